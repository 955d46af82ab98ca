//! API keys: created, listed and revoked from the command line, kept hashed in one JSON file,
//! and checked by the server on every request.
//!
//! A key is 32 bytes from the operating system's random number generator, written as
//! `kenning_` and 64 hex digits. The file keeps only its SHA-256. A slow password hash (bcrypt,
//! Argon2) exists to make guessing low-entropy passwords from a stolen hash expensive; a key of
//! 256 random bits cannot be guessed from its hash at any hashing speed, so one fast hash is as
//! safe and costs the server microseconds per request instead of milliseconds.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use kenning_core::{Domain, FieldError, closest, hex, validate_author};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::files::private_options;

/// What every kenning key starts with, so that secret scanners and people recognise one.
pub const KEY_PREFIX: &str = "kenning_";
const SECRET_BYTES: usize = 32;
/// Hex digits of the secret shown as the key's public id.
const ID_DIGITS: usize = 8;
/// The format of a file whose keys all have full access, which every version reads.
const FILE_FORMAT: u32 = 1;
/// The format of a file holding a scoped key. A version of kenning that knows no scopes refuses
/// it as a file it cannot read, rather than granting the scoped key full access.
const SCOPED_FILE_FORMAT: u32 = 2;
const MAX_NAME_CHARS: usize = 64;

/// One API key as stored: never the secret, only its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    /// The first 8 hex digits of the secret after the prefix: enough to tell keys apart in
    /// listings and the audit log, far too few to help guess the rest.
    pub id: String,
    /// A label for people, unique among the keys that are not revoked.
    pub name: String,
    /// Who the key acts as: recorded as the author of what it writes and in the audit log.
    pub identity: String,
    /// Hex SHA-256 of the whole secret.
    pub sha256: String,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
    /// What the key may do; a key written before scopes existed has full access.
    #[serde(flatten)]
    pub scope: Scope,
}

impl ApiKey {
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }
}

/// What a key may do: read only, or read and write; every domain, or only some.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// Every tool, prompt and web action that writes is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// The domains the key reads and writes; `None` is every domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domains: Option<Vec<DomainScope>>,
}

impl Scope {
    /// Whether the key may do everything (the scope of every key made before scopes existed).
    pub fn is_full(&self) -> bool {
        !self.read_only && self.domains.is_none()
    }

    /// Whether the key may read (and, unless read-only, write) the memories of `domain`.
    pub fn allows(&self, domain: &Domain) -> bool {
        self.domains.as_ref().is_none_or(|domains| domains.iter().any(|scope| scope.covers(domain)))
    }

    /// Reads `--domains user,org:acme`: a comma-separated list of `user`, `project` (every
    /// project), `project:{id}`, `org` (every organisation) and `org:{id}`.
    pub fn parse_domains(text: &str) -> Result<Vec<DomainScope>, FieldError> {
        let mut domains: Vec<DomainScope> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
            let domain = DomainScope::parse(part)?;
            if !domains.contains(&domain) {
                domains.push(domain);
            }
        }
        if domains.is_empty() {
            return Err(FieldError::new(
                "domains",
                "names no domain",
                text,
                "list the domains the key may use, e.g. `user,org:acme`, or leave --domains out for every domain",
            ));
        }
        Ok(domains)
    }

    /// The scope as people read it: `read-only, domains user, org:acme`, or `full access`.
    pub fn describe(&self) -> String {
        let access = if self.read_only { "read-only" } else { "read-write" };
        match &self.domains {
            None if !self.read_only => "full access".to_owned(),
            None => format!("{access}, every domain"),
            Some(domains) => {
                let names: Vec<String> = domains.iter().map(ToString::to_string).collect();
                format!("{access}, domains {}", names.join(", "))
            }
        }
    }
}

/// One entry of a key's domain list: one domain, or every domain of a kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DomainScope {
    /// One domain: `user`, `project:{id}` or `org:{id}`.
    Domain(Domain),
    /// Every project domain (`project`).
    AnyProject,
    /// Every organisation domain (`org`).
    AnyOrg,
}

impl DomainScope {
    fn parse(text: &str) -> Result<DomainScope, FieldError> {
        match text {
            "project" => Ok(DomainScope::AnyProject),
            "org" => Ok(DomainScope::AnyOrg),
            other => Domain::parse("domains", other).map(DomainScope::Domain).map_err(|error| FieldError {
                suggestion: "use `user`, `project`, `project:{id}`, `org` or `org:{id}`, comma-separated, e.g. `user,org:acme`".to_owned(),
                ..error
            }),
        }
    }

    fn covers(&self, domain: &Domain) -> bool {
        match self {
            DomainScope::Domain(one) => one == domain,
            DomainScope::AnyProject => matches!(domain, Domain::Project(_)),
            DomainScope::AnyOrg => matches!(domain, Domain::Org(_)),
        }
    }
}

impl std::fmt::Display for DomainScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DomainScope::Domain(domain) => domain.fmt(f),
            DomainScope::AnyProject => f.write_str("project"),
            DomainScope::AnyOrg => f.write_str("org"),
        }
    }
}

impl Serialize for DomainScope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DomainScope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DomainScope::parse(&text).map_err(|error| serde::de::Error::custom(format!("`{text}`: {}", error.problem)))
    }
}

/// A key just created: the record, and the secret, shown once and never stored.
#[derive(Debug, Clone)]
pub struct CreatedKey {
    pub key: ApiKey,
    pub secret: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    format: u32,
    keys: Vec<ApiKey>,
}

/// The key file. Changes take an exclusive lock on a lock file beside it and replace the file
/// atomically, so two concurrent `kenning keys` commands never lose each other's key and a
/// server never reads half a file.
#[derive(Debug, Clone)]
pub struct KeyStore {
    path: PathBuf,
}

impl KeyStore {
    pub fn new(path: impl Into<PathBuf>) -> KeyStore {
        KeyStore { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates a key acting as `identity` (default: its name), limited to `scope`.
    pub fn create(&self, name: &str, identity: Option<&str>, scope: Scope, now: DateTime<Utc>) -> Result<CreatedKey, Error> {
        let name = validate_name(name)?;
        let identity = validate_author(identity.unwrap_or(&name)).map_err(|error| Error::Invalid(FieldError { field: "identity".into(), ..error }))?;
        self.change(|file| {
            if file.keys.iter().any(|key| !key.is_revoked() && key.name == name) {
                return Err(Error::Invalid(FieldError::new(
                    "name",
                    "is already the name of an active key",
                    name.as_str(),
                    "choose another name, or revoke the existing key first with `kenning keys revoke NAME`",
                )));
            }
            let mut random = [0u8; SECRET_BYTES];
            getrandom::fill(&mut random).map_err(|error| Error::Random(error.to_string()))?;
            let digits = hex(&random);
            let secret = format!("{KEY_PREFIX}{digits}");
            let key = ApiKey {
                id: digits[..ID_DIGITS].to_owned(),
                name: name.clone(),
                identity: identity.clone(),
                sha256: hex(&Sha256::digest(secret.as_bytes())),
                created_at: now,
                revoked_at: None,
                scope,
            };
            file.keys.push(key.clone());
            Ok(CreatedKey { key, secret })
        })
    }

    /// Every key ever created, revoked ones included, oldest first.
    pub fn list(&self) -> Result<Vec<ApiKey>, Error> {
        Ok(self.read()?.keys)
    }

    /// Revokes the active key with this name or id; the record stays, marked revoked.
    pub fn revoke(&self, name_or_id: &str, now: DateTime<Utc>) -> Result<ApiKey, Error> {
        self.change(|file| {
            let wanted = name_or_id.trim();
            let found = file
                .keys
                .iter_mut()
                .filter(|key| !key.is_revoked())
                .find(|key| key.name == wanted || key.id == wanted);
            match found {
                Some(key) => {
                    key.revoked_at = Some(now);
                    Ok(key.clone())
                }
                None => {
                    let active: Vec<&str> = file.keys.iter().filter(|key| !key.is_revoked()).map(|key| key.name.as_str()).collect();
                    let suggestion = match closest(wanted, active.iter().copied()) {
                        Some(near) => format!("did you mean `{near}`? `kenning keys list` shows every key"),
                        None if active.is_empty() => "there are no active keys; `kenning keys list` shows every key".to_owned(),
                        None => format!("active keys: {}", active.join(", ")),
                    };
                    Err(Error::Invalid(FieldError::new("key", "names no active key (by name or id)", wanted, suggestion)))
                }
            }
        })
    }

    /// The keys as they are now, for checking requests.
    pub fn load(&self) -> Result<KeySet, Error> {
        Ok(KeySet { keys: self.read()?.keys })
    }

    fn read(&self) -> Result<KeyFile, Error> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(KeyFile { format: FILE_FORMAT, keys: Vec::new() }),
            Err(source) => return Err(Error::Io { path: self.path.clone(), source }),
        };
        let file: KeyFile =
            serde_json::from_str(&text).map_err(|error| Error::Corrupt { path: self.path.clone(), detail: error.to_string() })?;
        if file.format != FILE_FORMAT && file.format != SCOPED_FILE_FORMAT {
            return Err(Error::Corrupt {
                path: self.path.clone(),
                detail: format!("format {} is not {FILE_FORMAT} or {SCOPED_FILE_FORMAT}", file.format),
            });
        }
        Ok(file)
    }

    /// Reads, changes and atomically replaces the file under an exclusive lock.
    fn change<T>(&self, apply: impl FnOnce(&mut KeyFile) -> Result<T, Error>) -> Result<T, Error> {
        let dir = self.path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
        crate::files::create_private_dir(dir).map_err(Error::io(dir))?;
        let lock_path = self.path.with_extension("lock");
        let lock = private_options().read(true).write(true).create(true).truncate(false).open(&lock_path).map_err(Error::io(&lock_path))?;
        lock.lock().map_err(Error::io(&lock_path))?;
        let mut file = self.read()?;
        let result = apply(&mut file)?;
        file.format = if file.keys.iter().all(|key| key.scope.is_full()) { FILE_FORMAT } else { SCOPED_FILE_FORMAT };
        let staging = self.path.with_extension("json.new");
        {
            let mut out = private_options().write(true).create(true).truncate(true).open(&staging).map_err(Error::io(&staging))?;
            let text = serde_json::to_string_pretty(&file).map_err(|error| Error::Corrupt { path: staging.clone(), detail: error.to_string() })?;
            out.write_all(text.as_bytes()).and_then(|()| out.write_all(b"\n")).and_then(|()| out.sync_all()).map_err(Error::io(&staging))?;
        }
        std::fs::rename(&staging, &self.path).map_err(Error::io(&self.path))?;
        // Syncing the directory makes the rename itself durable; not every platform can open one.
        if let Ok(dir) = File::open(dir) {
            let _ = dir.sync_all();
        }
        drop(lock);
        Ok(result)
    }
}

fn validate_name(name: &str) -> Result<String, Error> {
    let name = name.trim();
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        return Ok(name.to_owned());
    }
    Err(Error::Invalid(FieldError::new(
        "name",
        "must be 1-64 characters of [A-Za-z0-9._-]",
        name,
        "use a short label such as `ci` or `laptop-alice`",
    )))
}

/// The keys read from the file at one moment.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<ApiKey>,
}

/// What a presented secret turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Valid(ApiKey),
    Revoked(ApiKey),
    Unknown,
}

impl KeySet {
    /// Whether any key was ever created: from then on every request needs one.
    pub fn is_configured(&self) -> bool {
        !self.keys.is_empty()
    }

    pub fn active(&self) -> usize {
        self.keys.iter().filter(|key| !key.is_revoked()).count()
    }

    pub fn check(&self, presented: &str) -> Verdict {
        let digest = hex(&Sha256::digest(presented.trim().as_bytes()));
        // Every stored hash is compared in full, so the time taken says nothing about how much
        // of a hash matched.
        let mut found = None;
        for key in &self.keys {
            if constant_time_eq(key.sha256.as_bytes(), digest.as_bytes()) {
                found = Some(key);
            }
        }
        match found {
            Some(key) if key.is_revoked() => Verdict::Revoked(key.clone()),
            Some(key) => Verdict::Valid(key.clone()),
            None => Verdict::Unknown,
        }
    }

    /// The key with this public id as it is now, for a credential bound to a key (a web view
    /// session) rather than carrying its secret.
    pub fn by_id(&self, id: &str) -> Verdict {
        match self.keys.iter().find(|key| key.id == id) {
            Some(key) if key.is_revoked() => Verdict::Revoked(key.clone()),
            Some(key) => Verdict::Valid(key.clone()),
            None => Verdict::Unknown,
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |difference, (x, y)| difference | (x ^ y)) == 0
}

/// The key file's identity at one moment: a change to any of these means it was rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let metadata = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: metadata.modified().ok(),
        len: metadata.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(&metadata),
    })
}

/// Checks presented keys against the key file as it is now. The file is looked at (one `stat`)
/// on every request and read again when it changed, so a key created or revoked while the
/// server runs counts from the next request. Once keys have been seen, or the server was told
/// keys are required, a missing file does not switch authentication off: it refuses everyone.
#[derive(Debug)]
pub struct Authenticator {
    store: KeyStore,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    stamp: Option<Stamp>,
    keys: Arc<KeySet>,
    required: bool,
}

impl Authenticator {
    /// Loads the keys now, so that an unreadable file stops the server at start.
    pub fn new(store: KeyStore, required: bool) -> Result<Authenticator, Error> {
        let stamp = stamp(store.path());
        let keys = store.load()?;
        let required = required || keys.is_configured();
        Ok(Authenticator { store, state: Mutex::new(Loaded { stamp, keys: Arc::new(keys), required }) })
    }

    pub fn store(&self) -> &KeyStore {
        &self.store
    }

    /// The current keys and whether requests need one. A file that changed into something
    /// unreadable is an error: the caller refuses the request rather than trusting old keys.
    pub fn current(&self) -> Result<(Arc<KeySet>, bool), Error> {
        let now = stamp(self.store.path());
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if now != state.stamp {
            let keys = self.store.load()?;
            state.required |= keys.is_configured();
            state.keys = Arc::new(keys);
            state.stamp = now;
        }
        Ok((state.keys.clone(), state.required))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z").map(|time| time.with_timezone(&Utc)).unwrap_or_default()
    }

    #[test]
    fn a_created_key_is_valid_until_revoked_and_only_its_hash_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path().join("keys.json"));
        let created = store.create("ci", Some("ci-bot"), Scope::default(), now()).unwrap();
        assert!(created.secret.starts_with(KEY_PREFIX) && created.secret.len() == KEY_PREFIX.len() + 64);
        assert!(created.secret[KEY_PREFIX.len()..].starts_with(&created.key.id));
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains(&created.secret[KEY_PREFIX.len()..]), "the secret is never written");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(store.path()).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let keys = store.load().unwrap();
        assert_eq!(keys.check(&created.secret), Verdict::Valid(created.key.clone()));
        assert_eq!(keys.check("kenning_0000"), Verdict::Unknown);
        assert_eq!(created.key.identity, "ci-bot");

        let revoked = store.revoke("ci", now()).unwrap();
        assert_eq!(revoked.revoked_at, Some(now()));
        assert!(matches!(store.load().unwrap().check(&created.secret), Verdict::Revoked(_)));
        assert!(store.load().unwrap().is_configured(), "revoking the last key leaves authentication on");
    }

    #[test]
    fn names_are_validated_unique_among_active_keys_and_suggested_on_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path().join("nested").join("keys.json"));
        let first = store.create("laptop", None, Scope::default(), now()).unwrap();
        assert_eq!(first.key.identity, "laptop", "the identity defaults to the name");
        let Err(Error::Invalid(duplicate)) = store.create("laptop", None, Scope::default(), now()) else { panic!("a duplicate name is refused") };
        assert_eq!(duplicate.field, "name");
        let Err(Error::Invalid(bad)) = store.create("my laptop", None, Scope::default(), now()) else { panic!("a space is refused") };
        assert_eq!(bad.field, "name");
        let Err(Error::Invalid(identity)) = store.create("other", Some("a b"), Scope::default(), now()) else { panic!("a bad identity is refused") };
        assert_eq!(identity.field, "identity");
        let Err(Error::Invalid(miss)) = store.revoke("laptp", now()) else { panic!("an unknown key is refused") };
        assert!(miss.suggestion.contains("laptop"), "{}", miss.suggestion);
        store.revoke(&first.key.id, now()).unwrap();
        let again = store.create("laptop", None, Scope::default(), now()).unwrap();
        assert_ne!(again.secret, first.secret);
        assert_eq!(store.list().unwrap().len(), 2);
    }

    #[test]
    fn the_authenticator_sees_changes_and_a_deleted_file_does_not_turn_authentication_off() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path().join("keys.json"));
        let authenticator = Authenticator::new(store.clone(), false).unwrap();
        assert!(!authenticator.current().unwrap().1, "no keys, loopback: open");
        let created = store.create("ci", None, Scope::default(), now()).unwrap();
        let (keys, required) = authenticator.current().unwrap();
        assert!(required);
        assert!(matches!(keys.check(&created.secret), Verdict::Valid(_)));
        store.revoke("ci", now()).unwrap();
        assert!(matches!(authenticator.current().unwrap().0.check(&created.secret), Verdict::Revoked(_)));
        std::fs::remove_file(store.path()).unwrap();
        let (keys, required) = authenticator.current().unwrap();
        assert!(required && keys.active() == 0);
    }

    #[test]
    fn scopes_are_kept_and_a_file_with_one_is_refused_by_versions_that_know_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path().join("keys.json"));
        store.create("full", None, Scope::default(), now()).unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.contains("\"format\": 1") && !text.contains("read_only") && !text.contains("domains"), "{text}");

        let domains = Scope::parse_domains("user, org:acme,project,user").unwrap();
        let scoped = store.create("reader", None, Scope { read_only: true, domains: Some(domains) }, now()).unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.contains("\"format\": 2") && text.contains("\"read_only\": true"), "{text}");
        let Verdict::Valid(key) = store.load().unwrap().check(&scoped.secret) else { panic!("the scoped key is valid") };
        assert_eq!(key.scope.describe(), "read-only, domains user, org:acme, project");
        for (domain, allowed) in [("user", true), ("org:acme", true), ("org:other", false), ("project:widget", true)] {
            assert_eq!(key.scope.allows(&Domain::parse("domain", domain).unwrap()), allowed, "{domain}");
        }
        assert_eq!(store.load().unwrap().by_id(&key.id), Verdict::Valid(key.clone()));
        assert!(Scope::default().allows(&Domain::User) && Scope::default().is_full());

        // Revoking the only scoped key makes the file readable by every version again.
        store.revoke("reader", now()).unwrap();
        assert!(std::fs::read_to_string(store.path()).unwrap().contains("\"format\": 2"), "a revoked key keeps its scope");
        for bad in ["", "users", "org:", "team:x", " , "] {
            let error = Scope::parse_domains(bad).unwrap_err();
            assert_eq!(error.field, "domains", "{bad}");
        }
    }

    #[test]
    fn a_key_file_written_before_scopes_gives_its_keys_full_access() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path().join("keys.json"));
        let secret = format!("{KEY_PREFIX}{}", "ab".repeat(32));
        let text = format!(
            "{{\"format\": 1, \"keys\": [{{\"id\": \"abababab\", \"name\": \"ci\", \"identity\": \"ci\", \"sha256\": \"{}\", \"created_at\": \"2026-01-01T00:00:00Z\"}}]}}",
            hex(&Sha256::digest(secret.as_bytes()))
        );
        std::fs::write(store.path(), text).unwrap();
        let Verdict::Valid(key) = store.load().unwrap().check(&secret) else { panic!("an old key stays valid") };
        assert!(key.scope.is_full());
    }

    #[test]
    fn a_corrupt_key_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path().join("keys.json"));
        std::fs::write(store.path(), "{\"keys\": 3}").unwrap();
        let error = store.load().unwrap_err().to_string();
        assert!(error.contains("keys.json") && error.contains("not a kenning key file"), "{error}");
        assert!(Authenticator::new(store, false).is_err());
    }
}
