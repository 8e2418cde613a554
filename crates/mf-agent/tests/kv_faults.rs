//! Fault injection on a real SmolLM2 session's saved KV cache. One stored
//! session is resumed, as another process would resume it, once with its
//! cache skipped (the answer to match), once with the cache intact, and once
//! per damaged copy of the cache: bytes flipped (one test) and the file cut
//! (another) at places drawn from a fixed seed. Every resume must either load
//! an intact cache or decode the history again, give the answer of the resume
//! without the cache, and never abort (a file cut short used to reach an
//! assertion inside llama.cpp, which ends the process: this test binary would
//! die with it).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use mf_agent::{
    AgentEvent, AgentSettings, EngineChoice, FailureKind, KvMiss, NoAnswer, Resume, RunSpec, Sessions, ToolFailure, ToolReply, ToolRunner, ToolsSpec, VecSink,
};
use mf_forgetting::StrategyKind;
use mf_inference::{LlamaConfig, LlamaSession, ToolSpec};
use mf_tools::Requirement;
use mf_tools::policy::Approval;

const CTX: u32 = 1024;
/// Faults injected by each of the two tests (flips, cuts): 100 in all.
const FAULTS: usize = 50;
/// The seed the faults are drawn from (any fixed value: the run is repeatable).
const SEED: u64 = 0x6b76_2d66_6175_6c74;

fn model_path() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.is_file() {
        return Some(p);
    }
    // The test command sets MF_REQUIRE_MODELS=1: there a missing model fails the test by name.
    assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "model {} is absent (run scripts/fetch_models.py)", p.display());
    eprintln!("\n!!!!!!!! SKIPPED: model {} is absent (run scripts/fetch_models.py) !!!!!!!!\n", p.display());
    None
}

/// No tools: the model answers in one round, so a resume is one generation.
struct NoTools;

impl ToolRunner for NoTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }
    fn requirement(&self, _call_id: &str, name: &str, _args_json: &str) -> Result<Requirement, ToolFailure> {
        Err(ToolFailure::new(FailureKind::Tool("unknown_tool".into()), format!("no tool {name}")))
    }
    fn run<'a>(&'a self, _: &'a str, name: &'a str, _: &'a str, _: Option<&'a Approval>) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
        Box::pin(async move { Err(ToolFailure::new(FailureKind::Tool("unknown_tool".into()), format!("no tool {name}"))) })
    }
}

/// splitmix64: a few lines of a well-mixed generator, so the faults need no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The damage one test injects. Each kind is its own test, so the two run
/// side by side on two cores (one llama.cpp thread each).
#[derive(Debug, Clone, Copy)]
enum Damage {
    Flips,
    Cuts,
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// XOR the byte at this offset with a non-zero mask.
    Flip { at: usize, mask: u8 },
    /// Keep only the first `len` bytes.
    Cut { len: usize },
}

impl Fault {
    fn apply(self, good: &[u8]) -> Vec<u8> {
        match self {
            Fault::Flip { at, mask } => {
                let mut b = good.to_vec();
                b[at] ^= mask;
                b
            }
            Fault::Cut { len } => good[..len].to_vec(),
        }
    }
}

/// Copies the files of `from` and of its `kv/` folder into `to`, made anew.
fn copy_store(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    for sub in ["", "kv"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for e in std::fs::read_dir(from.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), to.join(sub).join(e.file_name())).unwrap();
            }
        }
    }
}

struct Resumed {
    used: bool,
    miss: Option<KvMiss>,
    note: String,
    reused: u32,
    answer: String,
}

/// Resumes session `id` in `dir` with a fresh `Sessions` (as another process
/// would) on `backend`, its cache cleared first (a new process has none).
async fn resume(dir: &Path, spec: &RunSpec, backend: &Arc<LlamaSession>, id: i64, skip_kv: bool) -> Resumed {
    backend.clear().await.unwrap();
    let sessions = Sessions::new(dir);
    sessions.use_backend(&spec.engine, spec.context, backend.clone()).await;
    let how = Resume { follow_up: Some("And which refund is the smallest?".into()), skip_kv, ..Resume::default() };
    let launch = sessions.resume_with_tools(id, how, Arc::new(NoAnswer), None, Some(Arc::new(NoTools))).await.unwrap();
    let mut sink = VecSink::default();
    let (_agent, out) = launch.run(&mut sink).await;
    let out = out.unwrap();
    let (used, miss, note) = sink
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::KvRestore { used, miss, note, .. } => Some((*used, miss.clone(), note.clone().unwrap_or_default())),
            _ => None,
        })
        .expect("a kv_restore event");
    let reused = sink
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Kv { purpose: mf_agent::Purpose::Round, stats, .. } => Some(stats.reused),
            _ => None,
        })
        .expect("a round was generated");
    Resumed { used, miss, note, reused, answer: out.answer.expect("a final answer") }
}

#[tokio::test(flavor = "multi_thread")]
async fn kv_files_with_flipped_bytes_are_decoded_again_with_the_same_answer_and_never_abort() {
    damaged_kv_files(Damage::Flips).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kv_files_cut_short_are_decoded_again_with_the_same_answer_and_never_abort() {
    damaged_kv_files(Damage::Cuts).await;
}

async fn damaged_kv_files(damage: Damage) {
    let Some(model) = model_path() else { return };
    let t0 = Instant::now();
    // One thread: 50 prefills of a 135M model are short, and llama.cpp's
    // worker threads spin while they wait, so on a busy 2-core machine two
    // threads took four times the wall time of one.
    let mut config = LlamaConfig::new(model.clone()).with_n_ctx(CTX);
    config.n_threads = Some(1);
    let backend = Arc::new(LlamaSession::load(config).unwrap());
    let spec = RunSpec {
        engine: EngineChoice::Embedded { model, threads: Some(1), gpu: false, tool_grammar: false },
        context: CTX,
        // Short replies keep 100 resumes cheap; greedy, so answers compare exactly.
        agent: AgentSettings {
            system_prompt: "You are a concise assistant. Answer in one short sentence.".into(),
            strategy: StrategyKind::None,
            reserve: 24,
            safety_cap: Some(2),
            ..AgentSettings::default()
        },
        tools: ToolsSpec::default(),
        summariser: None,
    };
    let root = tempfile::tempdir().unwrap();
    let (pristine, dir) = (root.path().join("pristine"), root.path().join("data"));

    // The session: one question, answered in one round; its cache saved.
    let sessions = Sessions::new(&pristine);
    sessions.use_backend(&spec.engine, spec.context, backend.clone()).await;
    let question = "Three refunds were issued: ord-1 for 12.50, ord-2 for 40.00 and ord-3 for 7.25. Which refund is the largest?";
    let launch = sessions.start_with_tools(spec.clone(), question, Arc::new(NoAnswer), None, Some(Arc::new(NoTools))).await.unwrap();
    let id = launch.id;
    let (_agent, out) = launch.run(&mut VecSink::default()).await;
    out.unwrap();
    let kv_file = sessions.kv_file(id);
    let good = std::fs::read(&kv_file).unwrap();
    let kv_name = kv_file.file_name().unwrap().to_owned();
    assert!(good.len() > 4096, "a real state file: {} bytes", good.len());

    // The answer to match: the resume that decodes the history again.
    copy_store(&pristine, &dir);
    let without = resume(&dir, &spec, &backend, id, true).await;
    assert_eq!((without.used, without.miss), (false, Some(KvMiss::Skipped)));
    // The intact cache loads, and the answer is the same.
    copy_store(&pristine, &dir);
    let intact = resume(&dir, &spec, &backend, id, false).await;
    assert!(intact.used && intact.reused > 0, "the intact cache was not loaded: {}", intact.note);
    assert_eq!(intact.answer, without.answer, "with the intact cache");
    let setup = t0.elapsed();

    let mut rng = Rng(SEED ^ damage as u64);
    let (mut detected, mut loaded) = (0, 0);
    let t1 = Instant::now();
    for i in 0..FAULTS {
        let fault = match damage {
            Damage::Flips => Fault::Flip { at: rng.below(good.len()), mask: (1 + rng.below(255)) as u8 },
            Damage::Cuts => Fault::Cut { len: rng.below(good.len()) },
        };
        copy_store(&pristine, &dir);
        let bad = fault.apply(&good);
        std::fs::write(dir.join("kv").join(&kv_name), &bad).unwrap();
        let r = resume(&dir, &spec, &backend, id, false).await;
        if r.used {
            // Allowed only for a file that is, byte for byte, the one saved.
            // (Compared, not printed: the files are megabytes.)
            assert!(bad == good, "fault {i} ({fault:?}): a damaged cache was loaded: {}", r.note);
            loaded += 1;
        } else {
            assert_eq!(r.miss, Some(KvMiss::Damaged), "fault {i} ({fault:?}): {}", r.note);
            assert!(r.note.starts_with("the saved cache is damaged: decoding the history again"), "fault {i}: {}", r.note);
            assert_eq!(r.reused, 0, "fault {i} ({fault:?}): the history was not decoded again");
            detected += 1;
        }
        assert_eq!(r.answer, without.answer, "fault {i} ({fault:?}): the answer differs from the one without the cache");
    }
    eprintln!(
        "kv faults: {FAULTS} {damage:?} of a {}-byte state file (seed {SEED:#x}); {detected} detected, {loaded} loaded; \
         {:.1} s for the faults, {:.1} s to set up",
        good.len(),
        t1.elapsed().as_secs_f64(),
        setup.as_secs_f64()
    );
    assert_eq!(detected + loaded, FAULTS);
}
