//! The store as the index of another source of truth.
//!
//! A backend that keeps its records elsewhere (the git notes of the project domain) hands the
//! store whole records, as they are in the source, with the name of the source state they come
//! from ([`MirrorUpdate::source`], a notes commit). The store applies them and records that name
//! in the same transaction, so the index always says exactly which source state it reflects.
//! The plan of an update is made inside the write transaction, from the source state the store
//! reflects at that moment: two processes catching up at once are serialised by SQLite's write
//! lock, and the second one plans from where the first left the index.
//!
//! Access counts and vectors are the index's own: a record put over an existing row keeps the
//! row's access figures (the higher of both), and its vectors unless its search text changed.

use std::collections::HashSet;

use kenning_core::decision::{Decision, Edge, Node, Outcome, Signal, taught_edges};
use kenning_core::relation;
use kenning_core::{Embedding, Memory, MemoryId, MemoryVersion, Status};
use rusqlite::{Connection, OptionalExtension, params};

use crate::codec::time_key;
use crate::error::Result;
use crate::{decisions, relations, vector, write};

/// One memory as its source holds it: the current version, every superseded one, and, for a
/// decision's memory, the decision with its signals and outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorRecord {
    pub memory: Memory,
    /// Superseded versions, oldest first.
    pub history: Vec<MemoryVersion>,
    pub decision: Option<MirrorDecision>,
    /// The complete set of graph edges that point at this memory (a mined skill's), when the
    /// source keeps one.
    pub edges_to: Option<Vec<Edge>>,
}

/// A decision with what hangs off it, as its source holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorDecision {
    pub decision: Decision,
    pub signals: Vec<Signal>,
    pub outcome: Option<Outcome>,
    /// The graph edges recorded with the outcome (decision -> outcome, signal -> outcome). The
    /// edges every signal and lesson implies are derived, as the store's own writes derive them.
    pub edges: Vec<Edge>,
}

/// A change of one entry of the source. `entry` names it in the source (a note's key).
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorChange {
    Put { entry: String, record: Box<MirrorRecord> },
    /// The entry is gone; `id` is the memory it held, when that could still be read.
    Remove { entry: String, id: Option<MemoryId> },
    /// The complete set of graph edges pointing at `target`, a memory the source may not hold.
    EdgesTo { entry: String, target: MemoryId, edges: Vec<Edge> },
    /// The entry cannot be indexed (corrupt, or written by another tool); the reason is kept
    /// for status reports until the entry changes.
    Skip { entry: String, reason: String },
}

/// What the index must apply to reflect the source state `source`.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorUpdate {
    pub source: String,
    /// The changes are the whole source, not a difference: memories not put are removed.
    pub complete: bool,
    pub changes: Vec<MirrorChange>,
    /// The order the writer captured new memories in, for those captured at the same instant
    /// (a batch); others follow by id.
    pub order: Vec<MemoryId>,
}

/// A vector for a memory, to be stored only if the index holds that memory at `version`.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedEmbedding {
    pub id: MemoryId,
    pub version: u32,
    pub embedding: Embedding,
}

/// What an application did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Applied {
    pub(crate) put: usize,
    pub(crate) removed: usize,
}

const SOURCE: &str = "source";

pub(crate) fn state(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn.prepare_cached("SELECT value FROM mirror_state WHERE key = ?")?.query_row([key], |row| row.get(0)).optional()?)
}

pub(crate) fn set_state(conn: &Connection, key: &str, value: &str) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO mirror_state (key, value) VALUES (?, ?)")?.execute(params![key, value])?;
    Ok(())
}

pub(crate) fn source(conn: &Connection) -> Result<Option<String>> {
    state(conn, SOURCE)
}

pub(crate) fn skipped(conn: &Connection) -> Result<Vec<(String, String)>> {
    let mut statement = conn.prepare_cached("SELECT entry, reason FROM mirror_skipped ORDER BY entry")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Applies `update` and records its source, then stores the vectors (see [`apply_embeddings`]).
pub(crate) fn apply(conn: &Connection, update: &MirrorUpdate, embeddings: &[VersionedEmbedding]) -> Result<Applied> {
    let mut applied = Applied::default();
    if update.complete {
        conn.execute("DELETE FROM mirror_skipped", [])?;
    }
    let mut puts: Vec<(&str, &MirrorRecord)> = Vec::new();
    let mut edges_to = Vec::new();
    for change in &update.changes {
        match change {
            MirrorChange::EdgesTo { entry, target, edges } => {
                forget_skip(conn, entry)?;
                edges_to.push((target, edges));
            }
            MirrorChange::Put { entry, record } => puts.push((entry, record)),
            MirrorChange::Remove { entry, id } => {
                forget_skip(conn, entry)?;
                if let Some(id) = id {
                    applied.removed += remove(conn, id.as_str())?;
                }
            }
            MirrorChange::Skip { entry, reason } => {
                conn.prepare_cached("INSERT OR REPLACE INTO mirror_skipped (entry, reason) VALUES (?, ?)")?
                    .execute(params![entry, reason])?;
            }
        }
    }
    if update.complete {
        let kept: HashSet<&str> = puts.iter().map(|(_, record)| record.memory.id.as_str()).collect();
        let mut statement = conn.prepare("SELECT id FROM memories")?;
        let stale: Vec<String> =
            statement.query_map([], |row| row.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
        for id in stale.iter().filter(|id| !kept.contains(id.as_str())) {
            applied.removed += remove(conn, id)?;
        }
    }
    // New rows take keys in capture order, so that neighbours in key order are neighbours in
    // time: by capture time, then in the order the writer gave, then by id.
    let position = |id: &MemoryId| update.order.iter().position(|ordered| ordered == id).unwrap_or(usize::MAX);
    puts.sort_by_cached_key(|(_, record)| (record.memory.created_at, position(&record.memory.id), record.memory.id.clone()));
    // Every row about to be rewritten leaves the active set first, so that a batch which moves
    // content from one memory to another never trips the one-active-copy rule halfway through.
    for (_, record) in &puts {
        conn.prepare_cached("UPDATE memories SET status = 'pending' WHERE id = ?")?.execute([record.memory.id.as_str()])?;
    }
    for (entry, record) in puts {
        let memory = &record.memory;
        let hash = memory.content_hash();
        if let Some(existing) = write::active_duplicate(conn, memory, &hash, Some(memory.id.as_str()))? {
            // Only a source written by hand can hold two active copies of one content: the
            // store's own writes and merges never make one. The later one is left out.
            remove(conn, memory.id.as_str())?;
            conn.prepare_cached("INSERT OR REPLACE INTO mirror_skipped (entry, reason) VALUES (?, ?)")?.execute(params![
                entry,
                format!("memory {} duplicates the active memory {existing} in namespace {}", memory.id, memory.namespace)
            ])?;
            continue;
        }
        forget_skip(conn, entry)?;
        put(conn, record, &hash)?;
        applied.put += 1;
    }
    for (target, edges) in edges_to {
        relations::replace_edges_to(conn, &Node::memory(target), edges)?;
    }
    if applied.removed > 0 {
        // Other processes' indexes learn of changed rows by their change numbers, which a
        // deleted row no longer has; a new identity makes them rebuild (see `purge`).
        crate::purge::renew_identity(conn)?;
    }
    set_state(conn, SOURCE, &update.source)?;
    apply_embeddings(conn, embeddings)?;
    Ok(applied)
}

/// Stores each vector whose memory the index holds at the version the vector was made for.
pub(crate) fn apply_embeddings(conn: &Connection, embeddings: &[VersionedEmbedding]) -> Result<()> {
    for item in embeddings {
        let held = write::stored(conn, item.id.as_str())?.is_some_and(|stored| stored.version == item.version);
        if held {
            vector::put(conn, item.id.as_str(), &item.embedding)?;
            conn.prepare_cached("UPDATE memories SET change_seq = ? WHERE id = ?")?
                .execute(params![write::next_change(conn)?, item.id.as_str()])?;
        }
    }
    Ok(())
}

fn forget_skip(conn: &Connection, entry: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM mirror_skipped WHERE entry = ?")?.execute([entry])?;
    Ok(())
}

/// Writes one record over whatever the index holds for its id.
fn put(conn: &Connection, record: &MirrorRecord, hash: &str) -> Result<()> {
    let id = record.memory.id.as_str();
    let existing = write::stored(conn, id)?;
    let mut memory = record.memory.clone();
    if let Some(existing) = &existing {
        memory.access_count = memory.access_count.max(existing.memory.access_count);
        memory.last_accessed_at = memory.last_accessed_at.max(existing.memory.last_accessed_at);
    }
    write::write_row(conn, &memory, hash, existing.as_ref().map(|existing| existing.seq))?;
    conn.prepare_cached("DELETE FROM memory_versions WHERE memory_id = ?")?.execute([id])?;
    for version in &record.history {
        write::put_version(conn, id, version, true)?;
    }
    if existing.as_ref().is_some_and(|existing| existing.memory.search_text() != memory.search_text()) {
        vector::delete_all(conn, id)?;
    }
    remove_decision(conn, id)?;
    if let Some(decision) = &record.decision {
        put_decision(conn, decision)?;
    }
    if let Some(edges) = &record.edges_to {
        relations::replace_edges_to(conn, &Node::memory(&memory.id), edges)?;
    }
    Ok(())
}

fn put_decision(conn: &Connection, record: &MirrorDecision) -> Result<()> {
    let decision = &record.decision;
    let id = decision.id.as_str();
    conn.prepare_cached("INSERT INTO decisions (id, module, status, created_at, revision, body) VALUES (?, ?, ?, ?, ?, ?)")?
        .execute(params![
            id,
            decision.module,
            decision.status.as_str(),
            time_key(decision.created_at),
            decision.revision,
            serde_json::to_string(decision)?
        ])?;
    decisions::write_files(conn, decision)?;
    for signal in &record.signals {
        conn.prepare_cached("INSERT OR REPLACE INTO decision_signals (id, decision_id, recorded_at, body) VALUES (?, ?, ?, ?)")?
            .execute(params![signal.id, id, time_key(signal.recorded_at), serde_json::to_string(signal)?])?;
        relations::insert_edges(
            conn,
            &[Edge {
                from: Node::decision(&decision.id),
                relation: relation::OBSERVED.to_owned(),
                to: Node::signal(&signal.id),
                created_at: signal.recorded_at,
            }],
        )?;
    }
    if let Some(outcome) = &record.outcome {
        conn.prepare_cached(
            "INSERT OR REPLACE INTO decision_outcomes (decision_id, id, module, completed_at, body) VALUES (?, ?, ?, ?, ?)",
        )?
        .execute(params![id, outcome.id, decision.module, time_key(outcome.completed_at), serde_json::to_string(outcome)?])?;
        let taught = taught_edges(outcome);
        relations::insert_edges(conn, &record.edges)?;
        relations::insert_edges(conn, &taught)?;
    }
    Ok(())
}

/// Drops the decision stored under `id`, with its signals, outcome and the edges that leave them.
fn remove_decision(conn: &Connection, id: &str) -> Result<()> {
    let mut statement = conn.prepare_cached("SELECT id FROM decision_signals WHERE decision_id = ?")?;
    let mut sources: Vec<(&str, String)> = statement
        .query_map([id], |row| row.get::<_, String>(0))?
        .map(|signal| signal.map(|signal| ("signal", signal)))
        .collect::<rusqlite::Result<_>>()?;
    let outcome: Option<String> =
        conn.prepare_cached("SELECT id FROM decision_outcomes WHERE decision_id = ?")?.query_row([id], |row| row.get(0)).optional()?;
    sources.extend(outcome.map(|outcome| ("outcome", outcome)));
    for (kind, from) in &sources {
        conn.prepare_cached("DELETE FROM relations WHERE from_kind = ? AND from_id = ? AND origin = 'graph'")?
            .execute(params![kind, from])?;
    }
    conn.prepare_cached("DELETE FROM relations WHERE from_kind = 'memory' AND from_id = ? AND origin = 'graph'")?.execute([id])?;
    for table in ["decision_signals", "decision_outcomes", "decision_files"] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE decision_id = ?"))?.execute([id])?;
    }
    conn.prepare_cached("DELETE FROM decisions WHERE id = ?")?.execute([id])?;
    Ok(())
}

/// Removes a memory and everything kept about it; returns how many memories went (0 or 1).
fn remove(conn: &Connection, id: &str) -> Result<usize> {
    remove_decision(conn, id)?;
    conn.prepare_cached("DELETE FROM relations WHERE to_kind = 'memory' AND to_id = ? AND origin = 'graph'")?.execute([id])?;
    conn.prepare_cached("DELETE FROM relations WHERE from_kind = 'memory' AND from_id = ? AND origin = 'link'")?.execute([id])?;
    for (table, column) in [("memory_tags", "memory_id"), ("memory_versions", "memory_id"), ("embeddings", "memory_id")] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE {column} = ?"))?.execute([id])?;
    }
    Ok(conn.prepare_cached("DELETE FROM memories WHERE id = ?")?.execute([id])?)
}

/// The id of an active memory other than `except` holding the content of `memory`.
pub(crate) fn active_duplicate(conn: &Connection, memory: &Memory, except: Option<&MemoryId>) -> Result<Option<MemoryId>> {
    if memory.status != Status::Active {
        return Ok(None);
    }
    write::active_duplicate(conn, memory, &memory.content_hash(), except.map(MemoryId::as_str))
}
