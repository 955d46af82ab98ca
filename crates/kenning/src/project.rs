//! Finding the project around the working directory: its git repository, its id and where
//! its store lives.
//!
//! A project's id names its domain (`project:{id}`) in every URN. It is, in order: the id
//! configured (`[project] id`, `KENNING_PROJECT_ID`); else the id its memories were first
//! stored under, which the notes keep (see [`identity`]), so adding, renaming or removing a
//! remote changes nothing; else, for a project with no memories yet, the id derived from the
//! `origin` remote's URL or, without one, from the folder's name.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The git repository the working directory is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The configured id, else the derived one; [`identity`] settles the id the domain takes.
    pub id: String,
    /// The id the `origin` remote's URL gives, or without one the folder's name.
    pub derived_id: String,
    /// Whether `id` was configured rather than derived.
    pub configured: bool,
    pub root: PathBuf,
    /// The repository's git directory (shared by all worktrees); the store lives in here, out of the work tree.
    pub git_dir: PathBuf,
}

impl Project {
    /// The repository containing `dir`, if any; `None` when `dir` is not in a git work tree.
    pub fn discover(dir: &Path, id_override: Option<&str>) -> Option<Project> {
        let repository = if git_is_redirected() { ask_git(dir)? } else { find_repository(dir, &ceiling_directories())? };
        let or_default = |id: String| if id.is_empty() { "project".to_owned() } else { id };
        let derived_id = or_default(repository.origin_url.as_deref().and_then(id_from_remote).unwrap_or_else(|| {
            sanitise(&repository.root.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default())
        }));
        let (id, configured) = match id_override {
            Some(id) => (or_default(sanitise(id)), true),
            None => (derived_id.clone(), false),
        };
        Some(Project { id, derived_id, configured, root: repository.root, git_dir: repository.common_dir })
    }

    pub fn store_path(&self) -> PathBuf {
        self.git_dir.join("kenning").join("project.db")
    }
}

/// The id a project's domain takes: the configured id, else `recorded` (the id its memories
/// were first stored under), else the derived id.
pub fn identity(project: &Project, recorded: Option<&str>) -> String {
    match recorded {
        Some(recorded) if !project.configured => recorded.to_owned(),
        _ => project.id.clone(),
    }
}

/// A path as a person typed it, relative to the working directory, made absolute the way
/// discovery resolves the repository root (symbolic links followed), so that the engine can
/// make it relative to that root. A path that does not exist (a deleted file is still
/// remembered) is resolved as far as its nearest existing parent.
pub fn path_from_here(path: &Path) -> String {
    let absolute = std::env::current_dir().map(|dir| dir.join(path)).unwrap_or_else(|_| path.to_owned());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let resolved = loop {
        if let Ok(resolved) = existing.canonicalize() {
            break resolved;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => break absolute.clone(),
        }
    };
    let full = rest.iter().rev().fold(resolved, |path, name| path.join(name));
    full.to_string_lossy().into_owned()
}

/// What discovery needs to know of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Repository {
    /// The top of the work tree.
    root: PathBuf,
    /// The git directory shared by all of the repository's worktrees.
    common_dir: PathBuf,
    origin_url: Option<String>,
}

/// `GIT_DIR`, `GIT_WORK_TREE` and `GIT_COMMON_DIR` move the repository away from where the
/// directory walk would find it; such setups are rare enough to leave to git itself.
fn git_is_redirected() -> bool {
    ["GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR"].iter().any(|name| std::env::var_os(name).is_some())
}

/// `GIT_CEILING_DIRECTORIES`: directories the walk must not climb into.
fn ceiling_directories() -> Vec<PathBuf> {
    std::env::var_os("GIT_CEILING_DIRECTORIES")
        .map(|value| std::env::split_paths(&value).filter(|path| path.is_absolute()).collect())
        .unwrap_or_default()
}

/// Finds the repository around `start` the way git does, without starting git: every start
/// of a CLI command or a hook pays for discovery, and three runs of git cost more than the
/// rest of a start together. From `start` upwards, the first directory holding a `.git`
/// directory, or a `.git` file naming one (worktrees, submodules), is the top of the work
/// tree; a bare repository or a git directory itself has no work tree; the walk never climbs
/// into a ceiling directory. Paths come out resolved, as git prints them.
fn find_repository(start: &Path, ceilings: &[PathBuf]) -> Option<Repository> {
    let ceilings: Vec<PathBuf> = ceilings.iter().map(|ceiling| ceiling.canonicalize().unwrap_or_else(|_| ceiling.clone())).collect();
    let mut dir = start.canonicalize().ok()?;
    loop {
        if let Some(git_dir) = git_dir_at(&dir.join(".git")) {
            let common_dir = common_dir(&git_dir)?;
            let origin_url = origin_url(&common_dir.join("config"));
            return Some(Repository { root: dir, common_dir, origin_url });
        }
        if is_git_directory(&dir) {
            return None;
        }
        let parent = dir.parent()?.to_path_buf();
        if ceilings.contains(&parent) {
            return None;
        }
        dir = parent;
    }
}

/// The git directory that `dot_git` is or points to.
fn git_dir_at(dot_git: &Path) -> Option<PathBuf> {
    let metadata = std::fs::metadata(dot_git).ok()?;
    let git_dir = if metadata.is_dir() {
        dot_git.to_path_buf()
    } else {
        let text = std::fs::read_to_string(dot_git).ok()?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        dot_git.parent()?.join(target)
    };
    is_git_directory(&git_dir).then(|| git_dir.canonicalize().ok()).flatten()
}

/// Whether `dir` looks like a git directory: a `HEAD` and objects of its own or of the
/// repository it is a worktree of.
fn is_git_directory(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
}

/// A worktree's git directory names the repository's shared one in its `commondir` file.
fn common_dir(git_dir: &Path) -> Option<PathBuf> {
    match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim()).canonicalize().ok(),
        Err(_) => Some(git_dir.to_path_buf()),
    }
}

/// `remote.origin.url` from a git config file: the last `url` in a `[remote "origin"]`
/// section, unquoted, without a trailing comment.
fn origin_url(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    let mut in_origin = false;
    let mut url = None;
    for line in text.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            let header = header.split(']').next().unwrap_or_default().trim();
            in_origin = match header.split_once(char::is_whitespace) {
                Some((section, subsection)) => section.eq_ignore_ascii_case("remote") && subsection.trim() == "\"origin\"",
                None => header.eq_ignore_ascii_case("remote.origin"),
            };
        } else if in_origin
            && let Some((key, value)) = line.split_once('=')
            && key.trim().eq_ignore_ascii_case("url")
        {
            url = Some(config_value(value.trim()));
        }
    }
    url.filter(|url| !url.is_empty())
}

/// A git config value as git reads it: quotes removed, `\\` and `\"` unescaped, and a `#` or
/// `;` outside quotes starting a comment.
fn config_value(raw: &str) -> String {
    let mut value = String::new();
    let mut quoted = false;
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => value.extend(chars.next()),
            '#' | ';' if !quoted => break,
            _ => value.push(c),
        }
    }
    value.trim_end().to_owned()
}

/// Discovery by git itself, for setups the walk does not model.
fn ask_git(dir: &Path) -> Option<Repository> {
    let root = PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?);
    let common_dir = PathBuf::from(git(dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"])?);
    let origin_url = git(dir, &["config", "--get", "remote.origin.url"]);
    Some(Repository { root, common_dir, origin_url })
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The repository name at the end of a remote URL: `git@host:acme/my-app.git` gives `my-app`.
pub fn id_from_remote(url: &str) -> Option<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    let name = trimmed.rsplit(['/', ':']).next()?;
    let id = sanitise(name);
    (!id.is_empty()).then_some(id)
}

/// Keeps the characters a domain id may hold, replacing others with `-`.
fn sanitise(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    mapped.trim_matches('-').chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs git in `dir` with the sandbox as the ceiling, so that nothing above it is found.
    fn git_in(dir: &Path, ceiling: &Path, args: &[&str]) -> Option<String> {
        let output = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
            .args(args)
            .env("GIT_CEILING_DIRECTORIES", ceiling)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .expect("git must be installed to run these tests");
        output.status.success().then(|| String::from_utf8(output.stdout).unwrap().trim().to_owned())
    }

    fn setup(sandbox: &Path, ceiling: &Path, commands: &[&[&str]]) {
        for command in commands {
            let (dir, args) = command.split_first().unwrap();
            let dir = sandbox.join(dir);
            std::fs::create_dir_all(&dir).unwrap();
            if !args.is_empty() {
                assert!(git_in(&dir, ceiling, args).is_some(), "git {args:?} in {} failed", dir.display());
            }
        }
    }

    /// In each layout, the walk finds what git itself reports: the top of the work tree, the
    /// shared git directory and the origin URL, or no work tree at all.
    #[test]
    fn discovery_agrees_with_git() {
        let sandbox = tempfile::tempdir().unwrap();
        let root = sandbox.path().canonicalize().unwrap();
        setup(
            &root,
            &root,
            &[
                &["plain", "init", "-q"],
                &["plain", "remote", "add", "origin", "git@github.com:acme/plain-app.git"],
                &["plain", "commit", "-q", "--allow-empty", "-m", "first"],
                &["plain", "worktree", "add", "-q", "../linked"],
                &["plain", "config", "--add", "remote.upstream.url", "https://example.com/upstream.git"],
                &["separate", "init", "-q", "--separate-git-dir", "../separate.git"],
                &["bare.git", "init", "-q", "--bare"],
                &["quoted", "init", "-q"],
                &["outside"],
            ],
        );
        std::fs::create_dir_all(root.join("plain/src/deep")).unwrap();
        let quoted_config = root.join("quoted/.git/config");
        let mut config = std::fs::read_to_string(&quoted_config).unwrap();
        config.push_str("[Remote \"origin\"]\n\turl = \"https://example.com/quoted repo.git\" ; a comment\n");
        std::fs::write(&quoted_config, config).unwrap();

        for dir in ["plain", "plain/src/deep", "linked", "separate", "bare.git", "plain/.git", "quoted", "outside"] {
            let dir = root.join(dir);
            let expected = git_in(&dir, &root, &["rev-parse", "--show-toplevel"]).map(|top| Repository {
                root: PathBuf::from(top),
                common_dir: PathBuf::from(git_in(&dir, &root, &["rev-parse", "--path-format=absolute", "--git-common-dir"]).unwrap()),
                origin_url: git_in(&dir, &root, &["config", "--get", "remote.origin.url"]),
            });
            assert_eq!(find_repository(&dir, std::slice::from_ref(&root)), expected, "in {}", dir.display());
        }
        assert_eq!(
            find_repository(&root.join("quoted"), std::slice::from_ref(&root)).unwrap().origin_url.as_deref(),
            Some("https://example.com/quoted repo.git")
        );
    }

    #[test]
    fn the_recorded_id_outlasts_remotes_and_a_configured_id_overrides_it() {
        let project = |id: &str, derived: &str, configured: bool| Project {
            id: id.to_owned(),
            derived_id: derived.to_owned(),
            configured,
            root: PathBuf::from("/r"),
            git_dir: PathBuf::from("/r/.git"),
        };
        // A remote was added after the first memories: they keep the folder's id.
        assert_eq!(identity(&project("upstream", "upstream", false), Some("repo")), "repo");
        // No memories yet: the remote names the project.
        assert_eq!(identity(&project("upstream", "upstream", false), None), "upstream");
        // A rename on purpose.
        assert_eq!(identity(&project("renamed", "upstream", true), Some("repo")), "renamed");
    }

    #[test]
    fn project_ids_come_from_remote_urls() {
        for (url, id) in [
            ("git@github.com:acme/my-app.git", "my-app"),
            ("https://gitlab.example.com/group/sub/service-x", "service-x"),
            ("ssh://git@host:2222/acme/api.git/", "api"),
            ("/srv/git/My Repo.git", "My-Repo"),
        ] {
            assert_eq!(id_from_remote(url).as_deref(), Some(id), "{url}");
        }
    }
}
