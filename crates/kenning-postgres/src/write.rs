//! Every change to the store. Each function runs inside one transaction opened by the caller,
//! and keeps the filter columns, tags, full-text vector, vectors and graph copy of the links in
//! step with the record.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kenning_core::Refusal;
use kenning_core::{Embedding, Inserted, Memory, MemoryId, MemoryRecord, MemoryVersion, Status};
use pgvector::Vector;
use tokio_postgres::types::{Kind, Type};

use crate::codec::{MEMORY_COLUMNS, decode_row, encode_memory, nanos, searchable, time_key};
use crate::error::{Error, Result};
use crate::relations;
use crate::sql::{Param, Params, Tx};

/// The unique index that keeps one active copy of each content per namespace.
const ACTIVE_CONTENT_INDEX: &str = "memories_active_content";

pub(crate) async fn insert(tx: &Tx, batch: &[(Memory, Option<Embedding>)]) -> Result<Vec<Inserted>> {
    let mut outcomes = Vec::with_capacity(batch.len());
    for (memory, embedding) in batch {
        let hash = memory.content_hash();
        // Checked before the id, so that retrying a capture whose acknowledgement was lost
        // reports the duplicate instead of failing.
        if let Some(existing) = active_duplicate(tx, memory, &hash, None).await? {
            outcomes.push(Inserted::Duplicate(existing));
            continue;
        }
        if stored(tx, memory.id.as_str()).await?.is_some() {
            return Err(Error::Refused(Refusal::IdTaken(memory.id.to_string())));
        }
        if !insert_row(tx, memory, &hash).await? {
            // A concurrent writer committed the same content between the check and the insert;
            // the unique index turned this insert away, and the winner is now visible.
            let existing = active_duplicate(tx, memory, &hash, None).await?.ok_or_else(|| Error::Refused(Refusal::Conflict {
                id: memory.id.to_string(),
                expected: memory.version,
            }))?;
            outcomes.push(Inserted::Duplicate(existing));
            continue;
        }
        if let Some(embedding) = embedding {
            put_vector(tx, memory.id.as_str(), embedding).await?;
        }
        outcomes.push(Inserted::Created);
    }
    Ok(outcomes)
}

/// A batch at least this large is a bulk load: written with `COPY`, its vectors kept out of the
/// live index, for a bulk index built over all of them at once (`vectors.rs`). One HNSW insert
/// per vector is what held bulk capture at some 230 memories a second.
pub(crate) const BULK_ROWS: usize = 64;

/// [`insert`] for a bulk load, with the same outcomes: the memories staged by a binary `COPY`
/// and stored by one `INSERT … SELECT` with the active-content index as arbiter, their vectors
/// copied in with a generation of their own (the backlog of the bulk index).
pub(crate) async fn insert_bulk(tx: &Tx, batch: &[(Memory, Option<Embedding>)]) -> Result<Vec<Inserted>> {
    let hashes: Vec<String> = batch.iter().map(|(memory, _)| memory.content_hash()).collect();
    let key = |index: usize| (batch[index].0.namespace.as_str().to_owned(), hashes[index].clone());
    let active: Vec<(String, String)> =
        (0..batch.len()).filter(|index| batch[*index].0.status == Status::Active).map(key).collect();

    // Active memories already holding one of the batch's contents, in one query.
    let mut holders: HashMap<(String, String), MemoryId> = crate::read::holders_of(tx, active.iter()).await?;
    // Checked before the ids, as one by one: a retried load whose acknowledgement was lost
    // reports its duplicates instead of failing. Within the batch, the first of a content wins.
    let mut outcomes: Vec<Option<Inserted>> = vec![None; batch.len()];
    let mut fresh: Vec<usize> = Vec::with_capacity(batch.len());
    for index in 0..batch.len() {
        if batch[index].0.status == Status::Active {
            if let Some(holder) = holders.get(&key(index)) {
                outcomes[index] = Some(Inserted::Duplicate(holder.clone()));
                continue;
            }
            holders.insert(key(index), batch[index].0.id.clone());
        }
        fresh.push(index);
    }
    let ids: Vec<&str> = fresh.iter().map(|index| batch[*index].0.id.as_str()).collect();
    if let Some(row) = tx.query_opt("SELECT id FROM memories WHERE id = ANY($1) LIMIT 1", &[&ids]).await? {
        return Err(Error::Refused(Refusal::IdTaken(row.get(0))));
    }

    let columns: Vec<&str> = ROW_COLUMNS.iter().map(|(column, _, _)| *column).collect();
    let definitions: Vec<String> = ROW_COLUMNS.iter().map(|(column, _, sql_type)| format!("{column} {sql_type}")).collect();
    tx.batch_execute(&format!("CREATE TEMP TABLE incoming (ord integer, {}) ON COMMIT DROP", definitions.join(", "))).await?;
    let mut types = vec![Type::INT4];
    types.extend(ROW_COLUMNS.iter().map(|(_, kind, _)| kind.clone()));
    let mut writer = tx.copy_in(&format!("COPY incoming (ord, {}) FROM STDIN (FORMAT binary)", columns.join(", ")), &types).await?;
    for (ord, index) in fresh.iter().enumerate() {
        let ord = i32::try_from(ord).unwrap_or(i32::MAX);
        let fields = row_fields(&batch[*index].0, &hashes[*index])?;
        let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&ord];
        values.extend(fields.iter().map(|field| field.value()));
        writer.as_mut().write(&values).await?;
    }
    writer.as_mut().finish().await?;
    let staged: Vec<String> = columns.iter().map(|column| stored_value(column, column)).collect();
    let inserted: HashSet<String> = tx
        .query(
            &format!(
                "INSERT INTO memories ({}) SELECT {} FROM incoming ORDER BY ord \
                 ON CONFLICT (namespace, content_hash) WHERE status = 'active' DO NOTHING RETURNING id",
                columns.join(", "),
                staged.join(", ")
            ),
            &[],
        )
        .await?
        .into_iter()
        .map(|row| row.get(0))
        .collect();

    let mut vectors: Vec<(&str, &Embedding)> = Vec::new();
    for index in fresh {
        let (memory, embedding) = &batch[index];
        if !inserted.contains(memory.id.as_str()) {
            // A concurrent writer committed the same content after the check above.
            let existing = active_duplicate(tx, memory, &hashes[index], None).await?.ok_or_else(|| Error::Refused(Refusal::Conflict {
                id: memory.id.to_string(),
                expected: memory.version,
            }))?;
            outcomes[index] = Some(Inserted::Duplicate(existing));
            continue;
        }
        if !memory.links.is_empty() {
            relations::sync_links(tx, memory).await?;
        }
        if let Some(embedding) = embedding {
            vectors.push((memory.id.as_str(), embedding));
        }
        outcomes[index] = Some(Inserted::Created);
    }
    if !vectors.is_empty() {
        copy_vectors(tx, &vectors).await?;
    }
    Ok(outcomes.into_iter().map(|outcome| outcome.expect("every memory has an outcome")).collect())
}

/// Copies vectors in as one new generation, outside the live index: the bulk index's backlog.
async fn copy_vectors(tx: &Tx, vectors: &[(&str, &Embedding)]) -> Result<()> {
    let row = tx.query_one("SELECT nextval('embedding_generations'), 'public.vector'::regtype::oid", &[]).await?;
    let generation: i64 = row.get(0);
    let vector_type = Type::new("vector".to_owned(), row.get(1), Kind::Simple, "public".to_owned());
    let types = [Type::TEXT, Type::TEXT, Type::INT4, vector_type, Type::INT8];
    let mut writer = tx.copy_in("COPY embeddings (memory_id, model, dim, vector, generation) FROM STDIN (FORMAT binary)", &types).await?;
    for (id, embedding) in vectors {
        let dim = i32::try_from(embedding.vector.len()).unwrap_or(i32::MAX);
        let vector = Vector::from(embedding.vector.clone());
        writer.as_mut().write(&[id, &embedding.model, &dim, &vector, &generation]).await?;
    }
    writer.as_mut().finish().await?;
    Ok(())
}

/// Compare-and-swap on the version. The row is locked (`FOR UPDATE`) before its version is
/// compared, so a concurrent writer either committed before (and the version moved on) or
/// waits until this transaction ends.
pub(crate) async fn replace(
    tx: &Tx,
    next: &Memory,
    previous: &MemoryVersion,
    embedding: Option<&Embedding>,
) -> Result<()> {
    let id = next.id.as_str();
    let Some(current) = stored_for_update(tx, id).await? else {
        return Err(Error::Refused(Refusal::NotFound(id.to_owned())));
    };
    if current.version != previous.version {
        return Err(Error::Refused(Refusal::Conflict { id: id.to_owned(), expected: previous.version }));
    }
    let hash = next.content_hash();
    if let Some(existing) = active_duplicate(tx, next, &hash, Some(id)).await? {
        return Err(Error::Refused(Refusal::Duplicate { id: id.to_owned(), existing: existing.to_string() }));
    }
    update_row(tx, current.seq, next, &hash).await.map_err(|error| conflict_on_duplicate(error, id, previous.version))?;
    put_version(tx, id, previous, true).await?;
    let text_changed = current.memory.search_text() != next.search_text();
    update_vectors(tx, id, text_changed, embedding).await
}

/// Bumps access counts without a new version: reading a memory does not change what it says.
/// The read statistics live in their own columns, so this never rewrites a record and never
/// conflicts with a writer changing it; the latest read time wins whatever order reads arrive in.
pub(crate) async fn record_access(tx: &Tx, ids: &[MemoryId], at: DateTime<Utc>) -> Result<()> {
    let ids: Vec<&str> = ids.iter().map(MemoryId::as_str).collect();
    // One statement for the whole recall; an id listed twice is counted twice.
    tx.execute(
        "UPDATE memories m SET access_count = m.access_count + reads.count, \
         last_accessed_at = greatest(m.last_accessed_at, $2) \
         FROM (SELECT id, count(*) AS count FROM unnest($1::text[]) AS id GROUP BY id) reads WHERE m.id = reads.id",
        &[&ids, &time_key(at)],
    )
    .await?;
    Ok(())
}

pub(crate) async fn set_embeddings(tx: &Tx, items: &[(MemoryId, Embedding)]) -> Result<()> {
    for (id, embedding) in items {
        if stored(tx, id.as_str()).await?.is_none() {
            tracing::warn!(%id, "not storing a vector for a memory that does not exist");
            continue;
        }
        put_vector(tx, id.as_str(), embedding).await?;
    }
    Ok(())
}

/// Writes records as they are. A record is skipped when its id exists at the same or a newer
/// version, and when it is active and another active memory already holds its content.
pub(crate) async fn import(tx: &Tx, records: &[MemoryRecord]) -> Result<usize> {
    let mut written = 0;
    for record in records {
        let memory = &record.memory;
        let id = memory.id.as_str();
        let current = stored_for_update(tx, id).await?;
        if current.as_ref().is_some_and(|current| current.version >= memory.version) {
            continue;
        }
        let hash = memory.content_hash();
        if let Some(existing) = active_duplicate(tx, memory, &hash, Some(id)).await? {
            tracing::info!(%id, %existing, "import skipped a duplicate of an active memory");
            continue;
        }
        match &current {
            Some(current) => update_row(tx, current.seq, memory, &hash).await?,
            None => {
                if !insert_row(tx, memory, &hash).await? {
                    tracing::info!(%id, "import skipped a duplicate of an active memory written concurrently");
                    continue;
                }
            }
        }
        // The imported record's read statistics are taken as they are.
        tx.execute(
            "UPDATE memories SET access_count = $2, last_accessed_at = $3 WHERE id = $1",
            &[&id, &(memory.access_count.min(i64::MAX as u64) as i64), &memory.last_accessed_at.map(time_key)],
        )
        .await?;
        for version in &record.history {
            put_version(tx, id, version, true).await?;
        }
        let text_changed = match &current {
            Some(current) => {
                // The version being overwritten stays in the history unless the incoming
                // history already has an entry for it.
                let overwritten = MemoryVersion {
                    version: current.version,
                    superseded_at: memory.updated_at,
                    reason: format!("replaced by imported version {}", memory.version),
                    memory: current.memory.clone(),
                };
                put_version(tx, id, &overwritten, false).await?;
                current.memory.search_text() != memory.search_text()
            }
            None => false,
        };
        update_vectors(tx, id, text_changed, record.embedding.as_ref()).await?;
        written += 1;
    }
    Ok(written)
}

/// Recomputes every row's full-text vector, tags and the copy of its links from the record.
pub(crate) async fn rebuild_index(tx: &Tx) -> Result<u64> {
    let rows = tx.query(&format!("SELECT m.seq, {MEMORY_COLUMNS} FROM memories m"), &[]).await?;
    let mut indexed = 0;
    for row in rows {
        let seq: i64 = row.get(0);
        let memory = decode_row(&row, 1)?;
        tx.execute(
            "UPDATE memories SET search = to_tsvector('english', $2), tags = $3, facets = $4 WHERE seq = $1",
            &[&seq, &searchable(&memory.search_text()), &memory.tags, &facets(&memory)],
        )
        .await?;
        relations::sync_links(tx, &memory).await?;
        indexed += 1;
    }
    Ok(indexed)
}

/// A stored memory with its row key and version column.
pub(crate) struct Stored {
    pub seq: i64,
    pub version: u32,
    pub memory: Memory,
}

async fn stored(tx: &Tx, id: &str) -> Result<Option<Stored>> {
    stored_with(tx, id, "").await
}

async fn stored_for_update(tx: &Tx, id: &str) -> Result<Option<Stored>> {
    stored_with(tx, id, " FOR UPDATE").await
}

async fn stored_with(tx: &Tx, id: &str, lock: &str) -> Result<Option<Stored>> {
    let sql = format!("SELECT m.seq, m.version, {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1{lock}");
    let Some(row) = tx.query_opt(&sql, &[&id]).await? else { return Ok(None) };
    let version: i32 = row.get(1);
    Ok(Some(Stored { seq: row.get(0), version: u32::try_from(version).unwrap_or(0), memory: decode_row(&row, 2)? }))
}

/// The id of an active memory, other than `except`, that `memory` (whose content hash is
/// `hash`) would duplicate if it is active.
async fn active_duplicate(tx: &Tx, memory: &Memory, hash: &str, except: Option<&str>) -> Result<Option<MemoryId>> {
    if memory.status != Status::Active {
        return Ok(None);
    }
    let row = tx
        .query_opt(
            "SELECT id FROM memories WHERE namespace = $1 AND content_hash = $2 AND status = 'active' \
             AND id IS DISTINCT FROM $3",
            &[&memory.namespace.as_str(), &hash, &except],
        )
        .await?;
    row.map(|row| MemoryId::parse(row.get::<_, &str>(0)).map_err(|error| Error::Corrupt(error.to_string()))).transpose()
}

/// The columns a memory's row is written with (name, type, SQL type), in the order [`row_fields`]
/// gives their values: the one list that an insert, an update and a bulk load all write.
const ROW_COLUMNS: [(&str, Type, &str); 15] = [
    ("id", Type::TEXT, "text"),
    ("namespace", Type::TEXT, "text"),
    ("kind", Type::TEXT, "text"),
    ("status", Type::TEXT, "text"),
    ("confidence", Type::FLOAT8, "double precision"),
    ("created_at", Type::INT8, "bigint"),
    ("occurred_at", Type::INT8, "bigint"),
    ("content_hash", Type::TEXT, "text"),
    ("version", Type::INT4, "integer"),
    ("tags", Type::TEXT_ARRAY, "text[]"),
    ("access_count", Type::INT8, "bigint"),
    ("last_accessed_at", Type::TEXT, "text"),
    ("search", Type::TEXT, "text"),
    ("body", Type::TEXT, "text"),
    ("facets", Type::TEXT_ARRAY, "text[]"),
];

/// The values of [`ROW_COLUMNS`] for `memory`, whose content hash is `hash`. `search` is the
/// search text, which the database turns into the full-text vector.
fn row_fields(memory: &Memory, hash: &str) -> Result<Vec<Box<dyn Param>>> {
    let version = i32::try_from(memory.version).unwrap_or(i32::MAX);
    let access_count = memory.access_count.min(i64::MAX as u64) as i64;
    Ok(vec![
        Box::new(memory.id.as_str().to_owned()),
        Box::new(memory.namespace.as_str().to_owned()),
        Box::new(memory.kind.as_str().to_owned()),
        Box::new(memory.status.as_str().to_owned()),
        Box::new(memory.confidence),
        Box::new(nanos(memory.created_at)),
        Box::new(nanos(memory.occurred_at())),
        Box::new(hash.to_owned()),
        Box::new(version),
        Box::new(memory.tags.clone()),
        Box::new(access_count),
        Box::new(memory.last_accessed_at.map(time_key)),
        Box::new(searchable(&memory.search_text())),
        Box::new(encode_memory(memory)?),
        Box::new(facets(memory)),
    ])
}

/// The SQL that stores a column's value from its placeholder (or staged column).
fn stored_value(column: &str, value: &str) -> String {
    match column {
        "search" => format!("to_tsvector('english', {value})"),
        _ => value.to_owned(),
    }
}

/// The columns and their SQL values, each value's placeholder in `params`.
fn row_values(memory: &Memory, hash: &str, params: &mut Params) -> Result<Vec<(&'static str, String)>> {
    Ok(ROW_COLUMNS
        .iter()
        .zip(row_fields(memory, hash)?)
        .map(|((column, _, _), value)| (*column, stored_value(column, &params.push_boxed(value))))
        .collect())
}

/// Inserts the row of a new memory. Returns false, writing nothing, when the active-content
/// index already holds its content (a concurrent writer got there first).
async fn insert_row(tx: &Tx, memory: &Memory, hash: &str) -> Result<bool> {
    let mut params = Params::default();
    let values = row_values(memory, hash, &mut params)?;
    let columns: Vec<&str> = values.iter().map(|(column, _)| *column).collect();
    let expressions: Vec<&str> = values.iter().map(|(_, value)| value.as_str()).collect();
    let sql = format!(
        "INSERT INTO memories ({}) VALUES ({}) \
         ON CONFLICT (namespace, content_hash) WHERE status = 'active' DO NOTHING RETURNING seq",
        columns.join(", "),
        expressions.join(", ")
    );
    let inserted = tx.query_opt(&sql, &params.refs()).await?;
    if inserted.is_some() {
        relations::sync_links(tx, memory).await?;
    }
    Ok(inserted.is_some())
}

/// Rewrites the row under `seq` with `memory`. Read statistics stay as stored: they only grow,
/// and the stored ones are at least as new as any copy a writer started from.
async fn update_row(tx: &Tx, seq: i64, memory: &Memory, hash: &str) -> Result<()> {
    let mut params = Params::default();
    let seq = params.push(seq);
    let assignments: Vec<String> = row_values(memory, hash, &mut params)?
        .into_iter()
        .map(|(column, value)| match column {
            "access_count" | "last_accessed_at" => format!("{column} = greatest({column}, {value})"),
            _ => format!("{column} = {value}"),
        })
        .collect();
    let sql = format!("UPDATE memories SET {} WHERE seq = {seq}", assignments.join(", "));
    tx.execute(&sql, &params.refs()).await?;
    relations::sync_links(tx, memory).await
}

fn facets(memory: &Memory) -> Vec<String> {
    kenning_core::provenance::facets(memory)
}

/// A unique violation of the active-content index during a replace means a concurrent writer
/// made another memory hold this content after the check: a lost race, to be retried.
fn conflict_on_duplicate(error: Error, id: &str, expected: u32) -> Error {
    match &error {
        Error::Postgres(driver)
            if driver.as_db_error().and_then(|db| db.constraint()) == Some(ACTIVE_CONTENT_INDEX) =>
        {
            Error::Refused(Refusal::Conflict { id: id.to_owned(), expected })
        }
        _ => error,
    }
}

/// Adds a superseded version to the history; with `overwrite`, over an entry of the same version.
async fn put_version(tx: &Tx, id: &str, version: &MemoryVersion, overwrite: bool) -> Result<()> {
    let on_conflict = if overwrite {
        "DO UPDATE SET superseded_at = excluded.superseded_at, reason = excluded.reason, body = excluded.body"
    } else {
        "DO NOTHING"
    };
    let number = i32::try_from(version.version).unwrap_or(i32::MAX);
    tx.execute(
        &format!(
            "INSERT INTO memory_versions (memory_id, version, superseded_at, reason, body) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (memory_id, version) {on_conflict}"
        ),
        &[&id, &number, &time_key(version.superseded_at), &version.reason, &encode_memory(&version.memory)?],
    )
    .await?;
    Ok(())
}

/// Stores `embedding` as the vector of `id` for its model, replacing an earlier one.
pub(crate) async fn put_vector(tx: &Tx, id: &str, embedding: &Embedding) -> Result<()> {
    let dim = i32::try_from(embedding.vector.len()).unwrap_or(i32::MAX);
    // Written one by one, it goes into the live index at once (generation 0), even where a bulk
    // load had put an earlier vector of the memory in the backlog.
    tx.execute(
        "INSERT INTO embeddings (memory_id, model, dim, vector) VALUES ($1, $2, $3, $4::real[]::vector) \
         ON CONFLICT (memory_id, model) DO UPDATE SET dim = excluded.dim, vector = excluded.vector, \
         written = nextval('embedding_writes'), generation = 0",
        &[&id, &embedding.model, &dim, &embedding.vector],
    )
    .await?;
    Ok(())
}

/// Vectors embed the search text, so they are stale once it changes; `embedding`, when given,
/// is the vector of the new text.
async fn update_vectors(tx: &Tx, id: &str, text_changed: bool, embedding: Option<&Embedding>) -> Result<()> {
    if text_changed {
        tx.execute("DELETE FROM embeddings WHERE memory_id = $1", &[&id]).await?;
    }
    if let Some(embedding) = embedding {
        put_vector(tx, id, embedding).await?;
    }
    Ok(())
}
