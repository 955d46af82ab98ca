//! Decisions, signals and outcomes: every write runs inside one transaction opened by the
//! caller, together with the memory rows it touches.

use crate::sql::Tx;
use kenning_core::decision::{normalise_decision_path, paths_under_pattern};
use kenning_core::decision::{
    Decision, DecisionChange, DecisionFilter, DecisionRecord, Edge, Node, Outcome, Signal, SkillSync, outcome_with_lessons,
    taught_edges,
};
use kenning_core::{Refusal, relation};
use kenning_core::{Embedding, Inserted, Memory};

use crate::codec::{sql_count, time_key};
use crate::sql::Params;
use crate::error::{Error, Result};
use crate::{relations, write};

pub(crate) async fn insert_decision(
    tx: &Tx,
    decision: &Decision,
    memory: &Memory,
    embedding: Option<&Embedding>,
) -> Result<()> {
    let id = decision.id.as_str();
    if revision(tx, id).await?.is_some() {
        return Err(Error::Refused(Refusal::IdTaken(id.to_owned())));
    }
    match write::insert(tx, &[(memory.clone(), embedding.cloned())]).await?.as_slice() {
        [Inserted::Created] => {}
        _ => return Err(Error::Refused(Refusal::IdTaken(memory.id.to_string()))),
    }
    let revision = i32::try_from(decision.revision).unwrap_or(i32::MAX);
    tx.execute(
        "INSERT INTO decisions (id, module, status, created_at, revision, body) VALUES ($1, $2, $3, $4, $5, $6)",
        &[&id, &decision.module, &decision.status.as_str(), &time_key(decision.created_at), &revision, &serde_json::to_string(decision)?],
    )
    .await?;
    write_files(tx, decision).await
}

pub(crate) async fn update_decision(tx: &Tx, change: &DecisionChange) -> Result<()> {
    let next = &change.next;
    let id = next.id.as_str();
    // Locked, so that the revision compared is the one this transaction replaces.
    let stored = tx.query_opt("SELECT revision FROM decisions WHERE id = $1 FOR UPDATE", &[&id]).await?;
    change.check_revision(stored.map(|row| u32::try_from(row.get::<_, i32>(0)).unwrap_or(u32::MAX)))?;
    let revision = i32::try_from(next.revision).unwrap_or(i32::MAX);
    tx.execute(
        "UPDATE decisions SET module = $1, status = $2, revision = $3, body = $4 WHERE id = $5",
        &[&next.module, &next.status.as_str(), &revision, &serde_json::to_string(next)?, &id],
    )
    .await?;
    write_files(tx, next).await?;
    if let Some(memory) = &change.memory {
        write::replace(tx, &memory.next, &memory.previous, memory.embedding.as_ref()).await?;
    }
    Ok(())
}

async fn revision(tx: &Tx, id: &str) -> Result<Option<i32>> {
    Ok(tx.query_opt("SELECT revision FROM decisions WHERE id = $1", &[&id]).await?.map(|row| row.get(0)))
}

async fn write_files(tx: &Tx, decision: &Decision) -> Result<()> {
    let id = decision.id.as_str();
    tx.execute("DELETE FROM decision_files WHERE decision_id = $1", &[&id]).await?;
    for path in decision.context.files() {
        tx.execute(
            "INSERT INTO decision_files (decision_id, path) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&id, &normalise_decision_path(path)],
        )
        .await?;
    }
    Ok(())
}

pub(crate) async fn get_decision(tx: &Tx, id: &str) -> Result<Option<DecisionRecord>> {
    let Some(row) = tx.query_opt("SELECT body FROM decisions WHERE id = $1", &[&id]).await? else { return Ok(None) };
    Ok(Some(record(tx, serde_json::from_str(row.get::<_, &str>(0))?).await?))
}

async fn record(tx: &Tx, decision: Decision) -> Result<DecisionRecord> {
    let id = decision.id.as_str();
    let signals = tx
        .query("SELECT body FROM decision_signals WHERE decision_id = $1 ORDER BY recorded_at, id", &[&id])
        .await?
        .iter()
        .map(|row| Ok(serde_json::from_str(row.get::<_, &str>(0))?))
        .collect::<Result<Vec<_>>>()?;
    let outcome = tx.query_opt("SELECT body FROM decision_outcomes WHERE decision_id = $1", &[&id]).await?;
    let outcome = outcome.map(|row| serde_json::from_str(row.get::<_, &str>(0))).transpose()?;
    Ok(DecisionRecord { decision, signals, outcome })
}

/// A [`DecisionFilter`] as a SQL condition over `decisions d`.
fn condition(filter: &DecisionFilter, params: &mut Params) -> String {
    let mut clauses = vec!["true".to_owned()];
    if let Some(module) = &filter.module {
        clauses.push(format!("d.module = {}", params.push(module.clone())));
    }
    if let Some(status) = filter.status {
        clauses.push(format!("d.status = {}", params.push(status.as_str().to_owned())));
    }
    if let Some(path) = &filter.file {
        let path = normalise_decision_path(path);
        let exact = params.push(path.to_owned());
        let under = params.push(paths_under_pattern(path));
        clauses.push(format!(
            "EXISTS (SELECT 1 FROM decision_files f WHERE f.decision_id = d.id AND (f.path = {exact} OR f.path LIKE {under} ESCAPE '\\'))"
        ));
    }
    if let Some(ids) = &filter.ids {
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        clauses.push(format!("d.id = ANY({})", params.push(ids)));
    }
    if let Some(has_outcome) = filter.has_outcome {
        let exists = "EXISTS (SELECT 1 FROM decision_outcomes o WHERE o.decision_id = d.id)";
        clauses.push(if has_outcome { exists.to_owned() } else { format!("NOT {exists}") });
    }
    clauses.join(" AND ")
}

pub(crate) async fn list_decisions(
    tx: &Tx,
    filter: &DecisionFilter,
    offset: usize,
    limit: usize,
) -> Result<Vec<DecisionRecord>> {
    let mut params = Params::default();
    let condition = condition(filter, &mut params);
    let limit = params.push(sql_count(limit));
    let offset = params.push(sql_count(offset));
    let sql = format!("SELECT d.body FROM decisions d WHERE {condition} ORDER BY d.created_at DESC, d.id DESC LIMIT {limit} OFFSET {offset}");
    let rows = tx.query(&sql, &params.refs()).await?;
    let mut records = Vec::with_capacity(rows.len());
    for row in rows {
        records.push(record(tx, serde_json::from_str(row.get::<_, &str>(0))?).await?);
    }
    Ok(records)
}

pub(crate) async fn count_decisions(tx: &Tx, filter: &DecisionFilter) -> Result<u64> {
    let mut params = Params::default();
    let condition = condition(filter, &mut params);
    let count: i64 = tx.query_one(&format!("SELECT COUNT(*) FROM decisions d WHERE {condition}"), &params.refs()).await?.get(0);
    Ok(u64::try_from(count).unwrap_or(0))
}

pub(crate) async fn add_signal(tx: &Tx, signal: &Signal) -> Result<()> {
    let decision = signal.decision_id.as_str();
    if revision(tx, decision).await?.is_none() {
        return Err(Error::Refused(Refusal::NotFound(decision.to_owned())));
    }
    tx.execute(
        "INSERT INTO decision_signals (id, decision_id, recorded_at, body) VALUES ($1, $2, $3, $4)",
        &[&signal.id, &decision, &time_key(signal.recorded_at), &serde_json::to_string(signal)?],
    )
    .await?;
    relations::insert_edges(
        tx,
        &[Edge {
            from: Node::decision(&signal.decision_id),
            relation: relation::OBSERVED.to_owned(),
            to: Node::signal(&signal.id),
            created_at: signal.recorded_at,
        }],
    )
    .await
}

/// The outcome, the decision's new revision, the lessons' memories and the edges, together.
/// The outcome is stored with `lesson_ids` naming the memory each lesson became, each with a
/// `taught` edge from the outcome.
pub(crate) async fn record_outcome(
    tx: &Tx,
    change: &DecisionChange,
    outcome: &Outcome,
    lessons: &[(Memory, Option<Embedding>)],
    edges: &[Edge],
) -> Result<Vec<Inserted>> {
    let id = outcome.decision_id.as_str();
    if tx.query_opt("SELECT id FROM decision_outcomes WHERE decision_id = $1", &[&id]).await?.is_some() {
        return Err(Error::Refused(Refusal::Conflict { id: id.to_owned(), expected: change.expected_revision }));
    }
    update_decision(tx, change).await?;
    let inserted = write::insert(tx, lessons).await?;
    let stored = outcome_with_lessons(outcome, lessons, &inserted);
    tx.execute(
        "INSERT INTO decision_outcomes (decision_id, id, module, completed_at, body) VALUES ($1, $2, $3, $4, $5)",
        &[&id, &stored.id, &change.next.module, &time_key(stored.completed_at), &serde_json::to_string(&stored)?],
    )
    .await?;
    let taught = taught_edges(&stored);
    relations::insert_edges(tx, edges).await?;
    relations::insert_edges(tx, &taught).await?;
    Ok(inserted)
}

pub(crate) async fn outcomes(tx: &Tx, module: Option<&str>) -> Result<Vec<(Decision, Outcome)>> {
    let rows = tx
        .query(
            "SELECT d.body, o.body FROM decision_outcomes o JOIN decisions d ON d.id = o.decision_id \
             WHERE $1::text IS NULL OR o.module = $1 ORDER BY o.completed_at, o.decision_id",
            &[&module],
        )
        .await?;
    rows.iter()
        .map(|row| Ok((serde_json::from_str(row.get::<_, &str>(0))?, serde_json::from_str(row.get::<_, &str>(1))?)))
        .collect()
}

pub(crate) async fn sync_skills(tx: &Tx, sync: &SkillSync) -> Result<()> {
    for inserted in write::insert(tx, &sync.inserts).await? {
        if let Inserted::Duplicate(existing) = inserted {
            return Err(Error::Refused(Refusal::IdTaken(existing.to_string())));
        }
    }
    for change in &sync.replaces {
        write::replace(tx, &change.next, &change.previous, change.embedding.as_ref()).await?;
    }
    for (skill, edges) in &sync.edges_to {
        relations::replace_edges_to(tx, &Node::memory(skill), edges).await?;
    }
    Ok(())
}
