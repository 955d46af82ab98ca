//! Provenance: the branch a memory was captured on, the files it is about and the session it
//! came from, as filters.
//!
//! A memory carries its provenance in its metadata: `git_branch` and `git_commit` (recorded by
//! the project domain at capture), `file` and `files` (set by whoever captures it). Recall can
//! select on the branch and on a file; to answer that in every backend alike, a memory's
//! provenance is reduced to *facets*, plain strings each backend stores beside the memory and
//! matches exactly ([`facets`], [`SearchFilter::facets`](crate::SearchFilter::facets)).
//!
//! What a memory is about: a path names a file or a directory, relative to the repository
//! root, with `/` between its parts (the normal form of [`normalise_relative`]). A memory is
//! about
//! - every path in its metadata `file`, and in `files` (separated by commas or new lines);
//! - every path its title or content mentions: a word (between spaces, quotes, backticks,
//!   brackets, commas or semicolons) holding a `/` or ending in a file extension with a letter
//!   in it (`src/lib.rs`, `Cargo.toml`, `.gitignore`), a trailing `:line` or `:line:column`
//!   and sentence punctuation left out. A decision's memory lists the decision's files this
//!   way (`- files: …`), so decisions are found by their files. URLs, absolute paths and paths
//!   that climb out of the root (`../x`) are not paths in the repository and are left out;
//! - every directory above each of those paths, so a directory finds the memories about the
//!   files in it.
//!
//! A memory is about at most [`MAX_FILES`] paths; metadata comes first, then mentions in order.
//!
//! The session: metadata `session_id` (set by the hooks and the MCP server at capture, or by
//! the caller), else `conversation_id`. Recall lends score only between memories of one
//! session, so two agents' unrelated notes captured minutes apart are never neighbours.

use std::collections::BTreeSet;
use std::path::{Component, Path};

use crate::error::FieldError;
use crate::memory::Memory;

/// Metadata key of the branch checked out at capture (absent on a detached HEAD).
pub const BRANCH_KEY: &str = "git_branch";
/// Metadata key of the commit checked out at capture (absent before the first commit).
pub const COMMIT_KEY: &str = "git_commit";
/// Metadata key of the one file a memory is about.
pub const FILE_KEY: &str = "file";
/// Metadata key of the files a memory is about, separated by commas or new lines.
const FILES_KEY: &str = "files";
/// The most paths one memory is about, so that a memory quoting a long listing stays cheap to
/// index.
const MAX_FILES: usize = 64;

/// Metadata key of the session (of an agent, a hook run or an MCP connection) a memory was
/// captured in.
pub const SESSION_KEY: &str = "session_id";
/// Metadata key of the conversation a memory came from, the session when none is named.
pub const CONVERSATION_KEY: &str = "conversation_id";

const BRANCH_FACET: &str = "branch:";
const FILE_FACET: &str = "file:";
const SESSION_FACET: &str = "session:";

/// The facet of memories captured on `branch`.
pub fn branch_facet(branch: &str) -> String {
    format!("{BRANCH_FACET}{branch}")
}

/// The facet of memories about `path`, a path in [`normalise_relative`]'s normal form.
pub fn file_facet(path: &str) -> String {
    format!("{FILE_FACET}{path}")
}

/// The facet of memories captured in session `session`.
pub(crate) fn session_facet(session: &str) -> String {
    format!("{SESSION_FACET}{session}")
}

/// The session `memory` was captured in, if its metadata names one (see the module).
pub fn session_of(memory: &Memory) -> Option<&str> {
    [SESSION_KEY, CONVERSATION_KEY].iter().find_map(|key| one_line(memory.metadata.get(*key)?))
}

/// Every facet of `memory`: its branch, the paths it is about and its session (see the module).
pub fn facets(memory: &Memory) -> Vec<String> {
    let mut facets = Vec::new();
    if let Some(branch) = memory.metadata.get(BRANCH_KEY).and_then(|branch| one_line(branch)) {
        facets.push(branch_facet(branch));
    }
    facets.extend(files_about(memory).iter().map(|path| file_facet(path)));
    facets.extend(session_of(memory).map(session_facet));
    facets
}

/// A metadata value trimmed, if it is not empty and holds no control character. A branch name
/// never holds one (git refuses them), and a session id that does is not one, so every facet
/// stays one line.
fn one_line(value: &str) -> Option<&str> {
    Some(value.trim()).filter(|value| !value.is_empty() && !value.chars().any(char::is_control))
}

/// The paths `memory` is about, in normal form (see the module).
fn files_about(memory: &Memory) -> BTreeSet<String> {
    let mut found = Found::default();
    for key in [FILE_KEY, FILES_KEY] {
        if let Some(value) = memory.metadata.get(key) {
            for part in value.split([',', '\n']) {
                if let Some(path) = normalise_relative(part.trim()) {
                    found.add(&path);
                }
            }
        }
    }
    for text in [memory.title.as_str(), memory.content.as_str()] {
        for word in text.split(|c: char| c.is_whitespace() || "`'\"()[]{}<>,;|*".contains(c)) {
            if let Some(path) = mentioned_path(word) {
                found.add(&path);
            }
        }
    }
    found.paths
}

#[derive(Default)]
struct Found {
    paths: BTreeSet<String>,
}

impl Found {
    /// Adds `path` and the directories above it, up to [`MAX_FILES`] paths in all.
    fn add(&mut self, path: &str) {
        let mut current = Some(path);
        while let Some(path) = current {
            if self.paths.len() >= MAX_FILES {
                return;
            }
            self.paths.insert(path.to_owned());
            current = path.rsplit_once('/').map(|(parent, _)| parent);
        }
    }
}

/// The path a word of prose names, if it names one (see the module).
fn mentioned_path(word: &str) -> Option<String> {
    if word.contains("://") {
        return None;
    }
    let mut word = word.trim_end_matches(['.', ':', '!', '?']);
    // `src/lib.rs:42` and `src/lib.rs:42:7` name the file.
    for _ in 0..2 {
        if let Some((head, tail)) = word.rsplit_once(':')
            && !tail.is_empty()
            && tail.bytes().all(|byte| byte.is_ascii_digit())
        {
            word = head;
        }
    }
    let path_like = word.chars().all(|c| c.is_alphanumeric() || "_-./@+~".contains(c));
    if !path_like || word.starts_with('/') {
        return None;
    }
    let last = word.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    let has_extension = last.rsplit_once('.').is_some_and(|(_, extension)| {
        !extension.is_empty() && extension.chars().all(char::is_alphanumeric) && extension.chars().any(char::is_alphabetic)
    });
    let has_directory = word.trim_end_matches('/').contains('/') && word.chars().any(char::is_alphabetic);
    if !(has_extension || has_directory) {
        return None;
    }
    normalise_relative(word)
}

/// A relative path in normal form: parts joined by `/`, no `.` parts, no empty parts, no
/// trailing `/`, `a/..` folded away. `None` for an absolute path, one that climbs out of where
/// it starts (`../x`), or an empty one.
fn normalise_relative(text: &str) -> Option<String> {
    if text.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// `text`, a path given by a caller in `field`, as a path relative to the repository `root`
/// in normal form. A relative path is taken relative to the root; an absolute one must lie
/// inside it. Without a repository only relative paths are accepted, as given.
pub fn repository_path(field: &str, text: &str, root: Option<&Path>) -> Result<String, FieldError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new(field, "is empty", text, "name a file or directory, e.g. `src/lib.rs`"));
    }
    let path = Path::new(trimmed);
    let relative = if path.is_absolute() {
        let Some(root) = root else {
            return Err(FieldError::new(
                field,
                "is an absolute path, and there is no repository to make it relative to",
                text,
                "give the path relative to the repository root, e.g. `src/lib.rs`",
            ));
        };
        let outside = || {
            FieldError::new(
                field,
                format!("is outside the repository at {}", root.display()),
                text,
                "give a path inside the repository, relative to its root, e.g. `src/lib.rs`",
            )
        };
        let (Some(path), Some(root)) = (lexical(path), lexical(root)) else { return Err(outside()) };
        path.strip_prefix(&root).map_err(|_| outside())?.to_string_lossy().into_owned()
    } else {
        trimmed.to_owned()
    };
    if relative.is_empty() {
        return Err(FieldError::new(field, "names the repository root itself", text, "name a file or directory inside it, e.g. `src`"));
    }
    normalise_relative(&relative).ok_or_else(|| {
        FieldError::new(
            field,
            "climbs out of the repository",
            text,
            "give a path inside the repository, relative to its root, e.g. `src/lib.rs`",
        )
    })
}

/// An absolute path with `.` and `..` folded away by their text alone; `None` if `..` climbs
/// above the top.
fn lexical(path: &Path) -> Option<std::path::PathBuf> {
    let mut out = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn about(title: &str, content: &str, metadata: &[(&str, &str)]) -> Vec<String> {
        let at = chrono::DateTime::UNIX_EPOCH;
        let memory = Memory {
            id: crate::MemoryId::parse("m1").unwrap(),
            domain: crate::Domain::User,
            namespace: crate::Namespace::parse("learnings").unwrap(),
            kind: crate::MemoryKind::Semantic,
            title: title.to_owned(),
            content: content.to_owned(),
            tags: Vec::new(),
            category: None,
            source: crate::Source::Inference,
            confidence: 0.5,
            salience: 0.5,
            status: crate::Status::Active,
            created_at: at,
            updated_at: at,
            event_time: None,
            last_accessed_at: None,
            access_count: 0,
            links: Vec::new(),
            metadata: metadata.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect(),
            version: 1,
            author: None,
        };
        files_about(&memory).into_iter().collect()
    }

    #[test]
    fn mentions_in_prose_name_files_and_their_directories() {
        let found = about(
            "Fix in `src/db/pool.rs`",
            "See src/db/pool.rs:42:7, ./Cargo.toml and .gitignore. Not https://example.com/a.rs, /etc/hosts, ../up.rs, 3.14 or v1.2.3.",
            &[],
        );
        assert_eq!(found, [".gitignore", "Cargo.toml", "src", "src/db", "src/db/pool.rs"]);
    }

    #[test]
    fn metadata_paths_need_no_extension() {
        let found = about("t", "nothing here", &[("files", "Makefile, ./docs//guide/\nscripts/test"), ("file", "Dockerfile")]);
        assert_eq!(found, ["Dockerfile", "Makefile", "docs", "docs/guide", "scripts", "scripts/test"]);
    }

    #[test]
    fn a_decision_s_files_line_names_its_files() {
        let found = about("Use a pool", "# Decision: Use a pool\n\n- files: src/db/pool.rs, config/db.toml\n", &[]);
        assert!(found.contains(&"src/db/pool.rs".to_owned()) && found.contains(&"config/db.toml".to_owned()), "{found:?}");
    }

    #[test]
    fn paths_from_callers_are_made_relative_to_the_root_or_refused() {
        let root = Path::new("/work/repo");
        assert_eq!(repository_path("file", "./src//lib.rs", Some(root)).unwrap(), "src/lib.rs");
        assert_eq!(repository_path("file", "/work/repo/src/../README.md", Some(root)).unwrap(), "README.md");
        assert_eq!(repository_path("file", "src/", None).unwrap(), "src");
        let outside = repository_path("file", "/work/other/x.rs", Some(root)).unwrap_err();
        assert_eq!((outside.field.as_str(), outside.problem.as_str()), ("file", "is outside the repository at /work/repo"));
        assert_eq!(repository_path("file", "../x.rs", Some(root)).unwrap_err().problem, "climbs out of the repository");
        assert!(repository_path("file", "/work/repo", Some(root)).is_err());
        assert!(repository_path("file", "/abs.rs", None).is_err());
        assert!(repository_path("file", " ", Some(root)).is_err());
    }
}
