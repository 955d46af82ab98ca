//! What the engine hands back to callers: plain, serialisable views of memories and results.
//!
//! Views carry URNs and RFC 3339 strings rather than core types so that every front end (MCP,
//! CLI, JSON export) renders the same shape, and so their JSON schema is simple to publish.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use kenning_core::{Memory, MemoryVersion, StoreStats};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A whole memory record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryView {
    pub urn: String,
    pub id: String,
    pub domain: String,
    pub namespace: String,
    /// episodic, semantic or procedural.
    pub kind: String,
    pub title: String,
    /// Markdown.
    pub content: String,
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub source: String,
    /// Confidence stated at capture (or the source's default).
    pub confidence: f64,
    /// Confidence now, after evidence and decay, as recall weighs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_now: Option<f64>,
    /// Under the dormancy threshold: out of default recall.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dormant: bool,
    pub salience: f64,
    /// active or forgotten.
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_accessed_at: Option<String>,
    pub access_count: u64,
    pub links: Vec<LinkView>,
    /// The newer memory that replaced this one; recall prefers it except for questions about the past.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub version: u32,
    /// Who captured it (user id or API key identity); absent on older memories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LinkView {
    pub target: String,
    pub relation: String,
}

impl From<&Memory> for MemoryView {
    fn from(memory: &Memory) -> Self {
        MemoryView {
            urn: memory.urn().to_string(),
            id: memory.id.to_string(),
            domain: memory.domain.to_string(),
            namespace: memory.namespace.to_string(),
            kind: memory.kind.to_string(),
            title: memory.title.clone(),
            content: memory.content.clone(),
            tags: memory.tags.clone(),
            category: memory.category.clone(),
            source: memory.source.to_string(),
            confidence: memory.confidence,
            confidence_now: None,
            dormant: false,
            salience: memory.salience,
            status: memory.status.to_string(),
            created_at: timestamp(memory.created_at),
            updated_at: timestamp(memory.updated_at),
            event_time: memory.event_time.map(timestamp),
            last_accessed_at: memory.last_accessed_at.map(timestamp),
            access_count: memory.access_count,
            links: memory
                .links
                .iter()
                .map(|link| LinkView { target: link.target.to_string(), relation: link.relation.clone() })
                .collect(),
            superseded_by: memory
                .links
                .iter()
                .rev()
                .find(|link| link.relation == kenning_core::relation::SUPERSEDED_BY)
                .map(|link| link.target.to_string()),
            metadata: memory.metadata.clone(),
            version: memory.version,
            author: memory.author.clone(),
        }
    }
}

/// A short reference to a memory, for listings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryRef {
    pub urn: String,
    pub title: String,
    pub namespace: String,
    pub kind: String,
    pub status: String,
    pub occurred_at: String,
}

impl From<&Memory> for MemoryRef {
    fn from(memory: &Memory) -> Self {
        MemoryRef {
            urn: memory.urn().to_string(),
            title: memory.title.clone(),
            namespace: memory.namespace.to_string(),
            kind: memory.kind.to_string(),
            status: memory.status.to_string(),
            occurred_at: timestamp(memory.occurred_at()),
        }
    }
}

/// The result of a capture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CaptureOutcome {
    pub urn: String,
    pub title: String,
    /// False when an identical memory or one making the same claim existed; `urn` is then that one.
    pub created: bool,
    /// True when a memory making the same claim was found and confirmed (its confidence rises) instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reinforced: bool,
    /// On a merge, the forgotten memory keeping this capture's wording; `memory_restore` of it undoes the merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_as: Option<String>,
    /// Links to similar memories: `possibly-duplicate-of` (may say the same) or `related-to` (another claim on it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linked: Vec<LinkView>,
    /// True when the memory has a vector for semantic search (an embedder is configured).
    pub embedded: bool,
    /// Non-fatal observations, e.g. a namespace that looks like a typo of a built-in one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Secrets replaced by `[REDACTED:kind]` before the memory was stored, per field and kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<RedactionView>,
    /// Memories this one contradicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contradictions: Vec<ContradictionNote>,
}

/// A contradiction a capture found, as the capture reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContradictionNote {
    pub id: String,
    /// `negation`, `changed_value` or `superseded`.
    pub kind: String,
    /// The contradicted memory's URN.
    pub with: String,
    /// `open`, or `resolved` when this memory states the change itself.
    pub state: String,
}

/// The words of each memory that conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EvidenceView {
    pub a: Vec<String>,
    pub b: Vec<String>,
}

/// How a contradiction was settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SettlementView {
    /// `a_wins`, `b_wins` or `context_dependent`.
    pub resolution: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<String>,
    pub explanation: String,
    /// `rule:recency`, `rule:source_reliability`, `rule:supersession` or `llm:{model}`.
    pub decided_by: String,
}

/// One move of a contradiction's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TransitionView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub to: String,
    pub at: String,
    pub reason: String,
}

/// A contradiction between two memories: `a` the older, `b` the newer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContradictionView {
    pub id: String,
    pub a: String,
    pub b: String,
    pub kind: String,
    pub evidence: EvidenceView,
    /// `open`, `resolved`, `context_dependent` or `reopened`.
    pub state: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settlement: Option<SettlementView>,
    pub history: Vec<TransitionView>,
}

impl From<&kenning_core::contradiction::Contradiction> for ContradictionView {
    fn from(record: &kenning_core::contradiction::Contradiction) -> Self {
        ContradictionView {
            id: record.id.clone(),
            a: record.a.clone(),
            b: record.b.clone(),
            kind: record.kind.to_string(),
            evidence: EvidenceView { a: record.evidence.a.clone(), b: record.evidence.b.clone() },
            state: record.state.to_string(),
            created_at: timestamp(record.created_at),
            updated_at: timestamp(record.updated_at),
            settlement: record.resolution.as_ref().map(SettlementView::from),
            history: record
                .history
                .iter()
                .map(|step| TransitionView {
                    from: step.from.map(|state| state.to_string()),
                    to: step.to.to_string(),
                    at: timestamp(step.at),
                    reason: step.reason.clone(),
                })
                .collect(),
        }
    }
}

impl From<&kenning_core::contradiction::Resolution> for SettlementView {
    fn from(resolution: &kenning_core::contradiction::Resolution) -> Self {
        SettlementView {
            resolution: resolution.verdict.to_string(),
            conditions: resolution.conditions.clone(),
            explanation: resolution.explanation.clone(),
            decided_by: resolution.decided_by.clone(),
        }
    }
}

/// A page of contradictions, most recently changed first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContradictionPage {
    pub contradictions: Vec<ContradictionView>,
    /// Every contradiction passing the filter.
    pub total: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// How many contradictions are in each state, over every domain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContradictionCounts {
    pub open: u64,
    pub resolved: u64,
    pub context_dependent: u64,
    pub reopened: u64,
}

/// What `resolve_truth` decided: `{resolution, conditions, explanation}` and who decided it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResolutionView {
    pub contradiction_id: String,
    /// `a_wins`, `b_wins` or `context_dependent`.
    pub resolution: String,
    /// When each memory holds, for `context_dependent`.
    pub conditions: Option<String>,
    pub explanation: String,
    /// `rule:recency`, `rule:source_reliability` or `llm:{model}`.
    pub decided_by: String,
    pub llm: LlmUseView,
    /// The record's state now: `resolved` or `context_dependent`.
    pub state: String,
    pub a: String,
    pub b: String,
    /// The memory given contradicting evidence (a new version of it); none for `context_dependent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalised: Option<String>,
}

/// Secrets of one kind replaced in one field before it was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RedactionView {
    /// The field, e.g. `tags[0]`.
    pub field: String,
    /// What was found, e.g. `github-token` or `password`.
    pub kind: String,
    pub count: usize,
}

impl From<&kenning_core::secrets::Redaction> for RedactionView {
    fn from(redaction: &kenning_core::secrets::Redaction) -> Self {
        RedactionView { field: redaction.field.clone(), kind: redaction.kind.to_string(), count: redaction.count }
    }
}

/// The warning a response carries when secrets were redacted.
pub(crate) fn redaction_warning(redacted: &[RedactionView]) -> Option<String> {
    if redacted.is_empty() {
        return None;
    }
    let total: usize = redacted.iter().map(|r| r.count).sum();
    let what: Vec<String> = redacted.iter().map(|r| format!("{} in {}", r.kind, r.field)).collect();
    Some(format!(
        "{total} secret{} replaced by [REDACTED:kind] before storing ({}); keep credentials in a secret manager, not in memories",
        if total == 1 { " was" } else { "s were" },
        what.join(", ")
    ))
}

/// One recall result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecallHit {
    pub urn: String,
    pub title: String,
    pub domain: String,
    pub namespace: String,
    pub kind: String,
    pub tags: Vec<String>,
    /// What results are ordered by: relevance × (0.5 + 0.5 × confidence), 0..1, comparable within one response.
    pub score: f64,
    /// Fused relevance to the query, 0..1.
    pub relevance: f64,
    /// Confidence now: stated confidence adjusted by evidence, times recency retention.
    pub confidence: f64,
    /// Under the dormancy threshold (returned only with `include_dormant`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dormant: bool,
    /// Event time if the memory has one, else capture time.
    pub occurred_at: String,
    /// A passage of the content around the query terms (light detail).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// The whole content (full detail).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<LinkView>>,
}

/// A page of recall results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecallPage {
    pub results: Vec<RecallHit>,
    /// Pass this as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// `hybrid` (full-text and vectors fused) or `text` (BM25 only, no embedder configured).
    pub mode: String,
    /// True when results were cut short to stay within `max_tokens`.
    pub truncated: bool,
    /// Estimated tokens of the results returned.
    pub estimated_tokens: usize,
    pub resource_template: String,
    /// Domains left out, and why; the results come from the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<DomainNote>,
    /// Domains that answered from a fallback, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<DomainNote>,
    /// Synonyms or a model's rewrite of the query, also searched with less weight.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expanded_with: Vec<String>,
    /// How the model rewrite of the query went, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_rewrite: Option<String>,
}

/// A domain, and what kept it from answering as configured: the organisation database that
/// is down and left out, or whose read replica is down and whose primary answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(description = "A domain and why it is listed.")]
pub struct DomainNote {
    pub domain: String,
    pub message: String,
}

/// The result of an update, forget or restore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeOutcome {
    pub urn: String,
    pub status: String,
    /// Version after the change.
    pub version: u32,
    /// False when nothing had to change.
    pub changed: bool,
    /// Secrets replaced by `[REDACTED:kind]` in the update.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<RedactionView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One superseded version in a memory's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VersionView {
    pub version: u32,
    pub superseded_at: String,
    pub reason: String,
    pub memory: MemoryView,
}

impl From<&MemoryVersion> for VersionView {
    fn from(version: &MemoryVersion) -> Self {
        VersionView {
            version: version.version,
            superseded_at: timestamp(version.superseded_at),
            reason: version.reason.clone(),
            memory: MemoryView::from(&version.memory),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryView {
    pub urn: String,
    pub current: MemoryView,
    /// Superseded versions, newest first.
    pub versions: Vec<VersionView>,
}

/// Counts, locations and health of one domain's store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DomainStatus {
    pub domain: String,
    pub uri: String,
    pub backend: String,
    pub location: String,
    pub total: u64,
    pub by_status: BTreeMap<String, u64>,
    pub by_namespace: BTreeMap<String, u64>,
    pub by_kind: BTreeMap<String, u64>,
    pub vectors_by_model: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    pub index: IndexHealth,
    /// Problems the store worked around, e.g. unreadable notes it skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IndexHealth {
    /// Full-text entries match the number of memories.
    pub text_index_ok: bool,
    /// Memories with no vector from the current embedder (run `kenning reindex`).
    pub missing_vectors: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmbedderStatus {
    pub model: String,
    pub dimensions: usize,
}

/// Everything `memory_status` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusReport {
    pub total_memories: u64,
    pub default_domain: String,
    /// `hybrid` when an embedder is configured, else `text` (BM25 only).
    pub search_mode: String,
    /// Absent when no embedder is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedder: Option<EmbedderStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub domains: Vec<DomainStatus>,
    pub resource_template: String,
}

pub(crate) fn domain_status(domain: &kenning_core::Domain, stats: StoreStats, model: Option<&str>) -> DomainStatus {
    let active = stats.by_status.get("active").copied().unwrap_or(0);
    let missing_vectors = match model {
        Some(model) => active.saturating_sub(stats.vectors_by_model.get(model).copied().unwrap_or(0)),
        None => 0,
    };
    DomainStatus {
        domain: domain.to_string(),
        uri: kenning_core::Urn::Domain(domain.clone()).to_string(),
        backend: stats.backend,
        location: stats.location,
        total: stats.total,
        by_status: stats.by_status,
        by_namespace: stats.by_namespace,
        by_kind: stats.by_kind,
        vectors_by_model: stats.vectors_by_model,
        size_bytes: stats.size_bytes,
        index: IndexHealth { text_index_ok: stats.text_index_entries == stats.total, missing_vectors },
        warnings: stats.warnings,
    }
}

/// A page of memories in a domain or namespace, for resources and `list` commands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListingPage {
    pub uri: String,
    pub total: u64,
    pub memories: Vec<MemoryRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What `memory_sync` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyncView {
    /// The domain synced, e.g. `project:my-app`.
    pub domain: String,
    pub remote: String,
    /// Memories that arrived new or changed from the remote (merged ones included).
    pub received: u64,
    /// Memories changed on both sides, merged by the store's rule (both versions kept in history).
    pub merged: u64,
    /// Memories the remote received from here.
    pub sent: u64,
    /// Rounds of fetch, merge and push; more than one when the remote moved meanwhile.
    pub attempts: u32,
    /// Arrived memories embedded for vector search.
    pub embedded: u64,
}

/// What `reindex` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReindexReport {
    pub model: Option<String>,
    pub embedded: u64,
    pub text_indexed: u64,
}

/// How a response that could use a language model came about (`kenning_core::llm::LlmUse`):
/// `used` with the model, or `not_configured` / `failed` with the rule that did the work instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LlmUseView {
    /// used, not_configured or failed.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The rule that did the work without a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl From<&kenning_core::llm::LlmUse> for LlmUseView {
    fn from(value: &kenning_core::llm::LlmUse) -> Self {
        use kenning_core::llm::LlmUse;
        match value {
            LlmUse::Used { model } => LlmUseView { status: "used".into(), model: Some(model.clone()), error: None, fallback: None },
            LlmUse::NotConfigured { fallback } => {
                LlmUseView { status: "not_configured".into(), model: None, error: None, fallback: Some(fallback.clone()) }
            }
            LlmUse::Failed { error, fallback } => {
                LlmUseView { status: "failed".into(), model: None, error: Some(error.clone()), fallback: Some(fallback.clone()) }
            }
        }
    }
}
