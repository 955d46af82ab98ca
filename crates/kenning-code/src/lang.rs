//! The languages the code index parses, told apart by file name.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Rust,
    Python,
    TypeScript,
    JavaScript,
    Go,
}

impl Language {
    pub const ALL: [Language; 5] = [Language::Rust, Language::Python, Language::TypeScript, Language::JavaScript, Language::Go];

    /// The language of a file, from its extension; `None` for a file the index does not parse.
    pub fn of(path: &str) -> Option<Language> {
        let extension = path.rsplit_once('.').map(|(_, extension)| extension)?;
        match extension {
            "rs" => Some(Language::Rust),
            "py" | "pyi" => Some(Language::Python),
            "ts" | "tsx" | "mts" | "cts" => Some(Language::TypeScript),
            "js" | "jsx" | "mjs" | "cjs" => Some(Language::JavaScript),
            "go" => Some(Language::Go),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::TypeScript => "typescript",
            Language::JavaScript => "javascript",
            Language::Go => "go",
        }
    }

    pub fn parse_name(name: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|language| language.name() == name)
    }

    /// The tree-sitter grammar for a file of this language (TSX files get the TSX grammar).
    pub(crate) fn grammar(self, path: &str) -> tree_sitter::Language {
        match self {
            Language::Rust => tree_sitter_rust::LANGUAGE.into(),
            Language::Python => tree_sitter_python::LANGUAGE.into(),
            Language::TypeScript if path.ends_with(".tsx") => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Language::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Language::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }
}
