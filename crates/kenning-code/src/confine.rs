//! Confinement: every path a caller names is resolved inside the repository or refused, and
//! every file the repository itself names is read only once it resolves inside.
//!
//! A tool argument is untrusted text. It is refused, with a [`FieldError`] naming the field, the
//! problem, the value and a suggestion, when it climbs out with `..`, is absolute and outside
//! the root, reaches into `.git`, holds control characters or backslashes, names a URL, or
//! leads (through any symbolic link on the way, at any depth) to a place outside the
//! repository's real root or into a `.git` directory. What is accepted is returned as a path
//! relative to the root in normal form (`a/b.rs`), which is all the rest of this crate ever
//! joins onto the root.
//!
//! The repository's own files are untrusted too: a README, a changelog or a manifest may be a
//! symbolic link to any file of the machine, and a manifest may name a dependency by an
//! absolute or `../` path. Such reads go through [`Confinement::inside`] or [`within`], which
//! resolve every link first and then require the result inside the repository (outside its
//! `.git`) or inside the dependency folder it was found in.

use std::path::{Component, Path, PathBuf};

use kenning_core::FieldError;

/// The longest path accepted, in bytes; longer is not a real file in a repository.
pub const MAX_PATH_BYTES: usize = 4096;

const EXAMPLE: &str = "give a path inside the repository, relative to its root, e.g. `src/lib.rs`";

/// The repository root that paths are confined to.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// The root as given (what absolute paths from a caller are most likely to start with).
    given: PathBuf,
    /// The root with every symbolic link resolved: what a resolved path must lie inside.
    real: PathBuf,
}

/// Whether a path may name the repository root itself (`.`, or an absolute path to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootPath {
    /// The root is a valid answer, as for a question about the whole repository.
    Allowed,
    /// Only a file or directory inside the root is.
    Refused,
}

impl Confinement {
    /// Confines to `root`, which must exist.
    pub fn new(root: &Path) -> std::io::Result<Confinement> {
        let real = std::fs::canonicalize(root)?;
        Ok(Confinement { given: root.to_owned(), real })
    }

    /// The repository root, symbolic links resolved.
    pub fn root(&self) -> &Path {
        &self.real
    }

    /// `text` (the value of `field`) as a path relative to the root, in normal form; `""` for
    /// the root itself when `root` is [`RootPath::Allowed`]. The path need not exist, but every
    /// part of it that does must stay inside the repository once symbolic links are followed.
    pub fn resolve(&self, field: &str, text: &str, root: RootPath) -> Result<String, FieldError> {
        let refuse = |problem: &str| FieldError::new(field, problem, text, EXAMPLE);
        if text.is_empty() {
            return Err(FieldError::new(field, "is empty", text, "name a file or directory, e.g. `src/lib.rs`"));
        }
        if text.len() > MAX_PATH_BYTES {
            return Err(FieldError::new(field, format!("is longer than {MAX_PATH_BYTES} bytes"), truncated(text), EXAMPLE));
        }
        if text.chars().any(char::is_control) {
            return Err(refuse("holds a control character (a NUL byte, a newline)"));
        }
        if text.contains('\\') {
            return Err(FieldError::new(field, "holds a backslash", text, "separate directories with `/`, e.g. `src/lib.rs`"));
        }
        if text.contains("://") {
            return Err(refuse("is a URL, not a path in the repository"));
        }
        if text.starts_with('~') {
            return Err(refuse("starts with `~`, which would name a home directory outside the repository"));
        }
        let path = Path::new(text);
        let relative: PathBuf = if path.is_absolute() {
            let inside = path.strip_prefix(&self.given).or_else(|_| path.strip_prefix(&self.real));
            match inside {
                Ok(rest) => rest.to_owned(),
                Err(_) => return Err(refuse(&format!("is an absolute path outside the repository at {}", self.given.display()))),
            }
        } else {
            path.to_owned()
        };
        let mut parts: Vec<&str> = Vec::new();
        for component in relative.components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => return Err(refuse("contains `..`, which climbs out of where it starts")),
                Component::Normal(part) => {
                    let part = part.to_str().ok_or_else(|| refuse("is not valid UTF-8"))?;
                    if part == ".git" {
                        return Err(refuse("reaches into the `.git` directory, which holds git's own data, not the project's files"));
                    }
                    parts.push(part);
                }
                Component::RootDir | Component::Prefix(_) => return Err(refuse("is not a path inside the repository")),
            }
        }
        if parts.is_empty() && root == RootPath::Refused {
            return Err(FieldError::new(field, "names the repository root itself", text, "name a file or directory inside it, e.g. `src`"));
        }
        self.check_links(field, text, &parts)?;
        Ok(parts.join("/"))
    }

    /// Like [`Confinement::resolve`], and the path must exist.
    pub fn existing(&self, field: &str, text: &str, root: RootPath) -> Result<String, FieldError> {
        let relative = self.resolve(field, text, root)?;
        if self.real.join(&relative).exists() {
            Ok(relative)
        } else {
            Err(FieldError::new(field, "does not exist in the repository", text, "check the path; repo_search_patterns finds files by what they do"))
        }
    }

    /// The absolute path of a relative path this confinement accepted.
    pub fn absolute(&self, relative: &str) -> PathBuf {
        if relative.is_empty() { self.real.clone() } else { self.real.join(relative) }
    }

    /// `path` (absolute, or relative to the root) with every symbolic link resolved, when it
    /// exists and lies inside the repository and outside any `.git` directory; `None` otherwise.
    /// Every read of a file the repository names (a README, a changelog, a manifest) goes
    /// through this.
    pub fn inside(&self, path: &Path) -> Option<PathBuf> {
        let real = within(&self.real, &self.real.join(path))?;
        (!in_git_dir(&self.real, &real)).then_some(real)
    }

    /// The start of a text file the repository names ([`read_text`]'s 64 KiB), or `""` when it
    /// is missing or resolves outside the repository.
    pub fn read_text(&self, relative: &str) -> String {
        self.inside(Path::new(relative)).map(|path| read_text(&path)).unwrap_or_default()
    }

    /// Whether the repository holds `relative` (a file or a directory that resolves inside it).
    pub fn holds(&self, relative: &str) -> bool {
        self.inside(Path::new(relative)).is_some()
    }

    /// Follows the deepest part of the path that exists, symbolic links resolved, and refuses
    /// it if it lands outside the real root: a link anywhere on the way counts.
    fn check_links(&self, field: &str, text: &str, parts: &[&str]) -> Result<(), FieldError> {
        let mut existing = self.real.clone();
        let mut depth = 0;
        for part in parts {
            let next = existing.join(part);
            if std::fs::symlink_metadata(&next).is_err() {
                break;
            }
            existing = next;
            depth += 1;
        }
        if depth == 0 {
            return Ok(());
        }
        match std::fs::canonicalize(&existing) {
            // The `.git` rule holds for where the path leads, not only for how it is spelt: a
            // link `gitlink -> .git` must not expose `gitlink/config`.
            Ok(real) if real.starts_with(&self.real) && in_git_dir(&self.real, &real) => Err(FieldError::new(
                field,
                "leads through a symbolic link into a `.git` directory, which holds git's own data, not the project's files",
                text,
                "name the file inside the repository, not a link into `.git`",
            )),
            Ok(real) if real.starts_with(&self.real) => Ok(()),
            Ok(_) => Err(FieldError::new(
                field,
                "leads through a symbolic link to a place outside the repository",
                text,
                "name the file inside the repository, not a link that points out of it",
            )),
            // A dangling link or a loop: what it names cannot be checked, so it is not followed.
            Err(_) => Err(FieldError::new(
                field,
                "leads through a symbolic link that cannot be resolved (dangling or a loop)",
                text,
                "name a file that exists inside the repository",
            )),
        }
    }
}

/// `path` with every symbolic link resolved, when it exists and lies inside `base`, which must
/// itself be resolved (a canonical path); `None` otherwise. The check for reads from a folder of
/// installed dependencies (Cargo's registry sources, a `site-packages`, a package's own folder).
pub fn within(base: &Path, path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok().filter(|real| real.starts_with(base))
}

/// Whether `real`, a resolved path inside `root`, lies in a `.git` directory (the repository's or a
/// submodule's).
fn in_git_dir(root: &Path, real: &Path) -> bool {
    real.strip_prefix(root).is_ok_and(|inside| inside.components().any(|component| component.as_os_str() == ".git"))
}

/// The start of a text file (64 KiB at most); empty when it cannot be read. Only for paths
/// already confined ([`Confinement::inside`], [`within`]).
pub fn read_text(path: &Path) -> String {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(64 * 1024).read_to_string(&mut text);
    }
    text
}

fn truncated(text: &str) -> String {
    let mut end = 200;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
