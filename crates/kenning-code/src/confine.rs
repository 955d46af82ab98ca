//! Confinement: every path a caller names is resolved inside the repository or refused.
//!
//! A tool argument is untrusted text. It is refused, with a [`FieldError`] naming the field, the
//! problem, the value and a suggestion, when it climbs out with `..`, is absolute and outside
//! the root, reaches into `.git`, holds control characters or backslashes, names a URL, or
//! leads (through any symbolic link on the way, at any depth) to a place outside the
//! repository's real root. What is accepted is returned as a path relative to the root in
//! normal form (`a/b.rs`), which is all the rest of this crate ever joins onto the root.

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
    /// the root itself when `allow_root`. The path need not exist, but every part of it that
    /// does must stay inside the repository once symbolic links are followed.
    pub fn resolve(&self, field: &str, text: &str, allow_root: bool) -> Result<String, FieldError> {
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
        if parts.is_empty() && !allow_root {
            return Err(FieldError::new(field, "names the repository root itself", text, "name a file or directory inside it, e.g. `src`"));
        }
        self.check_links(field, text, &parts)?;
        Ok(parts.join("/"))
    }

    /// Like [`Confinement::resolve`], and the path must exist.
    pub fn existing(&self, field: &str, text: &str, allow_root: bool) -> Result<String, FieldError> {
        let relative = self.resolve(field, text, allow_root)?;
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

fn truncated(text: &str) -> String {
    let mut end = 200;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
