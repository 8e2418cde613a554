//! Linux containment: the helper process (runs inside) and the spawning side.
//!
//! Order inside the helper, and why:
//! 1. read the program from stdin (before anything is restricted);
//! 2. as root, drop to uid/gid 65534 with no groups and make the process
//!    dumpable again (so it may write its own uid map): kernel permission
//!    checks then protect root's files even if a later layer had a gap, and
//!    RLIMIT_NPROC is enforced (it is not for uid 0);
//! 3. `unshare` user, pid, net, mount, IPC, UTS namespaces and map the
//!    current uid/gid to itself (no root inside, so exec drops all
//!    capabilities);
//! 4. fork: the child is pid 1 of the new pid namespace; when it dies the
//!    kernel kills everything else in it (no survivors), and it dies with
//!    the helper (`PR_SET_PDEATHSIG`);
//! 5. child: private mount propagation, then a minimal root
//!    ([`root::minimal_root`]: the read paths bound read-only, four `/dev` nodes,
//!    a size-limited tmpfs on `/tmp`, `pivot_root`, the host tree detached,
//!    so no host path, UNIX sockets included, can even be named), the
//!    program written into `/tmp`, stdin `/dev/null`, rlimits, Landlock,
//!    seccomp, exec.
//!
//! The helper reports to the parent on fd 3 (JSON lines): `started`, then
//! `exited`/`signaled`, or `setup_failed` with a reason.
//!
//! Where each step lives: `helper` (the helper process: steps 1 to 4 and
//! the report), `root` (the minimal root of step 5), `confine` (rlimits,
//! Landlock and seccomp, the last thing before exec) and `spawn` (the
//! parent's side: the spec, starting the helper, collecting the output).

mod confine;
mod helper;
mod root;
mod spawn;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use helper::sandbox_helper_main;
pub(super) use spawn::{probe, run};

/// What the parent tells the helper (JSON in the last argument).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SandboxSpec {
    interpreter: PathBuf,
    script_name: String,
    read_paths: Vec<PathBuf>,
    env: Vec<(String, String)>,
    cpu_seconds: u64,
    memory_bytes: u64,
    file_size_bytes: u64,
    scratch_bytes: u64,
    open_files: u64,
    processes: u64,
    max_code_bytes: usize,
}

fn errno_msg(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn check(rc: libc::c_int, what: &str) -> Result<(), String> {
    if rc < 0 { Err(errno_msg(what)) } else { Ok(()) }
}
