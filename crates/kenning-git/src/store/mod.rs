//! [`GitNotesStore`]: the [`MemoryStore`] and [`DecisionStore`] whose records live in git notes,
//! with a [`SqliteStore`] as the index that answers reads.
//!
//! A write runs in three steps: bring the index up to the notes ref; check the change against
//! that state and write the notes it touches as one notes commit on top of it; move the ref from
//! that state to the new commit with compare-and-swap, starting again from the top if another
//! writer moved it first. Only then is the index brought up to the ref, which applies the change.
//! A process killed between the ref and the index leaves an index behind its ref, which the
//! next read or open catches up, so a write is acknowledged once its ref update is done.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use git2::{Oid, Repository, RepositoryOpenFlags};
use kenning_core::decision::{
    Decision, DecisionChange, DecisionFilter, DecisionId, DecisionRecord, DecisionStore, Edge, Hop, MemoryChange, Node,
    Outcome, Signal, SkillSync,
};
use kenning_core::{Refusal, relation};
use kenning_core::{
    Embedding, Inserted, Memory, MemoryId, MemoryRecord, MemoryStore, MemoryVersion, PurgeCounts, PurgeMode, ScoredId, SearchFilter,
    StoreStats, SyncReport,
};
use kenning_sqlite::{Durability, MirrorChange, MirrorUpdate, SqliteStore, VersionedEmbedding};

use crate::error::{Error, Result};
use crate::journal::Flush;
use crate::note::{DecisionDoc, EdgeDoc, Note, edges_key, note_key};
use crate::notes::{self, Identity, NOTES_REF};
use crate::objects::Objects;

mod decision_store;
mod draft;
mod memory_store;

use draft::Draft;

/// How many times a write starts again after losing the race for the notes ref.
const WRITE_ATTEMPTS: u32 = 200;
/// Records exported from an older store per batch while migrating it into notes.
const MIGRATION_BATCH: usize = 500;
/// The metadata keys of a memory's provenance.
pub const BRANCH_KEY: &str = kenning_core::provenance::BRANCH_KEY;
pub const COMMIT_KEY: &str = kenning_core::provenance::COMMIT_KEY;
/// The mirror state key recording that the index's own records were carried into notes.
const MIGRATED: &str = "migrated-to-notes";

/// The project domain's store: memories, their histories and decisions in git notes of the
/// repository, one note per memory under [`NOTES_REF`], indexed in a SQLite file.
pub struct GitNotesStore {
    repo: Mutex<Repository>,
    index: SqliteStore,
    location: String,
    /// The notes commit the index was last seen to reflect, so that a read whose ref has not
    /// moved costs one ref read and no database query.
    reflected: Mutex<Option<Oid>>,
    /// How writes survive a power loss.
    flush: Flush,
    /// Who signs this store's notes commits and the reflog entries of its ref's moves.
    identity: Identity,
    /// Where its notes commits' objects are written.
    objects: Objects,
}

/// The branch and commit checked out when a memory is captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// `None` on a detached HEAD.
    pub branch: Option<String>,
    /// `None` in a repository without commits.
    pub commit: Option<String>,
}

impl GitNotesStore {
    /// Opens the notes of the repository at `repo_path` (a work tree, a git directory or a bare
    /// repository) indexed in `index_path`, catching the index up and migrating into notes any
    /// records the index file held from before it was an index. With
    /// [`Durability::PowerLoss`] a write is on disk before it is acknowledged (through the
    /// notes journal where the platform has `syncfs`, which opening replays; elsewhere by
    /// flushing every object and ref); the index itself only needs to survive the process,
    /// because it is rebuilt from the notes after any loss.
    pub fn open(repo_path: &Path, index_path: &Path, durability: Durability) -> Result<GitNotesStore> {
        let repo = Repository::open_ext(repo_path, RepositoryOpenFlags::NO_SEARCH, std::iter::empty::<&std::ffi::OsStr>())
            .map_err(|error| Error::Repository { path: repo_path.to_owned(), reason: error.message().to_owned() })?;
        let flush = match durability {
            Durability::ProcessCrash => Flush::Never,
            #[cfg(target_os = "linux")]
            Durability::PowerLoss => Flush::Journal(crate::journal::Journal::new(&repo)),
            #[cfg(not(target_os = "linux"))]
            Durability::PowerLoss => Flush::EveryFile,
        };
        configure_libgit2(&flush);
        crate::journal::recover(&repo)?;
        let location = format!("{} ({NOTES_REF}; index {})", repo.commondir().display(), index_path.display());
        let index = SqliteStore::open_with(index_path, Durability::ProcessCrash)?;
        let identity = Identity::of(&repo);
        let objects = Objects::new(repo.commondir().join("objects"), flush.flushes_each_file());
        let store = GitNotesStore { repo: Mutex::new(repo), index, location, reflected: Mutex::new(None), flush, identity, objects };
        store.migrate()?;
        store.catch_up(&lock(&store.repo), &[])?;
        store.merge_fetched();
        Ok(store)
    }

    /// The project id the notes' memories were first stored under: the domain of the memory
    /// captured first. It travels with the notes, so every clone agrees on it whatever its
    /// remotes are called; `None` while the notes hold no memory.
    pub fn recorded_project_id(&self) -> Result<Option<String>> {
        Ok(match self.index.first_captured_domain()? {
            Some(kenning_core::Domain::Project(id)) => Some(id),
            _ => None,
        })
    }

    /// The index file.
    pub fn index_path(&self) -> PathBuf {
        self.index.path().to_owned()
    }

    /// The index, for sync's duplicate check.
    pub(crate) fn index(&self) -> &SqliteStore {
        &self.index
    }

    /// The branch and commit checked out now, recorded with each capture.
    pub fn provenance(&self) -> Provenance {
        let repo = lock(&self.repo);
        let head = repo.head().ok();
        let branch = head.as_ref().filter(|head| head.is_branch()).and_then(|head| head.shorthand().map(str::to_owned));
        let branch = branch.or_else(|| {
            // An unborn branch (no commits yet) has no HEAD reference to resolve, only a name.
            repo.find_reference("HEAD").ok().and_then(|head| head.symbolic_target().map(|target| target.trim_start_matches("refs/heads/").to_owned()))
        });
        let commit = head.and_then(|head| head.target()).map(|oid| oid.to_string());
        Provenance { branch, commit }
    }

    /// How writes survive a power loss, for sync's merges.
    pub(crate) fn flush(&self) -> &Flush {
        &self.flush
    }

    pub(crate) fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Runs `work` with the repository, for sync and status.
    pub(crate) fn with_repo<T>(&self, work: impl FnOnce(&Repository) -> Result<T>) -> Result<T> {
        work(&lock(&self.repo))
    }

    /// Brings the index up to the notes ref, storing `embeddings` for the memories it then
    /// holds at their versions; returns the notes commit the index reflects.
    pub(crate) fn catch_up(&self, repo: &Repository, embeddings: &[VersionedEmbedding]) -> Result<Option<Oid>> {
        self.catch_up_ordered(repo, embeddings, &[], None)
    }

    /// [`Self::catch_up`] with the order a write captured its memories in, and what that write
    /// changed when it is known: when the index reflects the write's base, the changes are
    /// applied as they are, without comparing trees and reading back the notes just written.
    /// They are handed over once: should the index's transaction be tried again, the trees
    /// are compared then.
    fn catch_up_ordered(&self, repo: &Repository, embeddings: &[VersionedEmbedding], order: &[MemoryId], mut written: Option<Written>) -> Result<Option<Oid>> {
        let source = self.index.catch_up_mirror(
            |reflected| {
                if let Some(Written { commit, changes, .. }) =
                    written.take_if(|written| reflected.is_some_and(|reflected| reflected == written.base.to_string()))
                {
                    return Ok(Some(MirrorUpdate { source: commit.to_string(), complete: false, changes, order: order.to_vec() }));
                }
                let mut update = plan(repo, reflected)?;
                if let Some(update) = &mut update {
                    update.order = order.to_vec();
                }
                Ok::<_, Error>(update)
            },
            embeddings,
        )?;
        let reflected = source.as_deref().and_then(|source| Oid::from_str(source).ok());
        *lock(&self.reflected) = reflected;
        Ok(reflected)
    }

    /// Catches the index up if the ref moved since this process last looked.
    fn refresh(&self) -> Result<()> {
        let repo = lock(&self.repo);
        let tip = notes::resolve(&repo, NOTES_REF)?;
        if tip.is_some() && tip == *lock(&self.reflected) {
            return Ok(());
        }
        self.catch_up(&repo, &[])?;
        Ok(())
    }

    /// Applies a change to the notes: `build` reads notes and stages new ones in a draft made
    /// on the state the index reflects; the staged notes become one commit, and the ref moves to
    /// it by compare-and-swap. A lost race starts again from a fresh state.
    fn write<T>(&self, message: &str, mut build: impl FnMut(&mut Draft<'_>) -> Result<T>) -> Result<T> {
        let repo = lock(&self.repo);
        for attempt in 0..WRITE_ATTEMPTS {
            let base = self.catch_up(&repo, &[])?;
            let tree = base.map(|base| notes::tree_of(&repo, base)).transpose()?;
            let mut draft =
                Draft { repo: &repo, tree, index: &self.index, staged: Vec::new(), staged_edges: Vec::new(), staged_purges: Vec::new(), embeddings: Vec::new() };
            let value = build(&mut draft)?;
            if draft.staged.is_empty() && draft.staged_edges.is_empty() && draft.staged_purges.is_empty() {
                self.catch_up(&repo, &draft.embeddings)?;
                return Ok(value);
            }
            let encode = |key: Oid, id: &MemoryId, note: &Note| {
                let bytes = note.encode().map_err(|reason| Error::Note { id: id.to_string(), reason })?;
                Ok((key, bytes))
            };
            let encoded = draft
                .staged
                .iter()
                .map(|(id, note, _)| encode(note_key(id), id, note))
                .chain(draft.staged_edges.iter().map(|(id, note)| encode(edges_key(id), id, note)))
                .chain(draft.staged_purges.iter().map(|(id, note)| encode(note_key(id), id, note)))
                .collect::<Result<Vec<_>>>()?;
            let order: Vec<MemoryId> = draft.staged.iter().map(|(id, _, _)| id.clone()).collect();
            // What the index is to apply, from the notes as staged. A note this process cannot
            // index leaves it to the comparison of trees, which records why.
            let changes: Option<Vec<MirrorChange>> = draft
                .staged
                .iter()
                .map(|(id, note, _)| (note_key(id), note))
                .chain(draft.staged_edges.iter().map(|(id, note)| (edges_key(id), note)))
                .chain(draft.staged_purges.iter().map(|(id, note)| (note_key(id), note)))
                .map(|(key, note)| indexable_note(&key.to_string(), note).ok())
                .collect();
            let signature = self.identity.now()?;
            let written = notes::commit(&repo, &self.objects, &signature, base, &encoded, message)?;
            let moved = self.flush.advance(base, written.commit, &written.objects, || {
                notes::advance(&repo, &signature, NOTES_REF, base, written.commit, message)
            })?;
            if moved {
                let embeddings = std::mem::take(&mut draft.embeddings);
                drop(draft);
                let known = base.zip(changes).map(|(base, changes)| Written { base, commit: written.commit, changes });
                self.catch_up_ordered(&repo, &embeddings, &order, known)?;
                return Ok(value);
            }
            backoff(attempt);
        }
        Err(Error::Busy(NOTES_REF.to_owned()))
    }

    /// Carries the records of an index file that predates notes into notes, once: every memory
    /// (current version and history), decision, signal, outcome and skill edge it holds that
    /// has no note yet. Records are read from the index itself, so nothing it held is lost.
    fn migrate(&self) -> Result<()> {
        if self.index.mirror_state(MIGRATED)?.is_some() {
            return Ok(());
        }
        if self.index.mirror_source()?.is_none() && self.index.count(&SearchFilter::default())? > 0 {
            let mut migrated = 0usize;
            let mut offset = 0;
            loop {
                let records = self.index.export(offset, MIGRATION_BATCH)?;
                if records.is_empty() {
                    break;
                }
                offset += records.len();
                migrated += self.write("kenning: migrate the project store into notes", |draft| {
                    let mut written = 0;
                    for record in &records {
                        if draft.note(&record.memory.id)?.is_some() {
                            continue;
                        }
                        let note = legacy_note(&self.index, record)?;
                        draft.stage(&record.memory.id, note, record.memory.clone());
                        written += 1;
                    }
                    Ok(written)
                })?;
            }
            tracing::info!(migrated, "migrated the project store's memories into git notes");
        }
        self.index.set_mirror_state(MIGRATED, "1")?;
        Ok(())
    }

    /// The purge of everything `author` wrote: the note of each such memory is replaced by a
    /// tombstone in one new notes commit, and the index drops the memory with its history,
    /// vectors, decision, signals, outcome and edges. The counts are the index's, taken just
    /// before. What this does not erase: earlier notes commits still hold the notes as they
    /// were (git keeps history; `git gc` cannot collect objects that commits reachable from the
    /// ref point at), in this repository and in every clone that fetched them. Edges that other
    /// memories' notes hold to a purged decision's outcome hold only ids, and are kept.
    fn purge(&self, author: &str, mode: PurgeMode) -> Result<PurgeCounts> {
        self.refresh()?;
        let counts = self.index.purge_author(author, PurgeMode::DryRun)?;
        if mode == PurgeMode::DryRun || counts.memories == 0 {
            return Ok(counts);
        }
        let ids = self.index.authored(author)?;
        let now = Utc::now();
        self.write("kenning: purge the memories of one author", |draft| {
            for id in &ids {
                if draft.note(id)?.is_some_and(|note| note.purged().is_none()) {
                    draft.staged_purges.push((id.clone(), Note::tombstone(id, now)));
                }
            }
            Ok(())
        })?;
        // The journal holds copies of the notes the tombstones replaced.
        self.flush.checkpoint()?;
        Ok(counts)
    }

    /// Entries of the notes that could not be indexed, with why, as status warnings.
    fn skipped_warnings(&self) -> Result<Vec<String>> {
        Ok(self
            .index
            .mirror_skipped()?
            .into_iter()
            .map(|(entry, reason)| format!("note {entry} in {NOTES_REF} was skipped: {reason}"))
            .collect())
    }

    /// Rebuilds the index from the notes alone: every memory, history, decision and edge is
    /// rewritten from its note, and whatever the notes do not hold is removed. Access counts and
    /// vectors, which notes do not carry, stay where the memory's text is unchanged.
    fn rebuild(&self) -> Result<u64> {
        let repo = lock(&self.repo);
        let Some(tip) = notes::resolve(&repo, NOTES_REF)? else {
            let source = self.index.catch_up_mirror(
                |_| Ok::<_, Error>(Some(MirrorUpdate { source: String::new(), complete: true, changes: Vec::new(), order: Vec::new() })),
                &[],
            )?;
            *lock(&self.reflected) = source.as_deref().and_then(|source| Oid::from_str(source).ok());
            return Ok(0);
        };
        let mut put = 0;
        self.index.catch_up_mirror(
            |_| {
                let update = full_update(&repo, tip, true)?;
                put = update.changes.iter().filter(|change| matches!(change, MirrorChange::Put { .. })).count() as u64;
                Ok::<_, Error>(Some(update))
            },
            &[],
        )?;
        *lock(&self.reflected) = Some(tip);
        Ok(put)
    }
}

/// The largest tree libgit2 keeps in its object cache.
const TREE_CACHE_LIMIT: usize = 1 << 20;

/// libgit2's global settings: flush every object and ref to disk when that is how writes
/// survive a power loss (the settings are per process, so the last store opened decides).
/// libgit2 also stops checking, for each tree and commit it writes, that every object named in
/// it exists: a notes commit names only the blobs and trees written just before it, or a
/// fetched commit's, and the check read an object header from disk per entry changed. And it
/// keeps trees of up to a mebibyte in its object cache, not 4 KiB: the notes tree's root (256
/// fan-out entries, about 7 KiB) and its fan-out trees are read again by every write.
fn configure_libgit2(flush: &Flush) {
    git2::opts::strict_object_creation(false);
    let fsync = match flush {
        #[cfg(not(target_os = "linux"))]
        Flush::EveryFile => 1,
        _ => 0,
    };
    // SAFETY: GIT_OPT_ENABLE_FSYNC_GITDIR takes a single int argument and the cache limit a type
    // and a size; libgit2 is initialised by git2 before any repository is opened, and this runs
    // before the first one is. Each sets one word of libgit2's globals.
    unsafe {
        libgit2_sys::init();
        libgit2_sys::git_libgit2_opts(libgit2_sys::GIT_OPT_ENABLE_FSYNC_GITDIR as std::ffi::c_int, fsync);
        let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Tree, TREE_CACHE_LIMIT);
    }
}

/// A poisoned lock only means another thread panicked while holding it; the repository handle
/// and the cached commit id inside stay sound.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A short random pause after losing the race for the ref, growing with each attempt, so that
/// writers that collided do not collide again in lockstep.
fn backoff(attempt: u32) {
    let ceiling = u64::from(attempt.min(20) + 1) * 500;
    std::thread::sleep(Duration::from_micros(fastrand::u64(0..=ceiling)));
}

/// What the index must apply to go from `reflected` to the ref's current commit, or `None`.
fn plan(repo: &Repository, reflected: Option<&str>) -> Result<Option<MirrorUpdate>> {
    let Some(tip) = notes::resolve(repo, NOTES_REF)? else { return Ok(None) };
    let before = reflected.and_then(|reflected| Oid::from_str(reflected).ok());
    if before == Some(tip) {
        return Ok(None);
    }
    let before_tree = before.and_then(|before| notes::tree_of(repo, before).ok());
    let Some(before_tree) = before_tree else {
        // No state reflected yet (a new index, or one that predates notes: keep its rows for the
        // migration), or one whose commit is gone (rewritten history): then the notes are all.
        return full_update(repo, tip, reflected.is_some()).map(Some);
    };
    let after = notes::tree_of(repo, tip)?;
    let (changed, foreign) = notes::diff(repo, &before_tree, &after)?;
    let mut changes = Vec::with_capacity(changed.len() + foreign.len());
    for change in changed {
        let before_id = change.before.and_then(|blob| read_note(repo, blob).ok()).and_then(|note| note.id().ok());
        match change.after {
            Some(blob) => match indexable(repo, &change.key, blob) {
                Ok(change) => changes.push(change),
                Err(reason) => {
                    changes.push(MirrorChange::Skip { entry: change.key.clone(), reason });
                    if let Some(id) = before_id {
                        changes.push(MirrorChange::Remove { entry: format!("{}:before", change.key), id: Some(id) });
                    }
                }
            },
            None => changes.push(MirrorChange::Remove { entry: change.key, id: before_id }),
        }
    }
    changes.extend(foreign.into_iter().map(|(entry, reason)| MirrorChange::Skip { entry, reason }));
    Ok(Some(MirrorUpdate { source: tip.to_string(), complete: false, changes, order: Vec::new() }))
}

/// Every note at `tip` as a put (or a skip), as one update.
fn full_update(repo: &Repository, tip: Oid, complete: bool) -> Result<MirrorUpdate> {
    let listing = notes::list(repo, &notes::tree_of(repo, tip)?)?;
    let mut changes = Vec::with_capacity(listing.notes.len());
    for (key, blob) in &listing.notes {
        changes.push(indexable(repo, key, *blob).unwrap_or_else(|reason| MirrorChange::Skip { entry: key.clone(), reason }));
    }
    changes.extend(listing.foreign.into_iter().map(|(entry, reason)| MirrorChange::Skip { entry, reason }));
    Ok(MirrorUpdate { source: tip.to_string(), complete, changes, order: Vec::new() })
}

fn read_note(repo: &Repository, blob: Oid) -> std::result::Result<Note, String> {
    let blob = repo.find_blob(blob).map_err(|error| format!("unreadable blob: {}", error.message()))?;
    Note::decode(blob.content())
}

/// A commit this process wrote on `base`, and the changes to the index its notes make.
struct Written {
    base: Oid,
    commit: Oid,
    changes: Vec<MirrorChange>,
}

/// The note at `key` as a put, or why it cannot be indexed.
fn indexable(repo: &Repository, key: &str, blob: Oid) -> std::result::Result<MirrorChange, String> {
    indexable_note(key, &read_note(repo, blob)?)
}

/// [`indexable`] for a note in hand.
fn indexable_note(key: &str, note: &Note) -> std::result::Result<MirrorChange, String> {
    if let Some(id) = note.purged() {
        return Ok(MirrorChange::Remove { entry: key.to_owned(), id: Some(id) });
    }
    if note.memory.is_null()
        && let Some(target) = &note.edges_for
    {
        let target = MemoryId::parse(target).map_err(|error| format!("field `edges_for`: {error}"))?;
        let expected = edges_key(&target).to_string();
        if expected != key {
            return Err(format!("it holds edges to memory {target}, whose edges note belongs on {expected}"));
        }
        let edges = note.edges_to.iter().flatten().map(EdgeDoc::to_edge).collect::<std::result::Result<_, _>>()?;
        return Ok(MirrorChange::EdgesTo { entry: key.to_owned(), target, edges });
    }
    let record = note.to_record()?;
    let expected = note_key(&record.memory.id).to_string();
    if expected != key {
        return Err(format!("it holds memory {}, whose note belongs on {expected}", record.memory.id));
    }
    Ok(MirrorChange::Put { entry: key.to_owned(), record: Box::new(record) })
}

/// The note of a record read from an index that predates notes, with its decision and edges.
fn legacy_note(index: &SqliteStore, record: &MemoryRecord) -> Result<Note> {
    let id = &record.memory.id;
    let invalid = |reason: String| Error::Note { id: id.to_string(), reason };
    let mut note = Note::new(&record.memory).map_err(invalid)?;
    for version in &record.history {
        note.push_history(version).map_err(invalid)?;
    }
    if let Ok(decision_id) = DecisionId::parse(id.as_str())
        && let Some(found) = index.get_decision(&decision_id)?
    {
        let edges = match &found.outcome {
            Some(outcome) => index
                .edges_to(&Node::outcome(&outcome.id))?
                .iter()
                .filter(|edge| edge.relation == relation::RESULTED_IN || edge.relation == relation::PRECEDED)
                .map(EdgeDoc::from_edge)
                .collect(),
            None => Vec::new(),
        };
        let doc = DecisionDoc { record: found.decision, signals: found.signals, outcome: found.outcome, edges };
        note.set_decision(&doc).map_err(invalid)?;
    }
    let skill_edges: Vec<EdgeDoc> = index
        .edges_to(&Node::memory(id))?
        .iter()
        .filter(|edge| edge.relation == relation::SUPPORTS || edge.relation == relation::EVIDENCES)
        .map(EdgeDoc::from_edge)
        .collect();
    if !skill_edges.is_empty() {
        note.edges_to = Some(skill_edges);
    }
    Ok(note)
}

type CoreResult<T> = kenning_core::Result<T>;
