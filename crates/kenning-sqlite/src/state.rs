//! The [`StateStore`] half of [`SqliteStore`]: workflows and protocol sessions in the `state`
//! table (schema migration 7), each write one transaction with its compare-and-swap check (a
//! batch of writes, one transaction with a check per record).

use chrono::{DateTime, Utc};
use kenning_core::Refusal;
use kenning_core::state::{StateKind, StateRecord, StateStore};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::Error;
use crate::store::SqliteStore;

fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

fn record(kind: StateKind, row: &rusqlite::Row<'_>) -> Result<StateRecord, Error> {
    let updated: i64 = row.get(2)?;
    Ok(StateRecord {
        kind,
        id: row.get(0)?,
        revision: u64::try_from(row.get::<_, i64>(1)?).map_err(|_| Error::Corrupt("a negative state revision".into()))?,
        updated_at: DateTime::from_timestamp_micros(updated).ok_or_else(|| Error::Corrupt(format!("state time {updated}")))?,
        body: row.get(3)?,
    })
}

fn put(tx: &Transaction, record: &StateRecord) -> Result<(), Error> {
    let stored: Option<i64> = tx
        .prepare_cached("SELECT revision FROM state WHERE kind = ? AND id = ?")?
        .query_row(params![record.kind.as_str(), record.id], |row| row.get(0))
        .optional()?;
    let expected = record.revision.saturating_sub(1);
    let conflict = || Error::Refused(Refusal::Conflict { id: record.id.clone(), expected: u32::try_from(expected).unwrap_or(u32::MAX) });
    match stored {
        None if record.revision == 1 => {}
        None => return Err(Error::Refused(Refusal::NotFound(record.id.clone()))),
        Some(revision) if record.revision > 1 && revision == expected as i64 => {}
        Some(_) => return Err(conflict()),
    }
    let revision = i64::try_from(record.revision).map_err(|_| conflict())?;
    tx.prepare_cached(
        "INSERT INTO state (kind, id, revision, updated_us, body) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (kind, id) DO UPDATE SET revision = ?3, updated_us = ?4, body = ?5",
    )?
    .execute(params![record.kind.as_str(), record.id, revision, micros(record.updated_at), record.body])?;
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
            let mut statement = tx.prepare_cached("SELECT id, revision, updated_us, body FROM state WHERE kind = ? AND id = ?")?;
            let mut rows = statement.query(params![kind.as_str(), id])?;
            match rows.next()? {
                Some(row) => Ok(Some(record(kind, row)?)),
                None => Ok(None),
            }
        })?)
    }

    fn list_state(&self, kind: StateKind, offset: usize, limit: usize) -> kenning_core::Result<Vec<StateRecord>> {
        Ok(self.db().read(|tx| {
            let mut statement = tx.prepare_cached(
                "SELECT id, revision, updated_us, body FROM state WHERE kind = ? ORDER BY updated_us DESC, id LIMIT ? OFFSET ?",
            )?;
            let mut rows = statement.query(params![kind.as_str(), limit.min(i64::MAX as usize) as i64, offset.min(i64::MAX as usize) as i64])?;
            let mut records = Vec::new();
            while let Some(row) = rows.next()? {
                records.push(record(kind, row)?);
            }
            Ok(records)
        })?)
    }

    fn delete_state(&self, kind: StateKind, id: &str) -> kenning_core::Result<bool> {
        Ok(self.db().write(|tx| Ok(tx.execute("DELETE FROM state WHERE kind = ? AND id = ?", params![kind.as_str(), id])? > 0))?)
    }
}
