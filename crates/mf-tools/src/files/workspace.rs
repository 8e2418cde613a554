//! The workspace roots and the confinement of every path in them: the
//! deny-list, the path as written, its canonical form through the root's
//! handle, and the open that never blocks on a FIFO.

use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

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
pub(super) fn lookup_err(path: &str, e: &std::io::Error) -> ToolError {
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
pub(super) fn resolve<'w>(ws: &'w Workspace, root: Option<&str>, path: &str) -> Result<(&'w Root, PathBuf), ToolError> {
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

/// Open a regular file without ever blocking on a FIFO.
pub(super) fn open_regular(dir: &Dir, rel: &Path, shown: &str) -> Result<cap_std::fs::File, ToolError> {
    let meta = dir.metadata(rel).map_err(|e| lookup_err(shown, &e))?;
    if !meta.is_file() {
        return Err(ToolError::NotRegularFile { path: shown.to_string(), kind: kind_name(&meta.file_type()).into() });
    }
    let mut opts = OpenOptions::new();
    opts.read(true);
    {
        use cap_std::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY);
    }
    let f = dir.open_with(rel, &opts).map_err(|e| lookup_err(shown, &e))?;
    let meta = f.metadata().map_err(|e| io_err(shown, &e))?;
    if !meta.is_file() {
        return Err(ToolError::NotRegularFile { path: shown.to_string(), kind: kind_name(&meta.file_type()).into() });
    }
    Ok(f)
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
