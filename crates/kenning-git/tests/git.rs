//! The git-notes store against the shared conformance suite, and what only real repositories
//! and real processes can show: acknowledged captures survive SIGKILL, two processes capture
//! into one repository at once, the index rebuilt from the notes equals the live one, an
//! older SQLite project store migrates into notes, `git gc` loses nothing, bad notes are
//! reported and skipped, and acknowledged captures survive a power loss (`journal`).
//!
//! Tests that need other processes spawn this test binary again, running one `child_*` test
//! with an environment variable that tells it what to do. Without that variable those tests
//! return at once.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use kenning_conformance::fixtures::{at, id, memory, update};
use kenning_core::decision::input::{build_decision, build_outcome, build_signal, decision_memory_input, lesson_memory_input, refresh_decision_memory};
use kenning_core::decision::{
    CaptureDecision, DecisionChange, DecisionFilter, DecisionId, DecisionStore, Edge, MemoryChange, ModuleList, Node, OutcomeInput,
    OutcomeStatus, SignalInput,
};
use kenning_core::relation;
use kenning_core::input::build_memory;
use kenning_core::{Domain, Inserted, Memory, MemoryRecord, MemoryStore, MemoryUrn, Namespace, PurgeMode, SearchFilter, Status};
use kenning_git::{GitNotesStore, NOTES_REF};
use kenning_sqlite::{Durability, SqliteStore};

#[path = "git/journal.rs"]
mod journal;

mod conformance {
    use super::*;

    kenning_conformance::conformance_tests!({
        let dir = tempfile::tempdir().unwrap();
        let next = AtomicUsize::new(0);
        move || -> Box<dyn MemoryStore> {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Box::new(open_new(&dir.path().join(format!("repo-{n}"))))
        }
    });
}

mod state_conformance {
    use super::*;

    kenning_conformance::state_conformance_tests!({
        let dir = tempfile::tempdir().unwrap();
        let next = AtomicUsize::new(0);
        move || -> Box<dyn MemoryStore> {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Box::new(open_new(&dir.path().join(format!("state-{n}"))))
        }
    });
}

mod decision_conformance {
    use super::*;

    kenning_conformance::decision_conformance_tests!({
        let dir = tempfile::tempdir().unwrap();
        let next = AtomicUsize::new(0);
        move || -> Box<dyn DecisionStore> {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Box::new(open_new(&dir.path().join(format!("repo-{n}"))))
        }
    });
}

/// A new repository at `path` with one commit, and its store.
fn open_new(path: &Path) -> GitNotesStore {
    init_repo(path);
    open(path)
}

fn init_repo(path: &Path) {
    git(path.parent().unwrap(), &["init", "-q", "-b", "main", path.to_str().unwrap()]);
    git(path, &["commit", "-q", "--allow-empty", "-m", "first"]);
}

fn open(path: &Path) -> GitNotesStore {
    GitNotesStore::open(path, &index_path(path), Durability::ProcessCrash).unwrap()
}

fn index_path(repo: &Path) -> PathBuf {
    repo.join(".git/kenning/project.db")
}

/// Gives the repository at `repo` the identity `name <email>` in its own configuration.
fn sign_as(repo: &Path, name: &str, email: &str) {
    git(repo, &["config", "user.name", name]);
    git(repo, &["config", "user.email", email]);
}

/// Runs git in `dir` with a fixed identity, failing the test if it fails.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git must be installed to run these tests");
    assert!(output.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Every note key in the notes ref, as git itself lists them.
fn git_notes(repo: &Path) -> Vec<String> {
    git(repo, &["notes", "--ref", NOTES_REF, "list"]).lines().map(|line| line.split(' ').next().unwrap().to_owned()).collect()
}

fn everything(store: &dyn MemoryStore) -> BTreeMap<String, MemoryRecord> {
    store.export(0, usize::MAX).unwrap().into_iter().map(|record| (record.memory.id.to_string(), record)).collect()
}

const CHILD_MODE: &str = "KENNING_TEST_CHILD";
const CHILD_REPO: &str = "KENNING_TEST_REPO";
const CHILD_PREFIX: &str = "KENNING_TEST_PREFIX";
/// Memories each child writes in the two-writer test.
const PAIR_WRITES: usize = 200;

fn child_mode() -> Option<String> {
    std::env::var(CHILD_MODE).ok()
}

fn spawn_child(test: &str, mode: &str, repo: &Path, prefix: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, mode)
        .env(CHILD_REPO, repo)
        .env(CHILD_PREFIX, prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn child_store() -> GitNotesStore {
    let repo = PathBuf::from(std::env::var(CHILD_REPO).unwrap());
    GitNotesStore::open(&repo, &index_path(&repo), Durability::PowerLoss).unwrap()
}

fn numbered(prefix: &str, n: usize) -> Memory {
    let mut m = memory(&format!("{prefix}-{n}"), "progress", &format!("Memory {n} written by {prefix}. {}", "Padding. ".repeat(10)));
    m.created_at = at(n as i64);
    m.updated_at = m.created_at;
    m
}

/// Captures memories one at a time, printing each id once `insert` returned, until killed or
/// done with `PAIR_WRITES` when the mode says so.
#[test]
#[ignore = "a child process that another test starts; it is not a test of its own"]
fn child_writer() {
    let mode = child_mode().expect("started by another test, with the child mode set");
    let prefix = std::env::var(CHILD_PREFIX).unwrap();
    let store = child_store();
    let limit = if mode == "pair" { PAIR_WRITES } else { usize::MAX };
    let mut stdout = std::io::stdout().lock();
    for n in 0..limit {
        assert_eq!(store.insert(&[(numbered(&prefix, n), None)]).unwrap(), [Inserted::Created]);
        writeln!(stdout, "ACK {n}").unwrap();
        stdout.flush().unwrap();
    }
}

#[test]
fn acknowledged_captures_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    let mut child = spawn_child("child_writer", "crash", &repo, "crash");
    let mut acknowledged = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if let Some(n) = line.unwrap().strip_prefix("ACK ") {
            acknowledged.push(n.parse::<usize>().unwrap());
            if acknowledged.len() >= 150 {
                break;
            }
        }
    }
    // `Child::kill` sends SIGKILL: the writer gets no chance to finish its index or clean up.
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(acknowledged.len() >= 150, "the writer stopped early: {}", String::from_utf8_lossy(&output.stderr));

    let notes = git_notes(&repo);
    let store = open(&repo);
    let records = everything(&store);
    assert!(notes.len() >= acknowledged.len());
    assert_eq!(records.len(), notes.len(), "the index holds every note after reopening");
    for n in acknowledged {
        let expected = numbered("crash", n);
        assert_eq!(records.get(expected.id.as_str()).map(|record| &record.memory), Some(&expected), "capture {n}");
    }
}

#[test]
fn two_processes_capturing_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    let children = [spawn_child("child_writer", "pair", &repo, "left"), spawn_child("child_writer", "pair", &repo, "right")];
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a writer failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    assert_eq!(git_notes(&repo).len(), 2 * PAIR_WRITES);
    let store = open(&repo);
    let records = everything(&store);
    for prefix in ["left", "right"] {
        for n in 0..PAIR_WRITES {
            assert!(records.contains_key(&format!("{prefix}-{n}")), "{prefix}-{n} is missing");
        }
    }
}

/// A decision with a signal and an outcome that taught a lesson, beside plain memories that were
/// updated and forgotten: everything the index holds about a project.
fn populate(store: &GitNotesStore) {
    let mut plain = memory("plain", "learnings", "Retries need jitter.");
    plain.tags = vec!["retry".into()];
    let revised = memory("revised", "context", "The build uses make.");
    let gone = memory("gone", "context", "The old CI was Jenkins.");
    store.insert(&[(plain.clone(), None), (revised.clone(), None), (gone.clone(), None)]).unwrap();
    let revised = update(store, &revised, |m| m.content = "The build uses cargo.".into());
    update(store, &revised, |m| m.confidence = 0.4);
    update(store, &gone, |m| m.status = Status::Forgotten);
    store.record_access(&[plain.id.clone()], at(30)).unwrap();

    let domain = Domain::Project("demo".into());
    let capture = CaptureDecision {
        statement: "Cache sessions in Redis".into(),
        alternatives: Some(vec!["An in-process cache".into()]),
        confidence: Some(0.7),
        module: Some("backend".into()),
        file_path: Some("src/session.rs".into()),
        ..CaptureDecision::default()
    };
    let decision = build_decision(capture, &ModuleList::default(), DecisionId::parse("dec_cache").unwrap(), at(40)).unwrap();
    let decision_memory = build_memory(decision_memory_input(&decision, None), domain.clone(), decision.id.memory_id(), at(40)).unwrap();
    store.insert_decision(&decision, &decision_memory, None).unwrap();
    let signal_input = SignalInput { signal_type: "ci_passed".into(), valence: "positive".into(), ..SignalInput::default() };
    store.add_signal(&build_signal(signal_input, &decision.id, "sig_cache".into(), at(41)).unwrap()).unwrap();
    let outcome_input = OutcomeInput {
        final_status: "success".into(),
        lessons_learned: vec!["Redis sessions need a TTL".into()],
        ..OutcomeInput::default()
    };
    let record = store.get_decision(&decision.id).unwrap().unwrap();
    let (mut outcome, next) = build_outcome(outcome_input, &record, "out_cache".into(), at(50)).unwrap();
    let decision_urn = MemoryUrn::new(domain.clone(), Namespace::parse("decisions").unwrap(), decision.id.memory_id());
    let lesson = build_memory(
        lesson_memory_input(&decision, &decision_urn, OutcomeStatus::Success, "Redis sessions need a TTL"),
        domain,
        id("lesson-cache"),
        at(50),
    )
    .unwrap();
    outcome.lesson_ids = vec![lesson.id.clone()];
    let current = store.get(&decision.id.memory_id()).unwrap().unwrap();
    let (next_memory, previous) = refresh_decision_memory(&current, &next, Some(&outcome), "outcome", at(50)).unwrap().unwrap();
    let change = DecisionChange { next, expected_revision: 1, memory: Some(MemoryChange { next: next_memory, previous, embedding: None }) };
    let edges = [
        Edge { from: Node::decision(&decision.id), relation: relation::RESULTED_IN.into(), to: Node::outcome("out_cache"), created_at: at(50) },
        Edge { from: Node::signal("sig_cache"), relation: relation::PRECEDED.into(), to: Node::outcome("out_cache"), created_at: at(50) },
    ];
    store.record_outcome(&change, &outcome, &[(lesson, None)], &edges).unwrap();
}

/// Everything the index answers about a project, for comparing two indexes.
fn snapshot(store: &GitNotesStore) -> (BTreeMap<String, MemoryRecord>, Vec<String>, Vec<String>) {
    let decisions = store
        .list_decisions(&DecisionFilter::default(), 0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|record| format!("{record:?}"))
        .collect();
    let chain = store.causal_chain(&Node::decision(&DecisionId::parse("dec_cache").unwrap()), 5).unwrap();
    (everything(store), decisions, chain.into_iter().map(|hop| format!("{hop:?}")).collect())
}

#[test]
fn reindex_from_notes_equals_the_live_index() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    populate(&store);
    let live = snapshot(&store);
    assert_eq!(live.0.len(), 5);
    assert_eq!(live.0["revised"].history.len(), 2);
    assert_eq!(live.2.len(), 5, "observed, resulted-in, preceded, taught and the lesson's link: {:?}", live.2);
    drop(store);

    // From the notes alone: a new index file in another place.
    let fresh = GitNotesStore::open(&repo, &dir.path().join("fresh.db"), Durability::ProcessCrash).unwrap();
    let mut rebuilt = snapshot(&fresh);
    // Reads are this machine's statistics, which the notes carry only as of each note's write.
    rebuilt.0.get_mut("plain").unwrap().memory.access_count = live.0["plain"].memory.access_count;
    rebuilt.0.get_mut("plain").unwrap().memory.last_accessed_at = live.0["plain"].memory.last_accessed_at;
    assert_eq!(rebuilt, live);

    // In place: `rebuild_index` rewrites every row from its note and keeps local statistics.
    let store = open(&repo);
    assert_eq!(store.rebuild_index().unwrap(), 5);
    assert_eq!(snapshot(&store), live);
}

#[test]
fn an_older_sqlite_project_store_migrates_into_notes_losing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    let legacy_path = index_path(&repo);
    {
        // The same records, written by the SQLite store the project domain used before notes.
        let legacy = SqliteStore::open(&legacy_path).unwrap();
        let reference = open_new(&dir.path().join("reference"));
        populate(&reference);
        legacy.import(&reference.export(0, usize::MAX).unwrap()).unwrap();
        for record in reference.list_decisions(&DecisionFilter::default(), 0, usize::MAX).unwrap() {
            assert!(legacy.get_decision(&record.decision.id).unwrap().is_none());
        }
    }
    let before = everything(&SqliteStore::open(&legacy_path).unwrap());
    let store = open(&repo);
    assert_eq!(everything(&store), before, "opening migrates without changing what the index answers");
    assert_eq!(git_notes(&repo).len(), before.len());
    drop(store);
    let fresh = GitNotesStore::open(&repo, &dir.path().join("fresh.db"), Durability::ProcessCrash).unwrap();
    let mut rebuilt = everything(&fresh);
    for (id, record) in &mut rebuilt {
        record.embedding = before[id].embedding.clone();
    }
    assert_eq!(rebuilt, before, "the notes alone hold every memory and version");
}

#[test]
fn git_gc_prune_now_loses_no_memory() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    populate(&store);
    let live = snapshot(&store);
    drop(store);
    git(&repo, &["gc", "-q", "--prune=now"]);
    let fresh = GitNotesStore::open(&repo, &dir.path().join("after-gc.db"), Durability::ProcessCrash).unwrap();
    assert_eq!(fresh.rebuild_index().unwrap(), 5);
    let after = snapshot(&fresh);
    assert_eq!(after.0.keys().collect::<Vec<_>>(), live.0.keys().collect::<Vec<_>>());
    assert_eq!(after.1, live.1);
}

#[test]
fn an_index_behind_its_notes_catches_up_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    store.insert(&[(memory("early", "learnings", "Before the copy."), None)]).unwrap();
    drop(store);
    // The index as a crash right after a note write, before its index write, leaves it.
    let stale = dir.path().join("stale.db");
    std::fs::copy(index_path(&repo), &stale).unwrap();
    let store = open(&repo);
    store.insert(&[(memory("late", "learnings", "After the copy."), None)]).unwrap();
    drop(store);
    std::fs::copy(&stale, index_path(&repo)).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", index_path(&repo).display()));
    }
    let store = open(&repo);
    assert!(store.get(&id("late")).unwrap().is_some());
    assert_eq!(store.count(&SearchFilter::default()).unwrap(), 2);
}

#[test]
fn another_process_s_capture_is_seen_by_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let reader = open_new(&repo);
    assert_eq!(reader.count(&SearchFilter::default()).unwrap(), 0);
    let writer = GitNotesStore::open(&repo, &dir.path().join("other.db"), Durability::ProcessCrash).unwrap();
    writer.insert(&[(memory("from-writer", "learnings", "Written through another index."), None)]).unwrap();
    let hits = reader.search_text("another index", &SearchFilter::active(), 5).unwrap();
    assert_eq!(hits.len(), 1);
}

#[test]
fn a_lock_on_the_notes_ref_left_by_a_killed_process_is_cleared_by_the_next_capture() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    store.insert(&[(memory("before", "learnings", "Written before the kill."), None)]).unwrap();
    let before = git(&repo, &["rev-parse", NOTES_REF]);
    let lock = repo.join(".git").join(format!("{NOTES_REF}.lock"));
    std::fs::write(&lock, "").unwrap();
    let killed_at = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    std::fs::File::options().write(true).open(&lock).unwrap().set_modified(killed_at).unwrap();
    store.insert(&[(memory("after", "learnings", "Written after the kill."), None)]).unwrap();
    assert!(!lock.exists(), "the stale lock is still there");
    assert_ne!(git(&repo, &["rev-parse", NOTES_REF]), before, "the ref did not move");
    assert!(open(&repo).get(&id("after")).unwrap().is_some());
}

#[test]
fn notes_commits_and_their_reflog_entries_are_signed_by_the_repository_identity() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    sign_as(&repo, "Grace Hopper", "grace@example.com");
    let store = open(&repo);
    store.insert(&[(memory("first", "learnings", "Written under the first identity."), None)]).unwrap();
    sign_as(&repo, "Ada Lovelace", "ada@example.com");
    // The identity is read when a store opens.
    let store = open(&repo);
    store.insert(&[(memory("second", "learnings", "Written under the second identity."), None)]).unwrap();
    let authors = git(&repo, &["log", "--format=%an <%ae>|%cn <%ce>", NOTES_REF]);
    let authors: Vec<&str> = authors.lines().collect();
    assert_eq!(authors, ["Ada Lovelace <ada@example.com>|Ada Lovelace <ada@example.com>", "Grace Hopper <grace@example.com>|Grace Hopper <grace@example.com>"]);
    let reflog = git(&repo, &["reflog", "show", "--format=%gn <%ge>", NOTES_REF]);
    assert_eq!(reflog.lines().next(), Some("Ada Lovelace <ada@example.com>"), "reflog: {reflog}");
}

/// The notes commits' objects are written by kenning, not libgit2: git must find every one of
/// them well formed, and each tree byte for byte as git itself would write its listing.
#[test]
fn notes_trees_and_commits_are_written_as_git_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    init_repo(&repo);
    sign_as(&repo, "Grace Hopper", "grace@example.com");
    let store = GitNotesStore::open(&repo, &index_path(&repo), Durability::PowerLoss).unwrap();
    // Enough memories that many fan-out folders hold several notes, some captured one at a
    // time into a folder an earlier batch made.
    let batch: Vec<(Memory, Option<_>)> = (0..400).map(|n| (numbered("batch", n), None)).collect();
    store.insert(&batch).unwrap();
    for n in 0..20 {
        store.insert(&[(numbered("single", n), None)]).unwrap();
    }
    let changed = update(&store, &batch[7].0, |m| m.content = "Changed after the batch.".into());
    assert_eq!(store.get(&changed.id).unwrap().unwrap().content, "Changed after the batch.");
    drop(store);

    git(&repo, &["fsck", "--strict", "--no-dangling", "--no-progress"]);
    let leftovers: Vec<PathBuf> = std::fs::read_dir(repo.join(".git/objects"))
        .unwrap()
        .flat_map(|folder| std::fs::read_dir(folder.unwrap().path()).into_iter().flatten())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap().to_string_lossy().starts_with("tmp_obj"))
        .collect();
    assert_eq!(leftovers, Vec::<PathBuf>::new());
    let root = notes_tree(&repo);
    let listing = git(&repo, &["ls-tree", &root]);
    assert_eq!(mktree(&repo, listing.trim_end()), root);
    let folders: Vec<&str> = listing.lines().map(|line| line.split('\t').next().unwrap().split(' ').nth(2).unwrap()).collect();
    assert!(folders.len() > 200, "{} folders", folders.len());
    for folder in folders {
        assert_eq!(mktree(&repo, git(&repo, &["ls-tree", folder]).trim_end()), folder);
    }
    assert_eq!(git_notes(&repo).len(), 420);
    let commit = git(&repo, &["cat-file", "commit", NOTES_REF]);
    let parent = git(&repo, &["rev-parse", &format!("{NOTES_REF}^")]);
    assert!(commit.starts_with(&format!("tree {root}\nparent {}\nauthor Grace Hopper <grace@example.com> ", parent.trim())), "{commit}");
    assert_eq!(git(&repo, &["log", "--format=%an|%cn|%s", "-1", NOTES_REF]).trim(), "Grace Hopper|Grace Hopper|kenning: update");
    let reopened = open(&repo);
    assert_eq!(reopened.rebuild_index().unwrap(), 420);
}

/// Writes `bytes` as the note on `key` (hex) with git itself, as another tool would.
fn write_raw_note(repo: &Path, bytes: &str) {
    let blob = git(repo, &["rev-parse", "HEAD"]);
    let file = repo.join("raw-note.txt");
    std::fs::write(&file, bytes).unwrap();
    git(repo, &["notes", "--ref", NOTES_REF, "add", "-f", "-F", file.to_str().unwrap(), blob.trim()]);
}

#[test]
fn corrupt_and_foreign_notes_are_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    store.insert(&[(memory("sound", "learnings", "A sound memory."), None)]).unwrap();
    write_raw_note(&repo, "a review comment, not JSON");
    store.insert(&[(memory("after", "learnings", "Written after the foreign note."), None)]).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!(stats.total, 2);
    assert_eq!(stats.warnings.len(), 1, "{:?}", stats.warnings);
    assert!(stats.warnings[0].contains("not JSON"), "{:?}", stats.warnings);

    write_raw_note(&repo, r#"{"format": "kenning-note/9", "memory": {}}"#);
    let stats = store.stats().unwrap();
    assert!(stats.warnings[0].contains("kenning-note/9"), "{:?}", stats.warnings);
    assert_eq!(store.rebuild_index().unwrap(), 2);
    assert_eq!(store.stats().unwrap().warnings.len(), 1);
}

#[test]
fn notes_keep_fields_a_newer_build_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    let original = memory("tolerant", "learnings", "Kept across rewrites.");
    store.insert(&[(original.clone(), None)]).unwrap();
    let key = kenning_git::note::note_key(&original.id).to_string();
    let text = git(&repo, &["notes", "--ref", NOTES_REF, "show", &key]);
    let mut note: serde_json::Value = serde_json::from_str(&text).unwrap();
    note["memory"]["stability"] = serde_json::json!(0.25);
    note["future"] = serde_json::json!({"kept": true});
    let blob_file = repo.join("edited.json");
    std::fs::write(&blob_file, serde_json::to_string(&note).unwrap()).unwrap();
    let blob = git(&repo, &["hash-object", "-w", blob_file.to_str().unwrap()]);
    let tree = git(&repo, &["ls-tree", NOTES_REF]);
    let listing: String = tree
        .lines()
        .map(|line| line.to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    // Rewrite the one note in place with git's plumbing.
    let sub = &key[..2];
    let inner = git(&repo, &["ls-tree", &format!("{NOTES_REF}:{sub}")]).replace(&key[2..], &key[2..]);
    let mut inner_lines: Vec<String> = inner.lines().map(str::to_owned).collect();
    for line in &mut inner_lines {
        if line.ends_with(&key[2..]) {
            *line = format!("100644 blob {}\t{}", blob.trim(), &key[2..]);
        }
    }
    let inner_tree = mktree(&repo, &inner_lines.join("\n"));
    let mut outer_lines: Vec<String> = listing.lines().map(str::to_owned).collect();
    for line in &mut outer_lines {
        if line.ends_with(&format!("\t{sub}")) {
            *line = format!("040000 tree {inner_tree}\t{sub}");
        }
    }
    let outer_tree = mktree(&repo, &outer_lines.join("\n"));
    let parent = git(&repo, &["rev-parse", NOTES_REF]);
    let commit = git(&repo, &["commit-tree", &outer_tree, "-p", parent.trim(), "-m", "newer build"]);
    git(&repo, &["update-ref", NOTES_REF, commit.trim()]);

    let current = store.get(&original.id).unwrap().unwrap();
    update(&store, &current, |m| m.content = "Rewritten by this build.".into());
    let text = git(&repo, &["notes", "--ref", NOTES_REF, "show", &key]);
    let note: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(note["memory"]["stability"], serde_json::json!(0.25));
    assert_eq!(note["future"], serde_json::json!({"kept": true}));
    assert_eq!(note["memory"]["content"], serde_json::json!("Rewritten by this build."));
    assert_eq!(note["history"][0]["memory"]["content"], serde_json::json!("Kept across rewrites."));
}

fn mktree(repo: &Path, listing: &str) -> String {
    let mut child = Command::new("git")
        .current_dir(repo)
        .args(["mktree"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{listing}\n").as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A bare remote made from a first repository, and `count` clones of it, each with its store.
fn remote_and_clones(dir: &Path, count: usize) -> (PathBuf, Vec<(PathBuf, GitNotesStore)>) {
    let seed = dir.join("seed");
    init_repo(&seed);
    let remote = dir.join("remote.git");
    git(dir, &["clone", "-q", "--bare", seed.to_str().unwrap(), remote.to_str().unwrap()]);
    let url = format!("file://{}", remote.display());
    let clones = (0..count)
        .map(|n| {
            let clone = dir.join(format!("clone-{n}"));
            git(dir, &["clone", "-q", &url, clone.to_str().unwrap()]);
            let store = open(&clone);
            (clone, store)
        })
        .collect();
    (remote, clones)
}

fn notes_tree(repo: &Path) -> String {
    git(repo, &["rev-parse", &format!("{NOTES_REF}^{{tree}}")]).trim().to_owned()
}

/// Every memory with its whole history, as a comparable map.
fn memories_and_histories(store: &GitNotesStore) -> BTreeMap<String, (Memory, Vec<kenning_core::MemoryVersion>)> {
    everything(store)
        .into_iter()
        .map(|(id, mut record)| {
            record.memory.access_count = 0;
            record.memory.last_accessed_at = None;
            (id, (record.memory, record.history))
        })
        .collect()
}

#[test]
fn two_clones_syncing_in_ten_interleaved_rounds_end_identical() {
    let dir = tempfile::tempdir().unwrap();
    let (_remote, clones) = remote_and_clones(dir.path(), 2);
    let per_round = 50;
    for round in 0..10 {
        for (side, (_, store)) in clones.iter().enumerate() {
            let batch: Vec<(Memory, Option<kenning_core::Embedding>)> =
                (0..per_round).map(|n| (numbered(&format!("clone{side}"), round * per_round + n), None)).collect();
            for item in batch.chunks(10) {
                store.insert(item).unwrap();
            }
            store.sync_with("origin").unwrap();
        }
    }
    // The side that synced first takes the other's last round.
    clones[0].1.sync_with("origin").unwrap();
    let (left, right) = (&clones[0], &clones[1]);
    assert_eq!(left.1.count(&SearchFilter::default()).unwrap(), 1000);
    assert_eq!(right.1.count(&SearchFilter::default()).unwrap(), 1000);
    assert_eq!(memories_and_histories(&left.1), memories_and_histories(&right.1));
    assert_eq!(notes_tree(&left.0), notes_tree(&right.0));
}

#[test]
fn edits_on_both_sides_merge_by_the_rule_alike_on_both_clones() {
    let dir = tempfile::tempdir().unwrap();
    let (_remote, clones) = remote_and_clones(dir.path(), 2);
    let (left, right) = (&clones[0].1, &clones[1].1);
    let both = memory("both-edit", "context", "The cache TTL is 60 s.");
    let forgotten = memory("forget-edit", "context", "Deploys go out on Fridays.");
    left.insert(&[(both.clone(), None), (forgotten.clone(), None)]).unwrap();
    left.sync_with("origin").unwrap();
    right.sync_with("origin").unwrap();

    // Left edits first, right edits later: right's edit is current everywhere, left's is kept.
    let edit = |store: &GitNotesStore, current: &Memory, minutes: i64, change: &dyn Fn(&mut Memory)| {
        let (mut next, mut previous) = kenning_conformance::fixtures::supersede(current, "edited", change);
        next.updated_at = at(minutes);
        previous.superseded_at = at(minutes);
        store.replace(&next, &previous, None).unwrap();
    };
    edit(left, &both, 10, &|m| m.content = "The cache TTL is 30 s.".into());
    edit(right, &both, 20, &|m| m.content = "The cache TTL is 90 s.".into());
    // A forget on the left after an edit on the right: the forget is later, so it is current,
    // and the edit stays in the history.
    edit(right, &forgotten, 30, &|m| m.content = "Deploys go out on Thursdays.".into());
    edit(left, &forgotten, 40, &|m| m.status = Status::Forgotten);

    left.sync_with("origin").unwrap();
    let report = right.sync_with("origin").unwrap();
    assert_eq!(report.merged, 2, "{report:?}");
    left.sync_with("origin").unwrap();
    assert_eq!(memories_and_histories(left), memories_and_histories(right));
    assert_eq!(notes_tree(&clones[0].0), notes_tree(&clones[1].0));

    let merged = left.get(&both.id).unwrap().unwrap();
    assert_eq!(merged.content, "The cache TTL is 90 s.");
    let contents: Vec<String> = left.history(&both.id).unwrap().into_iter().map(|version| version.memory.content).collect();
    assert_eq!(contents, ["The cache TTL is 60 s.", "The cache TTL is 30 s."]);
    assert_eq!(merged.version, 3);

    let merged = left.get(&forgotten.id).unwrap().unwrap();
    assert_eq!(merged.status, Status::Forgotten);
    let contents: Vec<String> = left.history(&forgotten.id).unwrap().into_iter().map(|version| version.memory.content).collect();
    assert_eq!(contents, ["Deploys go out on Fridays.", "Deploys go out on Thursdays."]);
}

#[test]
fn a_fresh_clone_gets_every_memory_by_one_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (remote, clones) = remote_and_clones(dir.path(), 1);
    populate(&clones[0].1);
    clones[0].1.sync_with("origin").unwrap();
    let live = snapshot(&clones[0].1);

    let fresh = dir.path().join("fresh");
    git(dir.path(), &["clone", "-q", &format!("file://{}", remote.display()), fresh.to_str().unwrap()]);
    let store = open(&fresh);
    assert_eq!(store.count(&SearchFilter::default()).unwrap(), 0, "a plain clone does not fetch notes");
    let report = store.sync_with("origin").unwrap();
    assert_eq!(report.received, 5);
    let mut copy = snapshot(&store);
    copy.0.get_mut("plain").unwrap().memory.access_count = live.0["plain"].memory.access_count;
    copy.0.get_mut("plain").unwrap().memory.last_accessed_at = live.0["plain"].memory.last_accessed_at;
    assert_eq!(copy, live);
}

#[test]
fn setup_lets_plain_git_fetch_and_push_carry_the_notes() {
    let dir = tempfile::tempdir().unwrap();
    let (_remote, clones) = remote_and_clones(dir.path(), 2);
    for (path, _) in &clones {
        let added = kenning_git::setup_refspecs(path, "origin").unwrap();
        assert_eq!(added.len(), 3, "{added:?}");
        assert!(kenning_git::setup_refspecs(path, "origin").unwrap().is_empty(), "a second setup adds nothing");
    }
    clones[0].1.insert(&[(memory("pushed", "learnings", "Carried by git push."), None)]).unwrap();
    git(&clones[0].0, &["push", "-q"]);
    git(&clones[1].0, &["fetch", "-q"]);
    drop(clones);
    // Opening merges what the plain fetch brought.
    let store = open(&dir.path().join("clone-1"));
    assert!(store.get(&id("pushed")).unwrap().is_some());
}

#[test]
fn provenance_names_the_branch_and_commit_or_says_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    git(dir.path(), &["init", "-q", "-b", "trunk", empty.to_str().unwrap()]);
    let store = open(&empty);
    let context = store.capture_context();
    assert_eq!(context.get(kenning_git::BRANCH_KEY).map(String::as_str), Some("trunk"), "an unborn branch has a name");
    assert_eq!(context.get(kenning_git::COMMIT_KEY), None, "no commit yet");
    store.insert(&[(memory("before-commits", "learnings", "Notes work before the first commit."), None)]).unwrap();
    assert!(store.get(&id("before-commits")).unwrap().is_some());

    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    let head = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let context = store.capture_context();
    assert_eq!(context.get(kenning_git::BRANCH_KEY).map(String::as_str), Some("main"));
    assert_eq!(context.get(kenning_git::COMMIT_KEY), Some(&head));
    git(&repo, &["checkout", "-q", "--detach"]);
    let context = store.capture_context();
    assert_eq!(context.get(kenning_git::BRANCH_KEY), None, "a detached HEAD has no branch");
    assert_eq!(context.get(kenning_git::COMMIT_KEY), Some(&head));

    // A bare repository holds notes too.
    let bare = dir.path().join("bare.git");
    git(dir.path(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
    let store = GitNotesStore::open(&bare, &bare.join("kenning/project.db"), Durability::ProcessCrash).unwrap();
    store.insert(&[(memory("in-bare", "learnings", "Stored in a bare repository."), None)]).unwrap();
    assert_eq!(git_notes(&bare).len(), 1);
}

/// Two clones capture the same content under their own ids, and `first` syncs first: the
/// notes tree both end with, and every memory with its history.
fn same_content_on_two_clones(first: usize) -> (String, BTreeMap<String, (Memory, Vec<kenning_core::MemoryVersion>)>) {
    let dir = tempfile::tempdir().unwrap();
    let (_remote, clones) = remote_and_clones(dir.path(), 2);
    let captured = |n: usize, name: &str, namespace: &str, minutes: i64| {
        let mut m = memory(name, namespace, "Run the migrations before the deploy.");
        m.created_at = at(minutes);
        m.updated_at = m.created_at;
        clones[n].1.insert(&[(m, None)]).unwrap();
    };
    // The right clone captures later, but it is the side that syncs first in one of the runs.
    captured(0, "same-left", "learnings", 1);
    captured(1, "same-right", "learnings", 2);
    // The same text in another namespace is another memory, not a duplicate.
    captured(1, "same-elsewhere", "standards", 3);
    let second = 1 - first;
    clones[first].1.sync_with("origin").unwrap();
    let report = clones[second].1.sync_with("origin").unwrap();
    assert_eq!(report.merged, 1, "the merging side retires one copy: {report:?}");
    clones[first].1.sync_with("origin").unwrap();
    let (left, right) = (&clones[0], &clones[1]);
    assert_eq!(notes_tree(&left.0), notes_tree(&right.0));
    assert_eq!(memories_and_histories(&left.1), memories_and_histories(&right.1));
    (notes_tree(&left.0), memories_and_histories(&left.1))
}

#[test]
fn the_same_content_captured_on_two_clones_keeps_the_first_and_retires_the_other_alike_on_both() {
    let (tree, memories) = same_content_on_two_clones(0);
    let survivor = &memories["same-left"];
    assert_eq!(survivor.0.status, Status::Active);
    assert_eq!(survivor.0.version, 1, "the copy captured first is left as it was");
    let (retired, history) = &memories["same-right"];
    assert_eq!(retired.status, Status::Forgotten);
    assert_eq!(retired.version, 2);
    assert_eq!(retired.updated_at, at(2) + chrono::TimeDelta::milliseconds(1));
    assert!(retired.links.iter().any(|link| link.relation == "duplicate-of" && link.target.id == id("same-left")), "{:?}", retired.links);
    assert_eq!(history.len(), 1, "the active copy is kept in the history");
    assert_eq!(history[0].memory.status, Status::Active);
    assert_eq!(history[0].memory.content, "Run the migrations before the deploy.");
    assert_eq!(memories["same-elsewhere"].0.status, Status::Active);

    // The other clone merging instead reaches the very same notes.
    let (tree_other_way, memories_other_way) = same_content_on_two_clones(1);
    assert_eq!(tree, tree_other_way);
    assert_eq!(memories, memories_other_way);
}

#[test]
fn a_worktree_shares_its_repository_s_notes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let store = open_new(&repo);
    store.insert(&[(memory("from-main", "learnings", "Written from the main work tree."), None)]).unwrap();
    let worktree = dir.path().join("feature");
    git(&repo, &["worktree", "add", "-q", "-b", "feature", worktree.to_str().unwrap()]);
    // The project store of a worktree is the repository's: one index in the common git dir.
    let shared = GitNotesStore::open(&worktree, &index_path(&repo), Durability::ProcessCrash).unwrap();
    assert!(shared.get(&id("from-main")).unwrap().is_some());
    let context = shared.capture_context();
    assert_eq!(context.get(kenning_git::BRANCH_KEY).map(String::as_str), Some("feature"), "the worktree's own branch");
    shared.insert(&[(memory("from-worktree", "learnings", "Written from a linked worktree."), None)]).unwrap();
    assert!(store.get(&id("from-worktree")).unwrap().is_some());
    assert_eq!(git_notes(&repo).len(), 2);
    assert_eq!(git_notes(&worktree).len(), 2);
}

#[test]
fn a_shallow_clone_syncs_notes_like_a_full_one() {
    let dir = tempfile::tempdir().unwrap();
    let (remote, clones) = remote_and_clones(dir.path(), 1);
    let seed = dir.path().join("seed");
    for n in 0..3 {
        git(&seed, &["commit", "-q", "--allow-empty", "-m", &format!("more history {n}")]);
    }
    git(&seed, &["push", "-q", remote.to_str().unwrap(), "main"]);
    clones[0].1.insert(&[(memory("before-shallow", "learnings", "Notes history is not code history."), None)]).unwrap();
    clones[0].1.sync_with("origin").unwrap();

    // A shallow clone has a truncated commit history; notes commits are fetched whole.
    let shallow = dir.path().join("shallow");
    git(dir.path(), &["clone", "-q", "--depth", "1", &format!("file://{}", remote.display()), shallow.to_str().unwrap()]);
    assert_eq!(git(&shallow, &["rev-parse", "--is-shallow-repository"]).trim(), "true");
    let store = open(&shallow);
    assert_eq!(store.sync_with("origin").unwrap().received, 1);
    assert!(store.get(&id("before-shallow")).unwrap().is_some());
    store.insert(&[(memory("from-shallow", "learnings", "Captured in a shallow clone."), None)]).unwrap();
    store.sync_with("origin").unwrap();
    clones[0].1.sync_with("origin").unwrap();
    assert!(clones[0].1.get(&id("from-shallow")).unwrap().is_some());
    assert_eq!(notes_tree(&clones[0].0), notes_tree(&shallow));
}

/// A purge replaces the author's notes with tombstones in a new notes commit. A clone that still
/// holds the memory, even one that edited it meanwhile, cannot bring it back by a sync, and a
/// clone that never saw it gets the tombstone. What is not erased, and the README says so: the
/// notes commits before the purge still hold the note.
#[test]
fn a_purge_survives_syncs_with_clones_that_still_hold_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (_remote, clones) = remote_and_clones(dir.path(), 3);
    let (left, right, late) = (&clones[0].1, &clones[1].1, &clones[2].1);
    let mut private = memory("ada-private", "context", "Ada's home address is 12 Quokka Lane.");
    private.author = Some("ada".into());
    let edited = memory("ada-edited", "context", "Ada's first draft of the release notes.");
    let mut edited_by_ada = edited.clone();
    edited_by_ada.author = Some("ada".into());
    let mut kept = memory("bob-kept", "context", "Bob keeps the release checklist.");
    kept.author = Some("bob".into());
    left.insert(&[(private.clone(), None), (edited_by_ada.clone(), None), (kept.clone(), None)]).unwrap();
    left.sync_with("origin").unwrap();
    right.sync_with("origin").unwrap();
    let before_purge = git(&clones[0].0, &["rev-parse", NOTES_REF]).trim().to_owned();

    // Right edits one of ada's memories while left purges ada.
    let (mut next, mut previous) = kenning_conformance::fixtures::supersede(&edited_by_ada, "edited", |m| {
        m.content = "Ada's release notes, edited on the right.".into();
    });
    next.updated_at = at(50);
    previous.superseded_at = at(50);
    right.replace(&next, &previous, None).unwrap();
    let dry = left.purge_author("ada", PurgeMode::DryRun).unwrap();
    assert_eq!(dry.memories, 2);
    assert!(left.get(&private.id).unwrap().is_some(), "a dry run removes nothing");
    let purged = left.purge_author("ada", PurgeMode::Apply).unwrap();
    assert_eq!(purged, dry);
    assert_eq!(left.get(&private.id).unwrap(), None);
    let tombstone = git(&clones[0].0, &["cat-file", "-p", &note_at(NOTES_REF, &private.id)]);
    assert!(tombstone.contains("\"purged\"") && !tombstone.contains("Quokka"), "{tombstone}");

    left.sync_with("origin").unwrap();
    right.sync_with("origin").unwrap();
    left.sync_with("origin").unwrap();
    late.sync_with("origin").unwrap();
    for store in [left, right, late] {
        assert_eq!(store.get(&private.id).unwrap(), None);
        assert_eq!(store.get(&edited.id).unwrap(), None, "the edit on the right did not bring the memory back");
        assert!(store.history(&edited.id).unwrap().is_empty());
        assert_eq!(store.get(&kept.id).unwrap().map(|m| m.content), Some(kept.content.clone()));
        assert!(everything(store).values().all(|record| record.memory.author.as_deref() != Some("ada")));
    }
    assert_eq!(notes_tree(&clones[0].0), notes_tree(&clones[1].0));
    assert_eq!(notes_tree(&clones[0].0), notes_tree(&clones[2].0));
    // A rebuild from the notes alone does not resurrect it either.
    right.rebuild_index().unwrap();
    assert_eq!(right.get(&edited.id).unwrap(), None);
    assert_eq!(right.count(&SearchFilter::default()).unwrap(), 1);

    // What a purge cannot erase: the notes commit from before it still holds the note.
    let old = git(&clones[0].0, &["cat-file", "-p", &note_at(&before_purge, &private.id)]);
    assert!(old.contains("Quokka"), "{old}");
}

/// The note of memory `id` in the notes commit `commit`, as git names it (two-digit fan-out).
fn note_at(commit: &str, id: &kenning_core::MemoryId) -> String {
    let key = kenning_git::note::note_key(id).to_string();
    format!("{commit}:{}/{}", &key[..2], &key[2..])
}
