//! The notes journal: captures acknowledged with power-loss durability survive the loss of
//! every object and ref write the journal stood in for. A power loss is played by doing to the
//! repository what the disk may do to writes that were never flushed: the ref goes back to where
//! it was, new loose objects are gone or left empty, and the index (a cache) is lost; and by
//! the reboot that follows it, which gives the journal's records another boot id than this one.

use std::collections::BTreeSet;

use super::*;

fn power_loss_store(repo: &Path) -> GitNotesStore {
    GitNotesStore::open(repo, &index_path(repo), Durability::PowerLoss).unwrap()
}

/// Captures `count` numbered memories through a store with power-loss durability, then closes it.
fn capture_journaled(repo: &Path, prefix: &str, count: usize) {
    let store = power_loss_store(repo);
    for n in 0..count {
        assert_eq!(store.insert(&[(numbered(prefix, n), None)]).unwrap(), [Inserted::Created]);
    }
}

fn journal(repo: &Path) -> PathBuf {
    repo.join(".git/kenning/notes-journal")
}

fn loose_objects(repo: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for fan_out in std::fs::read_dir(repo.join(".git/objects")).unwrap() {
        let fan_out = fan_out.unwrap().path();
        let name = fan_out.file_name().unwrap().to_string_lossy().into_owned();
        if name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit()) {
            found.extend(std::fs::read_dir(&fan_out).unwrap().map(|entry| entry.unwrap().path()));
        }
    }
    found
}

/// Rewrites the boot id of every whole record of the journal, as if it had been written before
/// the machine last started. Layout: magic (4), payload length (4), boot id (36), payload,
/// checksum (20), record length (4).
fn reboot(repo: &Path) {
    let mut bytes = std::fs::read(journal(repo)).unwrap();
    let mut at = 0;
    while at + 44 <= bytes.len() && &bytes[at..at + 4] == b"KNJ1" {
        let length = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        bytes[at + 8..at + 44].copy_from_slice(b"00000000-0000-0000-0000-000000000000");
        at += 44 + length + 24;
    }
    std::fs::write(journal(repo), bytes).unwrap();
}

/// Undoes, as a power loss may, every write since `durable` (the loose objects then on disk)
/// and `ref_before` (the notes ref then): alternately deletes new loose objects and leaves them
/// empty, moves the ref back, and deletes the index.
fn lose_unflushed_writes(repo: &Path, durable: &BTreeSet<PathBuf>, ref_before: Option<&str>) {
    let lost: Vec<PathBuf> = loose_objects(repo).difference(durable).cloned().collect();
    assert!(!lost.is_empty(), "the captures wrote loose objects");
    for (n, path) in lost.iter().enumerate() {
        if n % 2 == 0 {
            std::fs::remove_file(path).unwrap();
        } else {
            std::fs::write(path, b"").unwrap();
        }
    }
    match ref_before {
        Some(commit) => git(repo, &["update-ref", NOTES_REF, commit]),
        None => git(repo, &["update-ref", "-d", NOTES_REF]),
    };
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", index_path(repo).display()));
    }
    reboot(repo);
}

fn notes_ref(repo: &Path) -> Option<String> {
    let output = Command::new("git").current_dir(repo).args(["rev-parse", "--verify", "--quiet", NOTES_REF]).output().unwrap();
    output.status.success().then(|| String::from_utf8(output.stdout).unwrap().trim().to_owned())
}

fn assert_all_present(repo: &Path, store: &GitNotesStore, prefix: &str, count: usize) {
    let records = everything(store);
    for n in 0..count {
        let expected = numbered(prefix, n);
        assert_eq!(records.get(expected.id.as_str()).map(|record| &record.memory), Some(&expected), "{prefix}-{n} after the power loss");
    }
    git(repo, &["fsck", "--no-dangling", "--no-progress"]);
}

#[cfg(target_os = "linux")]
#[test]
fn acknowledged_captures_survive_a_power_loss_through_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    let durable = loose_objects(&repo);
    capture_journaled(&repo, "flushed", 20);
    assert!(std::fs::metadata(journal(&repo)).unwrap().len() > 0, "each capture is journaled");
    lose_unflushed_writes(&repo, &durable, None);
    assert_eq!(notes_ref(&repo), None);

    let store = power_loss_store(&repo);
    assert_all_present(&repo, &store, "flushed", 20);
    assert_eq!(std::fs::metadata(journal(&repo)).unwrap().len(), 0, "what was restored is flushed and the journal emptied");
}

#[cfg(target_os = "linux")]
#[test]
fn a_journal_record_cut_short_is_dropped_and_the_records_around_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    let durable = loose_objects(&repo);
    capture_journaled(&repo, "before", 10);
    // A record its writer did not finish (killed, or stopped by a full disk): its header
    // promises more than is there. The next writer must not append after it.
    let mut file = std::fs::OpenOptions::new().append(true).open(journal(&repo)).unwrap();
    file.write_all(b"KNJ1\xe8\x03\x00\x00partial").unwrap();
    drop(file);
    capture_journaled(&repo, "after", 10);
    lose_unflushed_writes(&repo, &durable, None);

    let store = power_loss_store(&repo);
    assert_all_present(&repo, &store, "before", 10);
    assert_all_present(&repo, &store, "after", 10);
}

#[cfg(target_os = "linux")]
#[test]
fn a_sync_s_merge_flushes_everything_and_empties_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    git(dir.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
    let repo = dir.path().join("repo");
    init_repo(&repo);
    git(&repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    let store = power_loss_store(&repo);
    store.insert(&[(numbered("synced", 0), None)]).unwrap();
    assert!(std::fs::metadata(journal(&repo)).unwrap().len() > 0);
    store.sync_with("origin").unwrap();
    store.insert(&[(numbered("synced", 1), None)]).unwrap();
    let other = dir.path().join("other");
    git(dir.path(), &["clone", "-q", remote.to_str().unwrap(), other.to_str().unwrap()]);
    let other_store = power_loss_store(&other);
    other_store.insert(&[(numbered("theirs", 0), None)]).unwrap();
    other_store.sync_with("origin").unwrap();
    let journaled = std::fs::metadata(journal(&repo)).unwrap().len();
    assert!(journaled > 0, "the capture after the first sync is journaled");
    store.sync_with("origin").unwrap();
    assert_eq!(std::fs::metadata(journal(&repo)).unwrap().len(), 0, "the merging sync flushed all and emptied the journal");
    assert_all_present(&repo, &store, "synced", 2);
    assert_all_present(&repo, &store, "theirs", 1);
}

#[cfg(target_os = "linux")]
#[test]
fn a_journal_is_replayed_once_after_a_reboot_and_not_in_the_boot_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    capture_journaled(&repo, "kept", 5);
    let written = std::fs::read(journal(&repo)).unwrap();
    assert!(!written.is_empty());
    drop(power_loss_store(&repo));
    assert_eq!(std::fs::read(journal(&repo)).unwrap(), written, "an open in the boot that wrote the journal leaves it alone");
    reboot(&repo);
    let store = power_loss_store(&repo);
    assert_eq!(std::fs::metadata(journal(&repo)).unwrap().len(), 0, "the first open after a reboot replays and empties it");
    assert_all_present(&repo, &store, "kept", 5);
}

#[cfg(target_os = "linux")]
#[test]
fn a_store_that_does_not_journal_still_replays_the_journal_others_left() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    let durable = loose_objects(&repo);
    capture_journaled(&repo, "journaled", 5);
    lose_unflushed_writes(&repo, &durable, None);
    let store = open(&repo);
    assert_all_present(&repo, &store, "journaled", 5);
}
