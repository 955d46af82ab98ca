//! The code index on disk: a SQLite file beside the project store holding, per file, its
//! modification time, size, hash, documentation and imports, and its chunks with their
//! vectors. It is a cache of the repository: deleting it costs one full parse.

use std::path::Path;

use rusqlite::{Connection, params};

use crate::error::{Error, Result};
use crate::parse::Chunk;

/// Bumped when what is stored changes meaning; an index of another version is rebuilt.
const SCHEMA_VERSION: i64 = 2;

pub(crate) struct Store {
    pub(crate) conn: Connection,
    path: std::path::PathBuf,
}

#[derive(Debug, Clone)]
pub(crate) struct FileRow {
    pub path: String,
    pub mtime_ns: i64,
    pub size: i64,
    pub hash: String,
    pub doc: String,
    pub lines: i64,
    pub imports: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct ChunkRow {
    pub id: i64,
    pub path: String,
    pub chunk: Chunk,
    pub model: Option<String>,
    pub vector: Option<Vec<f32>>,
}

impl Store {
    pub(crate) fn open(path: &Path) -> Result<Store> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| Error::index(path, error))?;
        }
        let conn = Connection::open(path).map_err(|error| Error::index(path, error))?;
        let store = Store { conn, path: path.to_owned() };
        store.migrate()?;
        Ok(store)
    }

    fn error(&self, error: impl std::fmt::Display) -> Error {
        Error::index(&self.path, error)
    }

    fn migrate(&self) -> Result<()> {
        self.conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(|error| self.error(error))?;
        // The index is a cache: another process may write it at the same time, and a crash
        // mid-write costs at most a re-parse, so WAL without full syncs is enough.
        self.conn.pragma_update(None, "journal_mode", "WAL").map_err(|error| self.error(error))?;
        self.conn.pragma_update(None, "synchronous", "NORMAL").map_err(|error| self.error(error))?;
        let version: i64 = self.conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(|error| self.error(error))?;
        if version != SCHEMA_VERSION {
            self.conn
                .execute_batch(&format!(
                    "DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS chunks;
                     DROP TABLE IF EXISTS dep_docs; DROP TABLE IF EXISTS dep_packages;
                     CREATE TABLE files (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
                         hash TEXT NOT NULL, doc TEXT NOT NULL, lines INTEGER NOT NULL, imports TEXT NOT NULL);
                     CREATE TABLE chunks (id INTEGER PRIMARY KEY, path TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
                         start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, signature TEXT NOT NULL, doc TEXT NOT NULL,
                         text TEXT NOT NULL, model TEXT, vector BLOB);
                     CREATE INDEX chunks_path ON chunks(path);
                     CREATE TABLE dep_packages (key TEXT PRIMARY KEY);
                     CREATE TABLE dep_docs (key TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, signature TEXT NOT NULL,
                         doc TEXT NOT NULL, file TEXT NOT NULL, line INTEGER NOT NULL);
                     CREATE INDEX dep_docs_key ON dep_docs(key);
                     PRAGMA user_version = {SCHEMA_VERSION};"
                ))
                .map_err(|error| self.error(error))?;
        }
        Ok(())
    }

    pub(crate) fn files(&self) -> Result<Vec<FileRow>> {
        let mut statement =
            self.conn.prepare("SELECT path, mtime_ns, size, hash, doc, lines, imports FROM files").map_err(|error| self.error(error))?;
        let rows = statement
            .query_map([], |row| {
                let imports: String = row.get(6)?;
                Ok(FileRow {
                    path: row.get(0)?,
                    mtime_ns: row.get(1)?,
                    size: row.get(2)?,
                    hash: row.get(3)?,
                    doc: row.get(4)?,
                    lines: row.get(5)?,
                    imports: imports.lines().map(str::to_owned).collect(),
                })
            })
            .map_err(|error| self.error(error))?;
        rows.collect::<std::result::Result<_, _>>().map_err(|error| self.error(error))
    }

    pub(crate) fn chunks(&self) -> Result<Vec<ChunkRow>> {
        let mut statement = self
            .conn
            .prepare("SELECT id, path, name, kind, start_line, end_line, signature, doc, text, model, vector FROM chunks")
            .map_err(|error| self.error(error))?;
        let rows = statement.query_map([], chunk_row).map_err(|error| self.error(error))?;
        rows.collect::<std::result::Result<_, _>>().map_err(|error| self.error(error))
    }

}

fn chunk_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ChunkRow> {
    let vector: Option<Vec<u8>> = row.get(10)?;
    Ok(ChunkRow {
        id: row.get(0)?,
        path: row.get(1)?,
        chunk: Chunk {
            name: row.get(2)?,
            kind: row.get(3)?,
            start_line: row.get::<_, i64>(4)? as usize,
            end_line: row.get::<_, i64>(5)? as usize,
            signature: row.get(6)?,
            doc: row.get(7)?,
            text: row.get(8)?,
        },
        model: row.get(9)?,
        vector: vector.map(|bytes| bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()),
    })
}

/// One write to the index, in one transaction.
pub(crate) struct Batch<'c> {
    tx: rusqlite::Transaction<'c>,
}

impl Store {
    pub(crate) fn batch(&mut self) -> Result<Batch<'_>> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|error| Error::index(&path, error))?;
        Ok(Batch { tx })
    }
}

impl Batch<'_> {
    fn error(error: rusqlite::Error) -> Error {
        Error::Index { path: "code index".to_owned(), message: error.to_string() }
    }

    pub(crate) fn remove(&self, path: &str) -> Result<()> {
        self.tx.execute("DELETE FROM chunks WHERE path = ?1", [path]).map_err(Self::error)?;
        self.tx.execute("DELETE FROM files WHERE path = ?1", [path]).map_err(Self::error)?;
        Ok(())
    }

    pub(crate) fn touch(&self, path: &str, mtime_ns: i64, size: i64) -> Result<()> {
        self.tx.execute("UPDATE files SET mtime_ns = ?2, size = ?3 WHERE path = ?1", params![path, mtime_ns, size]).map_err(Self::error)?;
        Ok(())
    }

    /// Replaces a file and its chunks; returns the new chunks' ids, in order.
    pub(crate) fn put(&self, file: &FileRow, chunks: &[(Chunk, Option<(&str, Vec<f32>)>)]) -> Result<Vec<i64>> {
        self.tx.execute("DELETE FROM chunks WHERE path = ?1", [&file.path]).map_err(Self::error)?;
        self.tx
            .execute(
                "INSERT OR REPLACE INTO files (path, mtime_ns, size, hash, doc, lines, imports) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![file.path, file.mtime_ns, file.size, file.hash, file.doc, file.lines, file.imports.join("\n")],
            )
            .map_err(Self::error)?;
        let mut statement = self
            .tx
            .prepare_cached(
                "INSERT INTO chunks (path, name, kind, start_line, end_line, signature, doc, text, model, vector)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .map_err(Self::error)?;
        let mut ids = Vec::with_capacity(chunks.len());
        for (chunk, vector) in chunks {
            let (model, blob) = match vector {
                Some((model, vector)) => (Some(*model), Some(vector.iter().flat_map(|value| value.to_le_bytes()).collect::<Vec<u8>>())),
                None => (None, None),
            };
            statement
                .execute(params![
                    file.path,
                    chunk.name,
                    chunk.kind,
                    chunk.start_line as i64,
                    chunk.end_line as i64,
                    chunk.signature,
                    chunk.doc,
                    chunk.text,
                    model,
                    blob
                ])
                .map_err(Self::error)?;
            ids.push(self.tx.last_insert_rowid());
        }
        Ok(ids)
    }

    pub(crate) fn set_vector(&self, id: i64, model: &str, vector: &[f32]) -> Result<()> {
        let blob: Vec<u8> = vector.iter().flat_map(|value| value.to_le_bytes()).collect();
        self.tx.execute("UPDATE chunks SET model = ?2, vector = ?3 WHERE id = ?1", params![id, model, blob]).map_err(Self::error)?;
        Ok(())
    }

    pub(crate) fn commit(self) -> Result<()> {
        self.tx.commit().map_err(Self::error)
    }
}
