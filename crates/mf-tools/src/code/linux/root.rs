//! The minimal root the program sees (step 5 of the module docs).

use std::ffi::CString;
use std::path::{Path, PathBuf};

use super::{SandboxSpec, check};

pub(super) fn mount(src: &str, target: &str, fstype: &str, flags: libc::c_ulong, data: Option<&str>) -> Result<(), String> {
    let c = |s: &str| CString::new(s).map_err(|e| e.to_string());
    let (src_c, target_c, fstype_c) = (c(src)?, c(target)?, c(fstype)?);
    let data_c = data.map(c).transpose()?;
    // SAFETY: all pointers are valid NUL-terminated strings or null.
    let rc =
        unsafe { libc::mount(src_c.as_ptr(), target_c.as_ptr(), fstype_c.as_ptr(), flags, data_c.as_ref().map_or(std::ptr::null(), |d| d.as_ptr().cast())) };
    check(rc, &format!("mount {fstype} on {target}"))
}

/// Replace the file system the program sees with a minimal one, so that
/// nothing of the host is even visible except the read paths.
///
/// Why: Landlock (ABI ≤ 7) does not govern `connect`/`sendto` to a pathname
/// UNIX socket, so with the host tree visible the program could talk to any
/// world-writable socket (an attack test found exactly that). With a new root
/// there is no such path to name. Layout: a small tmpfs root; each read path
/// bind-mounted read-only at the same place (symlinks such as `/bin -> usr/bin`
/// recreated as symlinks); `/dev/{null,zero,random,urandom}` bound from the
/// host; a fresh size-limited tmpfs on `/tmp`. Then `pivot_root` and the old
/// root is detached, and the root tmpfs is made read-only. No `/proc`, `/sys`,
/// `/run`, `/home`, `/root`.
pub(super) fn minimal_root(spec: &SandboxSpec) -> Result<(), String> {
    const NEW: &str = "/tmp";
    let no_dev = libc::MS_NOSUID | libc::MS_NODEV;
    mount("tmpfs", NEW, "tmpfs", no_dev, Some("size=1m,nr_inodes=4096,mode=0755"))?;
    let inside = |p: &Path| -> PathBuf { Path::new(NEW).join(p.strip_prefix("/").unwrap_or(p)) };
    let mut paths: Vec<PathBuf> = spec.read_paths.clone();
    let mut i = 0;
    while i < paths.len() {
        let p = paths[i].clone();
        i += 1;
        if !p.is_absolute() {
            return Err(format!("read path {} is not absolute", p.display()));
        }
        let target = inside(&p);
        if std::fs::symlink_metadata(&target).is_ok() {
            continue; // already made (listed twice, or under a bound folder)
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        let meta = std::fs::symlink_metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.file_type().is_symlink() {
            let to = std::fs::read_link(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            std::os::unix::fs::symlink(&to, &target).map_err(|e| format!("symlink {}: {e}", target.display()))?;
            // What the link points at must be there too.
            if let Ok(real) = std::fs::canonicalize(&p)
                && !paths.iter().any(|q| real.starts_with(q))
            {
                paths.push(real);
            }
            continue;
        }
        if meta.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
        } else {
            std::fs::File::create(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
        }
        bind(&p, &target, true)?;
    }
    let dev = Path::new(NEW).join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| format!("creating {}: {e}", dev.display()))?;
    for name in ["null", "zero", "random", "urandom"] {
        let target = dev.join(name);
        std::fs::File::create(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
        bind(&Path::new("/dev").join(name), &target, false)?;
    }
    let tmp = Path::new(NEW).join("tmp");
    std::fs::create_dir(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let tmp_opts = format!("size={},nr_inodes=16384,mode=0700", spec.scratch_bytes.max(4096));
    mount("tmpfs", &tmp.to_string_lossy(), "tmpfs", no_dev, Some(&tmp_opts))?;

    let c_new = CString::new(NEW).map_err(|e| e.to_string())?;
    let c_dot = CString::new(".").map_err(|e| e.to_string())?;
    // SAFETY: chdir/pivot_root/umount2 on valid NUL-terminated paths. pivot_root(".", ".")
    // stacks the old root on the new one; detaching "." then removes the old root.
    unsafe {
        check(libc::chdir(c_new.as_ptr()), "chdir(new root)")?;
        check(libc::syscall(libc::SYS_pivot_root, c_dot.as_ptr(), c_dot.as_ptr()) as libc::c_int, "pivot_root")?;
        check(libc::umount2(c_dot.as_ptr(), libc::MNT_DETACH), "detaching the old root")?;
        check(libc::chdir(c"/".as_ptr()), "chdir(/)")?;
    }
    if Path::new("/proc/self").exists() {
        return Err("the host file system is still visible after pivot_root".into());
    }
    mount("none", "/", "none", libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | no_dev, None)
}

/// Bind-mount `src` on `dst`; with `read_only`, remount it read-only, nosuid,
/// nodev, keeping the flags the kernel locks for a user namespace (noexec,
/// atime) as the source mount has them.
fn bind(src: &Path, dst: &Path, read_only: bool) -> Result<(), String> {
    let (s, d) = (src.to_string_lossy(), dst.to_string_lossy());
    mount(&s, &d, "none", libc::MS_BIND | libc::MS_REC, None)?;
    if !read_only {
        return Ok(());
    }
    let c = CString::new(d.as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: statvfs into a zeroed local struct with a valid path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, &format!("statvfs {d}"))?;
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    for (st_flag, ms_flag) in [
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    mount("none", &d, "none", flags, None)
}
