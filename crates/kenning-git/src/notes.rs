//! The notes ref as git objects: reading a note, writing a notes commit, moving the ref by
//! compare-and-swap, and the difference between two notes trees.
//!
//! Layout: one ref, [`NOTES_REF`]; its commits' trees hold one blob per memory at
//! `xx/yyyy…` (the note key's first two hex digits, then the other 38), the fan-out git itself
//! uses for large notes trees. Reading accepts any fan-out depth, as git does, so a tree that
//! `git notes` rewrote is read the same.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use git2::{ErrorCode, ObjectType, Oid, Repository, Signature, Tree};

use crate::error::Result;
use crate::objects::{FILE_MODE, FOLDER_MODE, Objects, TreeItem, commit_bytes, tree_bytes};

/// The ref holding every project memory's note.
pub const NOTES_REF: &str = "refs/notes/kenning";

/// How old a lock file on the notes ref must be before it is taken for one left by a killed
/// process. Holding the lock takes microseconds, so a lock this old has no owner.
const STALE_LOCK: Duration = Duration::from_secs(30);

/// The commit `name` points at, if the ref exists.
pub fn resolve(repo: &Repository, name: &str) -> Result<Option<Oid>> {
    match repo.refname_to_id(name) {
        Ok(oid) => Ok(Some(oid)),
        Err(error) if error.code() == ErrorCode::NotFound => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The tree of a notes commit.
pub fn tree_of(repo: &Repository, commit: Oid) -> Result<Tree<'_>> {
    Ok(repo.find_commit(commit)?.tree()?)
}

/// The path of a note in a tree with two-digit fan-out.
pub fn note_path(key: Oid) -> String {
    let hex = key.to_string();
    format!("{}/{}", &hex[..2], &hex[2..])
}

/// The bytes of the note on `key` in `tree`, at any fan-out depth.
pub fn read_note(repo: &Repository, tree: &Tree<'_>, key: Oid) -> Result<Option<Vec<u8>>> {
    match read_note_id(repo, tree, key)? {
        Some(blob) => Ok(Some(repo.find_blob(blob)?.content().to_vec())),
        None => Ok(None),
    }
}

/// The blob of the note on `key` in `tree`, at any fan-out depth.
pub fn read_note_id(repo: &Repository, tree: &Tree<'_>, key: Oid) -> Result<Option<Oid>> {
    let hex = key.to_string();
    let mut current = tree.clone();
    let mut rest = hex.as_str();
    while rest.len() > 2 {
        let (found, subtree) = match (current.get_name(rest), current.get_name(&rest[..2])) {
            (Some(entry), _) => ((entry.kind() == Some(ObjectType::Blob)).then(|| entry.id()), None),
            (None, Some(entry)) if entry.kind() == Some(ObjectType::Tree) => (None, Some(entry.id())),
            (None, _) => (None, None),
        };
        let Some(subtree) = subtree else { return Ok(found) };
        current = repo.find_tree(subtree)?;
        rest = &rest[2..];
    }
    Ok(None)
}

/// A notes commit just written, and every object it added or may have added: its blobs, the
/// fan-out trees holding them, its root tree and itself.
pub struct Written {
    pub commit: Oid,
    pub objects: Vec<Added>,
}

/// An object a notes commit added, with its type and bytes, so that the journal need not read
/// them back.
pub struct Added {
    pub kind: ObjectType,
    pub bytes: Vec<u8>,
}

/// Who signs notes commits and the reflog entries of the ref's moves: the repository's
/// configured identity or, when it has none, kenning. A store reads it once when it opens,
/// because libgit2 took a fresh snapshot of the git configuration for each commit and each
/// move, a twentieth of a notes write; a changed `user.name` signs the commits of the next
/// process. A note's author is in the note itself, never taken from here.
#[derive(Debug, Clone)]
pub struct Identity {
    name: String,
    email: String,
}

impl Identity {
    pub fn of(repo: &Repository) -> Identity {
        match repo.signature() {
            Ok(signature) => Identity {
                name: String::from_utf8_lossy(signature.name_bytes()).into_owned(),
                email: String::from_utf8_lossy(signature.email_bytes()).into_owned(),
            },
            Err(_) => Identity { name: "kenning".to_owned(), email: "kenning@localhost".to_owned() },
        }
    }

    pub fn now(&self) -> Result<Signature<'static>> {
        Ok(Signature::now(&self.name, &self.email)?)
    }
}

/// Writes the blobs of `notes` and a commit whose tree is `base`'s tree with them in place,
/// with `base` as its parent, through `objects`. Returns the new commit; the ref is not moved.
///
/// Each note goes in its fan-out folder (the `xx/` of [`note_path`]), in place of the entry of
/// the same name or beside the folder's other entries, whatever their depth: a folder that
/// `git notes` split further keeps its subfolders, and the note found first is this one.
pub fn commit(repo: &Repository, objects: &Objects, signature: &Signature<'_>, base: Option<Oid>, notes: &[(Oid, Vec<u8>)], message: &str) -> Result<Written> {
    let baseline = base.map(|base| tree_of(repo, base)).transpose()?;
    let mut added = Vec::with_capacity(notes.len() * 2 + 2);
    let mut folders: BTreeMap<String, Vec<TreeItem>> = BTreeMap::new();
    for (key, bytes) in notes {
        let blob = objects.write(ObjectType::Blob, bytes)?;
        added.push(Added { kind: ObjectType::Blob, bytes: bytes.clone() });
        let hex = key.to_string();
        let (folder, name) = hex.split_at(2);
        let items = match folders.entry(folder.to_owned()) {
            std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::btree_map::Entry::Vacant(entry) => entry.insert(folder_items(repo, baseline.as_ref(), folder)?),
        };
        TreeItem::upsert(items, TreeItem { name: name.as_bytes().to_vec(), mode: FILE_MODE, id: blob });
    }
    let mut root = baseline.as_ref().map(TreeItem::all_of).unwrap_or_default();
    for (folder, mut items) in folders {
        let bytes = tree_bytes(&mut items);
        let id = objects.write(ObjectType::Tree, &bytes)?;
        added.push(Added { kind: ObjectType::Tree, bytes });
        TreeItem::upsert(&mut root, TreeItem { name: folder.into_bytes(), mode: FOLDER_MODE, id });
    }
    let bytes = tree_bytes(&mut root);
    let tree = objects.write(ObjectType::Tree, &bytes)?;
    added.push(Added { kind: ObjectType::Tree, bytes });
    let parents = base.into_iter().collect::<Vec<_>>();
    let bytes = commit_bytes(tree, &parents, signature, message);
    let commit = objects.write(ObjectType::Commit, &bytes)?;
    added.push(Added { kind: ObjectType::Commit, bytes });
    Ok(Written { commit, objects: added })
}

/// The entries of the fan-out folder `folder` of `baseline`: none when there is no such folder.
fn folder_items(repo: &Repository, baseline: Option<&Tree<'_>>, folder: &str) -> Result<Vec<TreeItem>> {
    match baseline.and_then(|tree| tree.get_name(folder)) {
        None => Ok(Vec::new()),
        Some(entry) if entry.kind() == Some(ObjectType::Tree) => Ok(TreeItem::all_of(&repo.find_tree(entry.id())?)),
        Some(_) => Err(git2::Error::from_str(&format!("the notes tree holds `{folder}`, where a note's folder belongs, as something other than a folder")).into()),
    }
}

/// A commit of `tree` with `parents`, signed by `signature`.
pub fn commit_tree(repo: &Repository, signature: &Signature<'_>, tree: &Tree<'_>, parents: &[Oid], message: &str) -> Result<Oid> {
    Ok(repo.odb()?.write(ObjectType::Commit, &commit_bytes(tree.id(), parents, signature, message))?)
}

/// Moves `name` from `expected` to `new`, signing the reflog entry with `signature`; `false`
/// if another writer moved it first (or holds its lock), in which case nothing changed.
pub fn advance(repo: &Repository, signature: &Signature<'_>, name: &str, expected: Option<Oid>, new: Oid, message: &str) -> Result<bool> {
    let mut transaction = repo.transaction()?;
    match transaction.lock_ref(name) {
        Ok(()) => {}
        Err(error) if error.code() == ErrorCode::Locked => {
            clear_stale_lock(repo, name);
            return Ok(false);
        }
        Err(error) => return Err(error.into()),
    }
    // Read under the lock, so no other writer can move the ref between this and the move.
    if resolve(repo, name)? != expected {
        return Ok(false);
    }
    transaction.set_target(name, new, Some(signature), message)?;
    transaction.commit()?;
    Ok(true)
}

/// Removes the ref's lock file if a killed process left it behind.
fn clear_stale_lock(repo: &Repository, name: &str) {
    let lock = repo.commondir().join(format!("{name}.lock"));
    let stale = std::fs::metadata(&lock)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age > STALE_LOCK);
    if stale {
        tracing::warn!(lock = %lock.display(), "removing a stale lock on the notes ref left by a killed process");
        let _ = std::fs::remove_file(Path::new(&lock));
    }
}

/// Every note of a tree: key (the hex name, fan-out joined) -> blob, and the entries that are
/// not notes, each with why.
#[derive(Debug, Default)]
pub struct Listing {
    pub notes: BTreeMap<String, Oid>,
    pub foreign: Vec<(String, String)>,
}

/// Every note in `tree`.
pub fn list(repo: &Repository, tree: &Tree<'_>) -> Result<Listing> {
    let mut listing = Listing::default();
    collect(repo, tree, "", &mut listing)?;
    Ok(listing)
}

fn collect(repo: &Repository, tree: &Tree<'_>, prefix: &str, listing: &mut Listing) -> Result<()> {
    for entry in tree.iter() {
        let name = format!("{prefix}{}", entry.name().unwrap_or_default());
        match entry.kind() {
            Some(ObjectType::Tree) if name.len() < 40 && is_hex(&name) => collect(repo, &repo.find_tree(entry.id())?, &name, listing)?,
            Some(ObjectType::Blob) if name.len() == 40 && is_hex(&name) => {
                listing.notes.insert(name, entry.id());
            }
            _ => listing.foreign.push((name, "not a note: the name is not an object id".to_owned())),
        }
    }
    Ok(())
}

fn is_hex(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One note that differs between two trees: its key, its blob before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    pub key: String,
    pub before: Option<Oid>,
    pub after: Option<Oid>,
}

/// The notes that differ between `before` and `after`, and the entries of `after` that are not
/// notes. Subtrees with the same id are skipped whole, so a difference of a few notes costs a
/// few tree reads whatever the size of the trees.
pub fn diff(repo: &Repository, before: &Tree<'_>, after: &Tree<'_>) -> Result<(Vec<Changed>, Vec<(String, String)>)> {
    let mut old = Listing::default();
    let mut new = Listing::default();
    walk(repo, before, after, "", &mut old, &mut new)?;
    let mut changed = Vec::new();
    for (key, blob) in &old.notes {
        match new.notes.get(key) {
            Some(after) if after == blob => {}
            after => changed.push(Changed { key: key.clone(), before: Some(*blob), after: after.copied() }),
        }
    }
    for (key, blob) in &new.notes {
        if !old.notes.contains_key(key) {
            changed.push(Changed { key: key.clone(), before: None, after: Some(*blob) });
        }
    }
    Ok((changed, new.foreign))
}

fn walk(repo: &Repository, before: &Tree<'_>, after: &Tree<'_>, prefix: &str, old: &mut Listing, new: &mut Listing) -> Result<()> {
    let mut names: Vec<String> = before.iter().chain(after.iter()).filter_map(|entry| entry.name().map(str::to_owned)).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (a, b) = (before.get_name(&name), after.get_name(&name));
        if let (Some(a), Some(b)) = (&a, &b) {
            if a.id() == b.id() {
                continue;
            }
            if a.kind() == Some(ObjectType::Tree) && b.kind() == Some(ObjectType::Tree) {
                walk(repo, &repo.find_tree(a.id())?, &repo.find_tree(b.id())?, &format!("{prefix}{name}"), old, new)?;
                continue;
            }
        }
        for (entry, listing) in [(a, &mut *old), (b, &mut *new)] {
            let Some(entry) = entry else { continue };
            let path = format!("{prefix}{name}");
            match entry.kind() {
                Some(ObjectType::Tree) if path.len() < 40 && is_hex(&path) => collect(repo, &repo.find_tree(entry.id())?, &path, listing)?,
                Some(ObjectType::Blob) if path.len() == 40 && is_hex(&path) => {
                    listing.notes.insert(path, entry.id());
                }
                _ => listing.foreign.push((path, "not a note: the name is not an object id".to_owned())),
            }
        }
    }
    Ok(())
}
