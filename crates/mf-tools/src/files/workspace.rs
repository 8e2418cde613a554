//! The workspace roots and the confinement of every path in them: the
//! deny-list, the path as written, its canonical form through the root's
//! handle, and the open that never blocks on a FIFO.

use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::FileLimits;
use crate::ToolError;

/// One workspace root: a name the model uses and a directory handle.
#[derive(Debug)]
pub struct Root {
    /// Name shown to the model (the folder's last component, made unique).
    pub name: String,
    /// Where it is on disk (for display; access goes through `dir`).
    pub path: PathBuf,
    pub(super) dir: Dir,
}

/// The workspace roots the user picked.
#[derive(Debug, Default)]
pub struct Workspace {
    roots: Vec<Root>,
    /// Limits.
    pub limits: FileLimits,
}

impl Workspace {
    /// Open the given folders as roots.
    ///
    /// # Errors
    /// [`ToolError::Io`] when a folder cannot be opened.
    pub fn open(paths: &[PathBuf], limits: FileLimits) -> Result<Workspace, ToolError> {
        let mut roots: Vec<Root> = Vec::new();
        for p in paths {
            let dir = Dir::open_ambient_dir(p, ambient_authority()).map_err(|e| io_err(&p.display().to_string(), &e))?;
            let base = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "root".into());
            let mut name = base.clone();
            let mut i = 2;
            while roots.iter().any(|r| r.name == name) {
                name = format!("{base}-{i}");
                i += 1;
            }
            roots.push(Root { name, path: p.clone(), dir });
        }
        Ok(Workspace { roots, limits })
    }

    /// The roots, in the order given.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    fn root(&self, name: Option<&str>) -> Result<&Root, ToolError> {
        match name {
            None => self.roots.first().ok_or(ToolError::NoWorkspace),
            Some(n) => {
                if self.roots.is_empty() {
                    return Err(ToolError::NoWorkspace);
                }
                self.roots.iter().find(|r| r.name == n).ok_or_else(|| ToolError::UnknownRoot(n.to_string()))
            }
        }
    }
}

/// Why a file name is on the deny-list, if it is.
///
/// Denied: version-control internals (`.git`, `.hg`, `.svn`), `.env*`,
/// credential folders (`.ssh`, `.gnupg`, `.aws`, `.kube`, `.docker`),
/// private keys (`id_rsa`, `id_ed25519`, …), credential files (`.netrc`,
/// `.pgpass`, `.git-credentials`, `.npmrc`, `.pypirc`, `.htpasswd`) and key
/// material by extension (`.pem`, `.key`, `.p12`, `.pfx`, `.jks`,
/// `.keystore`, `.kdbx`, `.ppk`, `.asc`, `.gpg`).
pub fn denied_name(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    if [".git", ".hg", ".svn"].contains(&n.as_str()) {
        return Some("version-control internals are not readable");
    }
    if n.starts_with(".env") {
        return Some("environment files hold secrets");
    }
    if [".ssh", ".gnupg", ".aws", ".kube", ".docker", ".azure", ".gcloud"].contains(&n.as_str()) {
        return Some("credential folders are not readable");
    }
    if n.starts_with("id_")
        && !n.ends_with(".pub")
        && ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk"].iter().any(|k| n.starts_with(k))
    {
        return Some("private keys are not readable");
    }
    if [".netrc", "_netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", ".htpasswd", "credentials.json", "secrets.json"].contains(&n.as_str()) {
        return Some("credential files are not readable");
    }
    let ext = Path::new(&n).extension().and_then(|e| e.to_str()).unwrap_or("");
    if ["pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "ppk", "asc", "gpg"].contains(&ext) {
        return Some("key files are not readable");
    }
    None
}

/// Turn the model's path into a clean relative path, refusing absolute paths,
/// `..` and denied names.
fn relative(path: &str) -> Result<PathBuf, ToolError> {
    if path.contains('\0') {
        return Err(ToolError::InvalidArguments { tool: "files".into(), message: "path contains a NUL byte".into() });
    }
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('\\') || path.starts_with('~') {
        return Err(ToolError::AbsolutePath(path.to_string()));
    }
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => return Err(ToolError::PathTraversal(path.to_string())),
            Component::RootDir | Component::Prefix(_) => return Err(ToolError::AbsolutePath(path.to_string())),
        }
    }
    check_denied(path, &out)?;
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Ok(out)
}

fn check_denied(shown: &str, p: &Path) -> Result<(), ToolError> {
    for c in p.components() {
        if let Component::Normal(n) = c
            && let Some(reason) = denied_name(&n.to_string_lossy())
        {
            return Err(ToolError::PathDenied { path: shown.to_string(), reason: reason.to_string() });
        }
    }
    Ok(())
}

pub(super) fn io_err(path: &str, e: &std::io::Error) -> ToolError {
    ToolError::Io { path: path.to_string(), message: e.to_string() }
}

/// Map a cap-std lookup error: escapes become [`ToolError::PathEscapes`].
fn lookup_err(path: &str, e: &std::io::Error) -> ToolError {
    let msg = e.to_string();
    if msg.contains("outside of the filesystem") || e.raw_os_error() == Some(libc::EXDEV) {
        return ToolError::PathEscapes(path.to_string());
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::NotFound(path.to_string()),
        _ => io_err(path, e),
    }
}

/// Resolve the model's path inside a root: checked as written, then
/// canonicalised through the handle (escapes refused) and checked again.
fn resolve<'w>(ws: &'w Workspace, root: Option<&str>, path: &str) -> Result<(&'w Root, PathBuf), ToolError> {
    let r = ws.root(root)?;
    let rel = relative(path)?;
    let canon = r.dir.canonicalize(&rel).map_err(|e| lookup_err(path, &e))?;
    check_denied(path, &canon)?;
    let canon = if canon.as_os_str().is_empty() { PathBuf::from(".") } else { canon };
    Ok((r, canon))
}

pub(super) fn kind_name(ft: &cap_std::fs::FileType) -> &'static str {
    use cap_std::fs::FileTypeExt;
    if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Why a step of [`open_beneath`] failed: the path is not what the
/// resolution saw (a symlink, or a non-folder, now stands where it found a
/// folder), or another error.
enum Step {
    /// A component changed between the resolution and the open: resolve again.
    Changed,
    /// Anything else, already typed.
    Failed(ToolError),
}

/// What the last component must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Dir,
    RegularFile,
}

/// Opens `rel` beneath `dir` one component at a time, each with `openat`
/// relative to the handle of the folder before it and `O_NOFOLLOW`, so no
/// component can be a symlink, and each name is checked against the
/// deny-list as it is opened: the check and the open are one step. A
/// symlink (or a swapped-in non-folder) at any component is [`Step::Changed`]:
/// `rel` came from a resolution that followed every symlink, so one here
/// was put there since. A `cap_std` open would instead follow a symlink in
/// the middle of the path to anywhere inside the root, a denied folder
/// included.
#[cfg(unix)]
fn open_beneath(dir: &Dir, rel: &Path, want: Want, shown: &str) -> Result<std::fs::File, Step> {
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    let names: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(Ok(n)),
            Component::CurDir => None,
            _ => Some(Err(())),
        })
        .collect::<Result<_, _>>()
        .map_err(|()| Step::Failed(ToolError::PathTraversal(shown.to_string())))?;
    let dir_flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let mut held: Option<OwnedFd> = None;
    for (i, name) in names.iter().enumerate() {
        if let Some(reason) = denied_name(&name.to_string_lossy()) {
            return Err(Step::Failed(ToolError::PathDenied { path: shown.to_string(), reason: reason.to_string() }));
        }
        let parent = held.as_ref().map_or_else(|| dir.as_fd().as_raw_fd(), AsRawFd::as_raw_fd);
        let c = std::ffi::CString::new(name.as_bytes())
            .map_err(|_| Step::Failed(ToolError::InvalidArguments { tool: "files".into(), message: "path contains a NUL byte".into() }))?;
        let last = i + 1 == names.len();
        let flags = if last && want == Want::RegularFile {
            // The type first, through the folder's handle and without
            // following: a FIFO or a device is never opened at all.
            // SAFETY: `parent` is a live descriptor we hold; `c` is a valid C string; `st` is written by the call.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstatat(parent, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
                return Err(errno_step(shown));
            }
            regular_or_refuse(st.st_mode, shown).map_err(Step::Failed)?;
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC
        } else {
            dir_flags
        };
        // SAFETY: `parent` is a live descriptor we hold; `c` is a valid C string.
        let fd = unsafe { libc::openat(parent, c.as_ptr(), flags) };
        if fd < 0 {
            let step = errno_step(shown);
            if last && want == Want::Dir && matches!(step, Step::Changed) {
                // A file where a folder is wanted is a plain mistake unless it is a symlink.
                // SAFETY: as above.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                if unsafe { libc::fstatat(parent, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0 && st.st_mode & libc::S_IFMT != libc::S_IFLNK {
                    return Err(Step::Failed(ToolError::Io { path: shown.to_string(), message: "not a folder".into() }));
                }
            }
            return Err(step);
        }
        // SAFETY: `fd` was just returned by openat and is owned by nobody else.
        held = Some(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let file = match held {
        Some(fd) => std::fs::File::from(fd),
        None => dir.try_clone().map_err(|e| Step::Failed(io_err(shown, &e)))?.into_std_file(),
    };
    if want == Want::RegularFile {
        // Checked again on what was opened: swapped for a FIFO or a device
        // between the two steps, it is still refused.
        let meta = cap_std::fs::Metadata::from_just_metadata(file.metadata().map_err(|e| Step::Failed(io_err(shown, &e)))?);
        if !meta.is_file() {
            return Err(Step::Failed(ToolError::NotRegularFile { path: shown.to_string(), kind: kind_name(&meta.file_type()).into() }));
        }
    }
    Ok(file)
}

/// `Ok` for a regular file's mode, else the refusal naming what it is.
#[cfg(unix)]
fn regular_or_refuse(mode: libc::mode_t, shown: &str) -> Result<(), ToolError> {
    let kind = match mode & libc::S_IFMT {
        libc::S_IFREG => return Ok(()),
        libc::S_IFDIR => "directory",
        libc::S_IFLNK => "symlink",
        libc::S_IFIFO => "FIFO",
        libc::S_IFSOCK => "socket",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        _ => "special file",
    };
    Err(ToolError::NotRegularFile { path: shown.to_string(), kind: kind.into() })
}

/// The last OS error of an `openat`/`fstatat` step, as a [`Step`]: a
/// symlink met with `O_NOFOLLOW` (`ELOOP`) or a non-folder where a folder
/// was (`ENOTDIR`) means the path changed.
#[cfg(unix)]
fn errno_step(shown: &str) -> Step {
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ELOOP | libc::ENOTDIR) => Step::Changed,
        Some(libc::ENOENT) => Step::Failed(ToolError::NotFound(shown.to_string())),
        _ => Step::Failed(io_err(shown, &e)),
    }
}

/// How often a path that changed under a call is resolved again before the
/// call gives up. A workspace being edited may replace a folder once; a path
/// that changes on every try is being swapped on purpose, and three tries
/// cost three resolutions, not a spin.
const CHANGED_TRIES: usize = 3;

fn changed(shown: &str) -> ToolError {
    ToolError::Io { path: shown.to_string(), message: "the path changed while it was being opened (a symlink appeared in it); try again".into() }
}

/// Opens `rel` (a path the walk found beneath `dir`, every component a real
/// folder or file) as a regular file, never following a symlink at any
/// component and never blocking on a FIFO. A path that changed since is
/// refused, not retried: the walk only saw it in passing.
pub(super) fn open_regular(dir: &Dir, rel: &Path, shown: &str) -> Result<cap_std::fs::File, ToolError> {
    match open_beneath(dir, rel, Want::RegularFile, shown) {
        Ok(f) => Ok(cap_std::fs::File::from_std(f)),
        Err(Step::Changed) => Err(changed(shown)),
        Err(Step::Failed(e)) => Err(e),
    }
}

/// Opens `rel` as a folder handle beneath `dir`, as [`open_regular`] does.
pub(super) fn open_dir(dir: &Dir, rel: &Path, shown: &str) -> Result<Dir, ToolError> {
    match open_beneath(dir, rel, Want::Dir, shown) {
        Ok(f) => Ok(Dir::from_std_file(f)),
        Err(Step::Changed) => Err(changed(shown)),
        Err(Step::Failed(e)) => Err(e),
    }
}

/// The model's path resolved (symlinks inside the root followed, escapes
/// refused, the deny-list applied to the real path) and opened as a regular
/// file, component by component from the root's handle. When the path
/// changed between the two (a folder swapped for a symlink), it is resolved
/// again, at most [`CHANGED_TRIES`] times.
pub(super) fn resolve_file(ws: &Workspace, root: Option<&str>, path: &str) -> Result<(PathBuf, cap_std::fs::File), ToolError> {
    resolve_then(ws, root, path, Want::RegularFile).map(|(_, rel, f)| (rel, cap_std::fs::File::from_std(f)))
}

/// As [`resolve_file`], for a folder: its handle, for listing or walking it.
pub(super) fn resolve_dir<'w>(ws: &'w Workspace, root: Option<&str>, path: &str) -> Result<(&'w Root, PathBuf, Dir), ToolError> {
    resolve_then(ws, root, path, Want::Dir).map(|(r, rel, f)| (r, rel, Dir::from_std_file(f)))
}

fn resolve_then<'w>(ws: &'w Workspace, root: Option<&str>, path: &str, want: Want) -> Result<(&'w Root, PathBuf, std::fs::File), ToolError> {
    for _ in 0..CHANGED_TRIES {
        let (r, rel) = resolve(ws, root, path)?;
        match open_beneath(&r.dir, &rel, want, path) {
            Ok(f) => return Ok((r, rel, f)),
            Err(Step::Changed) => continue,
            Err(Step::Failed(e)) => return Err(e),
        }
    }
    Err(changed(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_list() {
        for n in [".git", ".env", ".env.local", ".ENV", "id_rsa", "id_ed25519", "server.pem", "tls.key", ".netrc", ".ssh", "store.p12"] {
            assert!(denied_name(n).is_some(), "{n}");
        }
        for n in ["README.md", "id_rsa.pub", "environment.txt", "keys.txt", "main.rs", "id_card.txt"] {
            assert_eq!(denied_name(n), None, "{n}");
        }
    }

    #[test]
    fn relative_paths() {
        assert_eq!(relative("a/./b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(relative("").unwrap(), PathBuf::from("."));
        assert!(matches!(relative("/etc/passwd"), Err(ToolError::AbsolutePath(_))));
        assert!(matches!(relative("~/x"), Err(ToolError::AbsolutePath(_))));
        assert!(matches!(relative("a/../../b"), Err(ToolError::PathTraversal(_))));
        assert!(matches!(relative("cfg/.env.prod"), Err(ToolError::PathDenied { .. })));
        assert!(matches!(relative(".git/config"), Err(ToolError::PathDenied { .. })));
    }
}
