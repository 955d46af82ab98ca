//! Skills and antipatterns mined from outcomes.
//!
//! Decisions with outcomes are grouped into patterns per module, in the order they were made:
//! each decision joins the pattern whose first decision (its anchor) it is most alike, when the
//! two are the same pattern by [`Relation::same_pattern`] (word overlap of at least
//! [`PATTERN_SIMILARITY`] and neither chose what the other rejected); otherwise it starts a new
//! pattern. Comparing with the anchor, not with every member, keeps a pattern from drifting one
//! small step at a time into something else.
//!
//! A pattern with at least [`MIN_PATTERN_OUTCOMES`] outcomes is mined. With `n` outcomes whose
//! scores sum to `s`, its success rate is `s / n`:
//! - at least [`SKILL_SUCCESS_RATE`] it is a skill, whose confidence is the 95% lower credible
//!   bound of its success rate, `lower_credible_bound(s, n, 0.95)`: 3 of 3 gives 0.47, 30 of 30
//!   gives 0.91;
//! - below it, an antipattern, whose confidence is the same bound on its failure rate,
//!   `lower_credible_bound(n - s, n, 0.95)`. It is of high severity when that bound is above one
//!   half (the data say it fails more often than not, with 95% credibility), else medium.
//!
//! [`PATTERN_SIMILARITY`]: crate::decision::similarity::PATTERN_SIMILARITY

use std::collections::BTreeMap;

use crate::calibration::lower_credible_bound;
use crate::decision::model::{Decision, DecisionId, Outcome, OutcomeStatus};
use crate::decision::similarity::{DecisionWords, Relation, relate};
use crate::input::{CaptureInput, LinkInput, MAX_TITLE_CHARS, truncate_chars};
use crate::urn::MemoryUrn;

/// Patterns with fewer outcomes than this are not mined.
const MIN_PATTERN_OUTCOMES: usize = 3;
/// The success rate from which a pattern is a skill rather than an antipattern.
const SKILL_SUCCESS_RATE: f64 = 0.5;
/// The credibility of the bounds that give skills and antipatterns their confidence.
const SKILL_CREDIBILITY: f64 = 0.95;

/// Whether a mined pattern is one to repeat or one to avoid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkillKind {
    Skill,
    Antipattern,
}

impl SkillKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SkillKind::Skill => "skill",
            SkillKind::Antipattern => "antipattern",
        }
    }

    /// The prefix of the ids of this kind's memories.
    fn id_prefix(self) -> &'static str {
        match self {
            SkillKind::Skill => "sk_",
            SkillKind::Antipattern => "ap_",
        }
    }
}

/// How serious a warning or an antipattern is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// A group of alike decisions in one module, in the order they were made.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    pub module: String,
    /// Indices into the evidence given to [`group_patterns`]; the first is the anchor.
    pub members: Vec<usize>,
    /// The anchor's words, which members are compared with.
    pub words: DecisionWords,
}

/// Groups decisions into patterns (see the module documentation). The evidence may come in any
/// order; patterns are formed in the order the decisions were made.
pub fn group_patterns(evidence: &[(Decision, Outcome)]) -> Vec<Pattern> {
    let mut order: Vec<usize> = (0..evidence.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&evidence[a].0, &evidence[b].0);
        a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id))
    });
    let mut patterns: Vec<Pattern> = Vec::new();
    for index in order {
        let decision = &evidence[index].0;
        let words = DecisionWords::new(&decision.statement, &decision.alternatives);
        let best = patterns
            .iter_mut()
            .filter(|pattern| pattern.module == decision.module)
            .map(|pattern| (relate(&pattern.words, &words), pattern))
            .filter(|(relation, _)| relation.same_pattern())
            .max_by(|a, b| a.0.similarity().total_cmp(&b.0.similarity()));
        match best {
            Some((_, pattern)) => pattern.members.push(index),
            None => patterns.push(Pattern { module: decision.module.clone(), members: vec![index], words }),
        }
    }
    patterns
}

/// A skill or antipattern mined from a pattern's outcomes.
#[derive(Debug, Clone, PartialEq)]
pub struct MinedSkill {
    /// `sk_` or `ap_` and the anchor decision's id without `dec_`; also the id of its memory.
    pub id: String,
    pub kind: SkillKind,
    pub module: String,
    /// The anchor decision's statement: what the pattern chose.
    pub statement: String,
    pub decision_ids: Vec<DecisionId>,
    pub outcome_ids: Vec<String>,
    pub total: usize,
    /// Outcomes whose status is success.
    pub successes: usize,
    /// The summed scores, in which a partial outcome counts as its score.
    pub weighted_successes: f64,
    /// `weighted_successes / total`.
    pub success_rate: f64,
    /// The 95% lower credible bound of the success rate (skills) or failure rate (antipatterns).
    pub confidence: f64,
    /// High or medium for antipatterns; `None` for skills.
    pub severity: Option<Severity>,
    /// Lessons recorded with the members' outcomes, without repeats: from the successes for a
    /// skill, from the failures and partial outcomes for an antipattern.
    pub lessons: Vec<String>,
    /// What the members rejected, without repeats.
    pub alternatives: Vec<String>,
    pub words: DecisionWords,
}

/// Mines every pattern with at least [`MIN_PATTERN_OUTCOMES`] outcomes, in pattern order.
pub fn mine(evidence: &[(Decision, Outcome)]) -> Vec<MinedSkill> {
    group_patterns(evidence)
        .into_iter()
        .filter(|pattern| pattern.members.len() >= MIN_PATTERN_OUTCOMES)
        .map(|pattern| mine_pattern(evidence, pattern))
        .collect()
}

fn mine_pattern(evidence: &[(Decision, Outcome)], pattern: Pattern) -> MinedSkill {
    let members: Vec<&(Decision, Outcome)> = pattern.members.iter().map(|&index| &evidence[index]).collect();
    let anchor = &members[0].0;
    let total = members.len();
    let weighted_successes: f64 = members.iter().map(|(_, outcome)| outcome.score).sum();
    let success_rate = weighted_successes / total as f64;
    let kind = if success_rate >= SKILL_SUCCESS_RATE { SkillKind::Skill } else { SkillKind::Antipattern };
    let (confidence, severity) = match kind {
        SkillKind::Skill => (lower_credible_bound(weighted_successes, total as f64, SKILL_CREDIBILITY), None),
        SkillKind::Antipattern => {
            let failure_bound = lower_credible_bound(total as f64 - weighted_successes, total as f64, SKILL_CREDIBILITY);
            (failure_bound, Some(if failure_bound > 0.5 { Severity::High } else { Severity::Medium }))
        }
    };
    let teaches = |outcome: &Outcome| match kind {
        SkillKind::Skill => outcome.status == OutcomeStatus::Success,
        SkillKind::Antipattern => outcome.status != OutcomeStatus::Success,
    };
    let mut lessons: Vec<String> = Vec::new();
    let mut alternatives: Vec<String> = Vec::new();
    for (decision, outcome) in &members {
        if teaches(outcome) {
            for lesson in &outcome.lessons {
                if !lessons.contains(lesson) {
                    lessons.push(lesson.clone());
                }
            }
        }
        for alternative in &decision.alternatives {
            if !alternatives.iter().any(|known| known.eq_ignore_ascii_case(alternative)) {
                alternatives.push(alternative.clone());
            }
        }
    }
    MinedSkill {
        id: format!("{}{}", kind.id_prefix(), anchor.id.suffix()),
        kind,
        module: pattern.module,
        statement: anchor.statement.clone(),
        decision_ids: members.iter().map(|(decision, _)| decision.id.clone()).collect(),
        outcome_ids: members.iter().map(|(_, outcome)| outcome.id.clone()).collect(),
        total,
        successes: members.iter().filter(|(_, outcome)| outcome.status == OutcomeStatus::Success).count(),
        weighted_successes,
        success_rate,
        confidence,
        severity,
        lessons,
        alternatives,
        words: pattern.words,
    }
}

/// How well a mined skill applies to a proposed statement: the word overlap with what the
/// pattern chose, or 0 when the proposal chose what the pattern rejected or the reverse.
pub fn applicability(skill: &MinedSkill, proposal: &DecisionWords) -> f64 {
    match relate(&skill.words, proposal) {
        Relation::Alike(similarity) => similarity,
        Relation::Contrast(_) => 0.0,
    }
}

/// The procedural memory a mined skill or antipattern is kept as (namespace `patterns`), with
/// its evidence in the metadata and a link to each decision it rests on.
pub fn skill_memory_input(skill: &MinedSkill, decision_urns: &[MemoryUrn]) -> CaptureInput {
    let label = match skill.kind {
        SkillKind::Skill => "Skill",
        SkillKind::Antipattern => "Antipattern",
    };
    let mut content = format!("# {label} ({}): {}\n\n", skill.module, skill.statement);
    content.push_str(&format!(
        "- evidence: {} of {} outcomes were successes (summed score {}, success rate {:.2})\n",
        skill.successes, skill.total, round(skill.weighted_successes), skill.success_rate
    ));
    let bound = match skill.kind {
        SkillKind::Skill => "success",
        SkillKind::Antipattern => "failure",
    };
    content.push_str(&format!("- confidence: {:.2} (95% lower credible bound of the {bound} rate)\n", skill.confidence));
    if let Some(severity) = skill.severity {
        content.push_str(&format!("- severity: {}\n", severity.as_str()));
    }
    let ids: Vec<&str> = skill.decision_ids.iter().map(|id| id.as_str()).collect();
    content.push_str(&format!("- decisions: {}\n", ids.join(", ")));
    if !skill.alternatives.is_empty() {
        content.push_str(&format!("- alternatives they rejected: {}\n", skill.alternatives.join("; ")));
    }
    if !skill.lessons.is_empty() {
        content.push_str("\n## Lessons\n\n");
        for lesson in &skill.lessons {
            content.push_str(&format!("- {lesson}\n"));
        }
    }
    let metadata = BTreeMap::from([
        ("skill_id".to_owned(), skill.id.clone()),
        ("kind".to_owned(), skill.kind.as_str().to_owned()),
        ("module".to_owned(), skill.module.clone()),
        ("successes".to_owned(), skill.successes.to_string()),
        ("total_outcomes".to_owned(), skill.total.to_string()),
        ("weighted_successes".to_owned(), round(skill.weighted_successes).to_string()),
        ("success_rate".to_owned(), round(skill.success_rate).to_string()),
        ("source".to_owned(), "outcomes".to_owned()),
    ]);
    CaptureInput {
        content,
        title: Some(truncate_chars(&format!("{label} ({}): {}", skill.module, skill.statement), MAX_TITLE_CHARS).to_owned()),
        kind: Some("procedural".to_owned()),
        namespace: Some(SKILLS_NAMESPACE.to_owned()),
        tags: vec![skill.kind.as_str().to_owned(), skill.module.clone(), MINED_TAG.to_owned()],
        category: Some(skill.kind.as_str().to_owned()),
        source: Some("inference".to_owned()),
        confidence: Some(skill.confidence),
        salience: Some(0.7),
        event_time: None,
        links: decision_urns.iter().map(|urn| LinkInput { target: urn.to_string(), relation: Some("evidenced-by".to_owned()) }).collect(),
        metadata,
        author: None,
    }
}

/// The namespace mined skills and antipatterns are kept in.
pub const SKILLS_NAMESPACE: &str = "patterns";
/// The tag every mined skill and antipattern memory carries, beside its kind and module.
pub const MINED_TAG: &str = "from-outcomes";

/// Six decimals: enough for any score sum, without floating-point tails in text.
fn round(value: f64) -> f64 {
    (value * 1e6).round() / 1e6
}
