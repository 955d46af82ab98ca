//! A notes commit's objects written straight into the repository's object folder as loose
//! objects, and the bytes of its trees and commit made here rather than by libgit2.
//!
//! libgit2's object database looks for a copy of every object before it writes it: a loose
//! file, then each pack, and when neither has it (a notes commit's objects are always new) it
//! lists the pack folder again, opens its multi-pack index and looks once more. A capture writes
//! four objects (its note, the fan-out tree holding it, the root tree and the commit), so it paid
//! for four listings of the pack folder, and then for reading the two trees back from disk for
//! the journal, which needs every object's bytes. [`Objects::write`] checks only that the loose
//! file is not there already, writes a temporary file in its fan-out folder and renames it into
//! place, so a reader sees the whole object or none; a copy also held in a pack is
//! harmless, as in git. [`tree_bytes`] and [`commit_bytes`] give the bytes git itself would
//! write, so the journal has them at hand.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::ZlibEncoder;
use git2::{ObjectType, Oid, Signature};

use crate::error::{Error, Result};

/// The mode of a tree entry that is a folder, as git writes it.
pub(crate) const FOLDER_MODE: i32 = 0o040000;
/// The mode of a tree entry that is a plain file (a note).
pub(crate) const FILE_MODE: i32 = 0o100644;

/// The loose objects of one repository.
pub(crate) struct Objects {
    folder: PathBuf,
    /// Whether each object and its folder are flushed to disk as written (where a write's
    /// durability does not come from the notes journal).
    sync: bool,
}

impl Objects {
    pub fn new(folder: PathBuf, sync: bool) -> Objects {
        Objects { folder, sync }
    }

    /// Writes `bytes` as an object of `kind` unless its loose file exists; returns its id.
    pub fn write(&self, kind: ObjectType, bytes: &[u8]) -> Result<Oid> {
        let id = Oid::hash_object(kind, bytes)?;
        let hex = id.to_string();
        let fan_out = self.folder.join(&hex[..2]);
        let path = fan_out.join(&hex[2..]);
        if path.exists() {
            return Ok(id);
        }
        let failed = |doing: &str, error: std::io::Error| Error::Object { id: hex.clone(), path: path.clone(), reason: format!("{doing}: {error}") };
        let mut encoder = ZlibEncoder::new(Vec::with_capacity(bytes.len() / 2 + 64), Compression::fast());
        let header = format!("{} {}\0", kind.str(), bytes.len());
        encoder.write_all(header.as_bytes()).and_then(|()| encoder.write_all(bytes)).map_err(|error| failed("compressing", error))?;
        let compressed = encoder.finish().map_err(|error| failed("compressing", error))?;
        // In the fan-out folder and named as git names its own, so that `git gc` removes one a
        // killed process left behind.
        let temporary = fan_out.join(format!("tmp_obj_kenning_{:016x}", fastrand::u64(..)));
        let written = match write_new(&temporary, &compressed, self.sync) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&fan_out).and_then(|()| write_new(&temporary, &compressed, self.sync))
            }
            other => other,
        }
        .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(failed("writing", error));
        }
        if self.sync {
            sync_folder(&fan_out).map_err(|error| failed("flushing the folder of", error))?;
        }
        Ok(id)
    }
}

/// Creates `path` read-only, as git leaves its objects, with `bytes` in it.
fn write_new(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o444);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    if sync {
        file.sync_all()?;
    }
    Ok(())
}

fn sync_folder(folder: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(folder)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = folder;
    Ok(())
}

/// One entry of a tree: its name, mode and object.
#[derive(Debug, Clone)]
pub(crate) struct TreeItem {
    pub name: Vec<u8>,
    pub mode: i32,
    pub id: Oid,
}

impl TreeItem {
    /// The entries of `tree`.
    pub fn all_of(tree: &git2::Tree<'_>) -> Vec<TreeItem> {
        tree.iter().map(|entry| TreeItem { name: entry.name_bytes().to_vec(), mode: entry.filemode(), id: entry.id() }).collect()
    }

    /// Puts `item` in `items` in place of the entry of the same name, or beside the others.
    pub fn upsert(items: &mut Vec<TreeItem>, item: TreeItem) {
        match items.iter_mut().find(|existing| existing.name == item.name) {
            Some(existing) => *existing = item,
            None => items.push(item),
        }
    }
}

/// A tree's bytes as git writes them: its entries in git's order (by name, a folder's name
/// compared as if it ended in `/`), each its octal mode, a space, its name, a zero byte and its
/// object's 20 bytes.
pub(crate) fn tree_bytes(items: &mut [TreeItem]) -> Vec<u8> {
    items.sort_by(git_order);
    let mut bytes = Vec::with_capacity(items.len() * 64);
    for item in items.iter() {
        bytes.extend_from_slice(format!("{:o} ", item.mode).as_bytes());
        bytes.extend_from_slice(&item.name);
        bytes.push(0);
        bytes.extend_from_slice(item.id.as_bytes());
    }
    bytes
}

fn git_order(a: &TreeItem, b: &TreeItem) -> std::cmp::Ordering {
    let end = |item: &TreeItem| (item.mode == FOLDER_MODE).then_some(b'/');
    a.name.iter().copied().chain(end(a)).cmp(b.name.iter().copied().chain(end(b)))
}

/// A commit's bytes as git writes them: its tree, its parents, `signature` as author and
/// committer, a blank line and `message`.
pub(crate) fn commit_bytes(tree: Oid, parents: &[Oid], signature: &Signature<'_>, message: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(256 + message.len());
    bytes.extend_from_slice(format!("tree {tree}\n").as_bytes());
    for parent in parents {
        bytes.extend_from_slice(format!("parent {parent}\n").as_bytes());
    }
    let when = signature.when();
    let offset = when.offset_minutes();
    let sign = if offset < 0 || when.sign() == '-' { '-' } else { '+' };
    let person = |role: &str, bytes: &mut Vec<u8>| {
        bytes.extend_from_slice(role.as_bytes());
        bytes.extend_from_slice(signature.name_bytes());
        bytes.extend_from_slice(b" <");
        bytes.extend_from_slice(signature.email_bytes());
        bytes.extend_from_slice(format!("> {} {sign}{:02}{:02}\n", when.seconds(), offset.abs() / 60, offset.abs() % 60).as_bytes());
    };
    person("author ", &mut bytes);
    person("committer ", &mut bytes);
    bytes.push(b'\n');
    bytes.extend_from_slice(message.as_bytes());
    bytes
}
