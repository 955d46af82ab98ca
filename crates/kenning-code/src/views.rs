//! What the code tools return: plain data with JSON schemas, no protocol types.

use schemars::JsonSchema;
use serde::Serialize;

use crate::lang::Language;

/// What one refresh of the index did.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq, Eq)]
pub struct RefreshStats {
    /// Source files found in the repository.
    pub files: usize,
    /// Files parsed again because they are new or their content changed.
    pub parsed: usize,
    /// Files dropped from the index because they are gone.
    pub removed: usize,
    /// Chunks in the index after the refresh.
    pub chunks: usize,
}

/// One chunk found by a search.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ChunkHit {
    pub path: String,
    pub name: String,
    pub kind: String,
    pub language: Language,
    pub start_line: usize,
    pub end_line: usize,
    pub signature: String,
    /// The first line of its doc comment, if any.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub doc: String,
    /// Its first lines.
    pub snippet: String,
    pub score: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchView {
    pub query: String,
    /// Chunks found, best first.
    pub hits: Vec<ChunkHit>,
    /// How the ranking was made: `hybrid` (full text and vectors) or `full_text`.
    pub ranking: String,
    pub indexed: RefreshStats,
}

/// A file like the one asked about.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SimilarFile {
    pub path: String,
    pub score: f64,
    /// Its chunk that matched best.
    pub best_match: ChunkHit,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SimilarView {
    /// The file compared against, or `snippet`.
    pub source: String,
    pub files: Vec<SimilarFile>,
}

/// A file reached through the import graph.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq)]
pub struct DependencyEdge {
    pub path: String,
    /// 1 for a direct import, 2 for an import of an import, …
    pub distance: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DependenciesView {
    pub path: String,
    pub direction: String,
    pub depth: usize,
    /// Files this one imports (directly and, with depth > 1, transitively).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imports: Option<Vec<DependencyEdge>>,
    /// Files that import this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_by: Option<Vec<DependencyEdge>>,
    /// External packages this file imports directly.
    pub external: Vec<String>,
}

/// A definition in a file.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Outline {
    pub name: String,
    pub kind: String,
    pub line: usize,
    pub signature: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub doc: String,
}

/// Who last changed a path, from git.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GitChange {
    pub commit: String,
    /// RFC 3339.
    pub date: String,
    pub author: String,
    pub summary: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UnderstandView {
    pub path: String,
    /// `file` or `directory`.
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<Language>,
    /// What it is for, from its documentation (or its files' documentation, for a directory).
    pub purpose: String,
    pub lines: usize,
    pub imports_from: Vec<String>,
    pub imported_by: Vec<String>,
    pub external_imports: Vec<String>,
    pub patterns: Vec<String>,
    pub conventions_observed: Vec<String>,
    pub test_files: Vec<String>,
    /// Its definitions (a file) or its files with their purpose (a directory).
    pub outline: Vec<Outline>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<GitChange>,
    /// With `deep`: files reached within two imports, both ways.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transitive: Option<DependenciesView>,
}
