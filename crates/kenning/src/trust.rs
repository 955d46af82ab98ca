//! Which repository configuration files the user trusts: each by its path and the SHA-256 of
//! its exact content, kept in `trusted.toml` in the user's config directory. A trusted file is
//! applied whole; a file that changed is no longer trusted until the user trusts it again (as
//! direnv's `allow` works). `kenning trust` records, lists and revokes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{self, Config};
use crate::print;
use crate::project::Project;

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// A repository's kenning.toml, or a repository's folder (its kenning.toml and
    /// .kenning/kenning.toml); default the repository here.
    pub path: Option<PathBuf>,
    /// List the trusted files and whether each is still as it was trusted.
    #[arg(long, conflicts_with_all = ["revoke", "path"])]
    pub list: bool,
    /// Stop trusting the file or files.
    #[arg(long)]
    pub revoke: bool,
}

/// The trusted files, as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct TrustList {
    #[serde(default, rename = "file")]
    files: Vec<Trusted>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Trusted {
    /// The file's path, symbolic links resolved.
    path: PathBuf,
    sha256: String,
    trusted_at: String,
}

/// Whether a repository file may be applied whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The user trusted exactly this content.
    Trusted,
    /// The user trusted this file, but its content has changed since.
    Changed,
    Unknown,
}

impl TrustList {
    /// The trust list's file: `trusted.toml` in the user's config directory.
    pub fn path() -> Option<PathBuf> {
        Config::config_dir().map(|dir| dir.join("trusted.toml"))
    }

    /// The stored list; empty when there is none.
    pub fn load() -> Result<TrustList> {
        let Some(path) = Self::path() else { return Ok(TrustList::default()) };
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).with_context(|| format!("parsing {} (delete it to trust no repository file)", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(TrustList::default()),
            Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Whether `path` (resolved) with content of digest `sha256` is trusted.
    pub fn standing(&self, path: &Path, sha256: &str) -> Standing {
        match self.files.iter().find(|file| file.path == path) {
            Some(file) if file.sha256 == sha256 => Standing::Trusted,
            Some(_) => Standing::Changed,
            None => Standing::Unknown,
        }
    }

    pub(crate) fn trust(&mut self, path: &Path, sha256: &str) {
        self.files.retain(|file| file.path != path);
        self.files.push(Trusted { path: path.to_owned(), sha256: sha256.to_owned(), trusted_at: chrono::Utc::now().to_rfc3339() });
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
    }

    fn revoke(&mut self, path: &Path) -> bool {
        let before = self.files.len();
        self.files.retain(|file| file.path != path);
        self.files.len() != before
    }

    /// Writes the list to a temporary file renamed over the old one, readable by the user only.
    fn save(&self) -> Result<()> {
        let path = Self::path().context("no user config directory is known; set KENNING_CONFIG_DIR")?;
        let dir = path.parent().context("the trust list has no folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let text = format!(
            "# Repository configuration files applied whole: each trusted by its exact content (sha256).\n\
             # Managed by `kenning trust`; a file whose content changed is not applied until trusted again.\n\n{}",
            toml::to_string(self)?
        );
        let temporary = dir.join(".trusted.toml.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&temporary).with_context(|| format!("writing {}", temporary.display()))?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path).with_context(|| format!("replacing {}", path.display()))
    }
}

/// The hex SHA-256 of `bytes`: a file's content, or a hook socket's identity.
pub fn digest(bytes: &[u8]) -> String {
    kenning_core::hex(&Sha256::digest(bytes))
}

/// What `kenning trust` did to one file.
#[derive(Serialize)]
struct FileReport {
    path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    /// `trusted`, `revoked`, `not trusted` (a revoke of a file that was not), or, listing,
    /// `in force`, `changed` or `missing`.
    status: &'static str,
    /// The settings the file holds beyond what any repository may set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    settings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trusted_at: Option<String>,
}

pub fn run(json: bool, args: TrustArgs) -> Result<()> {
    let mut list = TrustList::load()?;
    if args.list {
        let reports: Vec<FileReport> = list
            .files
            .iter()
            .map(|file| {
                let status = match std::fs::read(&file.path) {
                    Ok(bytes) if digest(&bytes) == file.sha256 => "in force",
                    Ok(_) => "changed",
                    Err(_) => "missing",
                };
                FileReport { path: file.path.clone(), sha256: Some(file.sha256.clone()), status, settings: Vec::new(), trusted_at: Some(file.trusted_at.clone()) }
            })
            .collect();
        return print(json, &reports, |reports| {
            if reports.is_empty() {
                return "no repository configuration file is trusted\n".to_owned();
            }
            reports
                .iter()
                .map(|report| {
                    let sha = report.sha256.as_deref().unwrap_or_default();
                    format!("{:<8}  {}  sha256 {}…  since {}\n", report.status, report.path.display(), &sha[..sha.len().min(12)], report.trusted_at.as_deref().unwrap_or_default())
                })
                .collect()
        });
    }
    let files = targets(args.path.as_deref())?;
    let mut reports = Vec::new();
    for file in files {
        if args.revoke {
            let path = std::fs::canonicalize(&file).unwrap_or(file);
            let status = if list.revoke(&path) { "revoked" } else { "not trusted" };
            reports.push(FileReport { path, sha256: None, status, settings: Vec::new(), trusted_at: None });
            continue;
        }
        let (path, bytes) = config::read_repository_file(&file)?;
        let settings = config::settings_beyond_repository(&path, &bytes)?;
        let sha256 = digest(&bytes);
        list.trust(&path, &sha256);
        reports.push(FileReport { path, sha256: Some(sha256), status: "trusted", settings, trusted_at: None });
    }
    list.save()?;
    print(json, &reports, |reports| {
        reports
            .iter()
            .map(|report| match report.status {
                "trusted" if report.settings.is_empty() => {
                    format!("trusted {}: it sets nothing beyond what any repository may set\n", report.path.display())
                }
                "trusted" => format!("trusted {}: it may now set {}\n", report.path.display(), report.settings.join(", ")),
                "revoked" => format!("no longer trusted: {}\n", report.path.display()),
                _ => format!("was not trusted: {}\n", report.path.display()),
            })
            .collect()
    })
}

/// The files a `kenning trust` names: a kenning.toml, or a folder's (the repository's root and
/// its `.kenning/`), by default the repository here.
fn targets(path: Option<&Path>) -> Result<Vec<PathBuf>> {
    let cwd = std::env::current_dir().context("reading the working directory")?;
    let folder = match path {
        Some(path) if path.is_dir() => path.to_owned(),
        Some(path) => {
            if path.file_name().is_none_or(|name| name != "kenning.toml") {
                bail!("{} is not a kenning.toml; name a repository's kenning.toml or its folder", path.display());
            }
            return Ok(vec![cwd.join(path)]);
        }
        None => Project::discover(&cwd, None).map_or(cwd, |project| project.root),
    };
    let files: Vec<PathBuf> = config::repository_files(&folder).into_iter().filter(|file| file.exists()).collect();
    if files.is_empty() {
        bail!("{} holds no kenning.toml (at its root or in .kenning/)", folder.display());
    }
    Ok(files)
}
