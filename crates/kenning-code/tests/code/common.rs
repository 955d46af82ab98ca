//! Fixture repositories in temporary directories, committed to git.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kenning_code::CodeIndex;
use tempfile::TempDir;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A copy of fixture `name` in a fresh git repository with one commit by Ada Lovelace.
pub fn repository(name: &str) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy(&fixtures().join(name), dir.path());
    let repository = git2::Repository::init(dir.path()).unwrap();
    commit_all(&repository, "Add the fixture");
    dir
}

pub fn commit_all(repository: &git2::Repository, message: &str) {
    let mut index = repository.index().unwrap();
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None).unwrap();
    index.update_all(["*"].iter(), None).unwrap();
    index.write().unwrap();
    let tree = repository.find_tree(index.write_tree().unwrap()).unwrap();
    let signature = git2::Signature::now("Ada Lovelace", "ada@example.com").unwrap();
    let parent = repository.head().ok().and_then(|head| head.peel_to_commit().ok());
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repository.commit(Some("HEAD"), &signature, &signature, message, &tree, &parents).unwrap();
}

fn copy(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The index of `root`, stored where kenning keeps it (inside `.git`), with the built-in embedder.
pub fn index(root: &Path) -> CodeIndex {
    let embedder = kenning_embed::StaticEmbedder::builtin().unwrap();
    CodeIndex::open(root, &root.join(".git/kenning/code.db"), Some(Arc::new(embedder))).unwrap()
}
