//! Finding the project around the working directory: its git repository, its id and where
//! its store lives.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The git repository the working directory is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub id: String,
    pub root: PathBuf,
    /// The repository's git directory (shared by all worktrees); the store lives in here, out of the work tree.
    pub git_dir: PathBuf,
}

impl Project {
    /// The repository containing `dir`, if any; `None` when `dir` is not in a git work tree or
    /// git is not installed.
    pub fn discover(dir: &Path, id_override: Option<&str>) -> Option<Project> {
        let root = git(dir, &["rev-parse", "--show-toplevel"])?;
        let git_dir = git(dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
        let root = PathBuf::from(root);
        let id = match id_override {
            Some(id) => sanitise(id),
            None => git(dir, &["config", "--get", "remote.origin.url"])
                .and_then(|url| id_from_remote(&url))
                .unwrap_or_else(|| sanitise(&root.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default())),
        };
        let id = if id.is_empty() { "project".to_owned() } else { id };
        Some(Project { id, root, git_dir: PathBuf::from(git_dir) })
    }

    pub fn store_path(&self) -> PathBuf {
        self.git_dir.join("kenning").join("project.db")
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The repository name at the end of a remote URL: `git@host:acme/my-app.git` gives `my-app`.
pub fn id_from_remote(url: &str) -> Option<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    let name = trimmed.rsplit(['/', ':']).next()?;
    let id = sanitise(name);
    (!id.is_empty()).then_some(id)
}

/// Keeps the characters a domain id may hold, replacing others with `-`.
fn sanitise(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    mapped.trim_matches('-').chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_ids_come_from_remote_urls() {
        for (url, id) in [
            ("git@github.com:acme/my-app.git", "my-app"),
            ("https://gitlab.example.com/group/sub/service-x", "service-x"),
            ("ssh://git@host:2222/acme/api.git/", "api"),
            ("/srv/git/My Repo.git", "My-Repo"),
        ] {
            assert_eq!(id_from_remote(url).as_deref(), Some(id), "{url}");
        }
    }
}
