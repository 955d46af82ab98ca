//! What the `repo` tools say about a file or directory: its purpose, relations, patterns,
//! conventions, tests and history, read from the index, the graph and git.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::confine::Confinement;
use crate::error::Result;
use crate::git;
use crate::index::{CodeIndex, State};
use crate::lang::Language;
use crate::parse::Chunk;
use crate::views::{DependenciesView, DependencyEdge, Outline, UnderstandView};

/// The deepest transitive dependency walk allowed.
pub const MAX_DEPTH: usize = 10;
/// The most entries an outline or a file list holds.
const MAX_LISTED: usize = 100;

/// How much [`CodeIndex::understand`] says about a file: its summary, or with its transitive
/// dependencies too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    Shallow,
    Deep,
}

/// Which way a dependency question looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Imports,
    ImportedBy,
    Both,
}

impl Direction {
    pub fn parse(text: &str) -> std::result::Result<Direction, kenning_core::FieldError> {
        match text {
            "imports" => Ok(Direction::Imports),
            "imported_by" => Ok(Direction::ImportedBy),
            "both" => Ok(Direction::Both),
            _ => Err(kenning_core::FieldError::new("direction", "is not an allowed value", text, "use `imports`, `imported_by` or `both`")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Direction::Imports => "imports",
            Direction::ImportedBy => "imported_by",
            Direction::Both => "both",
        }
    }
}

impl CodeIndex {
    /// What `path` (confined, relative; a file or a directory) imports and is imported by,
    /// within `depth` steps.
    pub fn dependencies(&self, path: &str, direction: Direction, depth: usize) -> Result<DependenciesView> {
        let (state, _) = self.fresh()?;
        Ok(dependencies(&state, path, direction, depth.clamp(1, MAX_DEPTH)))
    }

    /// A summary of a file or directory (`path` confined and relative; `""` is the root).
    pub fn understand(&self, path: &str, depth: Depth) -> Result<UnderstandView> {
        let (state, _) = self.fresh()?;
        let is_dir = self.confinement().absolute(path).is_dir();
        let mut view = if is_dir { understand_directory(&state, self.confinement(), path) } else { understand_file(&state, path) };
        view.last_modified = git::last_change(self.root(), path);
        if depth == Depth::Deep && !is_dir {
            view.transitive = Some(dependencies(&state, path, Direction::Both, 2));
        }
        Ok(view)
    }

    /// Test files that exercise `paths` (relative): by naming convention and through the
    /// import graph (tests that import them, directly or within a few steps).
    pub fn tests_for(&self, paths: &[String]) -> Result<Vec<TestLink>> {
        let (state, _) = self.fresh()?;
        Ok(tests_for(&state, paths))
    }

    /// The repository's layout: top-level entries with their files per language and the
    /// manifests that tell what kind of project it is.
    pub fn structure(&self) -> Result<Structure> {
        let (state, _) = self.fresh()?;
        let mut directories: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        let mut top_files = Vec::new();
        for file in &state.all_files {
            match file.split_once('/') {
                Some((top, _)) => {
                    let language = Language::of(file).map_or("other", Language::name).to_owned();
                    *directories.entry(top.to_owned()).or_default().entry(language).or_default() += 1;
                }
                None => top_files.push(file.clone()),
            }
        }
        let manifests = state
            .all_files
            .iter()
            .filter(|file| {
                matches!(file.rsplit('/').next(), Some("Cargo.toml" | "package.json" | "pyproject.toml" | "setup.py" | "go.mod" | "requirements.txt"))
            })
            .take(MAX_LISTED)
            .cloned()
            .collect();
        let mut languages: BTreeMap<String, usize> = BTreeMap::new();
        for file in state.files.keys() {
            if let Some(language) = Language::of(file) {
                *languages.entry(language.name().to_owned()).or_default() += 1;
            }
        }
        Ok(Structure {
            files: state.all_files.len(),
            languages,
            top_level_files: top_files,
            directories: directories.into_iter().map(|(path, files)| DirectorySummary { path, files }).take(MAX_LISTED).collect(),
            manifests,
        })
    }

    /// Conventions observed across the repository, per language.
    pub fn conventions(&self) -> Result<BTreeMap<String, Vec<String>>> {
        let (state, _) = self.fresh()?;
        let mut by_language: BTreeMap<Language, Vec<&str>> = BTreeMap::new();
        for path in state.files.keys() {
            if let Some(language) = Language::of(path) {
                by_language.entry(language).or_default().push(path);
            }
        }
        let mut out = BTreeMap::new();
        for (language, paths) in by_language {
            let chunks: Vec<&Chunk> = paths.iter().flat_map(|path| state.chunks_of(path)).collect();
            let mut observed = conventions(language, &chunks);
            let tests: Vec<&&str> = paths.iter().filter(|path| is_test_file(path, language)).collect();
            observed.push(format!("{} of {} files are test files", tests.len(), paths.len()));
            out.insert(language.name().to_owned(), observed);
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Structure {
    pub files: usize,
    /// Source files per language.
    pub languages: BTreeMap<String, usize>,
    pub top_level_files: Vec<String>,
    pub directories: Vec<DirectorySummary>,
    pub manifests: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DirectorySummary {
    pub path: String,
    /// Files per language (`other` for everything else).
    pub files: BTreeMap<String, usize>,
}

/// A test file and why it belongs to a changed file.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
pub struct TestLink {
    pub test_file: String,
    /// The changed file it covers.
    pub covers: String,
    /// `same_file` (tests inside it), `naming` (by convention) or `imports` (through the graph).
    pub reason: String,
}

fn dependencies(state: &State, path: &str, direction: Direction, depth: usize) -> DependenciesView {
    let edges = |reverse: bool| -> Vec<DependencyEdge> {
        if path.is_empty() || !state.files.contains_key(path) {
            // A directory: the union over its files, leaving out edges within it.
            let prefix = if path.is_empty() { String::new() } else { format!("{path}/") };
            let inside: Vec<&String> = state.files.keys().filter(|file| file.starts_with(&prefix)).collect();
            let mut best: BTreeMap<String, usize> = BTreeMap::new();
            for file in inside {
                for (other, distance) in state.graph.reach(file, reverse, depth) {
                    if !other.starts_with(&prefix) {
                        let entry = best.entry(other).or_insert(distance);
                        *entry = (*entry).min(distance);
                    }
                }
            }
            let mut list: Vec<DependencyEdge> = best.into_iter().map(|(path, distance)| DependencyEdge { path, distance }).collect();
            list.sort_by(|a, b| a.distance.cmp(&b.distance).then_with(|| a.path.cmp(&b.path)));
            list.truncate(MAX_LISTED);
            list
        } else {
            let mut list: Vec<DependencyEdge> =
                state.graph.reach(path, reverse, depth).into_iter().map(|(path, distance)| DependencyEdge { path, distance }).collect();
            list.truncate(MAX_LISTED);
            list
        }
    };
    DependenciesView {
        path: path.to_owned(),
        direction: direction.name().to_owned(),
        depth,
        imports: matches!(direction, Direction::Imports | Direction::Both).then(|| edges(false)),
        imported_by: matches!(direction, Direction::ImportedBy | Direction::Both).then(|| edges(true)),
        external: state.graph.external.get(path).map(|set| set.iter().cloned().collect()).unwrap_or_default(),
    }
}

fn understand_file(state: &State, path: &str) -> UnderstandView {
    let language = Language::of(path);
    let chunks = state.chunks_of(path);
    let file = state.files.get(path);
    let doc = file.map(|file| file.doc.clone()).unwrap_or_default();
    let purpose = if !doc.is_empty() {
        doc
    } else if let Some(chunk) = chunks.iter().find(|chunk| !chunk.doc.is_empty()) {
        format!("{} {}: {}", chunk.kind, chunk.name, chunk.doc)
    } else if language.is_none() {
        "not a source file the index parses".to_owned()
    } else {
        "no documentation: read its outline".to_owned()
    };
    let list = |set: Option<&BTreeSet<String>>| set.map(|set| set.iter().take(MAX_LISTED).cloned().collect()).unwrap_or_default();
    let test_files = tests_for(state, &[path.to_owned()]).into_iter().map(|link| link.test_file).collect::<BTreeSet<_>>().into_iter().collect();
    UnderstandView {
        path: path.to_owned(),
        kind: "file".to_owned(),
        language,
        purpose,
        lines: file.map_or(0, |file| usize::try_from(file.lines).unwrap_or(0)),
        imports_from: list(state.graph.imports.get(path)),
        imported_by: list(state.graph.imported_by.get(path)),
        external_imports: list(state.graph.external.get(path)),
        patterns: language.map(|language| patterns(language, &chunks)).unwrap_or_default(),
        conventions_observed: language.map(|language| conventions(language, &chunks)).unwrap_or_default(),
        test_files,
        outline: chunks
            .iter()
            .take(MAX_LISTED)
            .map(|chunk| Outline {
                name: chunk.name.clone(),
                kind: chunk.kind.clone(),
                line: chunk.start_line,
                signature: chunk.signature.clone(),
                doc: chunk.doc.lines().next().unwrap_or_default().to_owned(),
            })
            .collect(),
        last_modified: None,
        transitive: None,
    }
}

fn understand_directory(state: &State, confinement: &Confinement, path: &str) -> UnderstandView {
    let prefix = if path.is_empty() { String::new() } else { format!("{path}/") };
    let files: Vec<&String> = state.files.keys().filter(|file| file.starts_with(&prefix)).collect();
    let deps = dependencies(state, path, Direction::Both, 1);
    let mut languages: BTreeMap<Language, usize> = BTreeMap::new();
    for file in &files {
        if let Some(language) = Language::of(file) {
            *languages.entry(language).or_default() += 1;
        }
    }
    let language = languages.iter().max_by_key(|(_, count)| **count).map(|(language, _)| *language);
    let readme = state.all_files.iter().find(|file| {
        file.strip_prefix(&prefix).is_some_and(|rest| !rest.contains('/') && rest.to_ascii_lowercase().starts_with("readme"))
    });
    // The purpose of a directory: its module file's documentation (lib.rs, __init__.py,
    // index.ts, doc.go), else its README's first paragraph.
    let module_doc = files
        .iter()
        .filter(|file| {
            let name = file.strip_prefix(&prefix).unwrap_or(file);
            matches!(name, "src/lib.rs" | "lib.rs" | "mod.rs" | "src/main.rs" | "__init__.py" | "index.ts" | "index.js" | "doc.go")
        })
        .filter_map(|file| state.files.get(*file).map(|row| row.doc.clone()))
        .find(|doc| !doc.is_empty());
    let purpose = module_doc
        .or_else(|| readme.and_then(|readme| first_paragraph(&confinement.read_text(readme))))
        .unwrap_or_else(|| format!("{} source files; see the outline for each file's purpose", files.len()));
    let chunks: Vec<&Chunk> = files.iter().flat_map(|file| state.chunks_of(file)).collect();
    let test_files: Vec<String> = files.iter().filter(|file| Language::of(file).is_some_and(|language| is_test_file(file, language))).take(MAX_LISTED).map(|file| (*file).clone()).collect();
    let external: BTreeSet<String> = files.iter().filter_map(|file| state.graph.external.get(*file)).flatten().cloned().collect();
    UnderstandView {
        path: path.to_owned(),
        kind: "directory".to_owned(),
        language,
        purpose,
        lines: files.iter().filter_map(|file| state.files.get(*file)).map(|file| usize::try_from(file.lines).unwrap_or(0)).sum(),
        imports_from: deps.imports.unwrap_or_default().into_iter().map(|edge| edge.path).collect(),
        imported_by: deps.imported_by.unwrap_or_default().into_iter().map(|edge| edge.path).collect(),
        external_imports: external.into_iter().take(MAX_LISTED).collect(),
        patterns: language.map(|language| patterns(language, &chunks)).unwrap_or_default(),
        conventions_observed: language.map(|language| conventions(language, &chunks)).unwrap_or_default(),
        test_files,
        outline: files
            .iter()
            .take(MAX_LISTED)
            .map(|file| {
                let row = state.files.get(*file);
                Outline {
                    name: (*file).clone(),
                    kind: "file".to_owned(),
                    line: 1,
                    signature: String::new(),
                    doc: row.and_then(|row| row.doc.lines().next().map(str::to_owned)).unwrap_or_default(),
                }
            })
            .collect(),
        last_modified: None,
        transitive: None,
    }
}

fn first_paragraph(text: &str) -> Option<String> {
    text.split("\n\n").map(str::trim).find(|paragraph| !paragraph.is_empty() && !paragraph.starts_with('#')).map(str::to_owned)
}

/// Whether a file is a test file by its language's conventions.
pub fn is_test_file(path: &str, language: Language) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match language {
        Language::Rust => path.starts_with("tests/") || path.contains("/tests/"),
        Language::Python => name.starts_with("test_") || name.ends_with("_test.py") || name == "conftest.py",
        Language::TypeScript | Language::JavaScript => {
            name.contains(".test.") || name.contains(".spec.") || path.contains("__tests__/")
        }
        Language::Go => name.ends_with("_test.go"),
    }
}

/// The stem of a file name without test markers: `test_auth.py`, `auth_test.go`,
/// `auth.spec.ts` all give `auth`.
fn subject_stem(name: &str) -> &str {
    let stem = name.split('.').next().unwrap_or(name);
    stem.strip_prefix("test_").or_else(|| stem.strip_suffix("_test")).unwrap_or(stem)
}

fn tests_for(state: &State, paths: &[String]) -> Vec<TestLink> {
    let mut links: BTreeSet<TestLink> = BTreeSet::new();
    for path in paths {
        let Some(language) = Language::of(path) else { continue };
        let link = |test_file: &str, reason: &str| TestLink { test_file: test_file.to_owned(), covers: path.clone(), reason: reason.to_owned() };
        if is_test_file(path, language) {
            links.insert(link(path, "same_file"));
            continue;
        }
        if language == Language::Rust && state.chunks_of(path).iter().any(|chunk| chunk.kind == "module" && chunk.name.ends_with("tests")) {
            links.insert(link(path, "same_file"));
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let stem = subject_stem(name);
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
        for file in state.files.keys() {
            if file == path || Language::of(file) != Some(language) && !(is_script(language) && Language::of(file).is_some_and(is_script)) {
                continue;
            }
            let Some(file_language) = Language::of(file) else { continue };
            if !is_test_file(file, file_language) {
                continue;
            }
            let file_name = file.rsplit('/').next().unwrap_or(file);
            let same_stem = subject_stem(file_name) == stem && file_name != name;
            let near = match language {
                Language::Go => file.rsplit_once('/').map_or("", |(dir, _)| dir) == dir,
                _ => true,
            };
            if same_stem && near {
                links.insert(link(file, "naming"));
            }
        }
        for (importer, _) in state.graph.reach(path, true, 4) {
            if Language::of(&importer).is_some_and(|language| is_test_file(&importer, language)) {
                links.insert(link(&importer, "imports"));
            }
        }
    }
    links.into_iter().collect()
}

fn is_script(language: Language) -> bool {
    matches!(language, Language::TypeScript | Language::JavaScript)
}

/// Patterns seen in the code: how errors are handled, whether it is asynchronous, how it is
/// tested, which frameworks it leans on. Plain textual evidence, each with its count.
fn patterns(language: Language, chunks: &[&Chunk]) -> Vec<String> {
    let text: String = chunks.iter().map(|chunk| chunk.text.as_str()).collect::<Vec<_>>().join("\n");
    let count = |needle: &str| text.matches(needle).count();
    let checks: &[(&str, &str)] = match language {
        Language::Rust => &[
            ("?;", "errors propagated with `?`"),
            ("Result<", "fallible functions return `Result`"),
            ("thiserror", "error enums derived with thiserror"),
            ("async fn", "async functions"),
            ("#[test]", "unit tests beside the code"),
            ("impl From<", "conversions through `From`"),
            ("tracing::", "logging through `tracing`"),
            ("Serialize", "serde serialisation"),
            ("unsafe ", "unsafe code"),
            ("Arc<", "shared ownership with `Arc`"),
            (".unwrap()", "`unwrap()` calls"),
        ],
        Language::Python => &[
            ("raise ", "exceptions raised"),
            ("except ", "exceptions caught"),
            ("async def", "async functions"),
            ("@dataclass", "dataclasses"),
            (") -> ", "type hints on return values"),
            ("with ", "context managers"),
            ("logging.", "logging through `logging`"),
            ("@pytest", "pytest fixtures and marks"),
            ("assert ", "plain `assert` checks"),
        ],
        Language::TypeScript | Language::JavaScript => &[
            ("async ", "async/await"),
            (".then(", "promise chains"),
            ("throw ", "errors thrown"),
            ("catch", "errors caught"),
            ("interface ", "interfaces for shapes"),
            ("useState", "React hooks"),
            ("export default", "default exports"),
            ("describe(", "test suites with describe/it"),
        ],
        Language::Go => &[
            ("if err != nil", "errors returned and checked (`if err != nil`)"),
            ("go func", "goroutines"),
            ("chan ", "channels"),
            ("context.Context", "context passed through calls"),
            ("defer ", "cleanup with `defer`"),
            ("t.Run(", "table-driven subtests"),
            ("fmt.Errorf", "wrapped errors with fmt.Errorf"),
        ],
    };
    let mut found: Vec<(usize, String)> = checks.iter().map(|(needle, label)| (count(needle), *label)).filter(|(n, _)| *n > 0).map(|(n, label)| (n, format!("{label} ({n}×)"))).collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, label)| label).collect()
}

/// Naming, documentation and layout conventions observed in chunks.
fn conventions(language: Language, chunks: &[&Chunk]) -> Vec<String> {
    let mut observed = Vec::new();
    let functions: Vec<&str> = chunks
        .iter()
        .filter(|chunk| matches!(chunk.kind.as_str(), "function" | "method"))
        .map(|chunk| chunk.name.rsplit([':', '.']).next().unwrap_or(&chunk.name))
        .collect();
    let mut styles: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &functions {
        *styles.entry(naming_style(name)).or_default() += 1;
    }
    if let Some((style, count)) = styles.iter().max_by_key(|(_, count)| **count) {
        observed.push(format!("{style} function names ({count} of {})", functions.len()));
    }
    let types: Vec<&&Chunk> = chunks.iter().filter(|chunk| matches!(chunk.kind.as_str(), "struct" | "enum" | "class" | "interface" | "trait" | "type")).collect();
    if !types.is_empty() {
        let pascal = types.iter().filter(|chunk| naming_style(&chunk.name) == "PascalCase").count();
        observed.push(format!("PascalCase type names ({pascal} of {})", types.len()));
        if is_script(language) {
            let prefixed = types.iter().filter(|chunk| chunk.kind == "interface" && chunk.name.starts_with('I') && chunk.name.chars().nth(1).is_some_and(char::is_uppercase)).count();
            if prefixed > 0 {
                observed.push(format!("interfaces prefixed with `I` ({prefixed})"));
            }
        }
    }
    if !chunks.is_empty() {
        let documented = chunks.iter().filter(|chunk| !chunk.doc.is_empty()).count();
        observed.push(format!("{documented} of {} definitions documented", chunks.len()));
    }
    let indented: Vec<&str> = chunks.iter().flat_map(|chunk| chunk.text.lines().skip(1)).filter(|line| line.starts_with([' ', '\t'])).collect();
    if !indented.is_empty() {
        let tabs = indented.iter().filter(|line| line.starts_with('\t')).count();
        if tabs * 2 > indented.len() {
            observed.push("indented with tabs".to_owned());
        } else {
            let width = indented.iter().map(|line| line.len() - line.trim_start_matches(' ').len()).filter(|width| *width > 0).min().unwrap_or(4);
            observed.push(format!("indented with {width} spaces"));
        }
    }
    observed
}

fn naming_style(name: &str) -> &'static str {
    let has_underscore = name.trim_matches('_').contains('_');
    let first_upper = name.chars().next().is_some_and(char::is_uppercase);
    let has_upper = name.chars().any(char::is_uppercase);
    let has_lower = name.chars().any(char::is_lowercase);
    match (has_underscore, first_upper, has_upper, has_lower) {
        (true, _, true, false) => "SCREAMING_CASE",
        (true, _, _, _) => "snake_case",
        (false, true, _, _) => "PascalCase",
        (false, false, true, _) => "camelCase",
        _ => "lowercase",
    }
}
