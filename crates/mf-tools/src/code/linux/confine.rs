//! What pid 1 sets on itself just before exec: rlimits, Landlock (read-only
//! system folders, read-write `/tmp`, no TCP) and a seccomp filter.

use std::path::PathBuf;

use super::check;

pub(super) fn set_rlimit(res: libc::__rlimit_resource_t, value: u64) -> Result<(), String> {
    let lim = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
    // SAFETY: valid pointer to a local rlimit.
    check(unsafe { libc::setrlimit(res, &lim) }, &format!("setrlimit({res})"))
}

pub(super) fn landlock(read_paths: &[PathBuf]) -> Result<&'static str, String> {
    use landlock::{ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules};
    let abi = ABI::V7;
    let e = |e: landlock::RulesetError| format!("landlock: {e}");
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(e)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(e)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(e)?
        .create()
        .map_err(e)?
        .add_rules(path_beneath_rules(read_paths, AccessFs::from_read(abi)))
        .map_err(e)?
        .add_rules(path_beneath_rules(["/tmp"], AccessFs::from_all(abi)))
        .map_err(e)?
        .add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate))
        .map_err(e)?
        .add_rules(path_beneath_rules(["/dev/zero", "/dev/urandom", "/dev/random"], AccessFs::from_read(abi)))
        .map_err(e)?
        .restrict_self()
        .map_err(e)?;
    if !status.no_new_privs {
        return Err("landlock: no_new_privs not set".into());
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok("full"),
        RulesetStatus::PartiallyEnforced => Ok("partial"),
        RulesetStatus::NotEnforced => Err("Landlock is not available in this kernel".into()),
    }
}

// --- seccomp: a small hand-written BPF deny-list -----------------------------

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JSET_K: u16 = 0x05 | 0x40;
#[cfg(target_arch = "x86_64")]
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// `clone` flags that create a namespace. `CLONE_NEWTIME` (0x80) is left out:
/// for `clone` that bit is part of the exit signal, and the kernel accepts it
/// only from `clone3` and `unshare`, both refused outright.
const CLONE_NEW_ANY: u32 =
    (libc::CLONE_NEWNS | libc::CLONE_NEWCGROUP | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC | libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNET)
        as u32;

/// System calls refused with EPERM: kernel attack surface or escape tools
/// that sandboxed analysis code has no use for.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn denied_syscalls() -> Vec<libc::c_long> {
    vec![
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_kexec_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
    ]
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) fn seccomp() -> Result<(), String> {
    let mut prog = vec![
        stmt(BPF_LD_W_ABS, 4), // seccomp_data.arch
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, 0), // seccomp_data.nr
    ];
    #[cfg(target_arch = "x86_64")]
    {
        // x32 system calls share the x86_64 audit arch: refuse them all.
        prog.push(jump(BPF_JMP_JGE_K, 0x4000_0000, 0, 1));
        prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
    }
    // socket(domain, ...): only AF_UNIX.
    prog.push(jump(BPF_JMP_JEQ_K, libc::SYS_socket as u32, 0, 4));
    prog.push(stmt(BPF_LD_W_ABS, 16)); // low 32 bits of args[0] (little-endian)
    prog.push(jump(BPF_JMP_JEQ_K, libc::AF_UNIX as u32, 0, 1));
    prog.push(stmt(BPF_RET_K, RET_ALLOW));
    prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::EAFNOSUPPORT as u32));
    // clone(flags, ...): no namespace flags. The flags are an `unsigned long`
    // but the kernel reads only their low 32 bits, which are what is loaded.
    // Without this a program could start a child in a new user namespace
    // (nested in the sandbox's own) and be root there.
    prog.push(jump(BPF_JMP_JEQ_K, libc::SYS_clone as u32, 0, 4));
    prog.push(stmt(BPF_LD_W_ABS, 16)); // low 32 bits of args[0]
    prog.push(jump(BPF_JMP_JSET_K, CLONE_NEW_ANY, 0, 1));
    prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));
    prog.push(stmt(BPF_RET_K, RET_ALLOW));
    // clone3 passes its flags in a struct in memory, which a seccomp filter
    // cannot read: answer ENOSYS, so libc (threads, fork, posix_spawn) falls
    // back to clone, whose flags are checked above.
    prog.push(jump(BPF_JMP_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
    for nr in denied_syscalls() {
        prog.push(jump(BPF_JMP_JEQ_K, nr as u32, 0, 1));
        prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));
    }
    prog.push(stmt(BPF_RET_K, RET_ALLOW));
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_mut_ptr() };
    // SAFETY: prctl/seccomp with a valid program that outlives the call.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")?;
        let rc = libc::syscall(libc::SYS_seccomp, 1 /* SECCOMP_SET_MODE_FILTER */, 0, &fprog as *const _);
        check(rc as libc::c_int, "seccomp(SET_MODE_FILTER)")
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn seccomp() -> Result<(), String> {
    Err("no seccomp filter for this CPU architecture".into())
}
