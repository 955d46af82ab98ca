//! The storage seam for decisions and the graph around them.
//!
//! A [`DecisionStore`] is also a [`MemoryStore`]: a decision is a memory (namespace
//! `decisions`, same id) and the store writes the memory and the decision record in one
//! transaction, in the same database as the domain's other memories. The Membria graph
//! (decision -> signals -> outcome -> lessons -> skills) is kept as [`Edge`]s beside memories'
//! own links, and walked by [`DecisionStore::causal_chain`].

use chrono::{DateTime, Utc};

use crate::decision::model::{Decision, DecisionId, DecisionRecord, DecisionStatus, Outcome, Signal};
use crate::error::{Refusal, Result};
use crate::memory::{Memory, MemoryId, MemoryVersion};
use crate::store::{Embedding, Inserted, MemoryStore};

/// What a node of the graph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeKind {
    /// A memory of this store: a decision, a lesson or a skill.
    Memory,
    Signal,
    Outcome,
    /// A memory addressed by URN, possibly in another domain (the target of a memory's link).
    Urn,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Memory => "memory",
            NodeKind::Signal => "signal",
            NodeKind::Outcome => "outcome",
            NodeKind::Urn => "urn",
        }
    }

    pub fn parse(text: &str) -> Option<NodeKind> {
        [NodeKind::Memory, NodeKind::Signal, NodeKind::Outcome, NodeKind::Urn].into_iter().find(|kind| kind.as_str() == text)
    }
}

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Node {
    pub kind: NodeKind,
    pub id: String,
}

impl Node {
    pub fn memory(id: &MemoryId) -> Node {
        Node { kind: NodeKind::Memory, id: id.to_string() }
    }

    pub fn decision(id: &DecisionId) -> Node {
        Node { kind: NodeKind::Memory, id: id.to_string() }
    }

    pub fn signal(id: &str) -> Node {
        Node { kind: NodeKind::Signal, id: id.to_owned() }
    }

    pub fn outcome(id: &str) -> Node {
        Node { kind: NodeKind::Outcome, id: id.to_owned() }
    }
}

/// A directed, typed edge of the decision graph.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Edge {
    pub from: Node,
    pub relation: String,
    pub to: Node,
    pub created_at: DateTime<Utc>,
}

impl Edge {
    /// An edge read back from the text columns the SQL backends keep it in. The error is the
    /// reason a backend reports the row as corrupt.
    pub fn from_columns(
        from_kind: &str,
        from_id: String,
        relation: String,
        to_kind: &str,
        to_id: String,
        created_at: &str,
    ) -> std::result::Result<Edge, String> {
        let kind = |text: &str| NodeKind::parse(text).ok_or_else(|| format!("unknown graph node kind `{text}`"));
        Ok(Edge {
            from: Node { kind: kind(from_kind)?, id: from_id },
            relation,
            to: Node { kind: kind(to_kind)?, id: to_id },
            created_at: crate::store::parse_time_key(created_at)?,
        })
    }
}

/// The graph nodes whose edges a purge of one memory removes: the memory, and the signals and
/// outcome of the decision it is, if it is one.
pub fn purged_nodes(memory: &str, signals: &[String], outcomes: &[String]) -> Vec<Node> {
    std::iter::once(Node { kind: NodeKind::Memory, id: memory.to_owned() })
        .chain(signals.iter().map(|signal| Node::signal(signal)))
        .chain(outcomes.iter().map(|outcome| Node::outcome(outcome)))
        .collect()
}

/// The outcome as a store records it: its `lesson_ids` name the memories its lessons became,
/// in order. A lesson stored as a new memory is named by its own id; one that duplicated an
/// active memory (`Inserted::Duplicate`) by that memory's.
pub fn outcome_with_lessons(outcome: &Outcome, lessons: &[(Memory, Option<Embedding>)], inserted: &[Inserted]) -> Outcome {
    let mut stored = outcome.clone();
    stored.lesson_ids = lessons
        .iter()
        .zip(inserted)
        .map(|((memory, _), inserted)| match inserted {
            Inserted::Created => memory.id.clone(),
            Inserted::Duplicate(existing) => existing.clone(),
        })
        .collect();
    stored
}

/// The `taught` edges from a recorded outcome to each of its lessons, dated when the outcome was.
pub fn taught_edges(outcome: &Outcome) -> Vec<Edge> {
    outcome
        .lesson_ids
        .iter()
        .map(|lesson| Edge {
            from: Node::outcome(&outcome.id),
            relation: crate::relation::TAUGHT.to_owned(),
            to: Node::memory(lesson),
            created_at: outcome.completed_at,
        })
        .collect()
}

/// One edge reached while walking the graph, with its distance from the start (1 for the
/// start's own edges).
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    pub depth: u32,
    pub edge: Edge,
}

/// Which decisions a listing returns. Empty fields mean "no restriction".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecisionFilter {
    pub module: Option<String>,
    pub status: Option<DecisionStatus>,
    /// A decision matches when its file path or one of its related files is this path or lies
    /// under it (`src/db` matches `src/db/schema.ts`).
    pub file: Option<String>,
    /// Only these decisions (after a text search picked them).
    pub ids: Option<Vec<DecisionId>>,
    /// `Some(true)` only decisions with an outcome, `Some(false)` only those without.
    pub has_outcome: Option<bool>,
}

/// A replacement of one memory: compare-and-swap on `previous.version`, as in [`MemoryStore::replace`].
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryChange {
    pub next: Memory,
    pub previous: MemoryVersion,
    pub embedding: Option<Embedding>,
}

/// A new revision of a decision, with its memory's new version when what it says changed.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionChange {
    pub next: Decision,
    /// Compare-and-swap: the stored revision must still be this one.
    pub expected_revision: u32,
    pub memory: Option<MemoryChange>,
}

impl DecisionChange {
    /// The compare-and-swap every backend applies before writing the change: the decision must
    /// exist (`stored` is its revision as the store holds it now) at the expected revision.
    pub fn check_revision(&self, stored: Option<u32>) -> std::result::Result<(), Refusal> {
        let id = self.next.id.as_str();
        match stored {
            None => Err(Refusal::NotFound(id.to_owned())),
            Some(stored) if stored != self.expected_revision => {
                Err(Refusal::Conflict { id: id.to_owned(), expected: self.expected_revision })
            }
            Some(_) => Ok(()),
        }
    }
}

/// The mined skill and antipattern memories of one module, brought up to date at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillSync {
    pub inserts: Vec<(Memory, Option<Embedding>)>,
    /// Updates and retirements (status forgotten), each compare-and-swap.
    pub replaces: Vec<MemoryChange>,
    /// For each skill memory, the complete set of graph edges that point at it; edges to it
    /// not in the set are removed.
    pub edges_to: Vec<(MemoryId, Vec<Edge>)>,
}

/// One domain's decisions, kept beside (and partly as) its memories.
///
/// Contract (checked by the shared conformance suite): every method that writes does so in one
/// transaction, durably; a decision and its memory are written together or not at all;
/// revisions are compare-and-swap ([`crate::Error::Conflict`] when the stored one moved on).
pub trait DecisionStore: MemoryStore {
    /// Writes a new decision and its memory (which has the decision's id).
    fn insert_decision(&self, decision: &Decision, memory: &Memory, embedding: Option<&Embedding>) -> Result<()>;

    fn get_decision(&self, id: &DecisionId) -> Result<Option<DecisionRecord>>;

    /// Writes a new revision, and the memory's new version if given, when the stored revision is
    /// `change.expected_revision`. [`crate::Error::NotFound`] if there is no such decision.
    fn update_decision(&self, change: &DecisionChange) -> Result<()>;

    /// Decisions matching `filter`, newest first, from `offset`.
    fn list_decisions(&self, filter: &DecisionFilter, offset: usize, limit: usize) -> Result<Vec<DecisionRecord>>;

    fn count_decisions(&self, filter: &DecisionFilter) -> Result<u64>;

    /// Appends a signal and its edge from the decision. [`crate::Error::NotFound`] if the
    /// decision does not exist.
    fn add_signal(&self, signal: &Signal) -> Result<()>;

    /// Stores the outcome with the decision's new revision, the lessons' memories (skipping exact
    /// duplicates, as [`MemoryStore::insert`] does) and `edges`, all in one transaction. Fails
    /// with [`crate::Error::Conflict`] if the decision already has an outcome or its revision
    /// moved on.
    fn record_outcome(
        &self,
        change: &DecisionChange,
        outcome: &Outcome,
        lessons: &[(Memory, Option<Embedding>)],
        edges: &[Edge],
    ) -> Result<Vec<Inserted>>;

    /// Every decision of `module` (or of all modules) that has an outcome, with it, oldest
    /// outcome first.
    fn outcomes(&self, module: Option<&str>) -> Result<Vec<(Decision, Outcome)>>;

    /// Writes the skill memories of one module and the edges that point at them.
    fn sync_skills(&self, sync: &SkillSync) -> Result<()>;

    /// Every edge reachable from `start` by following edges forward, at most `max_depth` hops
    /// away, each with its shortest distance; ordered by distance, then creation.
    fn causal_chain(&self, start: &Node, max_depth: u32) -> Result<Vec<Hop>>;

    /// Edges that point at `node`.
    fn edges_to(&self, node: &Node) -> Result<Vec<Edge>>;
}

/// A decision's file path as every backend stores and compares it: without a leading `./` or a
/// trailing `/`, so `./src/db/` finds `src/db/x.rs`.
pub fn normalise_decision_path(path: &str) -> &str {
    let path = path.trim();
    let path = path.strip_prefix("./").unwrap_or(path);
    path.strip_suffix('/').unwrap_or(path)
}

/// The SQL `LIKE` pattern, with `\` as its escape character, of every decision file path under
/// the folder `path` (already normalised): `%`, `_` and `\` in the path match only themselves.
pub fn paths_under_pattern(path: &str) -> String {
    let mut pattern = String::with_capacity(path.len() + 2);
    for c in path.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push_str("/%");
    pattern
}
