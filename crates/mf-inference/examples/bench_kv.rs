//! The KV-reuse benchmark without the CLI: `cargo run --release -p mf-inference
//! --example bench_kv -- MODEL.gguf [--json]` (the same code as `mf bench-kv`).

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(model) = args.next() else {
        eprintln!("usage: bench_kv MODEL.gguf [--json]");
        std::process::exit(2);
    };
    let json = args.any(|a| a == "--json");
    match mf_inference::bench_kv::run(&mf_inference::bench_kv::BenchKvConfig::new(model)) {
        Ok(report) if json => println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default()),
        Ok(report) => print!("{}", report.to_text()),
        Err(e) => {
            eprintln!("bench-kv: {e}");
            std::process::exit(1);
        }
    }
}
