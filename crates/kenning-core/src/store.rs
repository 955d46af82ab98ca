//! The storage and embedding traits that backends implement and the engine drives.
//!
//! A [`MemoryStore`] holds one domain's memories durably and answers searches over them. It is
//! deliberately synchronous and free of any runtime: backends block, and async callers move the
//! call onto a blocking thread. A backend may keep its source of truth somewhere else (git notes,
//! say) and use an embedded index for search; [`MemoryStore::rebuild_index`] is the hook for that.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::error::Result;
use crate::memory::{Memory, MemoryId, MemoryVersion};
use crate::search::{ScoredId, SearchFilter};

/// A vector and the model that made it; vectors from different models are never compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    pub model: String,
    pub vector: Vec<f32>,
}

/// Turns text into vectors for similarity search.
pub trait Embedder: Send + Sync {
    /// A stable name for the model and its settings, recorded with every vector it makes.
    fn model_id(&self) -> &str;
    fn dimensions(&self) -> usize;
    /// Embeds a batch of texts; the result has one L2-normalised vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;

    /// The weight hybrid recall gives this model's ranking against full-text search's (which
    /// gets the rest of 1). Equal by default, since neither leg is better everywhere: full text
    /// wins on names and rare words, vectors on paraphrase. A model whose ranking is weaker
    /// (one vector per word, blind to word order) says so with a lower weight.
    fn recall_weight(&self) -> f64 {
        0.5
    }

    /// The similarity (cosine) at or above which this model's vectors of two statements say
    /// they make the same claim, for a pair whose words the claim rule cannot judge
    /// ([`crate::claim::Judgement::Unsure`]); `None` for a model that cannot tell paraphrases
    /// from other claims with like words (one vector per word, blind to order), which is the
    /// default: such pairs are then stored and linked, never merged.
    fn paraphrase_similarity(&self) -> Option<f64> {
        None
    }
}

/// What happened to a memory handed to [`MemoryStore::insert`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    Created,
    /// An active memory with the same namespace and content already exists; nothing was written.
    Duplicate(MemoryId),
}

/// A memory together with its superseded versions and its vector, as exported and imported.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecord {
    pub memory: Memory,
    pub history: Vec<MemoryVersion>,
    pub embedding: Option<Embedding>,
}

/// Counts and health figures of one store.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreStats {
    pub backend: String,
    pub location: String,
    pub total: u64,
    pub by_status: BTreeMap<String, u64>,
    /// Active memories per namespace.
    pub by_namespace: BTreeMap<String, u64>,
    /// Active memories per kind.
    pub by_kind: BTreeMap<String, u64>,
    /// Stored vectors per model id.
    pub vectors_by_model: BTreeMap<String, u64>,
    /// Entries in the full-text index; equals `total` when the index is healthy.
    pub text_index_entries: u64,
    pub size_bytes: Option<u64>,
    /// Problems the store met and worked around, such as entries of its source of truth it
    /// could not read; each says what and where.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What one sync of a store with a remote copy did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SyncReport {
    /// The remote, as named by the caller.
    pub remote: String,
    /// Memories that came from the remote new or changed (merged ones included).
    pub received: u64,
    /// Memories changed on both sides and merged by the store's rule.
    pub merged: u64,
    /// Memories the remote got from this store.
    pub sent: u64,
    /// Rounds of fetch, merge and push: more than one when the remote moved meanwhile.
    pub attempts: u32,
}

/// Whether a purge removes what it finds or only counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeMode {
    /// Counts what would go and changes nothing (`kenning purge --dry-run`).
    DryRun,
    /// Removes it for good.
    Apply,
}

/// What a purge of one author's records removed from one store, or would remove in a dry run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PurgeCounts {
    pub memories: u64,
    /// Superseded versions of those memories.
    pub versions: u64,
    /// Decisions among those memories (a decision is a memory with the same id).
    pub decisions: u64,
    /// Signals recorded on those decisions.
    pub signals: u64,
    /// Outcomes recorded on those decisions.
    pub outcomes: u64,
    /// Graph edges and copies of links from or to any of the above.
    pub edges: u64,
    /// Stored vectors of those memories, every model counted.
    pub vectors: u64,
    /// Workflows the author created, kept in the store's working state; counted by the engine,
    /// which reads their bodies, not by the store.
    pub workflows: u64,
    /// Contradiction records between any of those memories and another (their evidence quotes
    /// the memories' words), kept in the store's working state; counted by the engine.
    pub contradictions: u64,
}

impl PurgeCounts {
    /// Adds another store's counts to these.
    pub fn add(&mut self, other: &PurgeCounts) {
        self.memories += other.memories;
        self.versions += other.versions;
        self.decisions += other.decisions;
        self.signals += other.signals;
        self.outcomes += other.outcomes;
        self.edges += other.edges;
        self.vectors += other.vectors;
        self.workflows += other.workflows;
        self.contradictions += other.contradictions;
    }
}

/// How many memories captured before, and after, a memory [`MemoryStore::neighbours`] looks
/// through for its neighbours: enough to step over a few memories of other namespaces, few
/// enough that looking costs next to nothing.
pub const NEIGHBOUR_REACH: usize = 16;

/// One memory's change for [`MemoryStore::replace_many`]: the next version, the version it
/// replaces, and the vector for the next one if there is one.
#[derive(Debug, Clone, Copy)]
pub struct Replacement<'a> {
    pub next: &'a Memory,
    pub previous: &'a MemoryVersion,
    pub embedding: Option<&'a Embedding>,
}

/// One domain's durable memory store and search index.
///
/// Contract (checked by the shared conformance suite): an `insert` or `replace` that returned
/// `Ok` is durable and survives a crash of the process; concurrent writers from several
/// processes never lose an acknowledged write; `replace` is compare-and-swap on the version.
pub trait MemoryStore: Send + Sync {
    /// Inserts new memories in one atomic batch, skipping exact duplicates of active memories
    /// (same namespace and content hash) including duplicates within the batch.
    fn insert(&self, batch: &[(Memory, Option<Embedding>)]) -> Result<Vec<Inserted>>;

    /// For each memory, the active memory of the same namespace that already holds its content
    /// (the exact duplicate [`MemoryStore::insert`] would skip), looked up by content hash; `None`
    /// for a memory that is not active or whose content is new.
    fn active_holders(&self, memories: &[&Memory]) -> Result<Vec<Option<MemoryId>>>;

    fn get(&self, id: &MemoryId) -> Result<Option<Memory>>;

    /// Fetches several memories at once, in no particular order; missing ids are skipped.
    fn get_many(&self, ids: &[MemoryId]) -> Result<Vec<Memory>>;

    /// Replaces a memory whose stored version is `previous.version` with `next`, appending
    /// `previous` to its history. Fails with [`crate::Error::Conflict`] if the stored version
    /// moved on, and [`crate::Error::NotFound`] if the memory does not exist. Access counts
    /// and times are not versioned: the store keeps the higher of its own and `next`'s. `embedding`
    /// replaces the stored vector when given; otherwise the vector is dropped if the content changed.
    fn replace(&self, next: &Memory, previous: &MemoryVersion, embedding: Option<&Embedding>) -> Result<()>;

    /// [`Self::replace`] for several memories in one write, all or none: a conflict or a
    /// missing memory on any of them changes none of them. One write is one disk flush, where
    /// a replace each would flush once each (a capture marking the memories it contradicts).
    fn replace_many(&self, changes: &[Replacement<'_>]) -> Result<()>;

    /// Superseded versions, oldest first.
    fn history(&self, id: &MemoryId) -> Result<Vec<MemoryVersion>>;

    /// Records that memories were read: bumps access counts and last-access times.
    fn record_access(&self, ids: &[MemoryId], at: DateTime<Utc>) -> Result<()>;

    /// Memories matching `filter`, newest first by capture time, from `offset`.
    fn list(&self, filter: &SearchFilter, offset: usize, limit: usize) -> Result<Vec<Memory>>;

    fn count(&self, filter: &SearchFilter) -> Result<u64>;

    /// Full-text search (BM25 or the backend's equivalent) over title, tags and content.
    fn search_text(&self, query: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<ScoredId>>;

    /// Nearest neighbours by cosine similarity among vectors made by `model`.
    fn search_vector(&self, vector: &[f32], model: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<ScoredId>>;

    /// The nearest neighbours of each of several vectors, one list per vector in their order,
    /// for the checks of a batch of captures rather than for recall. A backend may answer them
    /// together at a lower search effort than [`MemoryStore::search_vector`]'s, and may leave out
    /// vectors it has not indexed yet (the backlog of a bulk load that is still running), which
    /// the batch's own comparisons cover. The default searches for each vector in turn.
    fn search_vector_many(&self, vectors: &[&[f32]], model: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<Vec<ScoredId>>> {
        vectors.iter().map(|vector| self.search_vector(vector, model, filter, limit)).collect()
    }

    /// The context each of `ids` was captured in: the memories captured just before and just
    /// after it. On each side, among the [`NEIGHBOUR_REACH`] memories captured next to it, the
    /// nearest in capture order that shares its namespace and passes `filter` counts, if it
    /// occurred within `window` of it; the one before comes first. One list per id, in the order
    /// of `ids`; an id the store does not hold, or that does not pass `filter` itself, has none.
    fn neighbours(&self, ids: &[MemoryId], filter: &SearchFilter, window: TimeDelta) -> Result<Vec<Vec<MemoryId>>>;

    /// Memories with no vector from `model`, for re-embedding.
    fn missing_embeddings(&self, model: &str, limit: usize) -> Result<Vec<Memory>>;

    fn set_embeddings(&self, items: &[(MemoryId, Embedding)]) -> Result<()>;

    /// Every memory with its history and vector, in capture order, from `offset`.
    fn export(&self, offset: usize, limit: usize) -> Result<Vec<MemoryRecord>>;

    /// Writes records as they are (ids, versions and history kept). A record whose id exists
    /// is skipped unless the incoming version is newer. Returns how many were written.
    fn import(&self, records: &[MemoryRecord]) -> Result<usize>;

    fn stats(&self) -> Result<StoreStats>;

    /// The hard delete of the data-rights rules: removes for good every memory `author` wrote
    /// (one whose current record or any earlier version names the author, the same selection
    /// as the author's export), with its whole history, its vectors, its links and every graph
    /// edge from or to it, and for a decision its signals and outcome; the search index forgets
    /// them too. With [`PurgeMode::DryRun`] nothing changes and the counts say what would go.
    fn purge_author(&self, author: &str, mode: PurgeMode) -> Result<PurgeCounts>;

    /// The ids of the memories [`MemoryStore::purge_author`] removes for `author`, found as it
    /// finds them.
    fn authored_by(&self, author: &str) -> Result<Vec<MemoryId>>;

    /// Leaves no byte of the records deleted so far readable in the store's own files, as far
    /// as the backend can; called after a purge. SQLite rewrites its database, WAL and index
    /// files. The default does nothing, for a backend whose storage it cannot rewrite:
    /// PostgreSQL keeps dead row versions until its own `VACUUM`, and its WAL and backups longer.
    fn erase_deleted(&self) -> Result<()> {
        Ok(())
    }

    /// Rebuilds the search index from the source of truth; returns the number of memories indexed.
    fn rebuild_index(&self) -> Result<u64>;

    /// Prepares what searching needs (an index held in memory, say) for text search and for
    /// vector search with `model`, so that the first search does not wait for it. Searching
    /// without it is correct, only slower the first time.
    fn warm_up(&self, model: Option<&str>) -> Result<()> {
        let _ = model;
        Ok(())
    }

    /// Exchanges memories with the remote copy named `remote`, merging both ways. Stores that
    /// keep no remote copies (a file of one machine) refuse.
    fn sync(&self, remote: &str) -> Result<SyncReport> {
        Err(crate::Error::Invalid(crate::FieldError::new(
            "domain",
            "is not kept in a store that syncs with remotes",
            remote,
            "sync the project domain, whose memories live in the repository's git notes",
        )))
    }

    /// The store's working state (workflows, protocol sessions), if it can keep any; `None`
    /// by default, which the engine reports as a refusal naming the domain.
    fn state(&self) -> Option<&dyn crate::state::StateStore> {
        None
    }

    /// A mark that changes whenever the store's memories change, by this process or another
    /// (a capture, an update, a forget, a sync, an import or a purge), and not when they are
    /// only read: front ends poll it to refresh what they show. `None` from a store that keeps
    /// no such mark, whose changes are then not announced.
    fn change_mark(&self) -> Result<Option<String>> {
        Ok(None)
    }

    /// Facts about the moment of a capture that the store can tell and the engine records in
    /// the memory's metadata (a git store: the branch and commit checked out). Empty by default.
    fn capture_context(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Why the store's reads are not being answered where they were configured to be, while
    /// that lasts: an organisation database whose read replica cannot be reached answers from
    /// its primary. Recall and status report it. `None` (the default) when all is as configured.
    fn degraded(&self) -> Option<String> {
        None
    }
}

/// A time as fixed-width RFC 3339 text with nanoseconds (`2026-05-08T13:56:00.000000000Z`), as
/// the backends store it in text columns. Text comparison of these strings is time order for
/// years 0 to 9999, which is every year RFC 3339 can express, and parsing it back gives the same
/// instant.
pub fn time_key(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// A time read back from a [`time_key`] column. The error is the reason a backend reports the
/// column as corrupt: no time kenning wrote fails to parse.
pub fn parse_time_key(text: &str) -> std::result::Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text).map(|time| time.with_timezone(&Utc)).map_err(|error| format!("stored time `{text}`: {error}"))
}
