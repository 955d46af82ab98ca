//! The decision record and its vocabulary: statuses and their transitions, risk levels, signals
//! and outcomes.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::FieldError;
use crate::memory::{MemoryId, vocabulary};

vocabulary!(
    /// Where a decision is in its life. See [`DecisionStatus::next_allowed`] for the transitions.
    DecisionStatus, "status" {
        Pending => "pending",
        Executed => "executed",
        Completed => "completed",
        Failed => "failed",
        Reworked => "reworked",
    }
);

impl DecisionStatus {
    /// The statuses an update may move a decision to: pending -> executed -> completed | failed
    /// | reworked. The last three are final.
    fn next_allowed(self) -> &'static [DecisionStatus] {
        match self {
            DecisionStatus::Pending => &[DecisionStatus::Executed],
            DecisionStatus::Executed => &[DecisionStatus::Completed, DecisionStatus::Failed, DecisionStatus::Reworked],
            DecisionStatus::Completed | DecisionStatus::Failed | DecisionStatus::Reworked => &[],
        }
    }

    /// Checks a move requested by an update; moving to the current status is not a move.
    pub fn transition(self, to: DecisionStatus) -> Result<DecisionStatus, FieldError> {
        if to == self || self.next_allowed().contains(&to) {
            return Ok(to);
        }
        let allowed: Vec<&str> = self.next_allowed().iter().map(|status| status.as_str()).collect();
        let suggestion = if allowed.is_empty() {
            format!("`{self}` is final; capture a new decision if the choice is being revisited")
        } else {
            format!("from `{self}` the allowed statuses are: {}", allowed.join(", "))
        };
        Err(FieldError::new("status", format!("cannot move a decision from `{self}` to `{to}`"), to.as_str(), suggestion))
    }
}

vocabulary!(
    /// How much could go wrong if the decision is wrong.
    RiskLevel, "risk_level" {
        Low => "low",
        Medium => "medium",
        High => "high",
    }
);

vocabulary!(
    /// An event observed between a decision and its outcome.
    SignalType, "signal_type" {
        PrCreated => "pr_created",
        PrMerged => "pr_merged",
        CiPassed => "ci_passed",
        CiFailed => "ci_failed",
        Incident => "incident",
        Performance => "performance",
    }
);

impl SignalType {
    /// How much evidence one signal of this type is, in pseudo-observations: an incident says
    /// more about a decision than a pull request being opened.
    pub fn weight(self) -> f64 {
        match self {
            SignalType::PrCreated => 0.5,
            SignalType::PrMerged | SignalType::CiPassed | SignalType::CiFailed | SignalType::Performance => 1.0,
            SignalType::Incident => 2.0,
        }
    }
}

vocabulary!(
    /// Whether a signal speaks for or against the decision.
    Valence, "valence" {
        Positive => "positive",
        Negative => "negative",
        Neutral => "neutral",
    }
);

vocabulary!(
    /// How a decision turned out.
    OutcomeStatus, "final_status" {
        Success => "success",
        Partial => "partial",
        Failure => "failure",
    }
);

impl OutcomeStatus {
    /// A reported status: one of the vocabulary's names, or a name the coding-agent decision
    /// log uses for the same thing (`successful`, `problematic` for a decision that worked with
    /// problems, `needs_revision` for one that has to be redone).
    pub(crate) fn parse_reported(text: &str) -> Result<OutcomeStatus, FieldError> {
        match text.trim() {
            "successful" => Ok(OutcomeStatus::Success),
            "problematic" => Ok(OutcomeStatus::Partial),
            "needs_revision" => Ok(OutcomeStatus::Failure),
            other => OutcomeStatus::parse(other),
        }
    }

    /// The score an outcome of this status gets when the caller states none.
    pub(crate) fn default_score(self) -> f64 {
        match self {
            OutcomeStatus::Success => 1.0,
            OutcomeStatus::Partial => 0.5,
            OutcomeStatus::Failure => 0.0,
        }
    }
}

/// A decision's id: `dec_` then lower-case letters and digits, at most 64 characters in all.
/// The decision's memory has the same id, so its URN is `kenning://{domain}/decisions/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct DecisionId(String);

impl DecisionId {
    pub const PREFIX: &'static str = "dec_";

    pub fn parse(text: &str) -> Result<DecisionId, FieldError> {
        let text = text.trim();
        let valid = text.len() <= 64
            && text
                .strip_prefix(Self::PREFIX)
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        if valid {
            Ok(DecisionId(text.to_owned()))
        } else {
            Err(FieldError::new(
                "decision_id",
                "must match ^dec_[a-z0-9]+$ (at most 64 characters)",
                text,
                "use the decision_id that decision_capture returned, e.g. `dec_01j9z3k4m5n6p7q8r9s0t1v2w3`",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of the decision's memory, which is the same text.
    pub fn memory_id(&self) -> MemoryId {
        MemoryId::parse(&self.0).expect("decision ids are valid memory ids")
    }

    /// The part after `dec_`, used to derive the ids of what hangs off the decision.
    pub fn suffix(&self) -> &str {
        &self.0[Self::PREFIX.len()..]
    }
}

impl fmt::Display for DecisionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for DecisionId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DecisionId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Where the decision was made: the session and the files it concerns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecisionContext {
    pub session_id: Option<String>,
    pub file_path: Option<String>,
    #[serde(default)]
    pub related_files: Vec<String>,
}

impl DecisionContext {
    /// Every file the decision concerns: the main path first, then the related ones.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.file_path.iter().chain(&self.related_files).map(String::as_str)
    }
}

/// A note added by an update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub at: DateTime<Utc>,
    pub text: String,
}

/// One decision, as stored. Signals and the outcome are kept beside it (see [`DecisionRecord`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub id: DecisionId,
    pub statement: String,
    pub alternatives: Vec<String>,
    /// The confidence stated at capture. Calibration compares this with the outcome: a
    /// confidence revised after seeing signals would flatter it. `None` when none was stated
    /// (a decision log entry): the decision is kept, searched and followed to its outcome, and
    /// calibration leaves it out.
    pub confidence: Option<f64>,
    /// The latest confidence, after any updates.
    pub current_confidence: Option<f64>,
    pub assumptions: Vec<String>,
    pub risk_level: RiskLevel,
    pub module: String,
    pub rationale: Option<String>,
    /// Why the decision was needed: the problem it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Known risks or downsides of the choice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub risks: Vec<String>,
    pub context: DecisionContext,
    /// Who decided, e.g. `agent`, `claude-code` or `human`.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub status: DecisionStatus,
    pub notes: Vec<Note>,
    pub linked_pr: Option<String>,
    pub linked_commit: Option<String>,
    /// SHA-256 of what was known when the decision was made, which never changes afterwards.
    pub context_hash: String,
    /// Starts at 1 and grows by one with every change; updates are compare-and-swap on it.
    pub revision: u32,
}

/// An event observed after the decision and before (or after) its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    pub id: String,
    pub decision_id: DecisionId,
    pub signal_type: SignalType,
    pub valence: Valence,
    pub description: Option<String>,
    #[serde(default)]
    pub metrics: BTreeMap<String, serde_json::Value>,
    pub recorded_at: DateTime<Utc>,
}

/// How a decision turned out. A decision has at most one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub id: String,
    pub decision_id: DecisionId,
    pub status: OutcomeStatus,
    /// How well it went, 0 to 1; calibration counts it as that fraction of a success.
    pub score: f64,
    pub completed_at: DateTime<Utc>,
    /// What was observed at the end, as the caller reported it (CI, incidents, metrics).
    #[serde(default)]
    pub observations: BTreeMap<String, serde_json::Value>,
    pub lessons: Vec<String>,
    /// The `learnings` memories the lessons became, in the order of `lessons`.
    #[serde(default)]
    pub lesson_ids: Vec<MemoryId>,
    /// What happened, in the reporter's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// A decision with everything recorded about it.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRecord {
    pub decision: Decision,
    /// Oldest first.
    pub signals: Vec<Signal>,
    pub outcome: Option<Outcome>,
}
