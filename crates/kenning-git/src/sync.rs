//! Sync with a remote: fetch its notes into a remote-tracking notes ref, merge them with ours
//! note by note, push the result with a lease, and start again if the remote moved meanwhile.
//!
//! The network steps run the user's own `git` (`git fetch`, `git push`), so the credential
//! helpers, SSH configuration and URL rewrites that work for their code work for their notes;
//! everything else (reading trees, merging, committing, moving refs) is libgit2 in process.
//!
//! The merge is three-way per note, against the notes commit both sides last shared: a note
//! changed on one side only takes that side's version; a note changed on both sides is merged
//! by [`crate::merge::merge_notes`], whose rule is symmetric, so both clones reach the same
//! notes tree whichever merges first. Notes are never deleted by kenning, so a note one side
//! deleted and the other kept is kept. Then every note the merge brought in is checked against
//! the local memories for the same active content in the same namespace (two clones that
//! captured the same thing): the copy captured first stays active and the other is retired by
//! [`crate::merge::retire_duplicate`], which again depends only on the two notes.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use git2::build::TreeUpdateBuilder;
use git2::{FileMode, Oid, Repository, Signature};
use kenning_core::{Memory, MemoryId, Status, SyncReport};

use crate::error::{Error, Result};
use crate::merge::{duplicate_survivor, merge_notes, retire_duplicate};
use crate::note::{Note, note_key};
use crate::notes::{self, NOTES_REF};
use crate::store::GitNotesStore;

/// How many times a sync starts again when the remote moved between its fetch and its push.
const SYNC_ATTEMPTS: u32 = 8;

/// The remote-tracking ref that holds `remote`'s notes as last fetched.
pub fn tracking_ref(remote: &str) -> String {
    format!("refs/notes/remotes/{remote}/kenning")
}

impl GitNotesStore {
    /// Exchanges notes with `remote` (a remote's name or URL) until both hold the same notes.
    pub fn sync_with(&self, remote: &str) -> Result<SyncReport> {
        validate_remote(remote)?;
        let tracking = tracking_ref(remote);
        let mut report = SyncReport { remote: remote.to_owned(), ..SyncReport::default() };
        for attempt in 1..=SYNC_ATTEMPTS {
            report.attempts = attempt;
            let git_dir = self.with_repo(|repo| Ok(repo.path().to_owned()))?;
            let remote_has_notes = fetch(&git_dir, remote, &tracking)?;
            let theirs = if remote_has_notes { self.with_repo(|repo| notes::resolve(repo, &tracking))? } else { None };
            let (merged, counts) = self.merge_from(theirs)?;
            report.received += counts.received;
            report.merged += counts.merged;
            let Some(merged) = merged else { return Ok(report) };
            if Some(merged) == theirs {
                return Ok(report);
            }
            report.sent = self.with_repo(|repo| count_changed(repo, theirs, merged))?;
            if push(&git_dir, remote, theirs)? {
                // The remote now holds what we hold: record it as the remote's last known state.
                self.with_repo(|repo| {
                    repo.reference(&tracking, merged, true, "kenning sync: pushed")?;
                    Ok(())
                })?;
                return Ok(report);
            }
            tracing::info!(remote, attempt, "the remote's notes moved during sync; fetching again");
        }
        Err(Error::Sync { remote: remote.to_owned(), reason: format!("the remote kept moving for {SYNC_ATTEMPTS} attempts; try again") })
    }

    /// Merges into the local notes every remote-tracking notes ref that a plain `git fetch`
    /// (with the refspecs of [`setup_refspecs`]) updated and that is not merged yet. A failure
    /// is logged, not raised: opening the store must not depend on a remote's notes.
    pub(crate) fn merge_fetched(&self) {
        let pending = self.with_repo(|repo| {
            let ours = notes::resolve(repo, NOTES_REF)?;
            let mut pending = Vec::new();
            for reference in repo.references_glob("refs/notes/remotes/*/kenning")? {
                let Some(theirs) = reference?.target() else { continue };
                let merged = match ours {
                    Some(ours) => ours == theirs || repo.graph_descendant_of(ours, theirs)?,
                    None => false,
                };
                if !merged {
                    pending.push(theirs);
                }
            }
            Ok(pending)
        });
        let result = pending.and_then(|pending| pending.into_iter().try_for_each(|theirs| self.merge_from(Some(theirs)).map(drop)));
        if let Err(error) = result {
            tracing::warn!(%error, "could not merge fetched notes; `kenning sync` will try again");
        }
    }

    /// Merges `theirs` into the local notes ref (compare-and-swap, retried on a local race) and
    /// catches the index up. Returns the local ref afterwards.
    fn merge_from(&self, theirs: Option<Oid>) -> Result<(Option<Oid>, Counts)> {
        self.with_repo(|repo| {
            loop {
                let ours = notes::resolve(repo, NOTES_REF)?;
                let (merged, counts) = match (ours, theirs) {
                    (ours, None) => (ours, Counts::default()),
                    (None, Some(theirs)) => (Some(theirs), Counts { received: count_changed(repo, None, theirs)?, merged: 0 }),
                    (Some(ours), Some(theirs)) => {
                        // The index must reflect `ours` to answer which local memory holds a
                        // content that came in.
                        self.catch_up(repo, &[])?;
                        let (merged, counts) = merge_commits(repo, &self.identity().now()?, ours, theirs, &|memory: &Memory| Ok(self.index().active_duplicate(memory, Some(&memory.id))?))?;
                        (Some(merged), counts)
                    }
                };
                // The merge's commit may stand on fetched objects, so its move flushes all.
                if merged == ours
                    || self.flush().advance_flushed(|| notes::advance(repo, &self.identity().now()?, NOTES_REF, ours, merged.unwrap_or(Oid::zero()), "kenning sync: merge"))?
                {
                    self.catch_up(repo, &[])?;
                    return Ok((merged, counts));
                }
            }
        })
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    received: u64,
    merged: u64,
}

/// Refuses remote names that git would read as options.
fn validate_remote(remote: &str) -> Result<()> {
    if remote.is_empty() || remote.starts_with('-') || remote.chars().any(char::is_control) {
        return Err(Error::Sync {
            remote: remote.to_owned(),
            reason: "not a remote name or URL; use a configured remote such as `origin`, or a URL".to_owned(),
        });
    }
    Ok(())
}

/// Finds the local active memory, other than `memory` itself, holding the content of `memory`
/// in its namespace, as the index of `ours` knows it.
type FindDuplicate<'f> = dyn Fn(&Memory) -> Result<Option<MemoryId>> + 'f;

/// The commit joining `ours` and `theirs`: one of them when the other is its ancestor, else a
/// merge commit whose tree merges the two note by note, and then retires duplicates.
fn merge_commits(repo: &Repository, signature: &Signature<'_>, ours: Oid, theirs: Oid, find_duplicate: &FindDuplicate<'_>) -> Result<(Oid, Counts)> {
    if ours == theirs || repo.graph_descendant_of(ours, theirs)? {
        return Ok((ours, Counts::default()));
    }
    let base = match repo.merge_base(ours, theirs) {
        Ok(base) => Some(base),
        Err(error) if error.code() == git2::ErrorCode::NotFound => None,
        Err(error) => return Err(error.into()),
    };
    if base == Some(ours) {
        return Ok((theirs, Counts { received: count_changed(repo, Some(ours), theirs)?, merged: 0 }));
    }
    let empty = repo.find_tree(repo.treebuilder(None)?.write()?)?;
    let base_tree = base.map(|base| notes::tree_of(repo, base)).transpose()?.unwrap_or_else(|| empty.clone());
    let ours_tree = notes::tree_of(repo, ours)?;
    let theirs_tree = notes::tree_of(repo, theirs)?;
    let (changed, _) = notes::diff(repo, &base_tree, &theirs_tree)?;
    // Our side of each note they changed: as in the base unless we changed it too. Two diffs
    // against the base read only the subtrees that differ; looking each key up in our tree
    // read its fan-out trees again for every note that came in.
    let (ours_changed, _) = notes::diff(repo, &base_tree, &ours_tree)?;
    let ours_now: HashMap<String, Option<Oid>> = ours_changed.into_iter().map(|change| (change.key, change.after)).collect();
    let mut counts = Counts::default();
    let mut update = TreeUpdateBuilder::new();
    // Keys whose note in the merge is theirs or a merge of both, with that note's blob: what
    // came in.
    let mut incoming: Vec<(Oid, Oid)> = Vec::new();
    for change in changed {
        let Ok(key) = Oid::from_str(&change.key) else { continue };
        let path = notes::note_path(key);
        let ours_blob = ours_now.get(&change.key).copied().unwrap_or(change.before);
        if ours_blob == change.after {
            continue;
        }
        let Some(their_blob) = change.after else {
            // Deleted on their side only: kenning never deletes a note, so ours is kept.
            continue;
        };
        counts.received += 1;
        if ours_blob.is_none() || ours_blob == change.before {
            update.upsert(&path, their_blob, FileMode::Blob);
            incoming.push((key, their_blob));
            continue;
        }
        let ours_blob = ours_blob.unwrap_or(their_blob);
        match (decode(repo, ours_blob), decode(repo, their_blob)) {
            (Ok(ours_note), Ok(their_note)) => {
                let merged = merge_notes(&ours_note, &their_note).map_err(|reason| Error::Note { id: change.key.clone(), reason })?;
                let bytes = merged.encode().map_err(|reason| Error::Note { id: change.key.clone(), reason })?;
                let blob = repo.blob(&bytes)?;
                update.upsert(&path, blob, FileMode::Blob);
                incoming.push((key, blob));
                counts.merged += 1;
            }
            // A note one side cannot read is not merged: the readable side wins, and with two
            // unreadable notes the greater blob id, so both clones choose alike.
            (Ok(_), Err(_)) => {}
            (Err(_), Ok(_)) => {
                update.upsert(&path, their_blob, FileMode::Blob);
                incoming.push((key, their_blob));
            }
            (Err(_), Err(_)) => {
                if their_blob > ours_blob {
                    update.upsert(&path, their_blob, FileMode::Blob);
                }
            }
        }
    }
    let tree = repo.find_tree(update.create_updated(repo, &ours_tree)?)?;
    let tree = retire_duplicates(repo, tree, &incoming, find_duplicate, &mut counts)?;
    let merged = notes::commit_tree(repo, signature, &tree, &[ours, theirs], "kenning sync: merge notes")?;
    Ok((merged, counts))
}

/// The merged `tree` with every active memory that came in (`incoming`, each key with its
/// note's blob in `tree`) checked against the local memory holding the same content: of each
/// such pair, the one captured later is retired. The index names the candidate; the merged
/// tree decides, since the merge may have changed the candidate's content.
fn retire_duplicates<'r>(
    repo: &'r Repository,
    tree: git2::Tree<'r>,
    incoming: &[(Oid, Oid)],
    find_duplicate: &FindDuplicate<'_>,
    counts: &mut Counts,
) -> Result<git2::Tree<'r>> {
    // Notes as this pass leaves them, so that a note retired once is seen retired.
    let mut decided: HashMap<Oid, Note> = HashMap::new();
    let read = |decided: &HashMap<Oid, Note>, key: Oid, blob: Option<Oid>| -> Option<Note> {
        if let Some(note) = decided.get(&key) {
            return Some(note.clone());
        }
        let blob = match blob {
            Some(blob) => blob,
            None => note_blob(repo, &tree, key).ok().flatten()?,
        };
        decode(repo, blob).ok()
    };
    for (key, blob) in incoming {
        let Some(note) = read(&decided, *key, Some(*blob)) else { continue };
        let Ok(memory) = note.memory() else { continue };
        if memory.status != Status::Active {
            continue;
        }
        let Some(other_id) = find_duplicate(&memory)? else { continue };
        let other_key = note_key(&other_id);
        let Some(other_note) = read(&decided, other_key, None) else { continue };
        let Ok(other) = other_note.memory() else { continue };
        if other.id == memory.id || other.status != Status::Active || other.namespace != memory.namespace || other.content_hash() != memory.content_hash() {
            continue;
        }
        let (loser_key, loser, survivor) =
            if duplicate_survivor(&other, &memory) { (*key, &note, &other) } else { (other_key, &other_note, &memory) };
        let retired = retire_duplicate(loser, survivor).map_err(|reason| Error::Note { id: loser_key.to_string(), reason })?;
        decided.insert(loser_key, retired);
        counts.merged += 1;
    }
    if decided.is_empty() {
        return Ok(tree);
    }
    let mut update = TreeUpdateBuilder::new();
    for (key, note) in &decided {
        let bytes = note.encode().map_err(|reason| Error::Note { id: key.to_string(), reason })?;
        update.upsert(notes::note_path(*key), repo.blob(&bytes)?, FileMode::Blob);
    }
    Ok(repo.find_tree(update.create_updated(repo, &tree)?)?)
}

fn note_blob(repo: &Repository, tree: &git2::Tree<'_>, key: Oid) -> Result<Option<Oid>> {
    let path = notes::note_path(key);
    match tree.get_path(Path::new(&path)) {
        Ok(entry) => Ok(Some(entry.id())),
        Err(error) if error.code() == git2::ErrorCode::NotFound => {
            // Another tool may have written the tree with a different fan-out.
            Ok(notes::read_note_id(repo, tree, key)?)
        }
        Err(error) => Err(error.into()),
    }
}

fn decode(repo: &Repository, blob: Oid) -> std::result::Result<Note, String> {
    let blob = repo.find_blob(blob).map_err(|error| error.message().to_owned())?;
    Note::decode(blob.content())
}

/// How many notes differ between two notes commits (`None`: no notes at all).
fn count_changed(repo: &Repository, from: Option<Oid>, to: Oid) -> Result<u64> {
    let empty = repo.find_tree(repo.treebuilder(None)?.write()?)?;
    let before = from.map(|from| notes::tree_of(repo, from)).transpose()?.unwrap_or(empty);
    let (changed, _) = notes::diff(repo, &before, &notes::tree_of(repo, to)?)?;
    Ok(changed.len() as u64)
}

/// `git fetch` of the remote's notes into `tracking`. Returns whether the remote has notes.
fn fetch(git_dir: &Path, remote: &str, tracking: &str) -> Result<bool> {
    let refspec = format!("+{NOTES_REF}:{tracking}");
    let output = git(git_dir, &["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, &refspec])?;
    if output.status.success() {
        return Ok(true);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("couldn't find remote ref") {
        return Ok(false);
    }
    Err(Error::Sync { remote: remote.to_owned(), reason: format!("git fetch failed: {}", stderr.trim()) })
}

/// `git push` of the local notes ref with a lease on what the remote held at the fetch
/// (`None`: it had no notes). `false` when the lease failed because the remote moved.
fn push(git_dir: &Path, remote: &str, expected: Option<Oid>) -> Result<bool> {
    let lease = format!("--force-with-lease={NOTES_REF}:{}", expected.map(|oid| oid.to_string()).unwrap_or_default());
    let refspec = format!("{NOTES_REF}:{NOTES_REF}");
    let output = git(git_dir, &["push", "--quiet", "--porcelain", &lease, remote, &refspec])?;
    if output.status.success() {
        return Ok(true);
    }
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if text.contains("stale info") || text.contains("fetch first") || text.contains("non-fast-forward") || text.contains("rejected") {
        return Ok(false);
    }
    Err(Error::Sync { remote: remote.to_owned(), reason: format!("git push failed: {}", text.trim()) })
}

fn git(git_dir: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|error| Error::Sync { remote: args.get(3).copied().unwrap_or_default().to_owned(), reason: format!("cannot run git: {error}") })
}

/// Adds refspecs to `remote` so that a plain `git fetch` brings its notes into the
/// remote-tracking notes ref (merged by the next `kenning sync` or open) and a plain `git push`
/// sends ours. Returns the lines added; adds nothing already there.
pub fn setup_refspecs(repo_path: &Path, remote: &str) -> Result<Vec<String>> {
    validate_remote(remote)?;
    let repo = Repository::open(repo_path).map_err(|error| Error::Repository { path: repo_path.to_owned(), reason: error.message().to_owned() })?;
    let mut config = repo.config()?;
    let fetch = format!("+{NOTES_REF}:{}", tracking_ref(remote));
    let mut added = Vec::new();
    let existing = |config: &git2::Config, name: &str| -> Result<Vec<String>> {
        let mut values = Vec::new();
        let mut entries = config.multivar(name, None)?;
        while let Some(entry) = entries.next() {
            values.extend(entry?.value().map(str::to_owned));
        }
        Ok(values)
    };
    if repo.find_remote(remote).is_err() {
        return Err(Error::Sync { remote: remote.to_owned(), reason: "no such remote in this repository; add it with `git remote add`".to_owned() });
    }
    let fetch_key = format!("remote.{remote}.fetch");
    if !existing(&config, &fetch_key)?.contains(&fetch) {
        config.set_multivar(&fetch_key, "^$", &fetch)?;
        added.push(format!("{fetch_key} = {fetch}"));
    }
    // A push refspec replaces git's default of pushing the current branch, so the current
    // branch (`HEAD`) is pushed explicitly beside the notes.
    let push_key = format!("remote.{remote}.push");
    let pushes = existing(&config, &push_key)?;
    for refspec in ["HEAD".to_owned(), format!("{NOTES_REF}:{NOTES_REF}")] {
        if !pushes.contains(&refspec) {
            config.set_multivar(&push_key, "^$", &refspec)?;
            added.push(format!("{push_key} = {refspec}"));
        }
    }
    Ok(added)
}
