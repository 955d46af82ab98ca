//! `cargo xtask architecture`: the crate graph of ARCHITECTURE.md, written from `cargo metadata`,
//! and the check that the document is true: its graph is the one the manifests give, and every
//! file or folder its code map names exists.
//!
//! The graph lists each workspace crate with the workspace crates it depends on (normal and build
//! dependencies; dev-dependencies are tests' business), by layer: a crate's layer is one above the
//! highest of its dependencies, so every arrow points down the page.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The lines around the generated graph in ARCHITECTURE.md.
const BEGIN: &str = "<!-- crate graph: written by `cargo xtask architecture`, from `cargo metadata` -->";
const END: &str = "<!-- end of crate graph -->";

#[derive(Debug, clap::Args)]
pub struct ArchitectureArgs {
    /// Only check ARCHITECTURE.md (the graph and every path it names); fail if it is out of date.
    #[arg(long)]
    check: bool,
}

pub fn run(args: &ArchitectureArgs) -> Result<()> {
    let root = workspace_root()?;
    let path = root.join("ARCHITECTURE.md");
    let document = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let graph = crate_graph(&root)?;
    if args.check {
        let problems = check(&root, &document, &graph);
        if !problems.is_empty() {
            bail!("ARCHITECTURE.md is out of date (`cargo xtask architecture` rewrites the graph):\n{}", problems.join("\n"));
        }
        eprintln!("ARCHITECTURE.md: the crate graph and every path it names are current");
        return Ok(());
    }
    let updated = with_graph(&document, &graph)?;
    std::fs::write(&path, updated).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote the crate graph into {}", path.display());
    Ok(())
}

fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Ok(manifest_dir.ancestors().nth(2).context("xtask lives in crates/xtask")?.to_path_buf())
}

#[derive(Deserialize)]
struct Metadata {
    packages: Vec<Package>,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    dependencies: Vec<Dependency>,
}

#[derive(Deserialize)]
struct Dependency {
    name: String,
    /// `None` for a normal dependency, else `"dev"` or `"build"`.
    kind: Option<String>,
}

/// The workspace crates and the workspace crates each depends on.
fn dependencies(root: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: Metadata = serde_json::from_slice(&output.stdout).context("reading cargo metadata's output")?;
    let members: BTreeSet<String> = metadata.packages.iter().map(|package| package.name.clone()).collect();
    Ok(metadata
        .packages
        .into_iter()
        .map(|package| {
            let used = package
                .dependencies
                .into_iter()
                .filter(|dependency| dependency.kind.as_deref() != Some("dev") && members.contains(&dependency.name))
                .map(|dependency| dependency.name)
                .collect();
            (package.name, used)
        })
        .collect())
}

/// The graph as the text between [`BEGIN`] and [`END`]: one line per crate, highest layer first.
fn crate_graph(root: &Path) -> Result<String> {
    let graph = dependencies(root)?;
    let mut layers: BTreeMap<String, usize> = BTreeMap::new();
    fn layer(name: &str, graph: &BTreeMap<String, BTreeSet<String>>, layers: &mut BTreeMap<String, usize>, path: &mut Vec<String>) -> usize {
        if let Some(known) = layers.get(name) {
            return *known;
        }
        assert!(!path.iter().any(|seen| seen == name), "a dependency cycle through {name}");
        path.push(name.to_owned());
        let below = graph.get(name).into_iter().flatten().map(|dependency| layer(dependency, graph, layers, path) + 1).max().unwrap_or(0);
        path.pop();
        layers.insert(name.to_owned(), below);
        below
    }
    for name in graph.keys() {
        layer(name, &graph, &mut layers, &mut Vec::new());
    }
    let mut ordered: Vec<(&String, usize)> = layers.iter().map(|(name, layer)| (name, *layer)).collect();
    ordered.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let width = ordered.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut text = String::from("```\n");
    for (name, layer) in ordered {
        let uses: Vec<&str> = graph[name].iter().map(String::as_str).collect();
        let uses = if uses.is_empty() { "(no workspace crate)".to_owned() } else { uses.join(", ") };
        text.push_str(&format!("{layer}  {name:<width$}  -> {uses}\n"));
    }
    text.push_str("```\n");
    Ok(text)
}

/// The document with `graph` between its markers.
fn with_graph(document: &str, graph: &str) -> Result<String> {
    let start = document.find(BEGIN).context("ARCHITECTURE.md has no crate graph marker")? + BEGIN.len();
    let end = document[start..].find(END).context("ARCHITECTURE.md has no end of crate graph marker")? + start;
    Ok(format!("{}\n{}{}", &document[..start], graph, &document[end..]))
}

/// What is out of date in `document`: the graph, and each path it names that does not exist.
fn check(root: &Path, document: &str, graph: &str) -> Vec<String> {
    let mut problems = Vec::new();
    match with_graph(document, graph) {
        Ok(updated) if updated != document => problems.push("the crate graph differs from `cargo metadata`".to_owned()),
        Ok(_) => {}
        Err(error) => problems.push(error.to_string()),
    }
    problems.extend(missing_paths(root, document));
    problems
}

/// The paths the document names in backquotes that name nothing: paths from the repository root
/// anywhere, and in the code map also file names under the crate whose entry names them.
fn missing_paths(root: &Path, document: &str) -> Vec<String> {
    let mut missing = Vec::new();
    let mut in_code_map = false;
    let mut crate_dir: Option<PathBuf> = None;
    for line in document.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            in_code_map = heading.trim() == "Code map";
            crate_dir = None;
        }
        // An entry of the code map names files of its crate; an entry about a concern names
        // them from `crates/`.
        if in_code_map && line.starts_with("- ") {
            crate_dir = line.strip_prefix("- `crates/").and_then(|rest| rest.split('`').next()).map(|name| root.join("crates").join(name));
        }
        for token in line.split('`').skip(1).step_by(2) {
            if !looks_like_a_path(token) {
                continue;
            }
            let trimmed = token.trim_end_matches('/');
            let rooted = ["crates/", "tests/", "scripts/", ".ci/", "docs/", "packaging/", "plugins/"].iter().any(|top| token.starts_with(top));
            let in_crate = in_code_map && crate_dir.as_ref().is_some_and(|dir| dir.join(trimmed).exists() || ends_anywhere_under(dir, trimmed));
            let found = root.join(trimmed).exists() || root.join("crates").join(trimmed).exists() || in_crate || (!rooted && crate_dir.is_none());
            if !found {
                let under = crate_dir.as_ref().map(|dir| format!(" (under {})", dir.strip_prefix(root).unwrap_or(dir).display()));
                missing.push(format!("`{token}`{} names nothing", under.unwrap_or_default()));
            }
        }
    }
    missing
}

/// A file name with a source or data extension, or a folder path ending in `/`.
fn looks_like_a_path(token: &str) -> bool {
    let plain = !token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    let hidden = token.starts_with('.') && !token.starts_with(".ci/");
    let extension = [".rs", ".py", ".toml", ".json", ".jsonl", ".md", ".yaml", ".sh"].iter().any(|extension| token.ends_with(extension));
    plain && !hidden && (extension || (token.ends_with('/') && token.len() > 1)) && !USER_FILES.contains(&token)
}

/// Files of the user's that the document names, which are not in the repository.
const USER_FILES: &[&str] = &["kenning.toml", "trusted.toml"];

/// Whether some file or folder under `dir` has a path ending in `/{tail}`.
fn ends_anywhere_under(dir: &Path, tail: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|name| name == "target") {
            continue;
        }
        if path.to_string_lossy().ends_with(&format!("/{tail}")) {
            return true;
        }
        if path.is_dir() && ends_anywhere_under(&path, tail) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ARCHITECTURE.md's crate graph is the manifests' and every path it names exists; `cargo
    /// xtask architecture` rewrites the graph.
    #[test]
    fn architecture_md_is_current() {
        let root = workspace_root().unwrap();
        let document = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        let problems = check(&root, &document, &crate_graph(&root).unwrap());
        assert!(problems.is_empty(), "ARCHITECTURE.md is out of date:\n{}", problems.join("\n"));
    }

    #[test]
    fn a_name_that_is_not_there_is_reported() {
        let root = workspace_root().unwrap();
        let document = "## Code map\n\n- `crates/kenning-core`: `memory.rs`, `mirror.rs`, `crates/kenning-core/src/urn.rs`.\n";
        assert_eq!(missing_paths(&root, document), ["`mirror.rs` (under crates/kenning-core) names nothing"]);
    }
}
