//! How every statement reaches the server: one transaction per unit of work ([`Tx`]), which
//! begins with the session's settings, and statements sent unnamed, each with its parameters'
//! types, in one round trip.
//!
//! Both are what a connection pooler in transaction mode (pgbouncer's `pool_mode = transaction`,
//! the mode most teams run) needs. Between transactions it may hand the client's next statement
//! to another server connection, so a named prepared statement made on one is missing on the
//! next ("prepared statement does not exist"), and a session setting (`search_path`, the HNSW
//! search depth) made by one transaction is not there for the next. So nothing is prepared by
//! name, and each transaction sets what it needs with `SET LOCAL` first. The settings travel in
//! the same write as the first statement, and a read's `COMMIT` is sent after its answer is
//! handed back, so neither costs the caller a round trip.

use std::sync::atomic::{AtomicBool, Ordering};

use deadpool::managed::Object;
use futures_util::{StreamExt, pin_mut};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row, SimpleQueryMessage};

use crate::connect::Connector;
use crate::error::{Error, Result};

/// A statement parameter with its SQL type, which an unnamed statement sends along.
pub(crate) trait Param: Sync + Send {
    fn value(&self) -> &(dyn ToSql + Sync);
    fn sql_type(&self) -> Type;
}

macro_rules! params {
    ($($rust:ty => $sql:expr),* $(,)?) => {
        $(impl Param for $rust {
            fn value(&self) -> &(dyn ToSql + Sync) {
                self
            }
            fn sql_type(&self) -> Type {
                $sql
            }
        })*
    };
}

params! {
    String => Type::TEXT,
    &str => Type::TEXT,
    Option<String> => Type::TEXT,
    Option<&str> => Type::TEXT,
    i32 => Type::INT4,
    i64 => Type::INT8,
    Option<i64> => Type::INT8,
    f64 => Type::FLOAT8,
    Vec<String> => Type::TEXT_ARRAY,
    Vec<&str> => Type::TEXT_ARRAY,
    Vec<i64> => Type::INT8_ARRAY,
    Vec<f32> => Type::FLOAT4_ARRAY,
}

/// Parameters of a statement built piece by piece: each `push` returns its `$n` placeholder.
#[derive(Default)]
pub(crate) struct Params {
    values: Vec<Box<dyn Param>>,
}

impl Params {
    pub fn push(&mut self, value: impl Param + 'static) -> String {
        self.values.push(Box::new(value));
        format!("${}", self.values.len())
    }

    pub fn push_boxed(&mut self, value: Box<dyn Param>) -> String {
        self.values.push(value);
        format!("${}", self.values.len())
    }

    pub fn refs(&self) -> Vec<&dyn Param> {
        self.values.iter().map(|value| value.as_ref()).collect()
    }
}

/// A pooled connection running one unit of work in one transaction.
///
/// The transaction begins with the first statement (`BEGIN` and the `SET LOCAL`s travel with
/// it) and ends with [`Tx::commit`] or [`Tx::rollback`]. A unit dropped half-way (its caller
/// was cancelled, or panicked) closes its connection instead of returning it to the pool, so
/// the server rolls the transaction back and no later unit finds itself inside it.
pub(crate) struct Tx {
    object: Option<Object<Connector>>,
    /// `BEGIN` and the session settings, sent with the first statement; `None` for a unit whose
    /// statements each commit on their own (`CREATE INDEX CONCURRENTLY` refuses a transaction).
    begin: Option<String>,
    begun: AtomicBool,
}

impl Tx {
    pub fn new(object: Object<Connector>, begin: Option<String>) -> Tx {
        Tx { object: Some(object), begin, begun: AtomicBool::new(false) }
    }

    fn client(&self) -> &Client {
        self.object.as_ref().expect("the connection is held until the unit ends")
    }

    /// The `BEGIN` still to send before the first statement, once.
    fn pending_begin(&self) -> Option<&str> {
        let begin = self.begin.as_deref()?;
        (!self.begun.swap(true, Ordering::AcqRel)).then_some(begin)
    }

    pub async fn query(&self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>> {
        let typed: Vec<(&(dyn ToSql + Sync), Type)> = params.iter().map(|param| (param.value(), param.sql_type())).collect();
        let client = self.client();
        match self.pending_begin() {
            Some(begin) => {
                // Sent together: the statement follows the BEGIN on the wire, in one write.
                let (begun, rows) = futures_util::future::join(client.batch_execute(begin), client.query_typed(sql, &typed)).await;
                begun?;
                Ok(rows?)
            }
            None => Ok(client.query_typed(sql, &typed).await?),
        }
    }

    pub async fn query_one(&self, sql: &str, params: &[&dyn Param]) -> Result<Row> {
        self.query_opt(sql, params).await?.ok_or_else(|| Error::Corrupt(format!("no row from `{sql}`")))
    }

    pub async fn query_opt(&self, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>> {
        let mut rows = self.query(sql, params).await?;
        match rows.len() {
            0 | 1 => Ok(rows.pop()),
            count => Err(Error::Corrupt(format!("{count} rows from `{sql}`, where one was expected"))),
        }
    }

    /// Runs a statement and returns how many rows it changed.
    pub async fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<u64> {
        let client = self.client();
        let run = async {
            let rows = client.query_typed_raw(sql, params.iter().map(|param| (param.value(), param.sql_type()))).await?;
            pin_mut!(rows);
            while let Some(row) = rows.next().await {
                row?;
            }
            Ok::<u64, tokio_postgres::Error>(rows.rows_affected().unwrap_or(0))
        };
        match self.pending_begin() {
            Some(begin) => {
                let (begun, changed) = futures_util::future::join(client.batch_execute(begin), run).await;
                begun?;
                Ok(changed?)
            }
            None => Ok(run.await?),
        }
    }

    /// Runs statements without parameters (DDL), through the simple protocol.
    pub async fn batch_execute(&self, sql: &str) -> Result<()> {
        match self.pending_begin() {
            Some(begin) => self.client().batch_execute(&format!("{begin}; {sql}")).await?,
            None => self.client().batch_execute(sql).await?,
        }
        Ok(())
    }

    /// The first value of the first row of a statement without parameters, as text.
    pub async fn simple_value(&self, sql: &str) -> Result<Option<String>> {
        let text = match self.pending_begin() {
            Some(begin) => format!("{begin}; {sql}"),
            None => sql.to_owned(),
        };
        let messages = self.client().simple_query(&text).await?;
        Ok(messages.iter().find_map(|message| match message {
            SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_owned)),
            _ => None,
        }).flatten())
    }

    /// Starts a binary `COPY … FROM STDIN` of rows with these column types.
    ///
    /// The driver prepares a `COPY` by name; inside the unit's transaction a transaction-mode
    /// pooler keeps the one server connection, and the statement is closed before the commit.
    pub async fn copy_in(&self, sql: &str, types: &[Type]) -> Result<std::pin::Pin<Box<BinaryCopyInWriter>>> {
        if let Some(begin) = self.pending_begin() {
            self.client().batch_execute(begin).await?;
        }
        let sink = self.client().copy_in(sql).await?;
        Ok(Box::pin(BinaryCopyInWriter::new(sink, types)))
    }

    /// Ends the transaction, keeping what it did, and gives the connection back to the pool.
    pub async fn commit(mut self) -> Result<()> {
        if self.begun.load(Ordering::Acquire) {
            self.client().batch_execute("COMMIT").await?;
        }
        self.release();
        Ok(())
    }

    /// Commits and reports where the server's write-ahead log stood after it: a standby that
    /// has replayed that far holds everything this unit wrote.
    pub async fn commit_at(mut self) -> Result<Option<u64>> {
        if !self.begun.load(Ordering::Acquire) {
            self.release();
            return Ok(None);
        }
        let messages = self.client().simple_query("COMMIT; SELECT pg_catalog.pg_current_wal_insert_lsn()::text").await?;
        self.release();
        let lsn = messages.iter().find_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0).and_then(parse_lsn),
            _ => None,
        });
        Ok(lsn)
    }

    /// Ends the transaction, undoing what it did. A connection that cannot roll back is closed.
    pub async fn rollback(mut self) {
        if self.begun.load(Ordering::Acquire) && self.client().batch_execute("ROLLBACK").await.is_err() {
            return;
        }
        self.release();
    }

    /// Marks the unit as ended cleanly, so that dropping it returns the connection to the pool.
    fn release(&mut self) {
        self.begun.store(false, Ordering::Release);
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if self.begun.load(Ordering::Acquire) {
            if let Some(object) = self.object.take() {
                // Taken out of the pool and dropped: the socket closes, the server rolls back.
                drop(Object::take(object));
            }
        }
    }
}

/// A write-ahead log position as PostgreSQL prints it (`16/B374D848`).
pub(crate) fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.split_once('/')?;
    Some((u64::from_str_radix(high, 16).ok()? << 32) | u64::from_str_radix(low, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_positions_are_read_as_printed() {
        assert_eq!(parse_lsn("0/3000060"), Some(0x0300_0060));
        assert_eq!(parse_lsn("16/B374D848"), Some((0x16 << 32) | 0xB374_D848));
        assert_eq!(parse_lsn("nonsense"), None);
    }
}
