//! `kenning keys …`: the API keys `kenning serve --http` accepts, kept hashed in the data
//! directory.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::Result;
use kenning_gateway::{ApiKey, KeyStore, Scope};
use serde::Serialize;

use crate::cli::KeysCommand;
use crate::config::Config;

/// Where the keys live: `KENNING_KEYS_FILE` when set (a file mounted into a container, which a
/// running server rereads when it changes), else `keys.json` in kenning's data directory.
pub fn key_file() -> Result<PathBuf> {
    match std::env::var_os("KENNING_KEYS_FILE") {
        Some(path) => Ok(PathBuf::from(path)),
        None => Ok(Config::data_dir()?.join("keys.json")),
    }
}

/// A key as listed: everything but its hash.
#[derive(Debug, Serialize)]
struct KeyView<'a> {
    id: &'a str,
    name: &'a str,
    identity: &'a str,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked_at: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    read_only: bool,
    /// The domains the key may use; absent: every domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    domains: Option<Vec<String>>,
    /// The scope as people read it (`full access`, `read-only, domains user`).
    access: String,
}

impl<'a> From<&'a ApiKey> for KeyView<'a> {
    fn from(key: &'a ApiKey) -> Self {
        KeyView {
            id: &key.id,
            name: &key.name,
            identity: &key.identity,
            created_at: key.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            revoked_at: key.revoked_at.map(|time| time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            read_only: key.scope.read_only,
            domains: key.scope.domains.as_ref().map(|domains| domains.iter().map(ToString::to_string).collect()),
            access: key.scope.describe(),
        }
    }
}

#[derive(Debug, Serialize)]
struct Created<'a> {
    #[serde(flatten)]
    view: KeyView<'a>,
    /// The key itself, shown this once.
    key: &'a str,
}

pub fn run(json: bool, command: KeysCommand) -> Result<()> {
    let store = KeyStore::new(key_file()?);
    let now = chrono::Utc::now();
    match command {
        KeysCommand::Create { name, identity, read_only, domains } => {
            let domains = domains.as_deref().map(Scope::parse_domains).transpose().map_err(kenning_engine::Error::Invalid)?;
            let created = store.create(&name, identity.as_deref(), Scope { read_only, domains }, now)?;
            let view = Created { view: KeyView::from(&created.key), key: &created.secret };
            crate::print(json, &view, |view| {
                format!(
                    "created key `{}` (id {}) acting as `{}`, {}:\n\n    {}\n\nThis is the only time the key is shown; kenning keeps only its hash in {}.\n\
                     Clients send it as `Authorization: Bearer {}`.\n",
                    view.view.name,
                    view.view.id,
                    view.view.identity,
                    view.view.access,
                    view.key,
                    store.path().display(),
                    view.key
                )
            })
        }
        KeysCommand::List => {
            let keys = store.list()?;
            let views: Vec<KeyView> = keys.iter().map(KeyView::from).collect();
            crate::print(json, &views, |views| {
                if views.is_empty() {
                    return "no API keys; create one with `kenning keys create --name NAME`\n".to_owned();
                }
                let mut out = format!("{:<8}  {:<20}  {:<24}  {:<20}  {:<30}  {}\n", "id", "name", "identity", "created", "status", "access");
                for view in views {
                    let status = match &view.revoked_at {
                        Some(time) => format!("revoked {time}"),
                        None => "active".to_owned(),
                    };
                    let _ = writeln!(out, "{:<8}  {:<20}  {:<24}  {:<20}  {status:<30}  {}", view.id, view.name, view.identity, view.created_at, view.access);
                }
                out
            })
        }
        KeysCommand::Revoke { key } => {
            let revoked = store.revoke(&key, now)?;
            crate::print(json, &KeyView::from(&revoked), |view| format!("revoked key `{}` (id {})\n", view.name, view.id))
        }
    }
}
