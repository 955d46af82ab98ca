//! Contradictions between memories: how they are found ([`detect`]), the record kept of each
//! with its states, and how one is settled without a language model (the rule) or with one
//! ([`judge`]: the prompts and the strict reading of the answers).
//!
//! A record names two memories: `a`, the older, and `b`, the newer one whose capture found the
//! conflict. Its state moves
//!
//! ```text
//! open ──> resolved | context_dependent ──> reopened ──> resolved | context_dependent
//! ```
//!
//! `resolved` has a winner; `context_dependent` says under which conditions each holds and
//! penalises neither; `reopened` is a settled contradiction whose winner a later capture
//! contradicted again. Every move is kept in the record's history.

mod change;
pub mod detect;
pub mod judge;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::confidence::add_contradicting;
use crate::error::FieldError;
use crate::input::{MAX_LINKS, default_confidence, supersede};
use crate::memory::{Link, Memory, MemoryVersion, vocabulary};
use crate::urn::MemoryUrn;

pub use detect::{Detection, Reading, detect, detect_read};

/// Ids of contradiction records start with this.
pub const ID_PREFIX: &str = "ctr_";

/// How far (in the source weights of [`default_confidence`]) the older statement's source must
/// be more reliable than the newer one's to win against recency: a direct observation (0.95)
/// beats a model's guess (0.6) or an inference (0.7), a user's word (0.9) beats an inference,
/// but a tool's result (0.85) does not beat an inference made later.
const SOURCE_MARGIN: f64 = 0.2;

vocabulary!(
    /// What makes two memories conflict.
    ContradictionKind, "kind" {
        Negation => "negation",
        ChangedValue => "changed_value",
        Superseded => "superseded",
    }
);

vocabulary!(
    /// Where a contradiction stands.
    ContradictionState, "state" {
        Open => "open",
        Resolved => "resolved",
        ContextDependent => "context_dependent",
        Reopened => "reopened",
    }
);

vocabulary!(
    /// How a contradiction was settled.
    Verdict, "resolution" {
        AWins => "a_wins",
        BWins => "b_wins",
        ContextDependent => "context_dependent",
    }
);

impl ContradictionState {
    /// The states this one may move to.
    fn next_allowed(self) -> &'static [ContradictionState] {
        match self {
            ContradictionState::Open | ContradictionState::Reopened => &[ContradictionState::Resolved, ContradictionState::ContextDependent],
            ContradictionState::Resolved | ContradictionState::ContextDependent => &[ContradictionState::Reopened],
        }
    }

    /// Whether the contradiction waits for a decision.
    pub fn is_unsettled(self) -> bool {
        matches!(self, ContradictionState::Open | ContradictionState::Reopened)
    }
}

/// The words that conflict, as each memory says them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub a: Vec<String>,
    pub b: Vec<String>,
}

/// How a contradiction was settled, and by what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub verdict: Verdict,
    /// When each memory holds; given for `context_dependent` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<String>,
    pub explanation: String,
    /// `rule:recency`, `rule:source_reliability`, `rule:supersession` or `llm:{model}`.
    pub decided_by: String,
}

/// One move of a contradiction's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// `None` for the record's creation.
    pub from: Option<ContradictionState>,
    pub to: ContradictionState,
    pub at: DateTime<Utc>,
    pub reason: String,
}

/// A contradiction as it is kept (the body of a `contradiction` state record, as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contradiction {
    pub id: String,
    /// The older memory's URN.
    pub a: String,
    /// The newer memory's URN: the capture that found the conflict.
    pub b: String,
    pub kind: ContradictionKind,
    pub evidence: Evidence,
    pub state: ContradictionState,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The latest settlement; kept through a reopening, so the reopened record says what was
    /// decided before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    pub history: Vec<Transition>,
}

impl Contradiction {
    /// A new open contradiction of `a` (older) by `b` (newer).
    pub fn open(id: String, a: String, b: String, detection: &Detection, reason: &str, at: DateTime<Utc>) -> Contradiction {
        Contradiction {
            id,
            a,
            b,
            kind: detection.kind,
            evidence: Evidence { a: detection.older.clone(), b: detection.newer.clone() },
            state: ContradictionState::Open,
            created_at: at,
            updated_at: at,
            resolution: None,
            history: vec![Transition { from: None, to: ContradictionState::Open, at, reason: reason.to_owned() }],
        }
    }

    /// Moves the record to `to`, or says why it cannot.
    pub fn transition(&mut self, to: ContradictionState, reason: &str, at: DateTime<Utc>) -> Result<(), FieldError> {
        if !self.state.next_allowed().contains(&to) {
            let allowed: Vec<&str> = self.state.next_allowed().iter().map(|state| state.as_str()).collect();
            let suggestion = match self.state {
                ContradictionState::Resolved | ContradictionState::ContextDependent => format!(
                    "`{}` is settled; it is reopened when a new capture contradicts its winner (from `{}` the allowed states are: {})",
                    self.state,
                    self.state,
                    allowed.join(", ")
                ),
                _ => format!("from `{}` the allowed states are: {}", self.state, allowed.join(", ")),
            };
            return Err(FieldError::new(
                "state",
                format!("cannot move contradiction {} from `{}` to `{to}`", self.id, self.state),
                to.as_str(),
                suggestion,
            ));
        }
        self.history.push(Transition { from: Some(self.state), to, at, reason: reason.to_owned() });
        self.state = to;
        self.updated_at = at;
        Ok(())
    }

    /// Settles an open or reopened contradiction: `resolved` when one side wins,
    /// `context_dependent` otherwise.
    pub fn settle(&mut self, resolution: Resolution, at: DateTime<Utc>) -> Result<(), FieldError> {
        let to = match resolution.verdict {
            Verdict::ContextDependent => ContradictionState::ContextDependent,
            Verdict::AWins | Verdict::BWins => ContradictionState::Resolved,
        };
        self.transition(to, &format!("{} ({})", resolution.verdict, resolution.decided_by), at)?;
        self.resolution = Some(resolution);
        Ok(())
    }

    /// Reopens a settled contradiction because `by` (a memory's URN) contradicts its winner.
    pub fn reopen(&mut self, by: &str, at: DateTime<Utc>) -> Result<(), FieldError> {
        self.transition(ContradictionState::Reopened, &format!("{by} contradicts the winner"), at)
    }

    /// The URN of the memory that won, when one did.
    pub fn winner(&self) -> Option<&str> {
        match self.resolution.as_ref().map(|resolution| resolution.verdict) {
            Some(Verdict::AWins) if self.state == ContradictionState::Resolved => Some(&self.a),
            Some(Verdict::BWins) if self.state == ContradictionState::Resolved => Some(&self.b),
            _ => None,
        }
    }

    /// Whether the memory of `urn` is one of the two.
    pub fn involves(&self, urn: &str) -> bool {
        self.a == urn || self.b == urn
    }

    pub fn to_body(&self) -> String {
        serde_json::to_string(self).expect("a contradiction serialises")
    }

    pub fn from_body(body: &str) -> Result<Contradiction, crate::Error> {
        serde_json::from_str(body).map_err(|error| crate::Error::Storage(format!("an unreadable contradiction record: {error}")))
    }
}

/// The next version of a memory a contradiction was settled against: one more contradicting
/// observation ([`crate::confidence::add_contradicting`]) and, when a newer memory replaced it, a
/// [`crate::relation::SUPERSEDED_BY`] link to that one (unless the memory already has it or has no room for
/// another link). `reason` is kept in the memory's history, cut to what a reason may hold.
pub fn settled_against(current: &Memory, replaced_by: Option<&MemoryUrn>, reason: &str, now: DateTime<Utc>) -> (Memory, MemoryVersion) {
    let mut next = current.clone();
    add_contradicting(&mut next);
    if let Some(target) = replaced_by {
        let linked = next.links.iter().any(|link| link.relation == crate::relation::SUPERSEDED_BY && &link.target == target);
        if !linked && next.links.len() < MAX_LINKS {
            next.links.push(Link { target: target.clone(), relation: crate::relation::SUPERSEDED_BY.to_owned() });
        }
    }
    let reason: String = reason.trim().chars().take(1000).collect();
    supersede(current, next, reason, now)
}

/// The next version of a memory a newer one contradicts while the contradiction is open: a
/// [`crate::relation::SUPERSEDED_BY`] link to the newer one, so that recall prefers it, and no evidence yet.
/// `None` when the memory already has the link or no room for it.
pub fn marked_superseded(current: &Memory, replaced_by: &MemoryUrn, reason: &str, now: DateTime<Utc>) -> Option<(Memory, MemoryVersion)> {
    let linked = current.links.iter().any(|link| link.relation == crate::relation::SUPERSEDED_BY && &link.target == replaced_by);
    if linked || current.links.len() >= MAX_LINKS {
        return None;
    }
    let mut next = current.clone();
    next.links.push(Link { target: replaced_by.clone(), relation: crate::relation::SUPERSEDED_BY.to_owned() });
    let reason: String = reason.trim().chars().take(1000).collect();
    Some(supersede(current, next, reason, now))
}

/// The next version of a memory that won a contradiction against the one it was marked
/// superseded by: the [`crate::relation::SUPERSEDED_BY`] link to that one goes. `None` when it has none.
pub fn no_longer_superseded(current: &Memory, by: &MemoryUrn, reason: &str, now: DateTime<Utc>) -> Option<(Memory, MemoryVersion)> {
    if !current.links.iter().any(|link| link.relation == crate::relation::SUPERSEDED_BY && &link.target == by) {
        return None;
    }
    let mut next = current.clone();
    next.links.retain(|link| !(link.relation == crate::relation::SUPERSEDED_BY && &link.target == by));
    let reason: String = reason.trim().chars().take(1000).collect();
    Some(supersede(current, next, reason, now))
}

/// Whether a memory was replaced by a newer one (it carries a [`crate::relation::SUPERSEDED_BY`] link).
pub fn is_superseded(memory: &Memory) -> bool {
    memory.links.iter().any(|link| link.relation == crate::relation::SUPERSEDED_BY)
}

/// Checks a contradiction id a caller gave.
pub fn check_id(field: &str, id: &str) -> Result<String, FieldError> {
    let id = id.trim();
    let valid = id.strip_prefix(ID_PREFIX).is_some_and(|rest| !rest.is_empty() && rest.len() <= 40 && rest.chars().all(|c| c.is_ascii_alphanumeric()));
    if valid {
        Ok(id.to_owned())
    } else {
        Err(FieldError::new(field, format!("is not a contradiction id (`{ID_PREFIX}` and letters or digits)"), id, "use an id a capture reported or `memory_contradictions` lists"))
    }
}

/// Settles a contradiction without a language model: the newer statement wins, unless the
/// older one's source is more reliable by [`SOURCE_MARGIN`] or more. `a` is the older memory.
pub fn rule_resolution(a: &Memory, b: &Memory) -> Resolution {
    let (older, newer, older_verdict, newer_verdict) =
        if a.created_at <= b.created_at { (a, b, Verdict::AWins, Verdict::BWins) } else { (b, a, Verdict::BWins, Verdict::AWins) };
    let (older_weight, newer_weight) = (default_confidence(older.source), default_confidence(newer.source));
    if older_weight - newer_weight >= SOURCE_MARGIN - 1e-9 {
        return Resolution {
            verdict: older_verdict,
            conditions: None,
            explanation: format!(
                "the older statement's source ({}, weight {older_weight}) is more reliable than the newer one's ({}, weight {newer_weight}) by at least {SOURCE_MARGIN}",
                older.source, newer.source
            ),
            decided_by: "rule:source_reliability".to_owned(),
        };
    }
    Resolution {
        verdict: newer_verdict,
        conditions: None,
        explanation: format!(
            "the newer statement ({}) replaces the older one ({}); its source ({}) is not less reliable by {SOURCE_MARGIN} or more",
            newer.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            older.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            newer.source
        ),
        decided_by: "rule:recency".to_owned(),
    }
}

/// The settlement of a contradiction whose newer statement says itself that the older one's
/// fact changed ("we moved from MySQL to PostgreSQL"): the newer one wins at once.
pub fn supersession_resolution(detection: &Detection) -> Resolution {
    Resolution {
        verdict: Verdict::BWins,
        conditions: None,
        explanation: format!(
            "the newer statement says `{}` was replaced by `{}`",
            detection.older.join(" "),
            detection.newer.join(" ")
        ),
        decided_by: "rule:supersession".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minute: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + minute * 60, 0).unwrap()
    }

    fn record() -> Contradiction {
        let detection = detect("timeout is 30s", "timeout is 60s", None).unwrap();
        Contradiction::open("ctr_1".into(), "kenning://user/config/a".into(), "kenning://user/config/b".into(), &detection, "found at capture", at(0))
    }

    fn resolution(verdict: Verdict) -> Resolution {
        Resolution { verdict, conditions: None, explanation: "because".into(), decided_by: "rule:recency".into() }
    }

    #[test]
    fn every_valid_transition() {
        use ContradictionState::*;
        for (first, second) in [(Verdict::AWins, Verdict::BWins), (Verdict::ContextDependent, Verdict::AWins), (Verdict::BWins, Verdict::ContextDependent)] {
            let mut record = record();
            assert_eq!(record.state, Open);
            record.settle(resolution(first), at(1)).unwrap();
            assert_eq!(record.state, if first == Verdict::ContextDependent { ContextDependent } else { Resolved });
            record.reopen("kenning://user/config/c", at(2)).unwrap();
            assert_eq!(record.state, Reopened);
            assert_eq!(record.winner(), None, "a reopened record has no winner");
            record.settle(resolution(second), at(3)).unwrap();
            assert_eq!(record.state, if second == Verdict::ContextDependent { ContextDependent } else { Resolved });
            let moves: Vec<(Option<ContradictionState>, ContradictionState)> = record.history.iter().map(|step| (step.from, step.to)).collect();
            assert_eq!(moves.len(), 4);
            assert_eq!(moves[0], (None, Open));
            assert_eq!(moves[2].1, Reopened);
            assert_eq!(record.updated_at, at(3));
        }
    }

    #[test]
    fn every_invalid_transition_is_a_field_error() {
        use ContradictionState::*;
        for from in ContradictionState::ALL {
            for to in ContradictionState::ALL {
                if from.next_allowed().contains(to) {
                    continue;
                }
                let mut record = record();
                record.state = *from;
                let error = record.transition(*to, "test", at(1)).unwrap_err();
                assert_eq!(error.field, "state");
                assert!(error.problem.contains(&format!("from `{from}` to `{to}`")), "{error:?}");
                assert_eq!(record.state, *from, "a refused move changes nothing");
                assert_eq!(record.history.len(), 1);
            }
        }
        let mut open = record();
        assert!(open.reopen("kenning://user/config/c", at(1)).is_err(), "an open contradiction cannot be reopened");
        open.settle(resolution(Verdict::AWins), at(1)).unwrap();
        let error = open.settle(resolution(Verdict::BWins), at(2)).unwrap_err();
        assert!(error.suggestion.contains("reopened when a new capture"), "{error:?}");
        assert_eq!(Reopened.next_allowed(), Open.next_allowed());
    }

    #[test]
    fn winners_and_bodies() {
        let mut record = record();
        record.settle(resolution(Verdict::BWins), at(1)).unwrap();
        assert_eq!(record.winner(), Some("kenning://user/config/b"));
        assert_eq!(Contradiction::from_body(&record.to_body()).unwrap(), record);
        assert!(Contradiction::from_body("{").is_err());
    }

    #[test]
    fn ids_are_checked() {
        assert_eq!(check_id("contradiction_id", " ctr_01abc ").unwrap(), "ctr_01abc");
        for bad in ["", "ctr_", "dec_01abc", "ctr_../x"] {
            assert_eq!(check_id("contradiction_id", bad).unwrap_err().field, "contradiction_id");
        }
    }
}
