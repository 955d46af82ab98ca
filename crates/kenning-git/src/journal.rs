//! How a write to the notes becomes durable with one disk flush: the notes journal.
//!
//! A notes commit is four or more loose objects (a blob per note, the fan-out tree, the root
//! tree, the commit) and a ref. Flushing each of them and the directory holding it, as libgit2
//! does when asked, took 12 flushes per capture. With [`Flush::Journal`], libgit2 flushes
//! nothing; instead, while holding the journal's lock, the writer moves the ref and appends to
//! `.git/kenning/notes-journal` one record holding every object the commit added and the ref's
//! move (`base` to `commit`), then flushes that one file. A write is acknowledged only after
//! that flush.
//!
//! After a power loss, the objects and the ref may be gone or torn while the journal holds
//! them: opening the store ([`Journal::recover`]) writes back every journaled object that is
//! missing or unreadable, and moves the ref along the chain of journaled moves that starts at
//! the ref's current commit. Holding the lock from the ref's move to the flush keeps that chain
//! whole: no other writer can move the ref on top of a move that is not journaled yet.
//!
//! The journal is emptied at a checkpoint ([`Journal::checkpoint`]): once it passes
//! [`CHECKPOINT_BYTES`], and after a sync's merge, everything written so far is flushed with
//! one `syncfs` of the repository's file system, and the journal is cut to nothing. A crash
//! during a checkpoint leaves the journal whole, and replaying it is harmless.
//!
//! Replaying reads every record and every object it names, which would cost each process that
//! opens the store (a hook) tens of milliseconds on a full journal. It is needed only when the
//! machine went down since the records were written: a process that crashed leaves its writes in
//! the page cache, where the next process reads them. So each record carries the kernel's boot
//! id, and a journal whose first record was written in this boot is not replayed. After a
//! reboot the first process to open the store replays the journal and checkpoints it.
//!
//! Record layout: the magic `KNJ1`, the payload's length (u32, little-endian), the boot id it
//! was written in (36 bytes; outside the checksum, so that it can be read alone), the payload,
//! the SHA-1 of the payload hashed as a git blob, and the record's whole length (u32), by which
//! a writer checks from the end that the journal ends in a whole record before it appends: a
//! writer killed in the middle of its record (or stopped by a full disk) leaves part of one,
//! which the next writer cuts off rather than append after it, where replay would never reach. Payload: the base commit (20 bytes, zeros for
//! none), the new commit (20 bytes), the object count (u32), then per object its type (1
//! commit, 2 tree, 3 blob), its length (u32) and its bytes. A record cut short or failing its
//! checksum ends the journal: it was never acknowledged.

#[cfg(target_os = "linux")]
use std::collections::HashMap;
#[cfg(target_os = "linux")]
use std::fs::{File, OpenOptions};
#[cfg(target_os = "linux")]
use std::io::{Read, Seek, SeekFrom, Write};
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
#[cfg(target_os = "linux")]
use std::os::unix::fs::FileExt;
#[cfg(target_os = "linux")]
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use git2::ObjectType;
use git2::{Oid, Repository};

#[cfg(target_os = "linux")]
use crate::error::Error;
use crate::error::Result;
use crate::notes::Added;
#[cfg(target_os = "linux")]
use crate::notes::{self, NOTES_REF};

/// The journal's size past which a write checkpoints it.
#[cfg(target_os = "linux")]
const CHECKPOINT_BYTES: u64 = 4 << 20;
#[cfg(target_os = "linux")]
const MAGIC: &[u8; 4] = b"KNJ1";
#[cfg(target_os = "linux")]
const OID_BYTES: usize = 20;
#[cfg(target_os = "linux")]
const BOOT_BYTES: usize = 36;
/// A record's bytes besides its payload: magic, length, boot id, checksum, whole length.
#[cfg(target_os = "linux")]
const FRAME_BYTES: u64 = 4 + 4 + BOOT_BYTES as u64 + OID_BYTES as u64 + 4;
/// Where Linux says which boot this is: a random UUID made at each boot.
#[cfg(target_os = "linux")]
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// How a notes store makes its writes survive a power loss.
pub(crate) enum Flush {
    /// Nothing is flushed: writes survive the process, not the machine.
    Never,
    /// libgit2 flushes every object and ref it writes (platforms without `syncfs`).
    #[cfg(not(target_os = "linux"))]
    EveryFile,
    /// One flush of the journal per write.
    #[cfg(target_os = "linux")]
    Journal(Journal),
}

impl Flush {
    /// Moves the ref with `advance` (compare-and-swap: `false` when another writer moved it
    /// first) and, when it moved, makes the move and `objects`, those `commit` added, durable
    /// before returning.
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    pub fn advance(&self, base: Option<Oid>, commit: Oid, objects: &[Added], advance: impl FnOnce() -> Result<bool>) -> Result<bool> {
        match self {
            #[cfg(target_os = "linux")]
            Flush::Journal(journal) => journal.advance(advance, |file| {
                if journal.append(file, base, commit, objects)? > CHECKPOINT_BYTES {
                    journal.checkpoint_locked(file)?;
                }
                Ok(())
            }),
            _ => advance(),
        }
    }

    /// Whether every object and ref is flushed to disk as it is written, rather than through
    /// the journal or not at all.
    pub fn flushes_each_file(&self) -> bool {
        match self {
            #[cfg(not(target_os = "linux"))]
            Flush::EveryFile => true,
            _ => false,
        }
    }

    /// Moves the ref with `advance`, and when it moved flushes everything written so far: for
    /// a move whose objects the writer does not list (a merge over fetched objects).
    pub fn advance_flushed(&self, advance: impl FnOnce() -> Result<bool>) -> Result<bool> {
        match self {
            #[cfg(target_os = "linux")]
            Flush::Journal(journal) => journal.advance(advance, |file| journal.checkpoint_locked(file)),
            _ => advance(),
        }
    }

    /// Flushes everything written so far and empties the journal, so that it no longer holds a
    /// copy of notes a purge replaced.
    pub fn checkpoint(&self) -> Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Flush::Journal(journal) => journal.checkpoint_locked(&mut journal.lock()?),
            _ => Ok(()),
        }
    }
}

/// Replays the repository's journal if it needs it (see [`Journal::recover`]), whatever the
/// durability of the store opening it: a store that does not journal its own writes must still
/// not write on top of a ref that lost journaled moves. Nothing to do where there is no journal.
pub(crate) fn recover(repo: &Repository) -> Result<usize> {
    #[cfg(target_os = "linux")]
    return Journal::new(repo).recover(repo);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = repo;
        Ok(0)
    }
}

/// The journal file of one repository.
#[cfg(target_os = "linux")]
pub(crate) struct Journal {
    path: PathBuf,
}

#[cfg(target_os = "linux")]
/// One journaled move of the ref with the objects it needs.
struct Record {
    base: Option<Oid>,
    commit: Oid,
    objects: Vec<(ObjectType, Vec<u8>)>,
}

#[cfg(target_os = "linux")]
/// The journal held under its exclusive lock; the lock goes with the file.
struct Locked(File);

#[cfg(target_os = "linux")]
impl Journal {
    pub fn new(repo: &Repository) -> Journal {
        Journal { path: repo.commondir().join("kenning").join("notes-journal") }
    }

    /// Opens the journal and takes its exclusive lock, which every process writing the notes
    /// of this repository takes before moving the ref.
    fn lock(&self) -> Result<Locked> {
        if let Some(folder) = self.path.parent() {
            std::fs::create_dir_all(folder).map_err(|error| self.io("creating the folder of", &error))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(|error| self.io("opening", &error))?;
        file.lock().map_err(|error| self.io("locking", &error))?;
        Ok(Locked(file))
    }

    /// Moves the ref with `advance` while holding the lock and, when it moved, makes the move
    /// durable with `durable` before letting go.
    fn advance(&self, advance: impl FnOnce() -> Result<bool>, durable: impl FnOnce(&mut Locked) -> Result<()>) -> Result<bool> {
        let mut file = self.lock()?;
        if !advance()? {
            return Ok(false);
        }
        durable(&mut file)?;
        Ok(true)
    }

    /// Appends and flushes the record of a move; returns the journal's length after it.
    fn append(&self, file: &mut Locked, base: Option<Oid>, commit: Oid, objects: &[Added]) -> Result<u64> {
        let mut payload = Vec::with_capacity(4096);
        payload.extend_from_slice(base.unwrap_or_else(Oid::zero).as_bytes());
        payload.extend_from_slice(commit.as_bytes());
        payload.extend_from_slice(&u32::try_from(objects.len()).unwrap_or(u32::MAX).to_le_bytes());
        for added in objects {
            payload.push(match added.kind {
                ObjectType::Commit => 1u8,
                ObjectType::Tree => 2,
                _ => 3,
            });
            payload.extend_from_slice(&u32::try_from(added.bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
            payload.extend_from_slice(&added.bytes);
        }
        let checksum = Oid::hash_object(ObjectType::Blob, &payload)?;
        let mut record = Vec::with_capacity(payload.len() + FRAME_BYTES as usize);
        record.extend_from_slice(MAGIC);
        record.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(u32::MAX).to_le_bytes());
        record.extend_from_slice(&boot_id().unwrap_or([0; BOOT_BYTES]));
        record.extend_from_slice(&payload);
        record.extend_from_slice(checksum.as_bytes());
        let total = u32::try_from(record.len() + 4).unwrap_or(u32::MAX);
        record.extend_from_slice(&total.to_le_bytes());
        let end = self.whole_end(file)?;
        if let Err(error) = file.0.write_all(&record) {
            let _ = file.0.set_len(end);
            return Err(self.io("writing", &error));
        }
        file.0.sync_data().map_err(|error| self.io("flushing", &error))?;
        Ok(end + record.len() as u64)
    }

    /// Where the journal's last whole record ends, cutting off whatever follows it.
    fn whole_end(&self, file: &mut Locked) -> Result<u64> {
        let end = file.0.metadata().map_err(|error| self.io("reading the size of", &error))?.len();
        if end == 0 || self.ends_in_a_whole_record(&file.0, end) {
            return Ok(end);
        }
        let mut bytes = Vec::new();
        file.0.seek(SeekFrom::Start(0)).map_err(|error| self.io("reading", &error))?;
        file.0.read_to_end(&mut bytes).map_err(|error| self.io("reading", &error))?;
        let whole = parse(&bytes).1 as u64;
        tracing::warn!(journal = %self.path.display(), dropped = end - whole, "the notes journal ends in part of a record a writer did not finish; cutting it off");
        file.0.set_len(whole).map_err(|error| self.io("cutting", &error))?;
        Ok(whole)
    }

    /// Whether the `end` of the journal is the end of a record: its last four bytes give a
    /// length at whose distance back a record starts with the magic and a payload length that
    /// adds up to it.
    fn ends_in_a_whole_record(&self, file: &File, end: u64) -> bool {
        let mut tail = [0u8; 4];
        if end < 4 || file.read_exact_at(&mut tail, end - 4).is_err() {
            return false;
        }
        let total = u64::from(u32::from_le_bytes(tail));
        let mut head = [0u8; 8];
        if total > end || total < FRAME_BYTES || file.read_exact_at(&mut head, end - total).is_err() {
            return false;
        }
        &head[..4] == MAGIC && u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]])) + FRAME_BYTES == total
    }

    /// Flushes everything written to the repository's file system, then empties the journal.
    fn checkpoint_locked(&self, file: &mut Locked) -> Result<()> {
        // SAFETY: syncfs takes an open file descriptor, which `file` holds for the call.
        if unsafe { libc::syncfs(file.0.as_raw_fd()) } != 0 {
            return Err(self.io("flushing the file system of", &std::io::Error::last_os_error()));
        }
        file.0.set_len(0).map_err(|error| self.io("emptying", &error))?;
        file.0.sync_data().map_err(|error| self.io("flushing", &error))
    }

    /// Brings the repository back to every acknowledged write after a power loss (see the
    /// module's documentation), unless the journal was written in this boot, then checkpoints.
    /// Returns how many objects and ref moves were restored.
    pub fn recover(&self, repo: &Repository) -> Result<usize> {
        if !self.path.exists() || self.written_in_this_boot() {
            return Ok(0);
        }
        let mut file = self.lock()?;
        let mut bytes = Vec::new();
        file.0.seek(SeekFrom::Start(0)).map_err(|error| self.io("reading", &error))?;
        file.0.read_to_end(&mut bytes).map_err(|error| self.io("reading", &error))?;
        let (records, whole) = parse(&bytes);
        if whole < bytes.len() {
            tracing::warn!(journal = %self.path.display(), dropped = bytes.len() - whole, "the notes journal ends in a record cut short; it was never acknowledged and is dropped");
            file.0.set_len(whole as u64).map_err(|error| self.io("cutting", &error))?;
        }
        let mut restored = 0;
        let odb = repo.odb()?;
        for record in &records {
            for (kind, data) in &record.objects {
                let oid = Oid::hash_object(*kind, data)?;
                if odb.read(oid).is_ok() {
                    continue;
                }
                // A torn loose object exists but cannot be read; libgit2 would not overwrite it.
                let _ = std::fs::remove_file(loose_path(repo, oid));
                let written = odb.write(*kind, data)?;
                if written != oid {
                    return Err(Error::Journal { path: self.path.clone(), reason: format!("object {oid} was written back as {written}") });
                }
                restored += 1;
            }
        }
        let next: HashMap<Option<Oid>, Oid> = records.iter().map(|record| (record.base, record.commit)).collect();
        let current = notes::resolve(repo, NOTES_REF).ok().flatten().filter(|oid| repo.find_commit(*oid).is_ok());
        let mut tip = current;
        let mut steps = 0;
        while let Some(&commit) = next.get(&tip) {
            tip = Some(commit);
            steps += 1;
            if steps > records.len() {
                break;
            }
        }
        if tip == current && current.is_none() {
            // The ref is unreadable and no journaled move starts from nothing: the newest
            // journaled commit, the one no other move starts from, is where the ref was.
            tip = records.iter().rev().map(|record| record.commit).find(|commit| !next.contains_key(&Some(*commit)));
        }
        if let Some(tip) = tip.filter(|tip| Some(*tip) != current) {
            tracing::warn!(notes = %tip, "restored the notes ref from the journal after a power loss");
            repo.reference(NOTES_REF, tip, true, "kenning: restore the notes from the journal")?;
            restored += 1;
        }
        // Replayed once after a reboot: the next process to open the store starts afresh.
        if !records.is_empty() {
            self.checkpoint_locked(&mut file)?;
        }
        Ok(restored)
    }

    /// Whether the journal is empty or its first record was written in this boot. Read without
    /// the lock: a checkpoint emptying the journal meanwhile makes this say no, which costs a
    /// replay of nothing.
    fn written_in_this_boot(&self) -> bool {
        let Ok(file) = File::open(&self.path) else { return false };
        let mut head = [0u8; 8 + BOOT_BYTES];
        match file.read_exact_at(&mut head, 0) {
            Ok(()) => &head[..4] == MAGIC && boot_id().is_some_and(|boot| head[8..] == boot),
            Err(_) => file.metadata().is_ok_and(|meta| meta.len() == 0),
        }
    }

    fn io(&self, doing: &str, error: &std::io::Error) -> Error {
        Error::Journal { path: self.path.clone(), reason: format!("{doing} the notes journal: {error}") }
    }
}

#[cfg(target_os = "linux")]
/// The records of a journal's bytes, and how many bytes they take: the rest is a record cut
/// short or torn.
fn parse(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut at = 0;
    while let Some((record, next)) = parse_record(bytes, at) {
        records.push(record);
        at = next;
    }
    (records, at)
}

#[cfg(target_os = "linux")]
fn parse_record(bytes: &[u8], at: usize) -> Option<(Record, usize)> {
    let mut reader = Reader { bytes, at };
    if reader.take(4)? != MAGIC {
        return None;
    }
    let length = reader.u32()? as usize;
    reader.take(BOOT_BYTES)?;
    let payload = reader.take(length)?;
    let checksum = reader.take(OID_BYTES)?;
    if Oid::hash_object(ObjectType::Blob, payload).ok()?.as_bytes() != checksum {
        return None;
    }
    if u64::from(reader.u32()?) != length as u64 + FRAME_BYTES {
        return None;
    }
    let end = reader.at;
    let mut reader = Reader { bytes: payload, at: 0 };
    let base = Oid::from_bytes(reader.take(OID_BYTES)?).ok().filter(|oid| !oid.is_zero());
    let commit = Oid::from_bytes(reader.take(OID_BYTES)?).ok()?;
    let count = reader.u32()?;
    let mut objects = Vec::new();
    for _ in 0..count {
        let kind = match reader.take(1)?[0] {
            1 => ObjectType::Commit,
            2 => ObjectType::Tree,
            3 => ObjectType::Blob,
            _ => return None,
        };
        let length = reader.u32()? as usize;
        objects.push((kind, reader.take(length)?.to_vec()));
    }
    Some((Record { base, commit, objects }, end))
}

#[cfg(target_os = "linux")]
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

#[cfg(target_os = "linux")]
impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let taken = self.bytes.get(self.at..self.at.checked_add(count)?)?;
        self.at += count;
        Some(taken)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

#[cfg(target_os = "linux")]
/// This boot's id, `None` where the kernel does not say (then every open replays the journal).
#[cfg(target_os = "linux")]
fn boot_id() -> Option<[u8; BOOT_BYTES]> {
    // Read once per process: a process does not outlive its boot.
    static BOOT: std::sync::OnceLock<Option<[u8; BOOT_BYTES]>> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| std::fs::read(BOOT_ID).ok()?.get(..BOOT_BYTES)?.try_into().ok())
}

/// Where git keeps `oid` as a loose object.
fn loose_path(repo: &Repository, oid: Oid) -> PathBuf {
    let hex = oid.to_string();
    Path::new(repo.commondir()).join("objects").join(&hex[..2]).join(&hex[2..])
}
