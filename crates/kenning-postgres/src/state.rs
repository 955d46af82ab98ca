//! Working state (`kenning_core::state`) in the `state` table (schema migration 4; the records'
//! subjects, migration 8). Each write is one statement, so compare-and-swap needs no explicit
//! lock: the revision is checked by the statement's own `WHERE`, which PostgreSQL evaluates on
//! the row it locks.

use chrono::DateTime;
use crate::sql::Tx;
use kenning_core::Refusal;
use kenning_core::state::{StateKind, StateRecord};

use crate::error::{Error, Result};

fn revision(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The columns [`record`] reads, in its order.
const COLUMNS: &str = "id, revision, updated_us, body, subjects";

fn record(kind: StateKind, row: &tokio_postgres::Row) -> Result<StateRecord> {
    let updated: i64 = row.get(2);
    Ok(StateRecord {
        kind,
        id: row.get(0),
        revision: u64::try_from(row.get::<_, i64>(1)).map_err(|_| Error::Corrupt("a negative state revision".into()))?,
        updated_at: DateTime::from_timestamp_micros(updated).ok_or_else(|| Error::Corrupt(format!("state time {updated}")))?,
        body: row.get(3),
        subjects: row.get(4),
    })
}

pub(crate) async fn put(tx: &Tx, record: &StateRecord) -> Result<()> {
    let kind = record.kind.as_str();
    let updated = record.updated_at.timestamp_micros();
    let expected = record.revision.saturating_sub(1);
    let conflict = || Error::Refused(Refusal::Conflict { id: record.id.clone(), expected: u32::try_from(expected).unwrap_or(u32::MAX) });
    if record.revision <= 1 {
        let written = tx
            .execute(
                "INSERT INTO state (kind, id, revision, updated_us, body, subjects) VALUES ($1, $2, 1, $3, $4, $5) ON CONFLICT (kind, id) DO NOTHING",
                &[&kind, &record.id, &updated, &record.body, &record.subjects],
            )
            .await?;
        return if written == 1 { Ok(()) } else { Err(conflict()) };
    }
    let written = tx
        .execute(
            "UPDATE state SET revision = $3, updated_us = $4, body = $5, subjects = $7 WHERE kind = $1 AND id = $2 AND revision = $6",
            &[&kind, &record.id, &revision(record.revision), &updated, &record.body, &revision(expected), &record.subjects],
        )
        .await?;
    if written == 1 {
        return Ok(());
    }
    match tx.query_opt("SELECT 1 FROM state WHERE kind = $1 AND id = $2", &[&kind, &record.id]).await? {
        Some(_) => Err(conflict()),
        None => Err(Error::Refused(Refusal::NotFound(record.id.clone()))),
    }
}

/// [`put`] of each record in order, in the caller's transaction: a refused record is answered
/// `false` and leaves the transaction usable, since [`put`] refuses by the rows its statements
/// touch, never by a failed statement.
pub(crate) async fn put_many(tx: &Tx, records: &[StateRecord]) -> Result<Vec<bool>> {
    let mut written = Vec::with_capacity(records.len());
    for record in records {
        written.push(match put(tx, record).await {
            Ok(()) => true,
            Err(Error::Refused(Refusal::Conflict { .. } | Refusal::NotFound(_))) => false,
            Err(other) => return Err(other),
        });
    }
    Ok(written)
}

pub(crate) async fn get(tx: &Tx, kind: StateKind, id: &str) -> Result<Option<StateRecord>> {
    let row = tx.query_opt(&format!("SELECT {COLUMNS} FROM state WHERE kind = $1 AND id = $2"), &[&kind.as_str(), &id]).await?;
    row.map(|row| record(kind, &row)).transpose()
}

pub(crate) async fn list(tx: &Tx, kind: StateKind, offset: usize, limit: usize) -> Result<Vec<StateRecord>> {
    let (offset, limit) = (i64::try_from(offset).unwrap_or(i64::MAX), i64::try_from(limit).unwrap_or(i64::MAX));
    let rows = tx
        .query(&format!("SELECT {COLUMNS} FROM state WHERE kind = $1 ORDER BY updated_us DESC, id LIMIT $2 OFFSET $3"), &[&kind.as_str(), &limit, &offset])
        .await?;
    rows.iter().map(|row| record(kind, row)).collect()
}

pub(crate) async fn about(tx: &Tx, kind: StateKind, subjects: &[&str]) -> Result<Vec<StateRecord>> {
    if subjects.is_empty() {
        return Ok(Vec::new());
    }
    let subjects: Vec<&str> = subjects.to_vec();
    let rows = tx
        .query(&format!("SELECT {COLUMNS} FROM state WHERE kind = $1 AND subjects && $2::text[] ORDER BY updated_us DESC, id"), &[&kind.as_str(), &subjects])
        .await?;
    rows.iter().map(|row| record(kind, row)).collect()
}

pub(crate) async fn delete(tx: &Tx, kind: StateKind, id: &str) -> Result<bool> {
    Ok(tx.execute("DELETE FROM state WHERE kind = $1 AND id = $2", &[&kind.as_str(), &id]).await? > 0)
}
