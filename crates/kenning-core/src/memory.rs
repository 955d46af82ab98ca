//! The memory record, its vocabulary (kinds, sources, statuses, namespaces) and its version history.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::error::{FieldError, closest};
use crate::urn::{Domain, MemoryUrn};

/// Declares a closed vocabulary: a `Copy` enum with its wire names, parsing with a
/// did-you-mean suggestion, and serde as a plain string.
macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident, $field:literal { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ::serde::Serialize, ::serde::Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn names() -> impl Iterator<Item = &'static str> {
                Self::ALL.iter().map(|value| value.as_str())
            }

            pub fn parse(text: &str) -> Result<Self, $crate::error::FieldError> {
                Self::ALL.iter().copied().find(|value| value.as_str() == text).ok_or_else(|| {
                    let allowed = Self::names().collect::<Vec<_>>().join(", ");
                    let suggestion = match $crate::error::closest(text, Self::names()) {
                        Some(near) => format!("did you mean `{near}`? allowed: {allowed}"),
                        None => format!("use one of: {allowed}"),
                    };
                    $crate::error::FieldError::new($field, "is not an allowed value", text, suggestion)
                })
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use vocabulary;

vocabulary!(
    /// The three kinds of long-term memory.
    MemoryKind, "kind" {
        Episodic => "episodic",
        Semantic => "semantic",
        Procedural => "procedural",
    }
);

vocabulary!(
    /// Where a memory's knowledge came from; it informs how far to trust it.
    Source, "source" {
        DirectObservation => "direct-observation",
        ToldByUser => "told-by-user",
        ToolResult => "tool-result",
        Inference => "inference",
        ModelGenerated => "model-generated",
    }
);

vocabulary!(
    /// Whether a memory takes part in recall. Forgetting is soft: the record and its history stay.
    Status, "status" {
        Active => "active",
        Forgotten => "forgotten",
    }
);

/// Namespaces every installation knows; any other valid name is a user-defined namespace.
pub const BUILT_IN_NAMESPACES: &[&str] = &[
    "decisions",
    "learnings",
    "patterns",
    "blockers",
    "progress",
    "context",
    "tech-debt",
    "apis",
    "config",
    "security",
    "performance",
    "testing",
    "preferences",
    "standards",
];

/// A validated namespace name: lower-case `[a-z0-9-]`, 1 to 64 characters, starting with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    pub fn parse(text: &str) -> Result<Namespace, FieldError> {
        let valid = !text.is_empty()
            && text.len() <= 64
            && !text.starts_with('-')
            && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if valid {
            return Ok(Namespace(text.to_owned()));
        }
        let normalised = normalise_name(text);
        let suggestion = match closest(text, BUILT_IN_NAMESPACES.iter().copied()) {
            Some(near) if near != normalised => format!("did you mean `{near}`? Names are lower-case [a-z0-9-]"),
            _ if !normalised.is_empty() => format!("use `{normalised}`: names are lower-case [a-z0-9-], at most 64 characters"),
            _ => "use a built-in namespace such as `learnings`, or a lower-case [a-z0-9-] name".to_string(),
        };
        Err(FieldError::new(
            "namespace",
            "must be lower-case letters, digits and hyphens (1-64 characters, not starting with a hyphen)",
            text,
            suggestion,
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn is_built_in(&self) -> bool {
        BUILT_IN_NAMESPACES.contains(&self.0.as_str())
    }

    /// The built-in namespace this user-defined one is a likely typo of, if any.
    pub fn near_built_in(&self) -> Option<&'static str> {
        if self.is_built_in() {
            return None;
        }
        closest(&self.0, BUILT_IN_NAMESPACES.iter().copied())
    }
}

/// Turns arbitrary text into the nearest valid name, for suggestions: `Tech Debt` becomes `tech-debt`.
fn normalise_name(text: &str) -> String {
    let mut name = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.ends_with('-') && !name.is_empty() {
            name.push('-');
        }
    }
    name.trim_end_matches('-').chars().take(64).collect()
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Namespace {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Namespace {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Namespace::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The longest author identity accepted.
const MAX_AUTHOR_CHARS: usize = 128;

/// Validates an author identity: 1 to 128 characters of `[A-Za-z0-9._@+:-]`, so that it can
/// stand in an audit line, a file name or a command line without quoting.
pub fn validate_author(text: &str) -> Result<String, FieldError> {
    let valid = !text.is_empty()
        && text.chars().count() <= MAX_AUTHOR_CHARS
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '+' | ':' | '-'));
    if valid {
        return Ok(text.to_owned());
    }
    let cleaned: String = text
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '+' | ':' | '-') { c } else { '-' })
        .take(MAX_AUTHOR_CHARS)
        .collect();
    let suggestion = if cleaned.is_empty() { "use a name such as `ci-bot` or `alice@example.com`".to_owned() } else { format!("use `{cleaned}`") };
    Err(FieldError::new("author", "must be 1-128 characters of [A-Za-z0-9._@+:-]", text, suggestion))
}

/// A memory's id inside its domain: 1 to 128 characters of `[A-Za-z0-9._:-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct MemoryId(String);

impl MemoryId {
    pub fn parse(text: &str) -> Result<MemoryId, FieldError> {
        let valid = !text.is_empty()
            && text.len() <= 128
            && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if valid {
            Ok(MemoryId(text.to_owned()))
        } else {
            Err(FieldError::new(
                "id",
                "must be 1-128 characters of [A-Za-z0-9._:-]",
                text,
                "use the id from the memory's URN, e.g. `01j9z3k4m5n6p7q8r9s0t1v2w3`",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for MemoryId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        MemoryId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A typed edge from one memory to another memory (in any domain).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub target: MemoryUrn,
    /// What the edge means, e.g. `relates-to`, `supersedes`, `derived-from`.
    pub relation: String,
}

/// One memory, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub id: MemoryId,
    pub domain: Domain,
    pub namespace: Namespace,
    pub kind: MemoryKind,
    pub title: String,
    pub content: String,
    pub tags: Vec<String>,
    pub category: Option<String>,
    pub source: Source,
    pub confidence: f64,
    pub salience: f64,
    pub status: Status,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the remembered thing happened, if it differs from when it was captured.
    pub event_time: Option<DateTime<Utc>>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub access_count: u64,
    pub links: Vec<Link>,
    pub metadata: BTreeMap<String, String>,
    /// Starts at 1 and grows by one with every change; each earlier version is kept in the history.
    pub version: u32,
    /// Who wrote the memory: the identity an HTTP API key maps to, else the configured user id.
    /// `None` on records written before authors were kept. Data-rights export and deletion
    /// (everything one author wrote) select on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

impl Memory {
    pub fn urn(&self) -> MemoryUrn {
        MemoryUrn::new(self.domain.clone(), self.namespace.clone(), self.id.clone())
    }

    /// The time the memory is about: its event time, else its capture time.
    pub fn occurred_at(&self) -> DateTime<Utc> {
        self.event_time.unwrap_or(self.created_at)
    }

    /// The key under which exact duplicates are detected inside one domain.
    pub fn content_hash(&self) -> String {
        content_hash(&self.namespace, &self.content)
    }

    /// The text that full-text and vector search index: title, tags and content.
    pub fn search_text(&self) -> String {
        let mut text = String::with_capacity(self.title.len() + self.content.len() + 16);
        if !self.content.starts_with(self.title.as_str()) {
            text.push_str(&self.title);
            text.push('\n');
        }
        if !self.tags.is_empty() {
            text.push_str(&self.tags.join(" "));
            text.push('\n');
        }
        text.push_str(&self.content);
        text
    }
}

/// Hex SHA-256 over the namespace and the content with surrounding whitespace trimmed.
pub fn content_hash(namespace: &Namespace, content: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(namespace.as_str().as_bytes());
    hasher.update([0]);
    hasher.update(content.trim().as_bytes());
    crate::hex(&hasher.finalize())
}

/// A superseded version of a memory: the full record as it was, and why it changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryVersion {
    pub version: u32,
    /// When this version was replaced.
    pub superseded_at: DateTime<Utc>,
    /// The reason given for the change that replaced it.
    pub reason: String,
    pub memory: Memory,
}
