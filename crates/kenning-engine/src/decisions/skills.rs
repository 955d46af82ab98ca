//! Skills and antipatterns: mined from outcomes on every read, so they always match the record,
//! and kept as procedural memories (updated or retired as outcomes arrive) so that recall and
//! the decision graph find them too.

use kenning_core::decision::input::refresh_memory;
use kenning_core::decision::mining::{
    MINED_TAG, MinedSkill, SKILLS_NAMESPACE, SkillKind, applicability, mine, skill_memory_input,
};
use kenning_core::decision::similarity::DecisionWords;
use kenning_core::decision::{Edge, MemoryChange, Node, SkillSync};
use kenning_core::relation;
use kenning_core::input::build_memory;
use kenning_core::{Domain, FieldError, MemoryId, MemoryUrn, Namespace, SearchFilter, Status};

use super::views::{AntipatternView, SkillChange, SkillEvidence, SkillView, SkillsView, round};
use super::{DecisionDomain, DecisionService};
use crate::error::Result;
use crate::service::{CAS_ATTEMPTS, backoff};

pub const DEFAULT_SKILLS_LIMIT: usize = 10;
pub const MAX_SKILLS_LIMIT: usize = 100;

/// The URN of a mined skill's memory.
pub(crate) fn skill_urn(domain: &Domain, id: &str) -> String {
    MemoryUrn::new(
        domain.clone(),
        Namespace::parse(SKILLS_NAMESPACE).expect("valid namespace"),
        MemoryId::parse(id).expect("mined ids are valid memory ids"),
    )
    .to_string()
}

/// What to do about a mined pattern, in a sentence.
pub(crate) fn skill_recommendation(skill: &MinedSkill) -> String {
    match (skill.kind, skill.lessons.first()) {
        (SkillKind::Skill, Some(lesson)) => format!("Worked {} of {} times; {lesson}", skill.successes, skill.total),
        (SkillKind::Skill, None) => format!("Worked {} of {} times in {}; a sound default here", skill.successes, skill.total, skill.module),
        (SkillKind::Antipattern, Some(lesson)) => format!("Avoid: {lesson}"),
        (SkillKind::Antipattern, None) if !skill.alternatives.is_empty() => {
            format!("Avoid, or compare with what was rejected before: {}", skill.alternatives.join(", "))
        }
        (SkillKind::Antipattern, None) => "Avoid, or say why this time differs".to_owned(),
    }
}

fn evidence(skill: &MinedSkill) -> SkillEvidence {
    SkillEvidence { successes: skill.successes, total_outcomes: skill.total, weighted_successes: round(skill.weighted_successes) }
}

pub(crate) fn skill_view(domain: &Domain, skill: &MinedSkill, applicability: Option<f64>) -> SkillView {
    SkillView {
        skill_id: skill.id.clone(),
        urn: skill_urn(domain, &skill.id),
        module: skill.module.clone(),
        statement: skill.statement.clone(),
        confidence: skill.confidence,
        success_rate: skill.success_rate,
        evidence: evidence(skill),
        applicability_score: applicability.map(round),
        recommendation: skill_recommendation(skill),
        decision_ids: skill.decision_ids.iter().map(ToString::to_string).collect(),
    }
}

fn antipattern_view(domain: &Domain, skill: &MinedSkill, applicability: Option<f64>) -> AntipatternView {
    AntipatternView {
        antipattern_id: skill.id.clone(),
        urn: skill_urn(domain, &skill.id),
        module: skill.module.clone(),
        pattern: skill.statement.clone(),
        severity: skill.severity.map_or("medium", |severity| severity.as_str()).to_owned(),
        success_rate: skill.success_rate,
        confidence: skill.confidence,
        evidence: evidence(skill),
        applicability_score: applicability.map(round),
        recommendation: skill_recommendation(skill),
        decision_ids: skill.decision_ids.iter().map(ToString::to_string).collect(),
    }
}

/// How `decision_skills` is asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillsQuery {
    /// One module; all modules when absent.
    pub module: Option<String>,
    /// A proposed decision: skills are then ranked by how well they apply to it.
    pub statement: Option<String>,
    /// Only skills at least this confident; default 0 (a 3-of-3 skill has confidence 0.47).
    pub min_confidence: Option<f64>,
    pub limit: Option<usize>,
    pub domain: Option<String>,
}

impl DecisionService {
    /// The skills and antipatterns mined from a module's outcomes (or all modules').
    pub fn skills(&self, query: SkillsQuery) -> Result<SkillsView> {
        let (domain, module) = self.module_given_as_domain(query.domain.clone(), query.module.clone());
        let query = SkillsQuery { domain, module, ..query };
        let entry = self.entry(query.domain.as_deref())?;
        let limit = query.limit.unwrap_or(DEFAULT_SKILLS_LIMIT);
        if !(1..=MAX_SKILLS_LIMIT).contains(&limit) {
            return Err(FieldError::new("limit", format!("must be between 1 and {MAX_SKILLS_LIMIT}"), limit, "ask for fewer").into());
        }
        let min_confidence = query.min_confidence.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&min_confidence) {
            return Err(FieldError::new("min_confidence", "must be between 0 and 1", min_confidence.to_string(), "use e.g. 0.5").into());
        }
        let (module, outcomes) = self.module_outcomes(entry, query.module.as_deref())?;
        let words = query.statement.as_deref().map(|statement| DecisionWords::new(statement, &[] as &[String]));
        let mut mined: Vec<(Option<f64>, MinedSkill)> = mine(&outcomes)
            .into_iter()
            .filter(|skill| skill.confidence >= min_confidence)
            .map(|skill| (words.as_ref().map(|words| applicability(&skill, words)), skill))
            .collect();
        // Most applicable first when a statement was given, then most confident.
        mined.sort_by(|a, b| {
            b.0.unwrap_or(0.0).total_cmp(&a.0.unwrap_or(0.0)).then(b.1.confidence.total_cmp(&a.1.confidence))
        });
        let of_kind = |kind: SkillKind| mined.iter().filter(move |(_, skill)| skill.kind == kind).take(limit);
        Ok(SkillsView {
            module,
            domain: entry.domain.to_string(),
            skills: of_kind(SkillKind::Skill).map(|(applies, skill)| skill_view(&entry.domain, skill, *applies)).collect(),
            antipatterns: of_kind(SkillKind::Antipattern).map(|(applies, skill)| antipattern_view(&entry.domain, skill, *applies)).collect(),
        })
    }

    /// Brings the module's skill and antipattern memories in line with its outcomes: creates the
    /// new ones, updates or revives the changed ones and retires (forgets, with the reason) the
    /// ones the record no longer supports; each compare-and-swap, retried as a whole.
    pub(crate) fn sync_skills(&self, entry: &DecisionDomain, module: &str) -> Result<Vec<SkillChange>> {
        let decisions = Namespace::parse("decisions").expect("valid namespace");
        for attempt in 0..CAS_ATTEMPTS {
            let now = self.memory().now();
            let mined = mine(&entry.store.outcomes(Some(module))?);
            let filter = SearchFilter {
                namespaces: vec![Namespace::parse(SKILLS_NAMESPACE).expect("valid namespace")],
                tags: vec![module.to_owned(), MINED_TAG.to_owned()],
                ..SearchFilter::default()
            };
            let existing = entry.store.list(&filter, 0, usize::MAX)?;
            let mut sync = SkillSync::default();
            let mut changes = Vec::new();
            let mut fresh = Vec::new();
            for skill in &mined {
                let id = MemoryId::parse(&skill.id).expect("mined ids are valid memory ids");
                let urns: Vec<MemoryUrn> = skill
                    .decision_ids
                    .iter()
                    .map(|decision| MemoryUrn::new(entry.domain.clone(), decisions.clone(), decision.memory_id()))
                    .collect();
                let face = skill_memory_input(skill, &urns);
                let relation = match skill.kind {
                    SkillKind::Skill => relation::SUPPORTS,
                    SkillKind::Antipattern => relation::EVIDENCES,
                };
                let edges = skill
                    .outcome_ids
                    .iter()
                    .map(|outcome| Edge { from: Node::outcome(outcome), relation: relation.to_owned(), to: Node::memory(&id), created_at: now })
                    .collect();
                let change = |change: &str| SkillChange {
                    skill_id: skill.id.clone(),
                    urn: skill_urn(&entry.domain, &skill.id),
                    kind: skill.kind.as_str().to_owned(),
                    change: change.to_owned(),
                    confidence: skill.confidence,
                };
                match existing.iter().find(|memory| memory.id == id) {
                    None => {
                        fresh.push(build_memory(face, entry.domain.clone(), id.clone(), now)?);
                        changes.push(change("created"));
                    }
                    Some(current) => {
                        let reason = format!("{} outcomes now, confidence {:.2}", skill.total, skill.confidence);
                        if let Some((next, previous)) = refresh_memory(current, face, Status::Active, &reason, now)? {
                            let embedding = self.memory().embed_change(current, &next)?;
                            sync.replaces.push(MemoryChange { next, previous, embedding });
                            changes.push(change(if current.status == Status::Forgotten { "revived" } else { "updated" }));
                        }
                    }
                }
                sync.edges_to.push((id, edges));
            }
            for stale in existing.iter().filter(|memory| memory.status == Status::Active && !mined.iter().any(|skill| skill.id == memory.id.as_str())) {
                // A skill and an antipattern of one pattern share the anchor's suffix after `sk_` / `ap_`.
                let successor = mined.iter().find(|skill| skill.id.get(3..) == stale.id.as_str().get(3..));
                let reason = match successor {
                    Some(skill) => format!(
                        "retired: the pattern's success rate is now {:.2} over {} outcomes, so it is kept as {} {}",
                        skill.success_rate,
                        skill.total,
                        skill.kind.as_str(),
                        skill.id
                    ),
                    None => "retired: the outcomes no longer form this pattern".to_owned(),
                };
                let (next, previous) = kenning_core::input::change_status(stale, Status::Forgotten, &reason, now)?
                    .expect("an active memory changes when forgotten");
                changes.push(SkillChange {
                    skill_id: stale.id.to_string(),
                    urn: stale.urn().to_string(),
                    kind: stale.metadata.get("kind").cloned().unwrap_or_default(),
                    change: "retired".to_owned(),
                    confidence: stale.confidence,
                });
                // Its edges stay: the decisions that built the skill keep it in their causal chains.
                sync.replaces.push(MemoryChange { next, previous, embedding: None });
            }
            if changes.is_empty() {
                return Ok(changes);
            }
            let embeddings = self.memory().embed_memories(&fresh)?;
            sync.inserts = fresh.into_iter().zip(embeddings).collect();
            match entry.store.sync_skills(&sync) {
                Ok(()) => return Ok(changes),
                Err(kenning_core::Error::Conflict { .. }) => backoff(attempt),
                Err(other) => return Err(other.into()),
            }
        }
        Err(crate::Error::Busy { target: format!("kenning://{}/{SKILLS_NAMESPACE}", entry.domain) })
    }
}
