//! The sandbox helper of `run_code`: started by mf-tools with a JSON spec as
//! its last argument and the program on stdin. Not meant to be run by hand.

fn main() {
    #[cfg(target_os = "linux")]
    {
        let Some(spec) = std::env::args().next_back() else { std::process::exit(125) };
        std::process::exit(mf_tools::code::sandbox_helper_main(&spec));
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("mf-sandbox: only used on Linux");
        std::process::exit(125);
    }
}
