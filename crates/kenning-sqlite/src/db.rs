//! Connections: how they are configured, shared between threads, and retried under contention.
//!
//! One writer connection sits behind a mutex, so writes from this process are serialised here
//! and SQLite only ever arbitrates between processes. Reads take a connection from a small pool
//! so that they run alongside writes, which WAL mode allows; while no write holds the writer and
//! the pool is empty (a short-lived process's only reads), they borrow the writer instead.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::{Error, Result};
use crate::schema;

/// How long SQLite itself waits for a lock before reporting SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`retry`] keeps trying an operation that SQLite reported as busy or locked. Some
/// contention (a WAL recovery, a lock needed while opening) is reported without waiting on the
/// busy timeout, so the timeout alone does not keep "database is locked" from callers.
const RETRY_FOR: Duration = Duration::from_secs(60);
/// Idle read connections kept for reuse; more are opened when more threads read at once.
const IDLE_READERS: usize = 4;

pub(crate) struct Db {
    path: PathBuf,
    durability: Durability,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

/// What an acknowledged write survives; the choice is how long each write waits for the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Every commit is flushed to the disk (`synchronous = FULL`) before it is acknowledged,
    /// so it survives the process being killed, the OS crashing and the power failing. A write
    /// then costs at least one disk flush, a few milliseconds on some disks.
    #[default]
    PowerLoss,
    /// Commits reach the OS but are flushed to the disk only at checkpoints (`synchronous =
    /// NORMAL` in WAL mode): an acknowledged write survives the process being killed, but the
    /// last ones before an OS crash or power failure may be lost. The store is never corrupted.
    ProcessCrash,
}

impl Db {
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<Db> {
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            create_private_dir(parent).map_err(|source| Error::CreateDir { path: parent.to_owned(), source })?;
        }
        keep_private(path).map_err(|source| Error::CreateFile { path: path.to_owned(), source })?;
        let mut writer = retry(|| open_writer(path, durability))?;
        retry(|| schema::migrate(&mut writer, path))?;
        Ok(Db { path: path.to_owned(), durability, writer: Mutex::new(writer), readers: Mutex::new(Vec::new()) })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `work` in a write transaction, committing if it succeeds. The transaction starts
    /// with BEGIN IMMEDIATE, taking the write lock up front: a deferred transaction that reads
    /// first and then writes can fail with SQLITE_BUSY without waiting on the busy timeout.
    /// `work` is run again from the start if SQLite reports contention, so it must not have
    /// effects outside the transaction.
    pub(crate) fn write<T>(&self, work: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        commit(&mut lock(&self.writer), work)
    }

    /// Runs `work` like [`Db::write`], but commits without waiting for the disk
    /// (`synchronous = NORMAL`, whatever the store's durability): for statistics such as access
    /// counts, which an OS crash or power failure may lose without harm, and which a read (a
    /// hook's recall, say) should not pay a disk flush for. WAL mode keeps the store intact.
    pub(crate) fn write_statistics<T>(&self, work: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        let mut conn = lock(&self.writer);
        let relax = self.durability == Durability::PowerLoss;
        if relax {
            conn.pragma_update(None, "synchronous", "NORMAL")?;
        }
        let result = commit(&mut conn, work);
        if relax {
            conn.pragma_update(None, "synchronous", "FULL")?;
        }
        result
    }

    /// Runs `work` in a write transaction and rolls it back: what a write would do, without
    /// doing it (a dry run).
    pub(crate) fn rehearse<T>(&self, mut work: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        let mut conn = lock(&self.writer);
        retry(|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = work(&tx)?;
            tx.rollback()?;
            Ok(value)
        })
    }

    /// Rewrites the database so that nothing deleted can be read from its files. A deleted row
    /// stays on disk in the free pages and the free space inside pages until they are reused,
    /// and in the WAL, which keeps pages as they were: `VACUUM` builds every page afresh, then a
    /// truncating checkpoint copies them into the database file and empties the WAL. A reader in
    /// another process keeps the WAL from being emptied; the checkpoint is tried again until
    /// none does.
    pub(crate) fn erase_freed(&self) -> Result<()> {
        let conn = lock(&self.writer);
        retry(|| Ok(conn.execute_batch("VACUUM")?))?;
        retry(|| {
            let blocked: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
            if blocked == 0 {
                return Ok(());
            }
            let busy = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY);
            Err(Error::Sqlite(rusqlite::Error::SqliteFailure(busy, Some("a reader holds the WAL".to_owned()))))
        })
    }

    /// Runs `work` in a read transaction, so that everything it reads comes from one snapshot.
    ///
    /// An idle read connection is used if there is one; else the write connection if no write
    /// holds it, which spares a short-lived process (a hook) opening a second connection and
    /// parsing the schema again; else a new read connection, kept for reuse.
    pub(crate) fn read<T>(&self, work: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
        let pooled = lock(&self.readers).pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => match self.writer.try_lock() {
                Ok(mut writer) => return read_on(&mut writer, work),
                Err(TryLockError::Poisoned(poisoned)) => return read_on(&mut poisoned.into_inner(), work),
                Err(TryLockError::WouldBlock) => retry(|| open_reader(&self.path))?,
            },
        };
        let result = read_on(&mut conn, work);
        let mut idle = lock(&self.readers);
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        }
        result
    }
}

/// The largest write-ahead log a store's last connection leaves unmerged when it closes.
///
/// SQLite merges the log into the database, with its disk flushes, when the last connection to
/// a store closes, and a hook is a process of a few milliseconds that closes its stores at every
/// run (a prompt's recall writes its access counts). Skipping the merge loses nothing (the log
/// holds every commit, flushed as the durability says), but the next process to open the store
/// rebuilds SQLite's index of the log by reading all of it: after a reindex that is megabytes.
/// So the merge is skipped only while the log is small enough to read in well under a
/// millisecond; a run that finds it larger merges it.
const LOG_LEFT_ON_CLOSE: u64 = 256 * 1024;

impl Drop for Db {
    fn drop(&mut self) {
        let mut log = self.path.as_os_str().to_owned();
        log.push("-wal");
        if std::fs::metadata(&log).is_ok_and(|metadata| metadata.len() <= LOG_LEFT_ON_CLOSE) {
            let writer = lock(&self.writer);
            let readers = lock(&self.readers);
            for conn in std::iter::once(&*writer).chain(readers.iter()) {
                // A connection that refuses only closes the way it would have anyway.
                let _ = conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
            }
        }
    }
}

/// Options that create a file its owner alone can read and write (0600 on Unix): a store holds
/// someone's memories, and its index file their words.
pub(crate) fn private_file() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Creates `dir` and its missing parents open to their owner alone (0700 on Unix).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Makes the database file before SQLite does, readable by its owner alone (SQLite gives the
/// `-wal` and `-shm` files it makes the database file's permissions), and takes group and
/// other access away from a database, and its companion files, that an earlier version
/// created open to them.
fn keep_private(path: &Path) -> std::io::Result<()> {
    private_file().write(true).create(true).truncate(false).open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let companions = ["", "-wal", "-shm", ".index"].map(|suffix| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        });
        for file in companions {
            if let Ok(metadata) = std::fs::metadata(&file)
                && metadata.permissions().mode() & 0o077 != 0
            {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(metadata.permissions().mode() & 0o700))?;
            }
        }
    }
    Ok(())
}

/// A poisoned lock only means another thread panicked while holding it; the connection inside
/// is still sound, because a transaction that was open then rolled back when it was dropped.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many prepared statements a connection keeps. The store prepares about a hundred distinct
/// statements (some with a filter's varying conditions); rusqlite keeps 16 by default, and with
/// so few a mirror update or a sync prepared most statements again for every record, which was
/// a third of its time.
const STATEMENT_CACHE: usize = 256;

/// Opens a connection with the settings every connection of a store has.
fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Without the planner's stability guarantee, SQLite plans a statement for the values bound
    // to it and prepares it again whenever they change: the index's catch-up query, whose
    // change-number range differs every time, was parsed and planned afresh on every search
    // after a write. The store's queries have one good plan whatever their values.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(conn)
}

fn open_writer(path: &Path, durability: Durability) -> Result<Connection> {
    let conn = open_connection(path)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Corrupt(format!("{} refused WAL mode (journal mode is {mode})", path.display())));
    }
    // FULL syncs the WAL on every commit. In WAL mode NORMAL already survives a crash of the
    // process, because committed pages are in the OS cache, but it can lose the last commits
    // if the machine loses power or the OS crashes.
    let synchronous = match durability {
        Durability::PowerLoss => "FULL",
        Durability::ProcessCrash => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", synchronous)?;
    Ok(conn)
}

fn open_reader(path: &Path) -> Result<Connection> {
    let conn = open_connection(path)?;
    // A guard against a future read path that writes by mistake.
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// Runs `work` in a deferred transaction on `conn`, again from the start while SQLite reports
/// contention.
fn read_on<T>(conn: &mut Connection, mut work: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
    retry(|| {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let value = work(&tx)?;
        tx.commit()?;
        Ok(value)
    })
}

/// Runs `work` in an immediate write transaction on `conn` and commits it, again from the start
/// while SQLite reports contention (see [`Db::write`]).
fn commit<T>(conn: &mut Connection, mut work: impl FnMut(&Transaction) -> Result<T>) -> Result<T> {
    retry(|| {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = work(&tx)?;
        tx.commit()?;
        Ok(value)
    })
}

/// Runs `attempt` until it succeeds, fails with something other than lock contention, or
/// contention outlasts [`RETRY_FOR`]. Sleeps are short, growing and jittered, so that two
/// processes that collided do not collide again in lockstep.
fn retry<T>(mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match attempt() {
            Err(error) if error.is_busy() && started.elapsed() < RETRY_FOR => {
                tracing::debug!(%error, "sqlite busy; retrying");
                let jitter = Duration::from_micros(fastrand::u64(0..=pause.as_micros() as u64));
                std::thread::sleep(pause + jitter);
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            result => return result,
        }
    }
}
