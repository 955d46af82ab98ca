//! The merge of one memory's note changed on two clones: a pure, symmetric function, so every
//! clone computes the same note whichever side merges.
//!
//! The rule:
//! - Every version either side holds survives: the union of both histories (a version both
//!   sides hold, the same memory apart from its number, is kept once) plus the current version
//!   that loses.
//! - The current version is the one updated last (`updated_at`); on a tie an active memory beats
//!   a forgotten one (so a forget and an edit at the same instant keep the memory), then the
//!   higher version number, then the greater canonical JSON text.
//!   A forget on one clone and an edit on another are decided by the same rule: whichever
//!   happened later is current, and the other is in the history.
//! - History entries are numbered 1, 2, … in order of (version, superseded_at, text), and the
//!   current version takes the next number, so versions keep growing.
//! - A decision keeps the revision with the higher number (then the later update), the union
//!   of both sides' signals and edges, and one outcome: the earlier (then the smaller text);
//!   a second, different outcome is kept under `conflicting_outcomes`.
//! - Other top-level fields: the union; on a clash, the greater canonical JSON.
//! - A tombstone (the memory's author's records were purged) wins over any note of the memory.
//!
//! Two different memories, captured on two clones with the same content in one namespace
//! (each with its own id, so their notes never clash), meet when a sync brings one to the
//! other. One active copy per content is the store's rule, so the merge keeps one of them
//! active and retires the other ([`duplicate_survivor`], [`retire_duplicate`]):
//! - The one captured first survives (`created_at`, then the smaller id), untouched.
//! - The other gets a new current version: forgotten, linked to the survivor by
//!   `duplicate-of`, updated a millisecond after the later of its own last update and the
//!   survivor's capture. Its active version goes into its history, so nothing is lost.
//! - The new version depends on the two memories alone, never on the clock or on the side
//!   that merges, so both clones write the same note byte for byte. The millisecond makes the
//!   retirement the later version, so that a clone still holding the active copy adopts it
//!   by the rule above rather than reviving the copy.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use kenning_core::{Link, Memory, MemoryVersion, Status, relation};
use serde_json::{Map, Value};

use crate::note::{DecisionDoc, EdgeDoc, Note};

/// Merges `ours` and `theirs`, two notes of one memory that differ.
pub fn merge_notes(ours: &Note, theirs: &Note) -> Result<Note, String> {
    let (a, b) = if canonical_note(ours) <= canonical_note(theirs) { (ours, theirs) } else { (theirs, ours) };
    // A purge is final: its tombstone beats every version of the memory, so a clone that still
    // holds the memory cannot bring it back by a sync. Of two tombstones, the smaller text.
    match (a.purged().is_some(), b.purged().is_some()) {
        (true, _) => return Ok(a.clone()),
        (false, true) => return Ok(b.clone()),
        (false, false) => {}
    }
    if a.memory.is_null() && b.memory.is_null() {
        // Two edges notes: the union of their edges.
        let edges = union_edges(a.edges_to.as_deref().unwrap_or_default(), b.edges_to.as_deref().unwrap_or_default());
        return Ok(Note { edges_to: Some(edges), ..a.clone() });
    }
    let winner_first = current_order(&a.memory, &b.memory)?;
    let (winner, loser) = if winner_first { (&a.memory, &b.memory) } else { (&b.memory, &a.memory) };

    let mut entries: Vec<Value> = a.history.iter().chain(&b.history).cloned().collect();
    if winner != loser {
        let superseded_at = winner.get("updated_at").cloned().unwrap_or(Value::Null);
        let reason = format!(
            "merged by sync: changed on two clones; the version updated last ({}) is current",
            superseded_at.as_str().unwrap_or("unknown time")
        );
        let mut entry = Map::new();
        entry.insert("version".into(), loser.get("version").cloned().unwrap_or(Value::from(0)));
        entry.insert("superseded_at".into(), superseded_at);
        entry.insert("reason".into(), Value::String(reason));
        entry.insert("memory".into(), loser.clone());
        entries.push(Value::Object(entry));
    }
    let history = dedupe_and_number(entries, winner);
    let mut memory = winner.clone();
    memory["version"] = Value::from(history.len() as u64 + 1);

    let decision = match (a.decision()?, b.decision()?) {
        (Some(x), Some(y)) => Some(merge_decisions(x, y)?),
        (x, y) => x.or(y).map(|doc| serde_json::to_value(doc).map_err(|error| error.to_string())).transpose()?,
    };
    let edges_to = match (&a.edges_to, &b.edges_to) {
        (Some(x), Some(y)) => Some(union_edges(x, y)),
        (x, y) => x.clone().or_else(|| y.clone()),
    };
    let mut extra = a.extra.clone();
    for (key, value) in &b.extra {
        match extra.get(key) {
            Some(existing) if canonical(existing) >= canonical(value) => {}
            _ => {
                extra.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(Value::Object(decision)) = &decision
        && let Some(conflicts) = decision.get("conflicting_outcomes")
    {
        extra.insert("conflicting_outcomes".into(), conflicts.clone());
    }
    let decision = decision.map(|mut value| {
        if let Value::Object(map) = &mut value {
            map.remove("conflicting_outcomes");
        }
        value
    });
    Ok(Note { format: a.format.clone(), memory, history, decision, edges_to, edges_for: None, extra })
}

/// Of two active memories with the same content, the one that stays active: the one captured
/// first, then the smaller id. `true` when that is `a`.
pub fn duplicate_survivor(a: &Memory, b: &Memory) -> bool {
    (a.created_at, a.id.as_str()) <= (b.created_at, b.id.as_str())
}

/// `loser`'s note with a new current version that retires it in favour of `survivor` (see
/// the module's rule), its active version kept in the history.
pub fn retire_duplicate(loser: &Note, survivor: &Memory) -> Result<Note, String> {
    let current = loser.memory()?;
    let at: DateTime<Utc> = current.updated_at.max(survivor.created_at) + TimeDelta::milliseconds(1);
    let mut next = current.clone();
    next.status = Status::Forgotten;
    next.updated_at = at;
    next.version = current.version + 1;
    let link = Link { target: survivor.urn(), relation: relation::DUPLICATE_OF.to_owned() };
    if !next.links.contains(&link) {
        next.links.push(link);
    }
    let previous = MemoryVersion {
        version: current.version,
        superseded_at: at,
        reason: format!("merged by sync: memory {} holds the same content and was captured first", survivor.id),
        memory: current,
    };
    let mut note = loser.clone();
    note.push_history(&previous)?;
    note.set_memory(&next)?;
    Ok(note)
}

/// Whether `a` should be current rather than `b` (see the module's rule).
fn current_order(a: &Value, b: &Value) -> Result<bool, String> {
    let key = |memory: &Value| -> Result<(String, bool, u64, String), String> {
        let updated = memory.get("updated_at").and_then(Value::as_str).ok_or("a memory without `updated_at`")?;
        // RFC 3339 times as serialised by chrono all share one offset (Z); parse to compare
        // instants rather than text, in case another tool wrote a different precision.
        let instant = chrono::DateTime::parse_from_rfc3339(updated)
            .map_err(|error| format!("`updated_at` {updated}: {error}"))?
            .with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let active = memory.get("status").and_then(Value::as_str) == Some("active");
        let version = memory.get("version").and_then(Value::as_u64).unwrap_or(0);
        Ok((instant, active, version, canonical(memory)))
    };
    Ok(key(a)? >= key(b)?)
}

/// The history entries without repeats (the same memory apart from its version number), the
/// current version's snapshot left out, numbered from 1 in a fixed order.
fn dedupe_and_number(entries: Vec<Value>, current: &Value) -> Vec<Value> {
    let snapshot = |memory: &Value| {
        let mut memory = memory.clone();
        if let Value::Object(map) = &mut memory {
            map.remove("version");
        }
        canonical(&memory)
    };
    let current = snapshot(current);
    let mut kept: BTreeMap<String, Value> = BTreeMap::new();
    for entry in entries {
        let key = snapshot(entry.get("memory").unwrap_or(&Value::Null));
        if key == current {
            continue;
        }
        match kept.get(&key) {
            Some(existing) if sort_key(existing) <= sort_key(&entry) => {}
            _ => {
                kept.insert(key, entry);
            }
        }
    }
    let mut entries: Vec<Value> = kept.into_values().collect();
    entries.sort_by_key(sort_key);
    for (n, entry) in entries.iter_mut().enumerate() {
        let number = Value::from(n as u64 + 1);
        entry["version"] = number.clone();
        if entry.get("memory").is_some_and(Value::is_object) {
            entry["memory"]["version"] = number;
        }
    }
    entries
}

fn sort_key(entry: &Value) -> (u64, String, String) {
    (
        entry.get("version").and_then(Value::as_u64).unwrap_or(0),
        entry.get("superseded_at").and_then(Value::as_str).unwrap_or_default().to_owned(),
        canonical(entry),
    )
}

fn merge_decisions(x: DecisionDoc, y: DecisionDoc) -> Result<Value, String> {
    let rank = |doc: &DecisionDoc| (doc.record.revision, doc.record.updated_at, canonical(&serde_json::to_value(&doc.record).unwrap_or_default()));
    let record = if rank(&x) >= rank(&y) { x.record.clone() } else { y.record.clone() };
    let mut signals = x.signals.clone();
    for signal in &y.signals {
        if !signals.iter().any(|existing| existing.id == signal.id) {
            signals.push(signal.clone());
        }
    }
    signals.sort_by(|a, b| (a.recorded_at, &a.id).cmp(&(b.recorded_at, &b.id)));
    let mut conflicting = None;
    let outcome = match (x.outcome, y.outcome) {
        (Some(p), Some(q)) if p != q => {
            let text = |outcome: &kenning_core::decision::Outcome| canonical(&serde_json::to_value(outcome).unwrap_or_default());
            let (kept, other) = if (p.completed_at, text(&p)) <= (q.completed_at, text(&q)) { (p, q) } else { (q, p) };
            conflicting = Some(other);
            Some(kept)
        }
        (p, q) => p.or(q),
    };
    let doc = DecisionDoc { record, signals, outcome, edges: union_edges(&x.edges, &y.edges) };
    let mut value = serde_json::to_value(doc).map_err(|error| error.to_string())?;
    if let Some(other) = conflicting {
        value["conflicting_outcomes"] = Value::Array(vec![serde_json::to_value(other).map_err(|error| error.to_string())?]);
    }
    Ok(value)
}

fn union_edges(x: &[EdgeDoc], y: &[EdgeDoc]) -> Vec<EdgeDoc> {
    let mut edges: BTreeMap<String, EdgeDoc> = BTreeMap::new();
    for edge in x.iter().chain(y) {
        let value = serde_json::to_value(edge).unwrap_or_default();
        edges.entry(canonical(&value)).or_insert_with(|| edge.clone());
    }
    edges.into_values().collect()
}

/// JSON text with object keys sorted at every depth, whatever order the map keeps: the
/// comparison key of the rule's last resort.
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> = map.iter().map(|(key, value)| (key, sorted(value))).collect();
                Value::Object(ordered.into_iter().map(|(key, value)| (key.clone(), value)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

fn canonical_note(note: &Note) -> String {
    canonical(&serde_json::to_value(note).unwrap_or_default())
}
