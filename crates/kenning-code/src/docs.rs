//! The `docs` toolset's machinery: the project's documentation (Markdown files and the doc
//! comments in its code) and the documentation of the dependencies actually installed, in the
//! versions the lock files name: Cargo's registry sources for Cargo.lock, `node_modules`, the
//! Python environment's `site-packages`.
//!
//! A dependency's documented items (public Rust items with doc comments, Python definitions
//! with docstrings, TypeScript declarations with JSDoc) are read with the same tree-sitter
//! parser as the code index, once per package version, and kept in the code index file.
//! Searches are full text (BM25) over project sections and dependency items together.
//!
//! Every manifest, lock file and package folder is read only where it resolves: the
//! repository's files inside the repository, a dependency's folder inside the folder it was
//! found in (the registry sources, `node_modules` in the repository, the `site-packages`), and
//! a package's files inside its folder. A dependency named by an absolute or `../` path, or a
//! `top_level.txt` naming a folder elsewhere, is not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use kenning_core::interrupt::interrupted;
use kenning_core::{MemoryKind, SearchFilter, Status};
use kenning_index::{DocInput, SearchIndex};
use rusqlite::params;
use schemars::JsonSchema;
use serde::Serialize;

use crate::confine::{Confinement, read_text, within};
use crate::error::{Error, Result};
use crate::index::{CodeIndex, with_identifier_words};
use crate::lang::Language;
use crate::parse;

/// Files of one package read for its documentation, and bytes: enough for any library's API,
/// bounded so that a huge generated crate cannot stall a search.
const MAX_PACKAGE_FILES: usize = 400;
const MAX_PACKAGE_BYTES: u64 = 6 << 20;
/// The longest doc text a hit quotes.
const DOC_BYTES: usize = 1200;

/// Where installed dependencies live; the binary fills it from the environment.
#[derive(Debug, Clone, Default)]
pub struct DocSources {
    /// Cargo's home (`$CARGO_HOME`, else `~/.cargo`).
    pub cargo_home: Option<PathBuf>,
    /// Python `site-packages` directories beyond those of a virtual environment in the repository.
    pub site_packages: Vec<PathBuf>,
}

/// An installed dependency.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
pub struct Package {
    /// `cargo`, `npm` or `pypi`.
    pub ecosystem: String,
    pub name: String,
    pub version: String,
    /// The package's folder, symbolic links resolved.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// One documented thing found by a search or an API lookup.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocHit {
    /// `project` or the package's name.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The item's path (`serde_json::de::from_str`) or the section's title.
    pub name: String,
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub signature: String,
    pub doc: String,
    /// Where it is: a path relative to the repository, or the file in the installed package.
    pub file: String,
    pub line: usize,
    pub score: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocSearchView {
    pub query: String,
    pub scope: String,
    pub hits: Vec<DocHit>,
    /// Dependencies whose documentation was searched.
    pub packages_searched: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ApiView {
    pub name: String,
    /// The best match, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<DocHit>,
    /// Other items of that name.
    pub others: Vec<DocHit>,
}

/// Which documentation a search covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocScope {
    Project,
    Dependencies,
    All,
}

impl DocScope {
    pub fn parse(text: &str) -> std::result::Result<DocScope, kenning_core::FieldError> {
        match text {
            "project" => Ok(DocScope::Project),
            "dependencies" => Ok(DocScope::Dependencies),
            "all" => Ok(DocScope::All),
            _ => Err(kenning_core::FieldError::new("scope", "is not an allowed value", text, "use `project`, `dependencies` or `all`")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            DocScope::Project => "project",
            DocScope::Dependencies => "dependencies",
            DocScope::All => "all",
        }
    }
}

/// A documented item as stored.
#[derive(Debug, Clone)]
struct Entry {
    source: String,
    version: Option<String>,
    name: String,
    kind: String,
    signature: String,
    doc: String,
    file: String,
    line: usize,
}

impl Entry {
    fn hit(&self, score: f64) -> DocHit {
        DocHit {
            source: self.source.clone(),
            version: self.version.clone(),
            name: self.name.clone(),
            kind: self.kind.clone(),
            signature: self.signature.clone(),
            doc: parse::truncate(&self.doc, DOC_BYTES).to_owned(),
            file: self.file.clone(),
            line: self.line,
            score: (score * 1000.0).round() / 1000.0,
        }
    }
}

/// The direct dependencies the repository declares, as installed.
pub fn installed_packages(repository: &Confinement, sources: &DocSources) -> Vec<Package> {
    let mut packages = Vec::new();
    packages.extend(cargo_packages(repository, sources));
    packages.extend(npm_packages(repository));
    packages.extend(python_packages(repository, sources));
    packages.sort();
    packages.dedup_by(|a, b| a.ecosystem == b.ecosystem && a.name == b.name);
    packages
}

/// Names under `[dependencies]`-like tables of every Cargo.toml in the repository, each at the
/// version Cargo.lock resolved, found in the registry sources.
fn cargo_packages(repository: &Confinement, sources: &DocSources) -> Vec<Package> {
    let Some(registry_sources) = sources.cargo_home.as_ref().and_then(|home| std::fs::canonicalize(home.join("registry/src")).ok()) else { return Vec::new() };
    let lock = repository.inside(Path::new("Cargo.lock")).map(|lock| read_text_full(&lock)).unwrap_or_default();
    if lock.is_empty() {
        return Vec::new();
    }
    let mut declared = BTreeSet::new();
    let walker = ignore::WalkBuilder::new(repository.root()).require_git(false).max_depth(Some(4)).build();
    for entry in walker.flatten() {
        if entry.file_name() == "Cargo.toml"
            && let Some(manifest) = repository.inside(entry.path())
        {
            declared.extend(cargo_declared(&read_text(&manifest)));
        }
    }
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|line| line.trim().strip_prefix(key).and_then(|rest| rest.trim().strip_prefix('=')).map(|value| value.trim().trim_matches('"').to_owned()))
        };
        if let (Some(name), Some(version), Some(_registry)) = (field("name"), field("version"), field("source")) {
            versions.entry(name).or_default().push(version);
        }
    }
    let registries: Vec<PathBuf> = std::fs::read_dir(&registry_sources).into_iter().flatten().flatten().map(|entry| entry.path()).collect();
    let mut packages = Vec::new();
    for name in declared {
        for version in versions.get(&name).into_iter().flatten() {
            // The name and version come from the repository's files: the folder they make must
            // still be one of the registry's.
            let folder = |registry: &PathBuf| within(&registry_sources, &registry.join(format!("{name}-{version}"))).filter(|dir| dir.is_dir());
            if let Some(dir) = registries.iter().find_map(folder) {
                packages.push(Package { ecosystem: "cargo".into(), name: name.clone(), version: version.clone(), dir });
            }
        }
    }
    packages
}

/// The dependencies `package.json` declares, as installed in the repository's `node_modules`.
fn npm_packages(repository: &Confinement) -> Vec<Package> {
    let Ok(manifest) = serde_json::from_str::<serde_json::Value>(&repository.read_text("package.json")) else { return Vec::new() };
    let mut packages = Vec::new();
    for section in ["dependencies", "devDependencies"] {
        for name in manifest.get(section).and_then(serde_json::Value::as_object).into_iter().flat_map(|deps| deps.keys()) {
            // A name such as `/etc` or `../../x` would lead out of `node_modules`: the folder
            // must resolve inside the repository.
            let Some(dir) = repository.inside(&Path::new("node_modules").join(name)).filter(|dir| dir.is_dir()) else { continue };
            let installed = within(&dir, &dir.join("package.json")).and_then(|file| serde_json::from_str::<serde_json::Value>(&read_text(&file)).ok());
            if let Some(version) = installed.as_ref().and_then(|installed| installed.get("version")).and_then(serde_json::Value::as_str) {
                packages.push(Package { ecosystem: "npm".into(), name: name.clone(), version: version.to_owned(), dir });
            }
        }
    }
    packages
}

/// Packages in the repository's virtual environment (`.venv`, `venv`) and the given
/// site-packages that the project declares (requirements files, pyproject).
fn python_packages(repository: &Confinement, sources: &DocSources) -> Vec<Package> {
    let mut declared: BTreeSet<String> = pyproject_declared(&repository.read_text("pyproject.toml")).into_iter().collect();
    declared.extend(setup_cfg_declared(&repository.read_text("setup.cfg")));
    for name in ["requirements.txt", "requirements-dev.txt", "dev-requirements.txt"] {
        declared.extend(requirements_declared(&repository.read_text(name)));
    }
    // The environment's site-packages as given, and those of a virtual environment that lies
    // inside the repository.
    let mut sites: Vec<PathBuf> = sources.site_packages.iter().filter_map(|site| std::fs::canonicalize(site).ok()).collect();
    for venv in [".venv", "venv"] {
        let Some(lib) = repository.inside(&Path::new(venv).join("lib")) else { continue };
        for version in std::fs::read_dir(lib).into_iter().flatten().flatten() {
            sites.extend(repository.inside(&version.path().join("site-packages")));
        }
    }
    let mut packages = Vec::new();
    for site in sites {
        for entry in std::fs::read_dir(&site).into_iter().flatten().flatten() {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = file_name.strip_suffix(".dist-info") else { continue };
            let Some((name, version)) = stem.rsplit_once('-') else { continue };
            let module = normalised_distribution(name);
            if !declared.contains(&module) {
                continue;
            }
            // A distribution installs one or more importable top-level names (pytest installs
            // `pytest`, which re-exports, and `_pytest`, which defines); each is a package, and
            // must be a folder or module of this site-packages.
            for import in top_level_names(&site, &entry.path(), &module) {
                let installed = within(&site, &site.join(&import)).filter(|dir| dir.is_dir()).or_else(|| within(&site, &site.join(format!("{import}.py"))));
                if let Some(dir) = installed {
                    packages.push(Package { ecosystem: "pypi".into(), name: import, version: version.to_owned(), dir });
                }
            }
        }
    }
    packages
}

/// The importable names a distribution installs: `top_level.txt` when the installer wrote one,
/// else the first parts of the paths in `RECORD`, else the distribution's own name.
fn top_level_names(site: &Path, dist_info: &Path, module: &str) -> Vec<String> {
    let text = |name: &str| within(site, &dist_info.join(name)).map(|file| read_text(&file)).unwrap_or_default();
    let mut names: Vec<String> = text("top_level.txt").lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect();
    if names.is_empty() {
        for line in text("RECORD").lines() {
            let path = line.split(',').next().unwrap_or_default();
            let first = path.split('/').next().unwrap_or_default();
            let name = first.strip_suffix(".py").unwrap_or(first);
            let importable = !name.is_empty() && !first.contains("..") && !first.ends_with(".dist-info") && !first.ends_with(".data") && name != "__pycache__";
            let is_module = path.contains('/') || first.ends_with(".py");
            if importable && is_module && !names.iter().any(|known| known == name) {
                names.push(name.to_owned());
            }
        }
    }
    if names.is_empty() {
        names.push(module.to_owned());
    }
    names
}

/// A distribution name as site-packages and imports compare them: lower case, with `-` and
/// `.` as `_` (PEP 503 folds all three into one separator).
fn normalised_distribution(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace(['-', '.'], "_")
}

/// The crates a Cargo.toml declares, read with a TOML parser: its `[dependencies]`,
/// `[dev-dependencies]` and `[build-dependencies]`, the same under `[target.'…'.*]`, and
/// `[workspace.dependencies]`; a renamed dependency counts under its `package`. Path
/// dependencies are the workspace's own code, and `workspace = true` ones are counted where the
/// workspace declares them.
fn cargo_declared(text: &str) -> Vec<String> {
    let Ok(manifest) = text.parse::<toml::Table>() else { return Vec::new() };
    let tables = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut sections: Vec<&toml::Table> = tables.iter().filter_map(|name| manifest.get(*name)?.as_table()).collect();
    for target in manifest.get("target").and_then(toml::Value::as_table).into_iter().flat_map(|targets| targets.values()) {
        sections.extend(tables.iter().filter_map(|name| target.get(*name)?.as_table()));
    }
    sections.extend(manifest.get("workspace").and_then(|workspace| workspace.get("dependencies")).and_then(toml::Value::as_table));
    let mut names = Vec::new();
    for (key, value) in sections.into_iter().flatten() {
        let detail = value.as_table();
        let local = detail.is_some_and(|detail| detail.contains_key("path") || detail.get("workspace").and_then(toml::Value::as_bool) == Some(true));
        if !local {
            names.push(detail.and_then(|detail| detail.get("package")?.as_str()).unwrap_or(key).to_owned());
        }
    }
    names
}

/// The distributions a pyproject.toml declares, read with a TOML parser: PEP 621's
/// `[project] dependencies` and `optional-dependencies`, PEP 735's `[dependency-groups]`, and
/// Poetry's `[tool.poetry.dependencies]`, `dev-dependencies` and `group.*.dependencies` tables
/// (`python` aside), each name normalised.
fn pyproject_declared(text: &str) -> Vec<String> {
    let Ok(manifest) = text.parse::<toml::Table>() else { return Vec::new() };
    let mut specs: Vec<&str> = Vec::new();
    fn strings(value: &toml::Value) -> Vec<&str> {
        value.as_array().into_iter().flatten().filter_map(toml::Value::as_str).collect()
    }
    if let Some(project) = manifest.get("project") {
        specs.extend(project.get("dependencies").map(strings).unwrap_or_default());
        for group in project.get("optional-dependencies").and_then(toml::Value::as_table).into_iter().flat_map(|groups| groups.values()) {
            specs.extend(strings(group));
        }
    }
    for group in manifest.get("dependency-groups").and_then(toml::Value::as_table).into_iter().flat_map(|groups| groups.values()) {
        specs.extend(strings(group));
    }
    let mut names: Vec<String> = specs.into_iter().filter_map(requirement_name).collect();
    if let Some(poetry) = manifest.get("tool").and_then(|tool| tool.get("poetry")) {
        let mut tables: Vec<&toml::Table> = ["dependencies", "dev-dependencies"].iter().filter_map(|name| poetry.get(*name)?.as_table()).collect();
        for group in poetry.get("group").and_then(toml::Value::as_table).into_iter().flat_map(|groups| groups.values()) {
            tables.extend(group.get("dependencies").and_then(toml::Value::as_table));
        }
        names.extend(tables.into_iter().flat_map(|table| table.keys()).filter(|name| name.as_str() != "python").map(|name| normalised_distribution(name)));
    }
    names
}

/// The distributions of a requirements file: one requirement per line, comments, options
/// (`-r`, `-e`, `--index-url`) and direct URLs aside.
fn requirements_declared(text: &str) -> Vec<String> {
    text.lines().map(|line| line.split(" #").next().unwrap_or_default().trim()).filter(|line| !line.starts_with('-')).filter_map(requirement_name).collect()
}

/// `install_requires` of a setup.cfg: the requirements on the lines after the key.
fn setup_cfg_declared(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let continued = line.starts_with([' ', '\t']);
        let line = line.trim();
        if continued && inside {
            names.extend(requirement_name(line));
        } else {
            inside = line.split_once('=').is_some_and(|(key, _)| key.trim() == "install_requires");
            if inside && let Some((_, first)) = line.split_once('=') {
                names.extend(requirement_name(first.trim()));
            }
        }
    }
    names
}

/// The distribution a PEP 508 requirement names (`requests[socks]>=2; python_version > "3"`
/// gives `requests`), normalised; `None` for a comment, an empty line or a bare URL.
fn requirement_name(spec: &str) -> Option<String> {
    let spec = spec.trim();
    if spec.starts_with('#') || spec.contains("://") && !spec.contains('@') {
        return None;
    }
    let name: String = spec.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect();
    (!name.is_empty()).then(|| normalised_distribution(&name))
}

fn read_text_full(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The documented items of an installed package, read from the files that resolve inside its
/// folder.
fn package_entries(package: &Package) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut files = Vec::new();
    let mut bytes = 0u64;
    let walk_root = if package.ecosystem == "cargo" { package.dir.join("src") } else { package.dir.clone() };
    // Resolved like the files under it, so that their paths relative to it give module paths.
    let walk_root = within(&package.dir, &walk_root).unwrap_or(walk_root);
    if walk_root.is_file() {
        files.push(walk_root.clone());
    } else {
        let walker = ignore::WalkBuilder::new(&walk_root).standard_filters(false).build();
        for entry in walker.flatten() {
            let path = entry.path();
            // Within the package (its own folder sits in a `node_modules` too), from a `/`.
            let name = format!("/{}", path.strip_prefix(&walk_root).unwrap_or(path).to_string_lossy());
            let wanted = match package.ecosystem.as_str() {
                "cargo" => name.ends_with(".rs"),
                "npm" => name.ends_with(".d.ts") && !name.contains("/node_modules/"),
                _ => name.ends_with(".py") && !name.contains("/tests/") && !name.contains("/test/"),
            };
            if !wanted {
                continue;
            }
            let Some(file) = within(&package.dir, path) else { continue };
            bytes += entry.metadata().map_or(0, |metadata| metadata.len());
            if files.len() >= MAX_PACKAGE_FILES || bytes > MAX_PACKAGE_BYTES {
                break;
            }
            files.push(file);
        }
    }
    let readme = std::fs::read_dir(&package.dir)
        .into_iter()
        .flatten()
        .flatten()
        .find(|entry| entry.file_name().to_string_lossy().to_ascii_lowercase().starts_with("readme"))
        .and_then(|entry| within(&package.dir, &entry.path()));
    if let Some(readme) = readme {
        for (title, line, body) in markdown_sections(&read_text(&readme)) {
            entries.push(Entry {
                source: package.name.clone(),
                version: Some(package.version.clone()),
                name: title,
                kind: "readme".into(),
                signature: String::new(),
                doc: body,
                file: readme.display().to_string(),
                line,
            });
        }
    }
    for file in files {
        if interrupted() {
            break;
        }
        let display = file.display().to_string();
        let Some(language) = Language::of(&display) else { continue };
        let Ok(source) = std::fs::read_to_string(&file) else { continue };
        let parsed = parse::parse(&display, language, &source);
        let relative = file.strip_prefix(&walk_root).map(Path::to_owned).unwrap_or_default();
        let module = module_path(package, &relative);
        if !parsed.doc.is_empty() {
            entries.push(Entry {
                source: package.name.clone(),
                version: Some(package.version.clone()),
                name: module.clone(),
                kind: "module".into(),
                signature: String::new(),
                doc: parsed.doc.clone(),
                file: display.clone(),
                line: 1,
            });
        }
        for chunk in parsed.chunks {
            let public = match package.ecosystem.as_str() {
                "cargo" => chunk.signature.starts_with("pub ") || chunk.signature.starts_with("pub(") && !chunk.signature.starts_with("pub(crate)"),
                "pypi" => !chunk.name.rsplit('.').next().unwrap_or_default().starts_with('_'),
                _ => true,
            };
            let documented = !chunk.doc.is_empty() || matches!(chunk.kind.as_str(), "impl" | "trait");
            if !public || !documented || chunk.kind == "impl" {
                continue;
            }
            let separator = if package.ecosystem == "cargo" { "::" } else { "." };
            entries.push(Entry {
                source: package.name.clone(),
                version: Some(package.version.clone()),
                name: format!("{module}{separator}{}", chunk.name),
                kind: chunk.kind,
                signature: chunk.signature,
                doc: chunk.doc,
                file: display.clone(),
                line: chunk.start_line,
            });
        }
    }
    entries
}

/// `serde_json::de` for `src/de.rs` of serde_json; `requests.adapters` for `requests/adapters.py`.
fn module_path(package: &Package, relative: &Path) -> String {
    let crate_name = package.name.replace('-', "_");
    let text = relative.to_string_lossy();
    let text = text.trim_end_matches(".d.ts").trim_end_matches(".rs").trim_end_matches(".py").trim_end_matches(".ts");
    let parts: Vec<&str> = text.split('/').filter(|part| !matches!(*part, "" | "lib" | "main" | "mod" | "__init__" | "index")).collect();
    let separator = if package.ecosystem == "cargo" { "::" } else { "." };
    std::iter::once(crate_name.as_str()).chain(parts).collect::<Vec<_>>().join(separator)
}

/// `(title, line, body)` per heading of a Markdown text.
fn markdown_sections(text: &str) -> Vec<(String, usize, String)> {
    let mut sections: Vec<(String, usize, String)> = Vec::new();
    let mut in_code = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            sections.push((line.trim_start_matches('#').trim().to_owned(), number + 1, String::new()));
        } else {
            if sections.is_empty() {
                sections.push((String::new(), 1, String::new()));
            }
            let body = &mut sections.last_mut().expect("a section exists").2;
            if body.len() < 16 * 1024 {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    sections.retain(|(title, _, body)| !title.is_empty() || !body.trim().is_empty());
    sections
}

/// The documentation index in memory: what it was built from, and the index.
#[derive(Default)]
pub(crate) struct DocsState {
    fingerprint: String,
    entries: Vec<Entry>,
    search: SearchIndex,
}

impl CodeIndex {
    /// The project's documentation files: READMEs, `docs/`, changelogs and other Markdown.
    pub fn doc_files(&self) -> Result<Vec<String>> {
        let (state, _) = self.fresh()?;
        Ok(state.all_files.iter().filter(|file| file.ends_with(".md") || file.ends_with(".rst") || file.ends_with(".txt") && file.starts_with("docs/")).cloned().collect())
    }

    fn project_entries(&self) -> Result<Vec<Entry>> {
        let files = self.doc_files()?;
        let mut entries = Vec::new();
        for file in files {
            for (title, line, body) in markdown_sections(&self.confinement().read_text(&file)) {
                entries.push(Entry { source: "project".into(), version: None, name: title, kind: "doc".into(), signature: String::new(), doc: body, file: file.clone(), line });
            }
        }
        let state = self.lock();
        for (path, file) in &state.files {
            if !file.doc.is_empty() {
                entries.push(Entry { source: "project".into(), version: None, name: path.clone(), kind: "module".into(), signature: String::new(), doc: file.doc.clone(), file: path.clone(), line: 1 });
            }
        }
        for (path, chunk) in state.chunks.values() {
            if !chunk.doc.is_empty() {
                entries.push(Entry {
                    source: "project".into(),
                    version: None,
                    name: chunk.name.clone(),
                    kind: chunk.kind.clone(),
                    signature: chunk.signature.clone(),
                    doc: chunk.doc.clone(),
                    file: path.clone(),
                    line: chunk.start_line,
                });
            }
        }
        Ok(entries)
    }

    /// The documented items of `package`, read once per version and kept in the index file.
    fn dependency_entries(&self, package: &Package) -> Result<Vec<Entry>> {
        let key = format!("{}:{}@{}", package.ecosystem, package.name, package.version);
        let mut state = self.lock();
        let conn = state.store_conn();
        let error = |error: rusqlite::Error| Error::Index { path: "code index".into(), message: error.to_string() };
        let known: bool = conn.query_row("SELECT EXISTS(SELECT 1 FROM dep_packages WHERE key = ?1)", [&key], |row| row.get(0)).map_err(error)?;
        if !known {
            drop(state);
            let entries = package_entries(package);
            if interrupted() {
                return Err(Error::Interrupted);
            }
            state = self.lock();
            let conn = state.store_conn_mut();
            let tx = conn.transaction().map_err(error)?;
            tx.execute("DELETE FROM dep_docs WHERE key = ?1", [&key]).map_err(error)?;
            for entry in &entries {
                tx.execute(
                    "INSERT INTO dep_docs (key, name, kind, signature, doc, file, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![key, entry.name, entry.kind, entry.signature, entry.doc, entry.file, entry.line as i64],
                )
                .map_err(error)?;
            }
            tx.execute("INSERT OR REPLACE INTO dep_packages (key) VALUES (?1)", [&key]).map_err(error)?;
            tx.commit().map_err(error)?;
            return Ok(entries);
        }
        let mut statement = state.store_conn().prepare("SELECT name, kind, signature, doc, file, line FROM dep_docs WHERE key = ?1").map_err(error)?;
        let rows = statement
            .query_map([&key], |row| {
                Ok(Entry {
                    source: package.name.clone(),
                    version: Some(package.version.clone()),
                    name: row.get(0)?,
                    kind: row.get(1)?,
                    signature: row.get(2)?,
                    doc: row.get(3)?,
                    file: row.get(4)?,
                    line: usize::try_from(row.get::<_, i64>(5)?).unwrap_or(0),
                })
            })
            .map_err(error)?;
        rows.collect::<std::result::Result<_, _>>().map_err(error)
    }

    /// Full-text search over the project's documentation and its dependencies'.
    pub fn search_docs(&self, query: &str, scope: DocScope, sources: &DocSources, limit: usize) -> Result<DocSearchView> {
        let packages = if scope == DocScope::Project { Vec::new() } else { installed_packages(self.confinement(), sources) };
        let mut entries = if scope == DocScope::Dependencies { Vec::new() } else { self.project_entries()? };
        for package in &packages {
            entries.extend(self.dependency_entries(package)?);
        }
        let fingerprint = fingerprint(&entries);
        let mut docs = self.docs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if docs.fingerprint != fingerprint {
            let mut search = SearchIndex::new();
            for (key, entry) in entries.iter().enumerate() {
                let id = format!("d{key}");
                let text = with_identifier_words(&format!("{}\n{}\n{}\n{}", entry.name, entry.signature, entry.doc, entry.source));
                let doc = DocInput {
                    id: &id,
                    kind: MemoryKind::Semantic,
                    status: Status::Active,
                    namespace: "docs",
                    tags: &[],
                    confidence: 1.0,
                    occurred_at: DateTime::<Utc>::UNIX_EPOCH,
                    text: &text,
                    facets: &[],
                };
                search.upsert(i64::try_from(key).unwrap_or(i64::MAX), &doc, &[]);
            }
            *docs = DocsState { fingerprint, entries, search };
        }
        let hits = docs
            .search
            .search_text(&with_identifier_words(query), &SearchFilter::active(), limit.clamp(1, crate::MAX_LIMIT))
            .into_iter()
            .filter_map(|hit| {
                let key: usize = hit.id.as_str().strip_prefix('d')?.parse().ok()?;
                Some(docs.entries.get(key)?.hit(hit.score))
            })
            .collect();
        Ok(DocSearchView { query: query.to_owned(), scope: scope.name().to_owned(), hits, packages_searched: packages.len() })
    }

    /// The documentation of a named item: `serde_json::from_str`, `requests.get`,
    /// `kenning_core::FieldError` (a crate of this workspace), or a bare name in this project.
    pub fn api(&self, name: &str, sources: &DocSources) -> Result<ApiView> {
        let separator = if name.contains("::") { "::" } else { "." };
        let parts: Vec<&str> = name.split(separator).filter(|part| !part.is_empty()).collect();
        let last = parts.last().copied().unwrap_or(name);
        let package_name = parts.first().map(|first| first.replace('-', "_")).unwrap_or_default();
        let mut candidates: Vec<Entry> = Vec::new();
        let packages = installed_packages(self.confinement(), sources);
        let wanted = parts.join(separator);
        // A public name a package imports from where it is defined (`pytest.fixture` is
        // `_pytest.fixtures.fixture`) is looked up where it is defined too.
        let defined_at = if separator == "." { python_reexport(&packages, &wanted) } else { None };
        let mut searched: Vec<&Package> = Vec::new();
        if parts.len() > 1
            && let Some(package) = packages.iter().find(|package| package.name.replace('-', "_") == package_name)
        {
            searched.push(package);
        }
        if let Some(defined_at) = &defined_at
            && let Some(package) = packages.iter().find(|package| package.ecosystem == "pypi" && defined_at.split('.').next() == Some(package.name.as_str()))
            && !searched.contains(&package)
        {
            searched.push(package);
        }
        for package in searched {
            candidates.extend(self.dependency_entries(package)?);
        }
        if candidates.is_empty() {
            let (state, _) = self.fresh()?;
            // A crate of this workspace, or any definition of the project.
            let crate_dir = state.manifests.crates.get(&package_name).cloned();
            for (path, chunk) in state.chunks.values() {
                let inside = crate_dir.as_ref().is_none_or(|dir| dir.is_empty() || path.starts_with(&format!("{dir}/")));
                if inside {
                    candidates.push(Entry {
                        source: "project".into(),
                        version: None,
                        name: chunk.name.clone(),
                        kind: chunk.kind.clone(),
                        signature: chunk.signature.clone(),
                        doc: chunk.doc.clone(),
                        file: path.clone(),
                        line: chunk.start_line,
                    });
                }
            }
        }
        let rank = |entry: &Entry| -> Option<u8> {
            let entry_last = entry.name.rsplit([':', '.']).next().unwrap_or(&entry.name);
            if entry.name == wanted || defined_at.as_deref() == Some(entry.name.as_str()) {
                Some(0)
            } else if entry_last == last && entry.kind != "readme" {
                Some(if entry.doc.is_empty() { 2 } else { 1 })
            } else {
                None
            }
        };
        let mut matches: Vec<(u8, Entry)> = candidates.into_iter().filter_map(|entry| rank(&entry).map(|rank| (rank, entry))).collect();
        matches.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.len().cmp(&b.1.name.len())).then_with(|| a.1.file.cmp(&b.1.file)));
        let mut hits = matches.into_iter().map(|(_, entry)| entry.hit(1.0));
        let item = hits.next();
        Ok(ApiView { name: name.to_owned(), item, others: hits.take(9).collect() })
    }
}

/// Where a Python package's public name is defined when a module of the package imports it
/// from elsewhere (`from _pytest.fixtures import fixture` in `pytest/__init__.py` makes
/// `pytest.fixture` the function `_pytest.fixtures.fixture`), following a chain of such imports
/// a few steps; `None` when the name is not imported by its module.
fn python_reexport(packages: &[Package], dotted: &str) -> Option<String> {
    const MAX_STEPS: usize = 4;
    let mut current = dotted.to_owned();
    let mut resolved = None;
    for _ in 0..MAX_STEPS {
        let Some((module, item)) = current.rsplit_once('.') else { break };
        let Some(package) = packages.iter().find(|package| package.ecosystem == "pypi" && module.split('.').next() == Some(package.name.as_str())) else { break };
        let inner: Vec<&str> = module.split('.').skip(1).collect();
        let as_package = inner.iter().fold(package.dir.clone(), |dir, part| dir.join(part));
        let (file, is_package) = if as_package.join("__init__.py").is_file() {
            (as_package.join("__init__.py"), true)
        } else if package.dir.is_file() && inner.is_empty() {
            (package.dir.clone(), false)
        } else {
            (as_package.with_extension("py"), false)
        };
        // The module read must resolve inside the package's own folder.
        let Some(file) = within(&package.dir, &file) else { break };
        let Some((origin, name)) = imported_name(&read_text(&file), module, is_package, item) else { break };
        current = format!("{origin}.{name}");
        resolved = Some(current.clone());
    }
    resolved
}

/// The module and name that `item` is imported from in the source of `module` (a package's
/// `__init__.py` when `is_package`): `from a.b import c as item` gives `("a.b", "c")`; relative
/// imports are made absolute.
fn imported_name(source: &str, module: &str, is_package: bool, item: &str) -> Option<(String, String)> {
    let mut statements = Vec::new();
    let mut open: Option<String> = None;
    for line in source.lines() {
        let line = line.split('#').next().unwrap_or_default();
        if let Some(statement) = open.as_mut() {
            statement.push(' ');
            statement.push_str(line.trim());
            if line.contains(')') {
                statements.push(open.take().unwrap_or_default());
            }
        } else if line.starts_with("from ") {
            if line.contains('(') && !line.contains(')') {
                open = Some(line.trim().to_owned());
            } else {
                statements.push(line.trim().to_owned());
            }
        }
    }
    for statement in statements {
        let Some((from, names)) = statement.strip_prefix("from ").and_then(|rest| rest.split_once(" import ")) else { continue };
        let names = names.replace(['(', ')', '\\'], " ");
        for name in names.split(',') {
            let mut words = name.split_whitespace();
            let (Some(original), alias) = (words.next(), words.nth(1)) else { continue };
            if alias.unwrap_or(original) != item || original == "*" {
                continue;
            }
            let from = from.trim();
            let dots = from.chars().take_while(|c| *c == '.').count();
            let origin = if dots == 0 {
                from.to_owned()
            } else {
                // `.x` in a package's __init__ is its own submodule; in a module, a sibling.
                let mut base: Vec<&str> = module.split('.').collect();
                let up = if is_package { dots - 1 } else { dots };
                base.truncate(base.len().checked_sub(up)?);
                let rest = &from[dots..];
                if rest.is_empty() { base.join(".") } else { format!("{}.{rest}", base.join(".")) }
            };
            return Some((origin, original.to_owned()));
        }
    }
    None
}

fn fingerprint(entries: &[Entry]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for entry in entries {
        (&entry.source, &entry.name, &entry.file, entry.line, &entry.doc).hash(&mut hasher);
    }
    format!("{}:{:x}", entries.len(), hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `dependencies = ["pytest"]` on one line and Poetry's `name = "version"`
    /// tables were not read (the line reader skipped every line holding ` = `).
    #[test]
    fn python_manifests_are_read_in_every_form() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("PEP 621, one line", "[project]\nname = \"app\"\ndependencies = [\"pytest\", \"requests[socks]>=2.31; python_version > '3.8'\"]\n", &["pytest", "requests"]),
            (
                "PEP 621, one per line, optional dependencies",
                "[project]\nname = \"app\"\ndependencies = [\n    \"Flask>=3\",\n    'typing-extensions',\n]\n\n[project.optional-dependencies]\ndev = [\"mypy\"]\n",
                &["flask", "typing_extensions", "mypy"],
            ),
            ("PEP 735 groups", "[dependency-groups]\ntest = [\"pytest>=8\", {include-group = \"lint\"}]\nlint = [\"ruff\"]\n", &["ruff", "pytest"]),
            (
                "Poetry tables",
                "[tool.poetry]\nname = \"app\"\n\n[tool.poetry.dependencies]\npython = \"^3.11\"\nrequests = \"^2.31\"\n\"zope.interface\" = { version = \"6\" }\n\n[tool.poetry.group.dev.dependencies]\npytest = \"^8\"\n",
                &["requests", "zope_interface", "pytest"],
            ),
            ("not TOML", "[project\ndependencies = [\"pytest\"", &[]),
        ];
        for (form, text, expected) in cases {
            let mut found = pyproject_declared(text);
            found.sort();
            let mut expected: Vec<String> = expected.iter().map(|name| (*name).to_owned()).collect();
            expected.sort();
            assert_eq!(found, expected, "{form}");
        }
    }

    #[test]
    fn requirements_files_and_setup_cfg_are_read() {
        let requirements = "# pinned\npytest==8.2.0  # tests\nDjango>=5\n-r base.txt\n-e ./local\n--index-url https://pypi.example/simple\nhttps://example.com/pkg.whl\nattrs @ https://example.com/attrs.whl\n\nzope.interface\n";
        assert_eq!(requirements_declared(requirements), ["pytest", "django", "attrs", "zope_interface"]);
        let setup_cfg = "[metadata]\nname = app\n\n[options]\ninstall_requires =\n    click>=8\n    rich\npython_requires = >=3.9\n";
        assert_eq!(setup_cfg_declared(setup_cfg), ["click", "rich"]);
    }

    #[test]
    fn cargo_manifests_are_read_with_a_toml_parser() {
        let manifest = r#"
[package]
name = "app"

[dependencies]
serde = { version = "1", features = ["derive"] }
rand = "0.9"
local = { path = "../local" }
tokio.workspace = true
json = { package = "serde_json", version = "1" }

[target.'cfg(unix)'.dependencies]
libc = "0.2"

[dev-dependencies]
insta = "1"

[workspace.dependencies]
tokio = "1"
"#;
        let mut found = cargo_declared(manifest);
        found.sort();
        assert_eq!(found, ["insta", "libc", "rand", "serde", "serde_json", "tokio"]);
    }

    #[test]
    fn re_exports_are_followed_to_where_a_name_is_defined() {
        let source = "\"\"\"pytest.\"\"\"\nfrom _pytest.fixtures import fixture\nfrom _pytest.python_api import (\n    approx,\n    raises as raises,  # re-exported\n)\nfrom .sub import thing as alias\n";
        assert_eq!(imported_name(source, "pytest", true, "fixture"), Some(("_pytest.fixtures".into(), "fixture".into())));
        assert_eq!(imported_name(source, "pytest", true, "raises"), Some(("_pytest.python_api".into(), "raises".into())));
        assert_eq!(imported_name(source, "pytest", true, "alias"), Some(("pytest.sub".into(), "thing".into())));
        assert_eq!(imported_name("from ..core import run\n", "pkg.api.v1", false, "run"), Some(("pkg.core".into(), "run".into())));
        assert_eq!(imported_name(source, "pytest", true, "missing"), None);
    }
}
