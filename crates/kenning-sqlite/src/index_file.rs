//! The search index persisted beside the database (`project.db.index` next to `project.db`),
//! so that a new process opens it in place instead of rebuilding it from every row.
//!
//! The file is a cache. Its stamp names the store it belongs to (an identity the database
//! holds from its creation) and the change number it reflects; a process opening it checks the
//! stamp, the image's checksums and its structure, then loads only the rows whose change
//! number moved since. A file that is missing, unreadable, written by another format, for
//! another store, ahead of the database, or damaged in any way is ignored and the index is
//! built from the database as if there were none. The database stays the source of truth.
//!
//! Writing: to a temporary file in the same directory, renamed over the old one, so a reader
//! sees the old file or the new one, never a part of either. The data is not flushed to the
//! disk before the rename: a file torn by a power failure fails its checksum and is rebuilt,
//! which is cheaper than making every write wait for the disk.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kenning_index::{BodyCheck, Graphs, ImageBytes, SearchIndex};
use memmap2::Mmap;
use rusqlite::Connection;

use crate::error::{Error, Result};

/// Where the index of the database at `db` is kept.
pub(crate) fn index_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".index");
    PathBuf::from(name)
}

/// The store's identity, made once when its schema was created.
pub(crate) fn store_identity(conn: &Connection) -> Result<String> {
    Ok(conn.prepare_cached("SELECT id FROM store_identity")?.query_row([], |row| row.get(0))?)
}

/// What an index image reflects: the store it was built from, and the highest change number
/// it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub identity: String,
    pub change: i64,
}

const STAMP_PREFIX: &str = "kenning-sqlite";

impl Stamp {
    fn encode(&self) -> Vec<u8> {
        format!("{STAMP_PREFIX} {} {}", self.identity, self.change).into_bytes()
    }

    fn decode(bytes: &[u8]) -> Option<Stamp> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut fields = text.split(' ');
        if fields.next()? != STAMP_PREFIX {
            return None;
        }
        let identity = fields.next()?.to_owned();
        let change = fields.next()?.parse().ok()?;
        fields.next().is_none().then_some(Stamp { identity, change })
    }
}

/// Why a persisted index was not used.
pub(crate) enum Refused {
    Missing,
    Unusable(String),
}

/// Opens the index file of the database at `db` if it belongs to the store `identity` and
/// reflects no change past `head`, and checks its header and its structure. Returns the index
/// and the change number it reflects. The body's checksum is not computed: it would read every
/// page of a file that every hook process opens, and the file is only ever written whole, under
/// a temporary name renamed over it once written, by a writer that computed the checksum as it
/// wrote; the structural checks keep a file damaged since from making a search go out of bounds.
pub(crate) fn open(db: &Path, identity: &str, head: i64) -> std::result::Result<(SearchIndex, i64), Refused> {
    let path = index_path(db);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Err(Refused::Missing),
        Err(error) => return Err(Refused::Unusable(format!("opening {}: {error}", path.display()))),
    };
    // SAFETY: the map is read-only, and index files are only ever replaced by renaming a new
    // file over them, which leaves this mapping on the old file; nothing here writes to one in
    // place. A file truncated under the map by another program is the one case this cannot
    // guard against, as with any memory-mapped file.
    let map = unsafe { Mmap::map(&file) }.map_err(|error| Refused::Unusable(format!("mapping {}: {error}", path.display())))?;
    let stamp = SearchIndex::image_stamp(&map).map_err(|error| Refused::Unusable(error.to_string()))?;
    let stamp = Stamp::decode(stamp).ok_or_else(|| Refused::Unusable("unreadable stamp".to_owned()))?;
    if stamp.identity != identity {
        return Err(Refused::Unusable(format!("written for another store ({})", stamp.identity)));
    }
    if stamp.change > head {
        return Err(Refused::Unusable(format!("reflects change {} but the store is at {head}", stamp.change)));
    }
    let bytes: ImageBytes = Arc::new(map);
    let (index, _) = SearchIndex::read_image(bytes, BodyCheck::Structure).map_err(|error| Refused::Unusable(error.to_string()))?;
    Ok((index, stamp.change))
}

/// Writes `index`, which reflects the store `identity` up to change `change`, as the index file
/// of the database at `db`, with the vector graphs of `graphs` that still fit it.
pub(crate) fn write(db: &Path, index: &SearchIndex, identity: &str, change: i64, graphs: &Graphs) -> Result<()> {
    let path = index_path(db);
    // Named for this process and this write, so that two writes never share a temporary file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let mut temporary = path.clone().into_os_string();
    temporary.push(format!(".tmp.{}.{}", std::process::id(), WRITES.fetch_add(1, Ordering::Relaxed)));
    let temporary = PathBuf::from(temporary);
    let written = (|| {
        let file = crate::db::private_file()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temporary)
            .map_err(|source| Error::IndexFile { path: temporary.clone(), source })?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let stamp = Stamp { identity: identity.to_owned(), change };
        index.write_image_with(&stamp.encode(), &mut out, graphs).map_err(|error| Error::IndexImage(error.to_string()))?;
        out.into_inner().map_err(|error| Error::IndexFile { path: temporary.clone(), source: error.into_error() })?;
        std::fs::rename(&temporary, &path).map_err(|source| Error::IndexFile { path: path.clone(), source })
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// Removes the index file, if there is one.
pub(crate) fn remove(db: &Path) {
    let path = index_path(db);
    if let Err(error) = std::fs::remove_file(&path)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), %error, "could not remove the search index file");
    }
}
