//! The note format: one JSON document per memory, versioned by its `format` field.
//!
//! ```json
//! {
//!   "format": "kenning-note/1",
//!   "memory":   { ...the current version, as kenning_core::Memory serialises... },
//!   "history":  [ { "version": 1, "superseded_at": "...", "reason": "...", "memory": { ... } } ],
//!   "decision": { "record": { ...Decision... }, "signals": [ ... ], "outcome": { ... }, "edges": [ ... ] },
//!   "edges_to": [ { "from": {"kind": "outcome", "id": "..."}, "relation": "supports", "to": {...}, "created_at": "..." } ]
//! }
//! ```
//!
//! An edges note (`{"format": …, "edges_for": "{id}", "edges_to": […]}`, attached to
//! [`edges_key`]) keeps graph edges pointing at a memory that has no note. A tombstone
//! (`{"format": …, "purged": {"id": "{id}", "at": "…"}}`) replaces the note of a memory whose
//! author's records were purged (see [`Note::tombstone`]).
//!
//! `history` lists superseded versions oldest first. `decision` is present on a decision's
//! memory; `edges_to` on a mined skill's (the complete set of graph edges pointing at it).
//! Access counts in a note are as they were when the note was last written: reads are each
//! machine's statistics, recorded in its index only, which keeps the higher of its own figures
//! and the note's.
//!
//! Readers must keep what they do not know: fields a newer build added, at the top level or
//! inside a memory or decision, are carried over when this build rewrites the note. A note
//! whose `format` is not `kenning-note/1` is reported and left alone.

use chrono::{DateTime, Utc};
use git2::{ObjectType, Oid};
use kenning_core::decision::{Decision, Edge, Node, NodeKind, Outcome, Signal};
use kenning_core::{Memory, MemoryId, MemoryVersion};
use kenning_sqlite::{MirrorDecision, MirrorRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The format this build writes and reads.
pub const FORMAT: &str = "kenning-note/1";

/// The field of a tombstone (see [`Note::tombstone`]).
const PURGED: &str = "purged";

/// The object a memory's note is attached to: the id of the blob `kenning-memory {id}\n`. Every
/// clone derives the same key from the same id, so one memory is one note everywhere, and two
/// memories never share one.
pub fn note_key(id: &MemoryId) -> Oid {
    // Hashing cannot fail for a blob; a zero id would only ever collide with itself.
    Oid::hash_object(ObjectType::Blob, format!("kenning-memory {id}\n").as_bytes()).unwrap_or_else(|_| Oid::zero())
}

/// The object an edges note is attached to: graph edges pointing at a memory that has no note
/// of its own (yet), kept so that they survive as the index would keep them.
pub fn edges_key(id: &MemoryId) -> Oid {
    Oid::hash_object(ObjectType::Blob, format!("kenning-edges {id}\n").as_bytes()).unwrap_or_else(|_| Oid::zero())
}

/// A note as stored: typed where this build needs the fields, raw JSON everywhere else so that
/// unknown fields survive a rewrite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub format: String,
    /// Absent only in an edges note (see [`edges_key`]).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub memory: Value,
    #[serde(default)]
    pub history: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges_to: Option<Vec<EdgeDoc>>,
    /// In an edges note: the memory id its `edges_to` point at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges_for: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A decision with what hangs off it, as a note holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionDoc {
    pub record: Decision,
    #[serde(default)]
    pub signals: Vec<Signal>,
    #[serde(default)]
    pub outcome: Option<Outcome>,
    /// Edges recorded with the outcome (decision -> outcome, signal -> outcome).
    #[serde(default)]
    pub edges: Vec<EdgeDoc>,
}

/// A graph edge in a note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeDoc {
    pub from: NodeDoc,
    pub relation: String,
    pub to: NodeDoc,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDoc {
    pub kind: String,
    pub id: String,
}

impl EdgeDoc {
    pub fn from_edge(edge: &Edge) -> EdgeDoc {
        let node = |node: &Node| NodeDoc { kind: node.kind.as_str().to_owned(), id: node.id.clone() };
        EdgeDoc { from: node(&edge.from), relation: edge.relation.clone(), to: node(&edge.to), created_at: edge.created_at }
    }

    pub fn to_edge(&self) -> Result<Edge, String> {
        let node = |node: &NodeDoc| {
            NodeKind::parse(&node.kind)
                .map(|kind| Node { kind, id: node.id.clone() })
                .ok_or_else(|| format!("edge node kind `{}` is not one of memory, signal, outcome, urn", node.kind))
        };
        Ok(Edge { from: node(&self.from)?, relation: self.relation.clone(), to: node(&self.to)?, created_at: self.created_at })
    }
}

impl Note {
    pub fn new(memory: &Memory) -> Result<Note, String> {
        Ok(Note {
            format: FORMAT.to_owned(),
            memory: to_value(memory)?,
            history: Vec::new(),
            decision: None,
            edges_to: None,
            edges_for: None,
            extra: Map::new(),
        })
    }

    /// An edges note: the complete set of graph edges pointing at memory `id`.
    pub fn edges_only(id: &MemoryId, edges: &[Edge]) -> Note {
        Note {
            format: FORMAT.to_owned(),
            memory: Value::Null,
            history: Vec::new(),
            decision: None,
            edges_to: Some(edges.iter().map(EdgeDoc::from_edge).collect()),
            edges_for: Some(id.to_string()),
            extra: Map::new(),
        }
    }

    /// The tombstone left where the note of memory `id` was when its author's records were
    /// purged (`{"format": …, "purged": {"id": …, "at": …}}`): it holds no content, and the
    /// merge keeps it over any version of the memory, so a sync with a clone that still holds
    /// the memory does not bring it back. It is kept under `extra`, so a build that does not
    /// know it carries it over unchanged.
    pub fn tombstone(id: &MemoryId, at: DateTime<Utc>) -> Note {
        let mut extra = Map::new();
        extra.insert(PURGED.to_owned(), serde_json::json!({ "id": id.to_string(), "at": at }));
        Note { format: FORMAT.to_owned(), memory: Value::Null, history: Vec::new(), decision: None, edges_to: None, edges_for: None, extra }
    }

    /// The memory a tombstone stands for, if this note is one.
    pub fn purged(&self) -> Option<MemoryId> {
        if !self.memory.is_null() {
            return None;
        }
        let id = self.extra.get(PURGED)?.get("id")?.as_str()?;
        MemoryId::parse(id).ok()
    }

    /// Reads a note's bytes; the error says what is wrong, for status reports.
    pub fn decode(bytes: &[u8]) -> Result<Note, String> {
        let value: Value = serde_json::from_slice(bytes).map_err(|error| format!("not JSON: {error}"))?;
        let format = value.get("format").and_then(Value::as_str).unwrap_or_default();
        if format != FORMAT {
            return Err(if format.is_empty() {
                "no `format` field: not a kenning note".to_owned()
            } else {
                format!("format `{format}` is not `{FORMAT}`, the one this build reads; upgrade kenning")
            });
        }
        serde_json::from_value(value).map_err(|error| format!("not a kenning note: {error}"))
    }

    /// The note's bytes: compact JSON with keys in a fixed order, so that every clone writes the
    /// same note for the same content byte for byte.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let mut bytes = serde_json::to_vec(self).map_err(|error| error.to_string())?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    pub fn memory(&self) -> Result<Memory, String> {
        serde_json::from_value(self.memory.clone()).map_err(|error| format!("field `memory`: {error}"))
    }

    pub fn id(&self) -> Result<MemoryId, String> {
        let id = self.memory.get("id").and_then(Value::as_str).ok_or("field `memory.id` is missing")?;
        MemoryId::parse(id).map_err(|error| format!("field `memory.id`: {error}"))
    }

    pub fn history(&self) -> Result<Vec<MemoryVersion>, String> {
        self.history
            .iter()
            .enumerate()
            .map(|(n, version)| serde_json::from_value(version.clone()).map_err(|error| format!("field `history[{n}]`: {error}")))
            .collect()
    }

    pub fn decision(&self) -> Result<Option<DecisionDoc>, String> {
        self.decision
            .as_ref()
            .map(|decision| serde_json::from_value(decision.clone()).map_err(|error| format!("field `decision`: {error}")))
            .transpose()
    }

    /// Replaces the current version, keeping fields of the old one this build does not know.
    pub fn set_memory(&mut self, memory: &Memory) -> Result<(), String> {
        let mut next = to_value(memory)?;
        carry_unknown(&self.memory, &mut next);
        self.memory = next;
        Ok(())
    }

    /// Appends a superseded version, replacing an entry of the same version number if there is one.
    pub fn push_history(&mut self, version: &MemoryVersion) -> Result<(), String> {
        let value = to_value(version)?;
        let number = |entry: &Value| entry.get("version").and_then(Value::as_u64);
        match self.history.iter_mut().find(|entry| number(entry) == Some(u64::from(version.version))) {
            Some(entry) => *entry = value,
            None => self.history.push(value),
        }
        self.history.sort_by_key(|entry| number(entry).unwrap_or(0));
        Ok(())
    }

    pub fn has_history_version(&self, version: u32) -> bool {
        self.history.iter().any(|entry| entry.get("version").and_then(Value::as_u64) == Some(u64::from(version)))
    }

    pub fn set_decision(&mut self, decision: &DecisionDoc) -> Result<(), String> {
        let mut next = to_value(decision)?;
        if let Some(old) = &self.decision {
            carry_unknown(old, &mut next);
            for part in ["record", "outcome"] {
                if let (Some(old), Some(next)) = (old.get(part), next.get_mut(part)) {
                    carry_unknown(old, next);
                }
            }
        }
        self.decision = Some(next);
        Ok(())
    }

    /// The record the index applies.
    pub fn to_record(&self) -> Result<MirrorRecord, String> {
        let decision = self
            .decision()?
            .map(|doc| {
                Ok::<_, String>(MirrorDecision {
                    decision: doc.record,
                    signals: doc.signals,
                    outcome: doc.outcome,
                    edges: doc.edges.iter().map(EdgeDoc::to_edge).collect::<Result<_, _>>()?,
                })
            })
            .transpose()?;
        let edges_to = self
            .edges_to
            .as_ref()
            .map(|edges| edges.iter().map(EdgeDoc::to_edge).collect::<Result<Vec<_>, _>>())
            .transpose()?;
        Ok(MirrorRecord { memory: self.memory()?, history: self.history()?, decision, edges_to })
    }
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|error| error.to_string())
}

/// Copies into `next` every key of the object `old` that `next` lacks, so that a rewrite by
/// this build keeps the fields a newer build wrote. Only the record's own fields are carried:
/// maps inside it (metadata) are data, and a key removed from them is meant to go.
pub fn carry_unknown(old: &Value, next: &mut Value) {
    let (Value::Object(old), Value::Object(next)) = (old, next) else { return };
    for (key, value) in old {
        if !next.contains_key(key) {
            next.insert(key.clone(), value.clone());
        }
    }
}
