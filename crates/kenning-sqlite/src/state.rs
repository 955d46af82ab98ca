//! The [`StateStore`] half of [`SqliteStore`]: workflows, protocol sessions, consolidation runs
//! and contradictions in the `state` table (schema migration 7), each record's subjects also in
//! `state_subjects` (migration 8); each write one transaction with its compare-and-swap check
//! (a batch of writes, one transaction with a check per record).

use chrono::{DateTime, Utc};
use kenning_core::Refusal;
use kenning_core::state::{StateKind, StateRecord, StateStore};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::Error;
use crate::store::SqliteStore;

fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

/// The columns [`record`] reads, in its order.
const COLUMNS: &str = "id, revision, updated_us, body, subjects";

fn record(kind: StateKind, row: &rusqlite::Row<'_>) -> Result<StateRecord, Error> {
    let updated: i64 = row.get(2)?;
    let subjects: String = row.get(4)?;
    Ok(StateRecord {
        kind,
        id: row.get(0)?,
        revision: u64::try_from(row.get::<_, i64>(1)?).map_err(|_| Error::Corrupt("a negative state revision".into()))?,
        updated_at: DateTime::from_timestamp_micros(updated).ok_or_else(|| Error::Corrupt(format!("state time {updated}")))?,
        body: row.get(3)?,
        subjects: serde_json::from_str(&subjects).map_err(|error| Error::Corrupt(format!("state subjects {subjects:?}: {error}")))?,
    })
}

fn records(kind: StateKind, mut rows: rusqlite::Rows<'_>) -> Result<Vec<StateRecord>, Error> {
    let mut records = Vec::new();
    while let Some(row) = rows.next()? {
        records.push(record(kind, row)?);
    }
    Ok(records)
}

fn put(tx: &Transaction, record: &StateRecord) -> Result<(), Error> {
    let kind = record.kind.as_str();
    let stored: Option<(i64, String)> = tx
        .prepare_cached("SELECT revision, subjects FROM state WHERE kind = ? AND id = ?")?
        .query_row(params![kind, record.id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let expected = record.revision.saturating_sub(1);
    let conflict = || Error::Refused(Refusal::Conflict { id: record.id.clone(), expected: u32::try_from(expected).unwrap_or(u32::MAX) });
    let stored_subjects = match stored {
        None if record.revision == 1 => None,
        None => return Err(Error::Refused(Refusal::NotFound(record.id.clone()))),
        Some((revision, subjects)) if record.revision > 1 && revision == expected as i64 => Some(subjects),
        Some(_) => return Err(conflict()),
    };
    let revision = i64::try_from(record.revision).map_err(|_| conflict())?;
    let subjects = serde_json::to_string(&record.subjects).expect("strings serialise");
    tx.prepare_cached(
        "INSERT INTO state (kind, id, revision, updated_us, body, subjects) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (kind, id) DO UPDATE SET revision = ?3, updated_us = ?4, body = ?5, subjects = ?6",
    )?
    .execute(params![kind, record.id, revision, micros(record.updated_at), record.body, subjects])?;
    // Most writes are a record's next revision with the subjects it had: nothing to index.
    if stored_subjects.as_deref() != Some(subjects.as_str()) {
        if stored_subjects.is_some() {
            tx.prepare_cached("DELETE FROM state_subjects WHERE kind = ? AND id = ?")?.execute(params![kind, record.id])?;
        }
        let mut insert = tx.prepare_cached("INSERT OR IGNORE INTO state_subjects (kind, subject, id) VALUES (?, ?, ?)")?;
        for subject in &record.subjects {
            insert.execute(params![kind, subject, record.id])?;
        }
    }
    Ok(())
}

impl StateStore for SqliteStore {
    fn put_state(&self, record: &StateRecord) -> kenning_core::Result<()> {
        Ok(self.db().write(|tx| put(tx, record))?)
    }

    fn put_states(&self, records: &[StateRecord]) -> kenning_core::Result<Vec<bool>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.db().write(|tx| {
            records
                .iter()
                .map(|record| match put(tx, record) {
                    Ok(()) => Ok(true),
                    Err(Error::Refused(Refusal::Conflict { .. } | Refusal::NotFound(_))) => Ok(false),
                    Err(other) => Err(other),
                })
                .collect()
        })?)
    }

    fn get_state(&self, kind: StateKind, id: &str) -> kenning_core::Result<Option<StateRecord>> {
        Ok(self.db().read(|tx| {
            let mut statement = tx.prepare_cached(&format!("SELECT {COLUMNS} FROM state WHERE kind = ? AND id = ?"))?;
            let mut rows = statement.query(params![kind.as_str(), id])?;
            match rows.next()? {
                Some(row) => Ok(Some(record(kind, row)?)),
                None => Ok(None),
            }
        })?)
    }

    fn list_state(&self, kind: StateKind, offset: usize, limit: usize) -> kenning_core::Result<Vec<StateRecord>> {
        Ok(self.db().read(|tx| {
            let mut statement =
                tx.prepare_cached(&format!("SELECT {COLUMNS} FROM state WHERE kind = ? ORDER BY updated_us DESC, id LIMIT ? OFFSET ?"))?;
            records(kind, statement.query(params![kind.as_str(), limit.min(i64::MAX as usize) as i64, offset.min(i64::MAX as usize) as i64])?)
        })?)
    }

    fn state_about(&self, kind: StateKind, subjects: &[&str]) -> kenning_core::Result<Vec<StateRecord>> {
        if subjects.is_empty() {
            return Ok(Vec::new());
        }
        // The subjects go in as one JSON array, so that one prepared statement serves any number.
        let subjects = serde_json::to_string(subjects).expect("strings serialise");
        // From the subjects to the records (`CROSS JOIN` keeps that order): asked as `id IN
        // (…)`, SQLite walked every record of the kind in time order, for the ordering.
        let columns: Vec<String> = COLUMNS.split(", ").map(|column| format!("state.{column}")).collect();
        Ok(self.db().read(|tx| {
            let mut statement = tx.prepare_cached(&format!(
                "SELECT {} FROM state_subjects AS about CROSS JOIN state ON state.kind = about.kind AND state.id = about.id
                 WHERE about.kind = ?1 AND about.subject IN (SELECT value FROM json_each(?2))
                 GROUP BY state.id ORDER BY state.updated_us DESC, state.id",
                columns.join(", ")
            ))?;
            records(kind, statement.query(params![kind.as_str(), subjects])?)
        })?)
    }

    fn delete_state(&self, kind: StateKind, id: &str) -> kenning_core::Result<bool> {
        Ok(self.db().write(|tx| {
            tx.execute("DELETE FROM state_subjects WHERE kind = ? AND id = ?", params![kind.as_str(), id])?;
            Ok(tx.execute("DELETE FROM state WHERE kind = ? AND id = ?", params![kind.as_str(), id])? > 0)
        })?)
    }
}
