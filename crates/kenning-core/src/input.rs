//! Turning what a caller sends into valid records: capture, update and status changes.
//!
//! Every function here is pure: the caller supplies the clock reading and the new id, so the
//! same input always gives the same record or the same [`FieldError`].

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::memory::{Link, Memory, MemoryId, MemoryKind, MemoryVersion, Namespace, Source, Status, validate_author};
use crate::urn::{Domain, MemoryUrn};

pub const MAX_TITLE_CHARS: usize = 200;
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
pub const MAX_TAGS: usize = 32;
const MAX_TAG_CHARS: usize = 64;
const MAX_METADATA_ENTRIES: usize = 64;
const MAX_METADATA_KEY_CHARS: usize = 64;
const MAX_METADATA_VALUE_BYTES: usize = 4096;
pub const MAX_LINKS: usize = 64;
const DEFAULT_NAMESPACE: &str = "context";
const DEFAULT_SALIENCE: f64 = 0.5;

/// What a caller sends to capture a memory. Vocabulary fields are strings so that a wrong value
/// gets a [`FieldError`] with a suggestion rather than a deserialisation failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureInput {
    pub content: String,
    pub title: Option<String>,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    pub category: Option<String>,
    pub source: Option<String>,
    pub confidence: Option<f64>,
    pub salience: Option<f64>,
    /// RFC 3339 timestamp or `YYYY-MM-DD` of when the remembered thing happened.
    pub event_time: Option<String>,
    #[serde(default)]
    pub links: Vec<LinkInput>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Who is capturing: set by the front end from the caller's identity (the configured user,
    /// or an HTTP API key's identity), never from a tool argument. `None` lets the engine use
    /// its default author.
    #[serde(default)]
    pub author: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkInput {
    pub target: String,
    pub relation: Option<String>,
}

/// A change to an existing memory; absent fields stay as they are. The reason is required and
/// is kept with the version this change supersedes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateInput {
    pub reason: String,
    pub title: Option<String>,
    pub content: Option<String>,
    pub kind: Option<String>,
    pub tags: Option<Vec<String>>,
    pub category: Option<String>,
    pub source: Option<String>,
    pub confidence: Option<f64>,
    pub salience: Option<f64>,
    pub event_time: Option<String>,
    pub links: Option<Vec<LinkInput>>,
    pub metadata: Option<BTreeMap<String, String>>,
}

/// The kind a namespace's memories usually are, used when a capture names no kind.
fn default_kind(namespace: &Namespace) -> MemoryKind {
    match namespace.as_str() {
        "decisions" | "progress" | "blockers" | "context" => MemoryKind::Episodic,
        "patterns" | "standards" => MemoryKind::Procedural,
        _ => MemoryKind::Semantic,
    }
}

/// The starting confidence a source earns when the caller states none: first-hand knowledge
/// is trusted more than a model's own guess.
pub(crate) fn default_confidence(source: Source) -> f64 {
    match source {
        Source::DirectObservation => 0.95,
        Source::ToldByUser => 0.9,
        Source::ToolResult => 0.85,
        Source::Inference => 0.7,
        Source::ModelGenerated => 0.6,
    }
}

/// Validates a capture and builds the version-1 record it describes.
pub fn build_memory(
    input: CaptureInput,
    domain: Domain,
    id: MemoryId,
    now: DateTime<Utc>,
) -> Result<Memory, FieldError> {
    let content = validate_content(&input.content)?;
    let namespace = Namespace::parse(input.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE))?;
    let kind = match input.kind.as_deref() {
        Some(kind) => MemoryKind::parse(kind)?,
        None => default_kind(&namespace),
    };
    let title = match input.title.as_deref() {
        Some(title) => validate_title(title)?,
        None => derive_title(&content),
    };
    let source = match input.source.as_deref() {
        Some(source) => Source::parse(source)?,
        None => Source::ModelGenerated,
    };
    let confidence = match input.confidence {
        Some(value) => unit_interval("confidence", value)?,
        None => default_confidence(source),
    };
    let salience = match input.salience {
        Some(value) => unit_interval("salience", value)?,
        None => DEFAULT_SALIENCE,
    };
    Ok(Memory {
        id,
        domain,
        namespace,
        kind,
        title,
        content,
        tags: validate_tags(&input.tags)?,
        category: validate_category(input.category.as_deref())?,
        source,
        confidence,
        salience,
        status: Status::Active,
        created_at: now,
        updated_at: now,
        event_time: input.event_time.as_deref().map(|text| parse_time("event_time", text)).transpose()?,
        last_accessed_at: None,
        access_count: 0,
        links: validate_links(&input.links)?,
        metadata: validate_metadata(input.metadata)?,
        version: 1,
        author: input.author.as_deref().map(validate_author).transpose()?,
    })
}

/// Applies an update, returning the new record and the version it supersedes.
pub fn apply_update(
    current: &Memory,
    input: UpdateInput,
    now: DateTime<Utc>,
) -> Result<(Memory, MemoryVersion), FieldError> {
    let reason = validate_reason(&input.reason)?;
    let mut next = current.clone();
    if let Some(title) = input.title.as_deref() {
        next.title = validate_title(title)?;
    }
    if let Some(content) = input.content.as_deref() {
        next.content = validate_content(content)?;
    }
    if let Some(kind) = input.kind.as_deref() {
        next.kind = MemoryKind::parse(kind)?;
    }
    if let Some(tags) = input.tags.as_ref() {
        next.tags = validate_tags(tags)?;
    }
    if let Some(category) = input.category.as_deref() {
        next.category = validate_category(Some(category))?;
    }
    if let Some(source) = input.source.as_deref() {
        next.source = Source::parse(source)?;
    }
    if let Some(confidence) = input.confidence {
        next.confidence = unit_interval("confidence", confidence)?;
    }
    if let Some(salience) = input.salience {
        next.salience = unit_interval("salience", salience)?;
    }
    if let Some(event_time) = input.event_time.as_deref() {
        next.event_time = Some(parse_time("event_time", event_time)?);
    }
    if let Some(links) = input.links.as_ref() {
        next.links = validate_links(links)?;
    }
    if let Some(metadata) = input.metadata {
        next.metadata = validate_metadata(metadata)?;
    }
    if next == *current {
        return Err(FieldError::new(
            "update",
            "changes nothing: every given field equals the memory's current value",
            serde_json::Value::Null,
            "pass at least one field whose value differs, e.g. `content` or `tags`",
        ));
    }
    Ok(supersede(current, next, reason, now))
}

/// Moves a memory to `status`, recording the reason in its history. `None` when it already has
/// that status, so forgetting twice is harmless.
pub fn change_status(
    current: &Memory,
    status: Status,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Option<(Memory, MemoryVersion)>, FieldError> {
    let reason = validate_reason(reason)?;
    if current.status == status {
        return Ok(None);
    }
    let mut next = current.clone();
    next.status = status;
    Ok(Some(supersede(current, next, reason, now)))
}

/// What a new piece of evidence says of a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvidenceKind {
    /// A later observation confirmed it.
    Supporting,
    /// A settled contradiction went against it.
    Contradicting,
}

/// Adds one piece of evidence to a memory ([`crate::confidence`] counts it in the memory's
/// confidence), as a new version whose history records `reason`.
pub fn record_evidence(current: &Memory, kind: EvidenceKind, reason: &str, now: DateTime<Utc>) -> Result<(Memory, MemoryVersion), FieldError> {
    let reason = validate_reason(reason)?;
    let mut next = current.clone();
    match kind {
        EvidenceKind::Supporting => crate::confidence::add_supporting(&mut next),
        EvidenceKind::Contradicting => crate::confidence::add_contradicting(&mut next),
    }
    Ok(supersede(current, next, reason, now))
}

pub(crate) fn supersede(current: &Memory, mut next: Memory, reason: String, now: DateTime<Utc>) -> (Memory, MemoryVersion) {
    next.version = current.version + 1;
    next.updated_at = now;
    let previous = MemoryVersion {
        version: current.version,
        superseded_at: now,
        reason,
        memory: current.clone(),
    };
    (next, previous)
}

fn validate_content(content: &str) -> Result<String, FieldError> {
    if content.trim().is_empty() {
        return Err(FieldError::new(
            "content",
            "is empty",
            content,
            "write the knowledge to remember as markdown text",
        ));
    }
    if content.len() > MAX_CONTENT_BYTES {
        return Err(FieldError::new(
            "content",
            format!("is {} bytes, more than the {MAX_CONTENT_BYTES}-byte limit", content.len()),
            format!("{}…", truncate_chars(content, 80)),
            "split it into several focused memories and link them",
        ));
    }
    Ok(content.to_owned())
}

fn validate_title(title: &str) -> Result<String, FieldError> {
    let trimmed = title.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new("title", "is empty", title, "give a short searchable title, or omit it to use the content's first line"));
    }
    if trimmed.chars().count() > MAX_TITLE_CHARS {
        return Err(FieldError::new(
            "title",
            format!("is longer than {MAX_TITLE_CHARS} characters"),
            title,
            format!("shorten it, e.g. `{}`", truncate_chars(trimmed, 60)),
        ));
    }
    Ok(trimmed.to_owned())
}

/// The first non-empty line of the content, without markdown heading marks, cut to 80 characters.
fn derive_title(content: &str) -> String {
    let line = content
        .lines()
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= 80 {
        line.to_owned()
    } else {
        format!("{}…", truncate_chars(line, 79))
    }
}

pub(crate) fn truncate_chars(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

fn validate_reason(reason: &str) -> Result<String, FieldError> {
    let trimmed = reason.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new(
            "reason",
            "is empty",
            reason,
            "say why, e.g. `superseded by the decision to use PostgreSQL`",
        ));
    }
    if trimmed.chars().count() > 1000 {
        return Err(FieldError::new("reason", "is longer than 1000 characters", truncate_chars(trimmed, 80), "keep the reason to a sentence or two"));
    }
    Ok(trimmed.to_owned())
}

pub(crate) fn unit_interval(field: &str, value: f64) -> Result<f64, FieldError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        let received = serde_json::Number::from_f64(value).map_or(serde_json::Value::String(value.to_string()), serde_json::Value::Number);
        Err(FieldError::new(
            field,
            "must be between 0 and 1",
            received,
            format!("use {field}: {}", if value > 1.0 { "1.0 or a fraction such as 0.75" } else { "0.0 or a fraction such as 0.25" }),
        ))
    }
}

fn validate_tags(tags: &[String]) -> Result<Vec<String>, FieldError> {
    if tags.len() > MAX_TAGS {
        return Err(FieldError::new("tags", format!("has {} tags, more than {MAX_TAGS}", tags.len()), tags.len(), "keep the few tags that help find this memory"));
    }
    let mut clean: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        let normalised = tag.trim().to_lowercase();
        if normalised.is_empty() || normalised.chars().count() > MAX_TAG_CHARS || normalised.chars().any(char::is_whitespace) {
            return Err(FieldError::new(
                "tags",
                format!("holds a tag that is empty, has whitespace or is longer than {MAX_TAG_CHARS} characters"),
                tag.as_str(),
                format!("use single words or hyphenated phrases, e.g. `{}`", normalise_tag(tag)),
            ));
        }
        if !clean.contains(&normalised) {
            clean.push(normalised);
        }
    }
    Ok(clean)
}

fn normalise_tag(tag: &str) -> String {
    let words: Vec<&str> = tag.split_whitespace().collect();
    let joined = words.join("-").to_lowercase();
    if joined.is_empty() { "database".to_owned() } else { truncate_chars(&joined, MAX_TAG_CHARS).to_owned() }
}

fn validate_category(category: Option<&str>) -> Result<Option<String>, FieldError> {
    match category.map(str::trim) {
        None | Some("") => Ok(None),
        Some(category) if category.chars().count() > 64 => Err(FieldError::new(
            "category",
            "is longer than 64 characters",
            category,
            "use a short label such as `architecture` or `debugging-lesson`",
        )),
        Some(category) => Ok(Some(category.to_owned())),
    }
}

fn validate_links(links: &[LinkInput]) -> Result<Vec<Link>, FieldError> {
    if links.len() > MAX_LINKS {
        return Err(FieldError::new("links", format!("has more than {MAX_LINKS} links"), links.len(), "link only the memories that matter"));
    }
    links
        .iter()
        .map(|link| {
            let target = MemoryUrn::parse("links.target", &link.target)?;
            let relation = link.relation.as_deref().map(str::trim).filter(|r| !r.is_empty()).unwrap_or("relates-to");
            if relation.chars().count() > 64 {
                return Err(FieldError::new("links.relation", "is longer than 64 characters", relation, "use a short verb such as `supersedes`"));
            }
            Ok(Link { target, relation: relation.to_owned() })
        })
        .collect()
}

fn validate_metadata(metadata: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, FieldError> {
    if metadata.len() > MAX_METADATA_ENTRIES {
        return Err(FieldError::new("metadata", format!("has more than {MAX_METADATA_ENTRIES} entries"), metadata.len(), "keep only the keys you will filter or read by"));
    }
    for (key, value) in &metadata {
        if key.trim().is_empty() || key.chars().count() > MAX_METADATA_KEY_CHARS {
            return Err(FieldError::new("metadata", format!("has a key that is empty or longer than {MAX_METADATA_KEY_CHARS} characters"), key.as_str(), "use short keys such as `turn_id`"));
        }
        if value.len() > MAX_METADATA_VALUE_BYTES {
            return Err(FieldError::new(format!("metadata.{key}"), format!("is longer than {MAX_METADATA_VALUE_BYTES} bytes"), value.len(), "put long text in the content, not in metadata"));
        }
    }
    Ok(metadata)
}

/// Parses an RFC 3339 timestamp or a plain `YYYY-MM-DD` date (taken as midnight UTC).
pub fn parse_time(field: &str, text: &str) -> Result<DateTime<Utc>, FieldError> {
    let text = text.trim();
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    Err(FieldError::new(
        field,
        "is not an RFC 3339 timestamp or a YYYY-MM-DD date",
        text,
        "use e.g. `2026-05-08T13:56:00Z` or `2026-05-08`",
    ))
}
