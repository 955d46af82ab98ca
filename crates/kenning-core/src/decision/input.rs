//! Turning what callers send into decision records, signals and outcomes, and rendering a
//! decision as the memory that makes it searchable.
//!
//! Every function is pure: clocks and ids come from the caller.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::decision::model::{
    Decision, DecisionContext, DecisionId, DecisionRecord, DecisionStatus, Note, Outcome, OutcomeStatus, RiskLevel,
    Signal, SignalType, Valence,
};
use crate::error::{FieldError, closest};
use crate::input::{CaptureInput, LinkInput, MAX_CONTENT_BYTES, build_memory, truncate_chars, unit_interval};
use crate::memory::{Memory, MemoryVersion, Status};
use crate::urn::MemoryUrn;

const MIN_STATEMENT_CHARS: usize = 10;
const MAX_STATEMENT_CHARS: usize = 500;
const MAX_ALTERNATIVES: usize = 20;
const MAX_ASSUMPTIONS: usize = 20;
const MAX_RISKS: usize = 20;
const MAX_LESSONS: usize = 20;
const MAX_FILES: usize = 50;
/// Alternatives, assumptions and lessons are short phrases or sentences.
const MAX_ITEM_CHARS: usize = 500;
pub const MAX_TEXT_CHARS: usize = 4000;
/// A note is counted in bytes, as the decision's memory that shows it is.
const MAX_NOTE_BYTES: usize = 4000;
/// Notes a decision keeps. Past this, what happened belongs in an outcome, a signal or a memory
/// of its own linked to the decision.
pub const MAX_NOTES: usize = 100;
const MAX_METRICS: usize = 32;
/// The namespace of decision memories.
pub const DECISIONS_NAMESPACE: &str = "decisions";
/// The namespace lessons learned are stored in.
const LESSONS_NAMESPACE: &str = "learnings";
const DEFAULT_CREATED_BY: &str = "agent";

/// The modules (areas of the code base) decisions are filed under, from configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleList(Vec<String>);

impl ModuleList {
    pub const DEFAULT: &'static [&'static str] = &["database", "auth", "api", "frontend", "backend", "infra"];

    /// The module a decision captured without one is filed under, accepted whatever the
    /// configured list: a decision log entry names no module, and is kept rather than refused.
    const UNFILED: &'static str = "general";

    /// Validates configured names: lower-case `[a-z0-9-]`, 1-64 characters; duplicates are dropped.
    pub fn new<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Result<ModuleList, FieldError> {
        let mut modules: Vec<String> = Vec::new();
        for name in names {
            let name = name.as_ref().trim().to_lowercase();
            let valid = !name.is_empty()
                && name.len() <= 64
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !valid {
                return Err(FieldError::new(
                    "modules",
                    "holds a name that is empty, longer than 64 characters or not lower-case [a-z0-9-]",
                    name,
                    "name modules like `database`, `auth` or `payments-api`",
                ));
            }
            if !modules.contains(&name) {
                modules.push(name);
            }
        }
        if modules.is_empty() {
            return Err(FieldError::new("modules", "is empty", serde_json::Value::Array(Vec::new()), "list at least one module, e.g. [\"backend\"]"));
        }
        Ok(ModuleList(modules))
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// The configured module `text` names (case and surrounding space ignored), or an error
    /// suggesting the closest one.
    pub fn parse(&self, field: &str, text: &str) -> Result<String, FieldError> {
        let wanted = text.trim().to_lowercase();
        if let Some(found) = self.0.iter().find(|module| **module == wanted) {
            return Ok(found.clone());
        }
        if wanted == Self::UNFILED {
            return Ok(wanted);
        }
        let allowed = self.0.join(", ");
        let suggestion = match closest(&wanted, self.0.iter().map(String::as_str)) {
            Some(near) => format!("did you mean `{near}`? configured modules: {allowed}"),
            None => format!("use one of: {allowed} (configure others with [decisions] modules in kenning.toml)"),
        };
        Err(FieldError::new(field, "is not a configured module", text, suggestion))
    }
}

impl Default for ModuleList {
    fn default() -> Self {
        ModuleList(Self::DEFAULT.iter().map(|name| (*name).to_owned()).collect())
    }
}

/// A decision as a caller states it. Vocabulary fields are strings so that a wrong value gets a
/// [`FieldError`] with a suggestion. Alternatives, confidence and module are asked for (the
/// schemas call them required) but a decision log entry without them is kept: no alternatives
/// listed, no stated confidence (calibration leaves it out), filed under
/// [`ModuleList::UNFILED`]; [`capture_notices`] says so to the caller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureDecision {
    pub statement: String,
    pub alternatives: Option<Vec<String>>,
    pub confidence: Option<f64>,
    pub module: Option<String>,
    /// Why the decision was needed.
    #[serde(default)]
    pub problem: Option<String>,
    /// Known risks or downsides of the choice.
    #[serde(default)]
    pub risks: Vec<String>,
    #[serde(default)]
    pub assumptions: Vec<String>,
    pub risk_level: Option<String>,
    pub rationale: Option<String>,
    pub session_id: Option<String>,
    pub file_path: Option<String>,
    #[serde(default)]
    pub related_files: Vec<String>,
    pub created_by: Option<String>,
    /// Who is writing: set by the front end from the caller's authenticated identity and
    /// recorded as the author of the decision's memory, never taken from tool arguments.
    #[serde(default)]
    pub author: Option<String>,
}

/// A change to a decision; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateDecision {
    pub status: Option<String>,
    pub confidence: Option<f64>,
    /// Appended to the decision's notes.
    pub notes: Option<String>,
    pub linked_pr: Option<String>,
    pub linked_commit: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SignalInput {
    pub signal_type: String,
    pub valence: String,
    pub description: Option<String>,
    #[serde(default)]
    pub metrics: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutcomeInput {
    pub final_status: String,
    /// Defaults by status: success 1, partial 0.5, failure 0.
    pub final_score: Option<f64>,
    /// What was observed at the end (CI, incidents, metrics), kept as given.
    #[serde(default)]
    pub signals: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub lessons_learned: Vec<String>,
    /// What happened, in the reporter's words.
    #[serde(default)]
    pub notes: Option<String>,
    /// The module the reporter takes the decision to be filed under (seed 000's
    /// `decision_domain`): checked against the decision's, since an outcome always counts
    /// toward its own decision's module.
    #[serde(default)]
    pub module: Option<String>,
}

/// What a capture left out that the caller should know: the defaults that filled the gaps.
pub fn capture_notices(input: &CaptureDecision) -> Vec<String> {
    let mut notices = Vec::new();
    if input.confidence.is_none() {
        notices.push(
            "no confidence was stated, so this decision does not count toward calibration; state one (0 to 1) when you capture the next".to_owned(),
        );
    }
    if input.module.as_deref().is_none_or(|module| module.trim().is_empty()) {
        notices.push(format!("no module was given, so the decision is filed under `{}`", ModuleList::UNFILED));
    }
    if input.alternatives.is_none() {
        notices.push("no alternatives were listed; name the options you rejected so a later reader sees what was weighed".to_owned());
    }
    notices
}

/// Validates a capture and builds the revision-1 decision it describes.
pub fn build_decision(
    input: CaptureDecision,
    modules: &ModuleList,
    id: DecisionId,
    now: DateTime<Utc>,
) -> Result<Decision, FieldError> {
    let statement = validate_statement(&input.statement)?;
    let alternatives = validate_alternatives(input.alternatives)?;
    let confidence = input.confidence.map(|value| unit_interval("confidence", value)).transpose()?;
    let module = match input.module.as_deref().map(str::trim).filter(|module| !module.is_empty()) {
        Some(module) => modules.parse("module", module)?,
        None => ModuleList::UNFILED.to_owned(),
    };
    let assumptions = validate_items("assumptions", &input.assumptions, MAX_ASSUMPTIONS)?;
    let problem = optional_text("problem", input.problem.as_deref(), MAX_TEXT_CHARS)?;
    let risks = validate_items("risks", &input.risks, MAX_RISKS)?;
    let risk_level = match input.risk_level.as_deref() {
        Some(text) => RiskLevel::parse(text.trim())?,
        None => RiskLevel::Medium,
    };
    let rationale = optional_text("rationale", input.rationale.as_deref(), MAX_TEXT_CHARS)?;
    let context = DecisionContext {
        session_id: optional_text("session_id", input.session_id.as_deref(), 128)?,
        file_path: optional_text("file_path", input.file_path.as_deref(), MAX_ITEM_CHARS)?,
        related_files: validate_items("related_files", &input.related_files, MAX_FILES)?,
    };
    let created_by = optional_text("created_by", input.created_by.as_deref(), 64)?.unwrap_or_else(|| DEFAULT_CREATED_BY.to_owned());
    let mut decision = Decision {
        id,
        statement,
        alternatives,
        confidence,
        current_confidence: confidence,
        assumptions,
        risk_level,
        module,
        rationale,
        problem,
        risks,
        context,
        created_by,
        created_at: now,
        updated_at: now,
        status: DecisionStatus::Pending,
        notes: Vec::new(),
        linked_pr: None,
        linked_commit: None,
        context_hash: String::new(),
        revision: 1,
    };
    decision.context_hash = context_hash(&decision);
    Ok(decision)
}

/// SHA-256 over what was known when the decision was made, as canonical JSON.
pub fn context_hash(decision: &Decision) -> String {
    let known = serde_json::json!({
        "statement": decision.statement,
        "alternatives": decision.alternatives,
        "confidence": decision.confidence,
        "assumptions": decision.assumptions,
        "risk_level": decision.risk_level,
        "module": decision.module,
        "rationale": decision.rationale,
        "context": decision.context,
        "created_at": decision.created_at.to_rfc3339_opts(SecondsFormat::Nanos, true),
    });
    // Fields added later join the hash only when set, so the hash of every decision that has
    // none of them is what it always was.
    let mut known = known;
    if let Some(problem) = &decision.problem {
        known["problem"] = problem.as_str().into();
    }
    if !decision.risks.is_empty() {
        known["risks"] = decision.risks.clone().into();
    }
    crate::hex(&Sha256::digest(known.to_string().as_bytes()))
}

/// Applies an update, returning the next revision. A status change must be a legal transition.
pub fn apply_decision_update(current: &Decision, input: UpdateDecision, now: DateTime<Utc>) -> Result<Decision, FieldError> {
    let mut next = current.clone();
    if let Some(status) = input.status.as_deref() {
        next.status = current.status.transition(DecisionStatus::parse(status.trim())?)?;
    }
    if let Some(confidence) = input.confidence {
        next.current_confidence = Some(unit_interval("confidence", confidence)?);
    }
    if let Some(text) = validate_note(input.notes.as_deref(), current.notes.len())? {
        next.notes.push(Note { at: now, text });
    }
    if let Some(pr) = optional_text("linked_pr", input.linked_pr.as_deref(), MAX_ITEM_CHARS)? {
        next.linked_pr = Some(pr);
    }
    if let Some(commit) = input.linked_commit.as_deref() {
        next.linked_commit = Some(validate_commit(commit)?);
    }
    if next == *current {
        return Err(FieldError::new(
            "update",
            "changes nothing: every given field equals the decision's current value",
            serde_json::Value::Null,
            "pass at least one of status, confidence, notes, linked_pr or linked_commit with a new value",
        ));
    }
    next.updated_at = now;
    next.revision = current.revision + 1;
    Ok(next)
}

fn validate_commit(text: &str) -> Result<String, FieldError> {
    let commit = text.trim();
    if (4..=64).contains(&commit.len()) && commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(commit.to_lowercase())
    } else {
        Err(FieldError::new(
            "linked_commit",
            "is not a commit SHA (4 to 64 hexadecimal digits)",
            text,
            "pass the commit's hash, e.g. `git rev-parse HEAD` gives `3f2a9c1…`",
        ))
    }
}

/// Validates a signal for `decision`.
pub fn build_signal(input: SignalInput, decision: &DecisionId, id: String, now: DateTime<Utc>) -> Result<Signal, FieldError> {
    Ok(Signal {
        id,
        decision_id: decision.clone(),
        signal_type: SignalType::parse(input.signal_type.trim())?,
        valence: Valence::parse(input.valence.trim())?,
        description: optional_text("description", input.description.as_deref(), MAX_TEXT_CHARS)?,
        metrics: validate_metrics("metrics", input.metrics)?,
        recorded_at: now,
    })
}

/// Validates an outcome for `record` and returns it with the decision's next revision: the
/// outcome closes a pending or executed decision as completed (success, partial) or failed,
/// and leaves a status set by hand alone. The caller fills in `lesson_ids` once it has made the
/// lessons' memories.
pub fn build_outcome(
    input: OutcomeInput,
    record: &DecisionRecord,
    id: String,
    now: DateTime<Utc>,
) -> Result<(Outcome, Decision), FieldError> {
    let decision = &record.decision;
    if let Some(existing) = &record.outcome {
        return Err(FieldError::new(
            "decision_id",
            format!(
                "already has an outcome ({}, score {}, recorded {})",
                existing.status,
                existing.score,
                existing.completed_at.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
            decision.id.as_str(),
            "an outcome is final; add what happened since with decision_update notes or decision_record_signal",
        ));
    }
    let status = OutcomeStatus::parse_reported(&input.final_status)?;
    if let Some(module) = input.module.as_deref().map(str::trim).filter(|module| !module.is_empty())
        && module.to_lowercase() != decision.module
    {
        return Err(FieldError::new(
            "decision_domain",
            format!("names `{module}`, but the decision is filed under `{}`", decision.module),
            module,
            format!("an outcome counts toward its decision's module; leave decision_domain out or pass `{}`", decision.module),
        ));
    }
    let notes = optional_text("notes", input.notes.as_deref(), MAX_TEXT_CHARS)?;
    let score = match input.final_score {
        Some(score) => unit_interval("final_score", score)?,
        None => status.default_score(),
    };
    let lessons = validate_items("lessons_learned", &input.lessons_learned, MAX_LESSONS)?;
    let outcome = Outcome {
        id,
        decision_id: decision.id.clone(),
        status,
        score,
        completed_at: now,
        observations: validate_metrics("signals", input.signals)?,
        lessons,
        lesson_ids: Vec::new(),
        notes,
    };
    let mut next = decision.clone();
    if matches!(decision.status, DecisionStatus::Pending | DecisionStatus::Executed) {
        next.status = match status {
            OutcomeStatus::Success | OutcomeStatus::Partial => DecisionStatus::Completed,
            OutcomeStatus::Failure => DecisionStatus::Failed,
        };
    }
    next.updated_at = now;
    next.revision = decision.revision + 1;
    Ok((outcome, next))
}

fn validate_statement(text: &str) -> Result<String, FieldError> {
    let statement = text.trim();
    let chars = statement.chars().count();
    if chars < MIN_STATEMENT_CHARS {
        return Err(FieldError::new(
            "statement",
            format!("is {chars} characters, fewer than {MIN_STATEMENT_CHARS}"),
            text,
            "say what was decided in a full sentence, e.g. `Use PostgreSQL for the orders service`",
        ));
    }
    if chars > MAX_STATEMENT_CHARS {
        return Err(FieldError::new(
            "statement",
            format!("is {chars} characters, more than {MAX_STATEMENT_CHARS}"),
            format!("{}…", truncate_chars(statement, 80)),
            "state the decision in one or two sentences and put the reasoning in `rationale`",
        ));
    }
    Ok(statement.to_owned())
}

/// The alternatives: none when the caller gave none (a decision log entry), at least one when
/// the caller gave a list (an empty list says nothing was weighed, seed 000's `missing_alternatives`).
fn validate_alternatives(alternatives: Option<Vec<String>>) -> Result<Vec<String>, FieldError> {
    let Some(given) = alternatives else { return Ok(Vec::new()) };
    let alternatives = validate_items("alternatives", &given, MAX_ALTERNATIVES)?;
    if alternatives.is_empty() {
        return Err(FieldError::new(
            "alternatives",
            "must list at least one alternative that was considered",
            serde_json::Value::Array(Vec::new()),
            "name the options you rejected, e.g. alternatives: [\"MongoDB\", \"SQLite\"]",
        ));
    }
    Ok(alternatives)
}

/// Trims each item, refusing empty or overlong ones and lists that are too long; drops repeats.
fn validate_items(field: &str, items: &[String], max_items: usize) -> Result<Vec<String>, FieldError> {
    if items.len() > max_items {
        return Err(FieldError::new(field, format!("has {} entries, more than {max_items}", items.len()), items.len(), "keep the ones that matter"));
    }
    let mut clean: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let trimmed = item.trim();
        if trimmed.is_empty() || trimmed.chars().count() > MAX_ITEM_CHARS {
            return Err(FieldError::new(
                field,
                format!("holds an entry that is empty or longer than {MAX_ITEM_CHARS} characters"),
                truncate_chars(item, 80),
                "give each entry as a short phrase or sentence",
            ));
        }
        if !clean.iter().any(|known| known == trimmed) {
            clean.push(trimmed.to_owned());
        }
    }
    Ok(clean)
}

fn optional_text(field: &str, text: Option<&str>, max_chars: usize) -> Result<Option<String>, FieldError> {
    match text.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) if text.chars().count() > max_chars => Err(FieldError::new(
            field,
            format!("is longer than {max_chars} characters"),
            format!("{}…", truncate_chars(text, 80)),
            "shorten it",
        )),
        Some(text) => Ok(Some(text.to_owned())),
    }
}

/// A note to append, refused when it is longer than [`MAX_NOTE_BYTES`] or the decision already
/// has [`MAX_NOTES`].
fn validate_note(text: Option<&str>, existing: usize) -> Result<Option<String>, FieldError> {
    let Some(text) = text.map(str::trim).filter(|text| !text.is_empty()) else { return Ok(None) };
    if text.len() > MAX_NOTE_BYTES {
        return Err(FieldError::new(
            "notes",
            format!("is {} bytes, more than the {MAX_NOTE_BYTES}-byte limit of a note", text.len()),
            format!("{}…", truncate_chars(text, 80)),
            "keep a note to a few sentences; capture longer findings with memory_capture and link them to the decision",
        ));
    }
    if existing >= MAX_NOTES {
        return Err(FieldError::new(
            "notes",
            format!("cannot be added: the decision already has {existing} notes, the most it keeps"),
            format!("{}…", truncate_chars(text, 80)),
            "record what happened as a signal (decision_record_signal) or the outcome (decision_record_outcome), or capture it with memory_capture",
        ));
    }
    Ok(Some(text.to_owned()))
}

fn validate_metrics(
    field: &str,
    metrics: BTreeMap<String, serde_json::Value>,
) -> Result<BTreeMap<String, serde_json::Value>, FieldError> {
    if metrics.len() > MAX_METRICS {
        return Err(FieldError::new(field, format!("has more than {MAX_METRICS} entries"), metrics.len(), "keep the figures that matter"));
    }
    let size = serde_json::to_string(&metrics).map_or(0, |text| text.len());
    if size > 16 * 1024 {
        return Err(FieldError::new(field, "is larger than 16 KiB as JSON", size, "report summary figures, not raw data"));
    }
    Ok(metrics)
}

/// What a decision's memory says: its title, markdown content, tags, metadata and confidence.
/// Recall finds decisions through this text; the decision row stays the structured record.
pub fn decision_memory_input(decision: &Decision, outcome: Option<&Outcome>) -> CaptureInput {
    let mut content = format!("# Decision: {}\n\n", decision.statement);
    let mut line = |label: &str, value: String| {
        if !value.is_empty() {
            content.push_str(&format!("- {label}: {value}\n"));
        }
    };
    line("id", decision.id.to_string());
    line("module", decision.module.clone());
    line("status", decision.status.to_string());
    line("risk", decision.risk_level.to_string());
    let confidence = match (decision.current_confidence, decision.confidence) {
        (Some(current), Some(stated)) if current != stated => format!("{current} (stated at capture: {stated})"),
        (Some(current), None) => format!("{current} (none stated at capture)"),
        (Some(current), Some(_)) => format!("{current}"),
        (None, _) => "not stated".to_owned(),
    };
    line("confidence", confidence);
    line("problem", decision.problem.clone().unwrap_or_default());
    line("alternatives considered", decision.alternatives.join("; "));
    line("rationale", decision.rationale.clone().unwrap_or_default());
    line("risks", decision.risks.join("; "));
    line("assumptions", decision.assumptions.join("; "));
    line("files", decision.context.files().collect::<Vec<_>>().join(", "));
    line("pull request", decision.linked_pr.clone().unwrap_or_default());
    line("commit", decision.linked_commit.clone().unwrap_or_default());
    if let Some(outcome) = outcome {
        line("outcome", format!("{} (score {})", outcome.status, outcome.score));
        line("outcome notes", outcome.notes.clone().unwrap_or_default());
        line("lessons", outcome.lessons.join("; "));
    }
    append_notes(&mut content, &decision.notes);
    fit_content(&mut content);
    let mut metadata = BTreeMap::from([
        ("decision_id".to_owned(), decision.id.to_string()),
        ("module".to_owned(), decision.module.clone()),
        ("status".to_owned(), decision.status.to_string()),
        ("risk_level".to_owned(), decision.risk_level.to_string()),
    ]);
    if let Some(outcome) = outcome {
        metadata.insert("outcome".to_owned(), outcome.status.to_string());
    }
    CaptureInput {
        content,
        title: Some(truncated_title(&decision.statement)),
        kind: Some("episodic".to_owned()),
        namespace: Some(DECISIONS_NAMESPACE.to_owned()),
        tags: vec!["decision".to_owned(), decision.module.clone()],
        category: Some("decision".to_owned()),
        source: Some(if decision.created_by == "human" { "told-by-user" } else { "model-generated" }.to_owned()),
        confidence: decision.current_confidence,
        salience: Some(match decision.risk_level {
            RiskLevel::Low => 0.4,
            RiskLevel::Medium => 0.6,
            RiskLevel::High => 0.8,
        }),
        event_time: None,
        links: Vec::new(),
        metadata,
        author: None,
    }
}

/// Appends the notes section: the latest notes that fit in a memory beside what is already
/// written, newest last, with a line saying how many earlier ones only the decision record keeps.
fn append_notes(content: &mut String, notes: &[Note]) {
    if notes.is_empty() {
        return;
    }
    let lines: Vec<String> =
        notes.iter().map(|note| format!("- {}: {}\n", note.at.to_rfc3339_opts(SecondsFormat::Secs, true), note.text)).collect();
    const HEADING: &str = "\n## Notes\n\n";
    // Room for the heading and the line about earlier notes, whose count has at most three digits.
    let elision_room = "- (999 earlier notes are kept in the decision record)\n".len();
    let room = MAX_CONTENT_BYTES.saturating_sub(content.len() + HEADING.len() + elision_room);
    let mut kept = 0;
    let mut used = 0;
    for line in lines.iter().rev() {
        if used + line.len() > room {
            break;
        }
        used += line.len();
        kept += 1;
    }
    content.push_str(HEADING);
    let earlier = lines.len() - kept;
    if earlier > 0 {
        content.push_str(&format!("- ({earlier} earlier notes are kept in the decision record)\n"));
    }
    for line in &lines[earlier..] {
        content.push_str(line);
    }
}

/// Cuts a decision's rendered content to what a memory holds, at a character boundary, marking
/// the cut. Only the longest decisions (many long alternatives, assumptions and files) reach it;
/// the decision record keeps every field whole.
fn fit_content(content: &mut String) {
    const MARK: &str = "\n…\n";
    if content.len() <= MAX_CONTENT_BYTES {
        return;
    }
    let mut end = MAX_CONTENT_BYTES - MARK.len();
    while !content.is_char_boundary(end) {
        end -= 1;
    }
    content.truncate(end);
    content.push_str(MARK);
}

fn truncated_title(statement: &str) -> String {
    if statement.chars().count() <= crate::input::MAX_TITLE_CHARS {
        statement.to_owned()
    } else {
        format!("{}…", truncate_chars(statement, crate::input::MAX_TITLE_CHARS - 1))
    }
}

/// The next version of a decision's memory after the decision changed, or `None` when what the
/// memory says is already current (say, after someone edited it by hand to the same text). A
/// forgotten decision memory stays forgotten. [`decision_memory_input`] always renders a valid
/// memory (its content is cut to fit), so an error here is a bug, reported rather than a panic.
pub fn refresh_decision_memory(
    current: &Memory,
    decision: &Decision,
    outcome: Option<&Outcome>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Option<(Memory, MemoryVersion)>, FieldError> {
    refresh_memory(current, decision_memory_input(decision, outcome), current.status, reason, now)
}

/// The next version of a memory kept in step with a record it is derived from: `face` (what the
/// memory should say) and `status` replace the current title, content, kind, tags, category,
/// source, confidence, salience, links and metadata. `None` when nothing would change.
pub fn refresh_memory(
    current: &Memory,
    face: CaptureInput,
    status: Status,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Option<(Memory, MemoryVersion)>, FieldError> {
    let built = build_memory(face, current.domain.clone(), current.id.clone(), now)?;
    let next = Memory {
        created_at: current.created_at,
        event_time: current.event_time,
        last_accessed_at: current.last_accessed_at,
        access_count: current.access_count,
        status,
        version: current.version,
        updated_at: current.updated_at,
        author: current.author.clone(),
        ..built
    };
    if next == *current {
        return Ok(None);
    }
    let next = Memory { version: current.version + 1, updated_at: now, ..next };
    let previous = MemoryVersion { version: current.version, superseded_at: now, reason: reason.to_owned(), memory: current.clone() };
    Ok(Some((next, previous)))
}

/// The `learnings` memory a lesson becomes: linked to the decision it came from.
pub fn lesson_memory_input(decision: &Decision, decision_urn: &MemoryUrn, outcome: OutcomeStatus, lesson: &str) -> CaptureInput {
    CaptureInput {
        content: format!(
            "{lesson}\n\nLearned from decision {} ({}, {outcome}): {}",
            decision.id, decision.module, decision.statement
        ),
        title: Some(truncated_title(lesson)),
        kind: Some("semantic".to_owned()),
        namespace: Some(LESSONS_NAMESPACE.to_owned()),
        tags: vec!["lesson".to_owned(), decision.module.clone()],
        category: Some("decision-lesson".to_owned()),
        source: Some("direct-observation".to_owned()),
        confidence: None,
        salience: Some(0.7),
        event_time: None,
        links: vec![LinkInput { target: decision_urn.to_string(), relation: Some(crate::relation::DERIVED_FROM.to_owned()) }],
        metadata: BTreeMap::from([
            ("decision_id".to_owned(), decision.id.to_string()),
            ("module".to_owned(), decision.module.clone()),
        ]),
        author: None,
    }
}
