//! Facts from the repository's git history: who last changed a path and when, and the recent
//! commits. Read with git2 (as kenning-git does), never by running git with caller text.

use std::path::Path;

use chrono::{DateTime, Utc};
use git2::{Repository, Sort};

use crate::views::GitChange;

/// How many commits back a last-change lookup looks before giving up.
const MAX_WALK: usize = 5000;

/// The last commit that changed `path` (a file or directory relative to the root), if the
/// root is in a git repository and the path has history.
pub fn last_change(root: &Path, path: &str) -> Option<GitChange> {
    let repository = Repository::discover(root).ok()?;
    let workdir = repository.workdir()?.canonicalize().ok()?;
    let prefix = root.strip_prefix(&workdir).ok()?;
    let full = prefix.join(path);
    let mut walk = repository.revwalk().ok()?;
    walk.push_head().ok()?;
    walk.set_sorting(Sort::TIME).ok()?;
    for oid in walk.take(MAX_WALK) {
        let commit = repository.find_commit(oid.ok()?).ok()?;
        let here = commit.tree().ok()?.get_path(&full).ok().map(|entry| entry.id());
        let Some(here) = here else { continue };
        let before = commit.parent(0).ok().and_then(|parent| parent.tree().ok()?.get_path(&full).ok().map(|entry| entry.id()));
        if before != Some(here) {
            return Some(change(&commit));
        }
    }
    None
}

/// The most recent commits from HEAD, newest first, each with the files it changed.
pub fn recent(root: &Path, count: usize) -> Vec<(GitChange, Vec<String>)> {
    let Ok(repository) = Repository::discover(root) else { return Vec::new() };
    let Ok(mut walk) = repository.revwalk() else { return Vec::new() };
    if walk.push_head().is_err() || walk.set_sorting(Sort::TIME).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for oid in walk.take(count) {
        let Ok(commit) = oid.and_then(|oid| repository.find_commit(oid)) else { break };
        let tree = commit.tree().ok();
        let parent = commit.parent(0).ok().and_then(|parent| parent.tree().ok());
        let mut files = Vec::new();
        if let Ok(diff) = repository.diff_tree_to_tree(parent.as_ref(), tree.as_ref(), None) {
            for delta in diff.deltas().take(30) {
                if let Some(path) = delta.new_file().path().or_else(|| delta.old_file().path()) {
                    files.push(path.to_string_lossy().into_owned());
                }
            }
        }
        out.push((change(&commit), files));
    }
    out
}

fn change(commit: &git2::Commit<'_>) -> GitChange {
    let date = DateTime::<Utc>::from_timestamp(commit.time().seconds(), 0).map(|date| date.to_rfc3339()).unwrap_or_default();
    GitChange {
        commit: commit.id().to_string()[..12].to_owned(),
        date,
        author: commit.author().name().unwrap_or_default().to_owned(),
        summary: commit.summary().unwrap_or_default().to_owned(),
    }
}
