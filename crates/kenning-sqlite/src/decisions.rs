//! Decisions, signals and outcomes: every write runs inside one transaction opened by the
//! caller, together with the memory rows it touches.

use kenning_core::decision::{normalise_decision_path, paths_under_pattern};
use kenning_core::decision::{
    Decision, DecisionChange, DecisionFilter, DecisionRecord, Edge, Node, Outcome, Signal, SkillSync, outcome_with_lessons,
    taught_edges,
};
use kenning_core::{Refusal, relation};
use kenning_core::{Embedding, Inserted, Memory};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use crate::codec::{sql_count, time_key};
use crate::error::{Error, Result};
use crate::{relations, write};

pub(crate) fn insert_decision(conn: &Connection, decision: &Decision, memory: &Memory, embedding: Option<&Embedding>) -> Result<()> {
    let id = decision.id.as_str();
    if revision(conn, id)?.is_some() {
        return Err(Error::Refused(Refusal::IdTaken(id.to_owned())));
    }
    match write::insert(conn, &[(memory.clone(), embedding.cloned())])?.as_slice() {
        [Inserted::Created] => {}
        _ => return Err(Error::Refused(Refusal::IdTaken(memory.id.to_string()))),
    }
    conn.prepare_cached("INSERT INTO decisions (id, module, status, created_at, revision, body) VALUES (?, ?, ?, ?, ?, ?)")?
        .execute(params![
            id,
            decision.module,
            decision.status.as_str(),
            time_key(decision.created_at),
            decision.revision,
            serde_json::to_string(decision)?
        ])?;
    write_files(conn, decision)
}

pub(crate) fn update_decision(conn: &Connection, change: &DecisionChange) -> Result<()> {
    let next = &change.next;
    let id = next.id.as_str();
    change.check_revision(revision(conn, id)?)?;
    conn.prepare_cached("UPDATE decisions SET module = ?, status = ?, revision = ?, body = ? WHERE id = ?")?.execute(params![
        next.module,
        next.status.as_str(),
        next.revision,
        serde_json::to_string(next)?,
        id
    ])?;
    write_files(conn, next)?;
    if let Some(memory) = &change.memory {
        write::replace(conn, &memory.next, &memory.previous, memory.embedding.as_ref())?;
    }
    Ok(())
}

fn revision(conn: &Connection, id: &str) -> Result<Option<u32>> {
    Ok(conn.prepare_cached("SELECT revision FROM decisions WHERE id = ?")?.query_row([id], |row| row.get(0)).optional()?)
}

pub(crate) fn write_files(conn: &Connection, decision: &Decision) -> Result<()> {
    let id = decision.id.as_str();
    conn.prepare_cached("DELETE FROM decision_files WHERE decision_id = ?")?.execute([id])?;
    let mut insert = conn.prepare_cached("INSERT OR IGNORE INTO decision_files (decision_id, path) VALUES (?, ?)")?;
    for path in decision.context.files() {
        insert.execute(params![id, normalise_decision_path(path)])?;
    }
    Ok(())
}

pub(crate) fn get_decision(conn: &Connection, id: &str) -> Result<Option<DecisionRecord>> {
    let body: Option<String> =
        conn.prepare_cached("SELECT body FROM decisions WHERE id = ?")?.query_row([id], |row| row.get(0)).optional()?;
    body.map(|body| record(conn, serde_json::from_str(&body)?)).transpose()
}

fn record(conn: &Connection, decision: Decision) -> Result<DecisionRecord> {
    let id = decision.id.as_str();
    let mut statement = conn.prepare_cached("SELECT body FROM decision_signals WHERE decision_id = ? ORDER BY recorded_at, id")?;
    let signals = statement
        .query_map([id], |row| row.get::<_, String>(0))?
        .map(|body| Ok(serde_json::from_str(&body?)?))
        .collect::<Result<Vec<_>>>()?;
    let outcome: Option<String> = conn
        .prepare_cached("SELECT body FROM decision_outcomes WHERE decision_id = ?")?
        .query_row([id], |row| row.get(0))
        .optional()?;
    let outcome = outcome.map(|body| serde_json::from_str(&body)).transpose()?;
    Ok(DecisionRecord { decision, signals, outcome })
}

/// A [`DecisionFilter`] as a SQL condition over `decisions d`, with its parameters.
fn condition(filter: &DecisionFilter) -> (String, Vec<Value>) {
    let mut clauses = vec!["1".to_owned()];
    let mut params = Vec::new();
    if let Some(module) = &filter.module {
        clauses.push("d.module = ?".to_owned());
        params.push(Value::Text(module.clone()));
    }
    if let Some(status) = filter.status {
        clauses.push("d.status = ?".to_owned());
        params.push(Value::Text(status.as_str().to_owned()));
    }
    if let Some(path) = &filter.file {
        let path = normalise_decision_path(path);
        clauses.push(
            "EXISTS (SELECT 1 FROM decision_files f WHERE f.decision_id = d.id AND (f.path = ? OR f.path LIKE ? ESCAPE '\\'))"
                .to_owned(),
        );
        params.push(Value::Text(path.to_owned()));
        params.push(Value::Text(paths_under_pattern(path)));
    }
    if let Some(ids) = &filter.ids {
        // SQLite reads `IN ()` as false, which is what an empty id list means.
        clauses.push(format!("d.id IN ({})", vec!["?"; ids.len()].join(", ")));
        params.extend(ids.iter().map(|id| Value::Text(id.to_string())));
    }
    if let Some(has_outcome) = filter.has_outcome {
        let exists = "EXISTS (SELECT 1 FROM decision_outcomes o WHERE o.decision_id = d.id)";
        clauses.push(if has_outcome { exists.to_owned() } else { format!("NOT {exists}") });
    }
    (clauses.join(" AND "), params)
}

pub(crate) fn list_decisions(conn: &Connection, filter: &DecisionFilter, offset: usize, limit: usize) -> Result<Vec<DecisionRecord>> {
    let (condition, mut params) = condition(filter);
    let sql = format!("SELECT d.body FROM decisions d WHERE {condition} ORDER BY d.created_at DESC, d.id DESC LIMIT ? OFFSET ?");
    params.push(Value::Integer(sql_count(limit)));
    params.push(Value::Integer(sql_count(offset)));
    let mut statement = conn.prepare_cached(&sql)?;
    let bodies = statement.query_map(params_from_iter(params), |row| row.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
    bodies.into_iter().map(|body| record(conn, serde_json::from_str(&body)?)).collect()
}

pub(crate) fn count_decisions(conn: &Connection, filter: &DecisionFilter) -> Result<u64> {
    let (condition, params) = condition(filter);
    let count: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM decisions d WHERE {condition}"))?
        .query_row(params_from_iter(params), |row| row.get(0))?;
    Ok(count as u64)
}

pub(crate) fn add_signal(conn: &Connection, signal: &Signal) -> Result<()> {
    let decision = signal.decision_id.as_str();
    if revision(conn, decision)?.is_none() {
        return Err(Error::Refused(Refusal::NotFound(decision.to_owned())));
    }
    conn.prepare_cached("INSERT INTO decision_signals (id, decision_id, recorded_at, body) VALUES (?, ?, ?, ?)")?.execute(params![
        signal.id,
        decision,
        time_key(signal.recorded_at),
        serde_json::to_string(signal)?
    ])?;
    relations::insert_edges(
        conn,
        &[Edge {
            from: Node::decision(&signal.decision_id),
            relation: relation::OBSERVED.to_owned(),
            to: Node::signal(&signal.id),
            created_at: signal.recorded_at,
        }],
    )
}

/// The outcome, the decision's new revision, the lessons' memories and the edges, together. The
/// outcome is stored with `lesson_ids` naming the memory each lesson became (for an exact
/// duplicate of an existing memory, that memory), each with a `taught` edge from the outcome.
pub(crate) fn record_outcome(
    conn: &Connection,
    change: &DecisionChange,
    outcome: &Outcome,
    lessons: &[(Memory, Option<Embedding>)],
    edges: &[Edge],
) -> Result<Vec<Inserted>> {
    let id = outcome.decision_id.as_str();
    let existing: Option<String> = conn
        .prepare_cached("SELECT id FROM decision_outcomes WHERE decision_id = ?")?
        .query_row([id], |row| row.get(0))
        .optional()?;
    if existing.is_some() {
        return Err(Error::Refused(Refusal::Conflict { id: id.to_owned(), expected: change.expected_revision }));
    }
    update_decision(conn, change)?;
    let inserted = write::insert(conn, lessons)?;
    let stored = outcome_with_lessons(outcome, lessons, &inserted);
    conn.prepare_cached("INSERT INTO decision_outcomes (decision_id, id, module, completed_at, body) VALUES (?, ?, ?, ?, ?)")?
        .execute(params![id, stored.id, change.next.module, time_key(stored.completed_at), serde_json::to_string(&stored)?])?;
    let taught = taught_edges(&stored);
    relations::insert_edges(conn, edges)?;
    relations::insert_edges(conn, &taught)?;
    Ok(inserted)
}

pub(crate) fn outcomes(conn: &Connection, module: Option<&str>) -> Result<Vec<(Decision, Outcome)>> {
    let mut statement = conn.prepare_cached(
        "SELECT d.body, o.body FROM decision_outcomes o JOIN decisions d ON d.id = o.decision_id \
         WHERE ?1 IS NULL OR o.module = ?1 ORDER BY o.completed_at, o.decision_id",
    )?;
    let rows = statement.query_map([module], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?;
    rows.map(|row| {
        let (decision, outcome) = row?;
        Ok((serde_json::from_str(&decision)?, serde_json::from_str(&outcome)?))
    })
    .collect()
}

pub(crate) fn sync_skills(conn: &Connection, sync: &SkillSync) -> Result<()> {
    for inserted in write::insert(conn, &sync.inserts)? {
        if let Inserted::Duplicate(existing) = inserted {
            return Err(Error::Refused(Refusal::IdTaken(existing.to_string())));
        }
    }
    for change in &sync.replaces {
        write::replace(conn, &change.next, &change.previous, change.embedding.as_ref())?;
    }
    for (skill, edges) in &sync.edges_to {
        relations::replace_edges_to(conn, &Node::memory(skill), edges)?;
    }
    Ok(())
}
