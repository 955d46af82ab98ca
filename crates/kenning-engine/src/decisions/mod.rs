//! [`DecisionService`]: decisions, signals and outcomes over each domain's decision store.
//!
//! A decision is written with its memory (namespace `decisions`, same id) in one transaction;
//! every later change rewrites that memory too, so recall always finds the current state.
//! Lessons become `learnings` memories linked to the decision, written in the outcome's
//! transaction. Ids, clocks, embeddings and domain names come from the [`MemoryService`] the
//! decision service is built on.

mod calibration;
mod context;
mod skills;
pub mod views;

pub use calibration::{ALL_MODULES, CalibrationQuery};
pub use context::{ContextQuery, Depth, markdown};
pub use skills::SkillsQuery;

use std::sync::Arc;

use kenning_core::decision::input::{
    apply_decision_update, build_decision, build_outcome, build_signal, capture_notices, decision_memory_input,
    lesson_memory_input, refresh_decision_memory, DECISIONS_NAMESPACE,
};
use kenning_core::calibration::{MIN_OUTCOMES, calibrate};
use kenning_core::decision::mining::{SkillKind, mine};
use kenning_core::decision::similarity::{relate, DecisionWords, Relation, SIMILAR_SIMILARITY};
use kenning_core::decision::{
    CaptureDecision, Decision, DecisionChange, DecisionFilter, DecisionId, DecisionRecord, DecisionStatus,
    DecisionStore, Edge, MemoryChange, ModuleList, Node, NodeKind, Outcome, OutcomeInput, SignalInput, UpdateDecision,
};
use kenning_core::input::build_memory;
use kenning_core::relation;
use kenning_core::{CaptureInput, Cursor, Domain, FieldError, Inserted, Memory, MemoryId, MemoryUrn, Namespace, SearchFilter};

use crate::error::{Error, Result};
use crate::ids::new_memory_id;
use crate::service::{backoff, MemoryService, CAS_ATTEMPTS};
use crate::redaction::redact;
use crate::views::{redaction_warning, timestamp};
use calibration::{evidence, recommendation};
use views::{
    decision_urn, round, Analysis, AntipatternMatch, CalibrationImpact, CaptureDecisionResult, CausalChain, ChainMemory,
    DecisionDetail, DecisionPage, DecisionSummary, DecisionView, EdgeView, OutcomeResult, PreventionEffectiveness,
    SignalResult, SimilarDecision, UpdateDecisionResult,
};

/// How many of the most recent decisions a similarity search compares against.
const SIMILARITY_WINDOW: usize = 500;
/// Similar decisions returned with one decision.
const MAX_SIMILAR: usize = 5;
/// How far the causal chain is walked: decision, signal, outcome, lesson or skill, and a link.
const MAX_CHAIN_DEPTH: u32 = 6;
/// The most decisions a text query ranks; deeper pages are not reachable.
const MAX_TEXT_MATCHES: usize = 1000;
pub const DEFAULT_QUERY_LIMIT: usize = 20;
pub const MAX_QUERY_LIMIT: usize = 100;

/// One domain and the store that keeps its decisions (the same store as its memories).
#[derive(Clone)]
pub struct DecisionDomain {
    pub domain: Domain,
    pub store: Arc<dyn DecisionStore>,
}

/// A search of past decisions; every field is optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecisionQuery {
    /// Full-text search over the decisions' memories (statement, alternatives, rationale, notes).
    pub text: Option<String>,
    pub module: Option<String>,
    pub status: Option<String>,
    /// A file or folder the decisions concern.
    pub file: Option<String>,
    pub domain: Option<String>,
    pub cursor: Option<String>,
    pub limit: Option<usize>,
}

/// Whether [`DecisionService::get`] works out a decision's causal chain (its `analysis`), which
/// walks the decision graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainAnalysis {
    Omitted,
    Included,
}

/// The decision service.
pub struct DecisionService {
    memory: Arc<MemoryService>,
    domains: Vec<DecisionDomain>,
    modules: ModuleList,
}

impl DecisionService {
    /// `domains` must be domains of `memory`, each backed by the same store as its memories.
    pub fn new(memory: Arc<MemoryService>, domains: Vec<DecisionDomain>, modules: ModuleList) -> Self {
        assert!(
            domains.iter().any(|entry| &entry.domain == memory.default_domain()),
            "the decision service needs a store for the default domain"
        );
        DecisionService { memory, domains, modules }
    }

    pub fn memory(&self) -> &Arc<MemoryService> {
        &self.memory
    }

    /// The same service over the domains `keep` accepts, on [`MemoryService::restricted`] (its
    /// [`DecisionService::memory`] is that view); `None` when `keep` accepts none of them.
    pub fn restricted(&self, keep: impl Fn(&Domain) -> bool) -> Option<DecisionService> {
        let memory = Arc::new(self.memory.restricted(&keep)?);
        let domains = self.domains.iter().filter(|entry| keep(&entry.domain)).cloned().collect();
        Some(DecisionService { memory, domains, modules: self.modules.clone() })
    }

    pub fn modules(&self) -> &ModuleList {
        &self.modules
    }

    pub fn domains(&self) -> impl Iterator<Item = &Domain> {
        self.domains.iter().map(|entry| &entry.domain)
    }

    /// The store of the domain a caller named, or of the default domain.
    pub(crate) fn entry(&self, domain: Option<&str>) -> Result<&DecisionDomain> {
        let wanted = match domain {
            Some(text) => &self.memory.resolve_domain("domain", text)?.domain,
            None => self.memory.default_domain(),
        };
        self.domains.iter().find(|entry| &entry.domain == wanted).ok_or_else(|| {
            Error::Invalid(FieldError::new(
                "domain",
                "keeps no decisions in this server",
                wanted.to_string(),
                "omit `domain` to use the default domain",
            ))
        })
    }

    /// The domain a caller named (`project`, `user`, a full `org:acme`), or the default domain.
    pub fn domain(&self, name: Option<&str>) -> Result<Domain> {
        Ok(self.entry(name)?.domain.clone())
    }

    /// Seed 000 calls a decision's module its `domain` (`get_calibration(domain: "database")`),
    /// where kenning's `domain` says where records are kept. A `domain` that names no storage
    /// domain (`project`, `user`, `org`, `{scope}:{id}`) but a module is read as that module
    /// when no module is given; any other `domain` is left for [`Self::entry`] to check.
    pub(crate) fn module_given_as_domain(&self, domain: Option<String>, module: Option<String>) -> (Option<String>, Option<String>) {
        match (domain, module) {
            (Some(text), None)
                if !text.contains(':') && !matches!(text.trim(), "project" | "user" | "org") && self.modules.parse("module", &text).is_ok() =>
            {
                (None, Some(text))
            }
            other => other,
        }
    }

    /// Finds a decision by id (`dec_…`) in any domain, or by its memory's URN.
    pub(crate) fn find(&self, text: &str) -> Result<(&DecisionDomain, DecisionRecord)> {
        let text = text.trim();
        let (domain, id) = if text.contains("://") {
            let urn = MemoryUrn::parse("decision_id", text)?;
            if urn.namespace.as_str() != DECISIONS_NAMESPACE {
                return Err(FieldError::new(
                    "decision_id",
                    "is the URN of a memory outside the `decisions` namespace",
                    text,
                    "pass the decision's id (`dec_…`) or its URN `kenning://{domain}/decisions/dec_…`",
                )
                .into());
            }
            (Some(self.memory.canonical_domain(&urn.domain).cloned().unwrap_or(urn.domain)), DecisionId::parse(urn.id.as_str())?)
        } else {
            (None, DecisionId::parse(text)?)
        };
        for entry in self.domains.iter().filter(|entry| domain.as_ref().is_none_or(|domain| domain == &entry.domain)) {
            if let Some(record) = entry.store.get_decision(&id)? {
                return Ok((entry, record));
            }
        }
        Err(Error::DecisionNotFound { id: id.to_string() })
    }

    /// Validates and stores a new decision with its memory.
    pub fn capture(&self, mut input: CaptureDecision, domain: Option<&str>) -> Result<CaptureDecisionResult> {
        let redacted = redact(&mut input);
        let entry = self.entry(domain)?;
        let now = self.memory.now();
        let id = DecisionId::parse(&format!("{}{}", DecisionId::PREFIX, new_memory_id(now))).expect("generated ids are valid");
        let author = input.author.clone();
        let notices = capture_notices(&input);
        let decision = build_decision(input, &self.modules, id, now)?;
        let face = self.memory.authored(CaptureInput { author, ..decision_memory_input(&decision, None) });
        let memory = build_memory(face, entry.domain.clone(), decision.id.memory_id(), now)?;
        let embedding = self.memory.embed_one(&memory.search_text())?;
        entry.store.insert_decision(&decision, &memory, embedding.as_ref())?;
        Ok(CaptureDecisionResult {
            decision_id: decision.id.to_string(),
            domain: entry.domain.to_string(),
            urn: decision_urn(&entry.domain, &decision),
            created_at: timestamp(decision.created_at),
            status: decision.status.to_string(),
            confidence: decision.confidence,
            module: decision.module.clone(),
            message: match decision.confidence {
                Some(confidence) => format!(
                    "Decision captured with confidence {confidence} in {}. Record signals as they come and the outcome when it is known.",
                    decision.module
                ),
                None => format!(
                    "Decision captured in {} without a stated confidence. Record signals as they come and the outcome when it is known.",
                    decision.module
                ),
            },
            warnings: redaction_warning(&redacted).into_iter().chain(notices).collect(),
            redacted,
        })
    }

    /// Changes status, confidence, notes or links, with compare-and-swap retries.
    pub fn update(&self, id: &str, mut input: UpdateDecision) -> Result<UpdateDecisionResult> {
        let redacted = redact(&mut input);
        for attempt in 0..CAS_ATTEMPTS {
            let (entry, record) = self.find(id)?;
            let current = &record.decision;
            let now = self.memory.now();
            let next = apply_decision_update(current, input.clone(), now)?;
            let reason = if next.status == current.status {
                "decision updated".to_owned()
            } else {
                format!("decision moved from {} to {}", current.status, next.status)
            };
            let memory = self.memory_change(entry, &next, record.outcome.as_ref(), &reason)?;
            let change = DecisionChange { next, expected_revision: current.revision, memory };
            match entry.store.update_decision(&change) {
                Ok(()) => {
                    let next = &change.next;
                    return Ok(UpdateDecisionResult {
                        decision_id: next.id.to_string(),
                        domain: entry.domain.to_string(),
                        urn: decision_urn(&entry.domain, next),
                        previous_status: current.status.to_string(),
                        new_status: next.status.to_string(),
                        confidence: next.current_confidence,
                        updated_at: timestamp(next.updated_at),
                        revision: next.revision,
                        warnings: redaction_warning(&redacted).into_iter().collect(),
                        redacted,
                    });
                }
                Err(kenning_core::Error::Conflict { .. }) => backoff(attempt),
                Err(kenning_core::Error::NotFound(_)) => return Err(Error::DecisionNotFound { id: current.id.to_string() }),
                Err(other) => return Err(other.into()),
            }
        }
        Err(Error::Busy { target: id.to_owned() })
    }

    /// The next version of a decision's memory after `next`, embedded if its text changed.
    fn memory_change(&self, entry: &DecisionDomain, next: &Decision, outcome: Option<&Outcome>, reason: &str) -> Result<Option<MemoryChange>> {
        let Some(current) = entry.store.get(&next.id.memory_id())? else { return Ok(None) };
        let Some((memory, previous)) = refresh_decision_memory(&current, next, outcome, reason, self.memory.now())? else {
            return Ok(None);
        };
        let embedding = if memory.search_text() == current.search_text() { None } else { self.memory.embed_one(&memory.search_text())? };
        Ok(Some(MemoryChange { next: memory, previous, embedding }))
    }

    /// One decision with its signals, outcome, similar decisions and, with
    /// [`ChainAnalysis::Included`], its causal chain.
    pub fn get(&self, id: &str, chain: ChainAnalysis) -> Result<DecisionDetail> {
        let (entry, record) = self.find(id)?;
        let decision = &record.decision;
        let similar = self.similar(
            entry,
            &decision.statement,
            &decision.alternatives,
            decision.confidence,
            Some(&decision.id),
            MAX_SIMILAR,
        )?;
        let estimated_success = match &record.outcome {
            Some(outcome) => outcome.score,
            None => {
                let (prior, _) = self.prior(entry, decision)?;
                kenning_core::decision::estimate::estimated_success(prior, &record.signals)
            }
        };
        let analysis = match chain {
            ChainAnalysis::Included => Some(self.analysis(entry, &record)?),
            ChainAnalysis::Omitted => None,
        };
        Ok(DecisionDetail {
            decision: DecisionView::new(&entry.domain, &record),
            estimated_success: round(estimated_success),
            similar_decisions: similar,
            antipatterns_triggered: self.antipatterns_triggered(entry, decision)?,
            analysis,
        })
    }

    /// Where an estimate of success starts for `decision` before any signal, and what it is: the
    /// module's calibrated success rate once it has enough outcomes, else the stated confidence,
    /// else (none stated) the module's record as it stands, 0.5 with no outcomes.
    fn prior(&self, entry: &DecisionDomain, decision: &Decision) -> Result<(f64, &'static str)> {
        let calibration = calibrate(&evidence(&entry.store.outcomes(Some(&decision.module))?));
        Ok(match decision.current_confidence {
            _ if calibration.sample_size >= MIN_OUTCOMES => (calibration.mean_success, "module_calibration"),
            Some(confidence) => (confidence, "stated_confidence"),
            None => (calibration.mean_success, "module_record"),
        })
    }

    /// The antipatterns of the decision's module that it is the same pattern as (excluding the
    /// ones it is itself part of).
    fn antipatterns_triggered(&self, entry: &DecisionDomain, decision: &Decision) -> Result<Vec<AntipatternMatch>> {
        let words = DecisionWords::new(&decision.statement, &decision.alternatives);
        let outcomes = entry.store.outcomes(Some(&decision.module))?;
        Ok(mine(&outcomes)
            .iter()
            .filter(|skill| skill.kind == SkillKind::Antipattern && !skill.decision_ids.contains(&decision.id))
            .filter_map(|skill| {
                let relation = relate(&skill.words, &words);
                relation.same_pattern().then(|| AntipatternMatch {
                    antipattern_id: skill.id.clone(),
                    pattern: skill.statement.clone(),
                    success_rate: skill.success_rate,
                    similarity: round(relation.similarity()),
                    severity: skill.severity.map_or("medium", |severity| severity.as_str()).to_owned(),
                })
            })
            .collect())
    }

    /// Past decisions in `entry` like the statement, most alike first.
    pub(crate) fn similar(
        &self,
        entry: &DecisionDomain,
        statement: &str,
        alternatives: &[String],
        confidence: Option<f64>,
        exclude: Option<&DecisionId>,
        limit: usize,
    ) -> Result<Vec<SimilarDecision>> {
        let words = DecisionWords::new(statement, alternatives);
        let mut found: Vec<(Relation, DecisionRecord)> = entry
            .store
            .list_decisions(&DecisionFilter::default(), 0, SIMILARITY_WINDOW)?
            .into_iter()
            .filter(|record| Some(&record.decision.id) != exclude)
            .map(|record| (relate(&words, &DecisionWords::new(&record.decision.statement, &record.decision.alternatives)), record))
            .filter(|(relation, _)| relation.similarity() >= SIMILAR_SIMILARITY)
            .collect();
        // Most alike first; among equals the newest, which the listing already put first.
        found.sort_by(|a, b| b.0.similarity().total_cmp(&a.0.similarity()));
        Ok(found
            .into_iter()
            .take(limit)
            .map(|(relation, record)| {
                let decision = &record.decision;
                SimilarDecision {
                    decision_id: decision.id.to_string(),
                    urn: decision_urn(&entry.domain, decision),
                    statement: decision.statement.clone(),
                    module: decision.module.clone(),
                    status: decision.status.to_string(),
                    similarity: round(relation.similarity()),
                    relation: match relation {
                        Relation::Alike(_) => "alike",
                        Relation::Contrast(_) => "contrast",
                    }
                    .to_owned(),
                    success_rate: record.outcome.as_ref().map(|outcome| outcome.score),
                    outcome: record.outcome.as_ref().map(|outcome| outcome.status.to_string()),
                    confidence_difference: confidence.zip(decision.confidence).map(|(at_hand, stated)| round(at_hand - stated)),
                    lessons: record.outcome.as_ref().map(|outcome| outcome.lessons.clone()).unwrap_or_default(),
                }
            })
            .collect())
    }

    /// The decision's causal chain from the graph: its signals, outcome, lessons and skills.
    fn analysis(&self, entry: &DecisionDomain, record: &DecisionRecord) -> Result<Analysis> {
        let hops = entry.store.causal_chain(&Node::decision(&record.decision.id), MAX_CHAIN_DEPTH)?;
        let memories_by = |relations: &[&str]| -> Result<Vec<ChainMemory>> {
            let mut ids: Vec<MemoryId> = Vec::new();
            for hop in hops.iter().filter(|hop| hop.edge.to.kind == NodeKind::Memory && relations.contains(&hop.edge.relation.as_str())) {
                let id = MemoryId::parse(&hop.edge.to.id)?;
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            let memories = entry.store.get_many(&ids)?;
            Ok(ids
                .iter()
                .filter_map(|id| memories.iter().find(|memory| &memory.id == id))
                .map(|memory| ChainMemory { urn: memory.urn().to_string(), title: memory.title.clone(), status: memory.status.to_string() })
                .collect())
        };
        let causal_chain = CausalChain {
            decision: record.decision.statement.clone(),
            signals: record
                .signals
                .iter()
                .map(|signal| match &signal.description {
                    Some(description) => format!("{} ({}): {description}", signal.signal_type, signal.valence),
                    None => format!("{} ({})", signal.signal_type, signal.valence),
                })
                .collect(),
            outcome: record.outcome.as_ref().map(|outcome| format!("{} (score {})", outcome.status, outcome.score)),
            lessons: memories_by(&[relation::TAUGHT])?,
            skills: memories_by(&[relation::SUPPORTS, relation::EVIDENCES])?,
        };
        let node = |node: &Node| format!("{}:{}", node.kind.as_str(), node.id);
        Ok(Analysis {
            causal_chain,
            edges: hops
                .iter()
                .map(|hop| EdgeView { depth: hop.depth, from: node(&hop.edge.from), relation: hop.edge.relation.clone(), to: node(&hop.edge.to) })
                .collect(),
            prevention_effectiveness: self.prevention(entry, record)?,
            antipatterns_avoided: self.antipatterns_avoided(entry, &record.decision)?,
        })
    }

    /// The antipatterns of the decision's module that it contrasts with: it rejected what they
    /// chose or chose what they rejected (excluding the ones it is itself part of).
    fn antipatterns_avoided(&self, entry: &DecisionDomain, decision: &Decision) -> Result<Vec<AntipatternMatch>> {
        let words = DecisionWords::new(&decision.statement, &decision.alternatives);
        let outcomes = entry.store.outcomes(Some(&decision.module))?;
        Ok(mine(&outcomes)
            .iter()
            .filter(|skill| skill.kind == SkillKind::Antipattern && !skill.decision_ids.contains(&decision.id))
            .filter_map(|skill| match relate(&skill.words, &words) {
                Relation::Contrast(similarity) => Some(AntipatternMatch {
                    antipattern_id: skill.id.clone(),
                    pattern: skill.statement.clone(),
                    success_rate: skill.success_rate,
                    similarity: round(similarity),
                    severity: skill.severity.map_or("medium", |severity| severity.as_str()).to_owned(),
                }),
                Relation::Alike(_) => None,
            })
            .collect())
    }

    /// How the decision's outcome steered the similar decisions captured after it was recorded.
    /// After a failure (score under 0.5), a decision that contrasts with it was prevented and
    /// one of the same pattern repeated it; after a success, one of the same pattern followed
    /// it and one that contrasts with it reversed it.
    fn prevention(&self, entry: &DecisionDomain, record: &DecisionRecord) -> Result<Option<PreventionEffectiveness>> {
        const MAX_IDS: usize = 20;
        let Some(outcome) = &record.outcome else { return Ok(None) };
        let decision = &record.decision;
        let failed = outcome.score < 0.5;
        let words = DecisionWords::new(&decision.statement, &decision.alternatives);
        let (mut prevented, mut repeated) = (Vec::new(), Vec::new());
        for later in entry.store.list_decisions(&DecisionFilter::default(), 0, SIMILARITY_WINDOW)? {
            let later = &later.decision;
            if later.id == decision.id || later.created_at <= outcome.completed_at {
                continue;
            }
            let relation = relate(&words, &DecisionWords::new(&later.statement, &later.alternatives));
            let along = match relation {
                Relation::Contrast(similarity) if similarity >= SIMILAR_SIMILARITY => failed,
                Relation::Alike(_) if relation.same_pattern() => !failed,
                _ => continue,
            };
            if along { prevented.push(later.id.to_string()) } else { repeated.push(later.id.to_string()) }
        }
        let prevented_issue = if failed || decision.alternatives.is_empty() {
            format!("{} ({}, score {})", decision.statement, outcome.status, outcome.score)
        } else {
            format!("choosing {} instead (rejected by a decision that succeeded with score {})", decision.alternatives.join(" or "), outcome.score)
        };
        let (along, against) = (prevented.len(), repeated.len());
        prevented.truncate(MAX_IDS);
        repeated.truncate(MAX_IDS);
        Ok(Some(PreventionEffectiveness {
            prevented_issue,
            prevented_decisions: along,
            repeated_decisions: against,
            effectiveness: (along + against > 0).then(|| round(along as f64 / (along + against) as f64)),
            prevented_ids: prevented,
            repeated_ids: repeated,
        }))
    }

    /// Past decisions by text, module, status and file, newest first (best match first with text).
    pub fn query(&self, query: DecisionQuery) -> Result<DecisionPage> {
        let entry = self.entry(query.domain.as_deref())?;
        let limit = query.limit.unwrap_or(DEFAULT_QUERY_LIMIT);
        if !(1..=MAX_QUERY_LIMIT).contains(&limit) {
            return Err(FieldError::new("limit", format!("must be between 1 and {MAX_QUERY_LIMIT}"), limit, "use the cursor to page through more").into());
        }
        let offset = query.cursor.as_deref().map(Cursor::decode).transpose()?.map_or(0, |cursor| cursor.offset);
        let mut filter = DecisionFilter {
            module: query.module.as_deref().map(|module| self.modules.parse("module", module)).transpose()?,
            status: query.status.as_deref().map(|status| DecisionStatus::parse(status.trim())).transpose()?,
            file: query.file.as_deref().map(str::trim).filter(|file| !file.is_empty()).map(str::to_owned),
            ..DecisionFilter::default()
        };
        if let Some(text) = query.text.as_deref() {
            kenning_core::search::check_query_length("text", text)?;
        }
        let text = query.text.as_deref().map(str::trim).filter(|text| !text.is_empty());
        let (records, total) = match text {
            None => {
                let total = entry.store.count_decisions(&filter)?;
                (entry.store.list_decisions(&filter, offset, limit)?, total)
            }
            Some(text) => {
                let namespaces = vec![Namespace::parse(DECISIONS_NAMESPACE).expect("valid namespace")];
                let search = SearchFilter { namespaces, ..SearchFilter::active() };
                let ranked: Vec<DecisionId> = entry
                    .store
                    .search_text(text, &search, MAX_TEXT_MATCHES)?
                    .into_iter()
                    .filter_map(|hit| DecisionId::parse(hit.id.as_str()).ok())
                    .collect();
                filter.ids = Some(ranked.clone());
                let mut matched = entry.store.list_decisions(&filter, 0, MAX_TEXT_MATCHES)?;
                matched.sort_by_key(|record| ranked.iter().position(|id| id == &record.decision.id));
                let total = matched.len() as u64;
                (matched.into_iter().skip(offset).take(limit).collect(), total)
            }
        };
        let end = offset + records.len();
        Ok(DecisionPage {
            domain: entry.domain.to_string(),
            total,
            decisions: records.iter().map(|record| DecisionSummary::new(&entry.domain, record)).collect(),
            next_cursor: ((end as u64) < total).then(|| Cursor { offset: end }.encode()),
        })
    }

    /// Appends a signal and returns the estimated chance of success given all signals so far.
    pub fn record_signal(&self, id: &str, mut input: SignalInput) -> Result<SignalResult> {
        let redacted = redact(&mut input);
        let (entry, mut record) = self.find(id)?;
        let now = self.memory.now();
        let signal = build_signal(input, &record.decision.id, format!("sig_{}", new_memory_id(now)), now)?;
        match entry.store.add_signal(&signal) {
            Ok(()) => {}
            Err(kenning_core::Error::NotFound(_)) => return Err(Error::DecisionNotFound { id: record.decision.id.to_string() }),
            Err(other) => return Err(other.into()),
        }
        record.signals.push(signal.clone());
        let (prior, prior_source) = self.prior(entry, &record.decision)?;
        let estimated = match &record.outcome {
            Some(outcome) => outcome.score,
            None => kenning_core::decision::estimate::estimated_success(prior, &record.signals),
        };
        Ok(SignalResult {
            signal_id: signal.id,
            decision_id: record.decision.id.to_string(),
            domain: entry.domain.to_string(),
            recorded_at: timestamp(signal.recorded_at),
            estimated_success: round(estimated),
            prior: round(prior),
            prior_source: prior_source.to_owned(),
            signals_counted: record.signals.len(),
            warnings: redaction_warning(&redacted).into_iter().collect(),
            redacted,
        })
    }

    /// Records how a decision turned out, with its lessons as `learnings` memories.
    pub fn record_outcome(&self, id: &str, mut input: OutcomeInput) -> Result<OutcomeResult> {
        let redacted = redact(&mut input);
        for attempt in 0..CAS_ATTEMPTS {
            let (entry, record) = self.find(id)?;
            let now = self.memory.now();
            let outcome_id = format!("out_{}", record.decision.id.suffix());
            let (mut outcome, next) = build_outcome(input.clone(), &record, outcome_id, now)?;
            let decision_urn = MemoryUrn::new(
                entry.domain.clone(),
                Namespace::parse(DECISIONS_NAMESPACE).expect("valid namespace"),
                next.id.memory_id(),
            );
            let lessons = outcome
                .lessons
                .iter()
                .map(|lesson| {
                    let id = MemoryId::parse(&new_memory_id(now)).expect("generated ids are valid");
                    let face = self.memory.authored(lesson_memory_input(&next, &decision_urn, outcome.status, lesson));
                    build_memory(face, entry.domain.clone(), id, now)
                })
                .collect::<Result<Vec<Memory>, FieldError>>()?;
            outcome.lesson_ids = lessons.iter().map(|memory| memory.id.clone()).collect();
            let batch: Vec<_> = lessons.iter().cloned().zip(self.memory.embed_memories(&lessons)?).collect();
            let outcome_node = Node::outcome(&outcome.id);
            let mut edges = vec![Edge {
                from: Node::decision(&next.id),
                relation: relation::RESULTED_IN.to_owned(),
                to: outcome_node.clone(),
                created_at: now,
            }];
            edges.extend(record.signals.iter().map(|signal| Edge {
                from: Node::signal(&signal.id),
                relation: relation::PRECEDED.to_owned(),
                to: outcome_node.clone(),
                created_at: now,
            }));
            let reason = format!("outcome recorded: {} (score {})", outcome.status, outcome.score);
            let memory = self.memory_change(entry, &next, Some(&outcome), &reason)?;
            let change = DecisionChange { next, expected_revision: record.decision.revision, memory };
            match entry.store.record_outcome(&change, &outcome, &batch, &edges) {
                Ok(inserted) => {
                    let learnings = Namespace::parse("learnings").expect("valid namespace");
                    let lesson_urns = lessons
                        .iter()
                        .zip(inserted)
                        .map(|(memory, inserted)| {
                            let id = match inserted {
                                Inserted::Created => memory.id.clone(),
                                Inserted::Duplicate(existing) => existing,
                            };
                            MemoryUrn::new(entry.domain.clone(), learnings.clone(), id).to_string()
                        })
                        .collect();
                    let module = change.next.module.clone();
                    let after = entry.store.outcomes(Some(&module))?;
                    let before: Vec<(Decision, Outcome)> =
                        after.iter().filter(|(decision, _)| decision.id != change.next.id).cloned().collect();
                    let previous = calibrate(&evidence(&before));
                    let current = calibrate(&evidence(&after));
                    let skills = self.sync_skills(entry, &module)?;
                    return Ok(OutcomeResult {
                        outcome_id: outcome.id.clone(),
                        decision_id: change.next.id.to_string(),
                        domain: entry.domain.to_string(),
                        final_status: outcome.status.to_string(),
                        final_score: outcome.score,
                        completed_at: timestamp(outcome.completed_at),
                        decision_status: change.next.status.to_string(),
                        lesson_urns,
                        calibration_impact: CalibrationImpact {
                            module,
                            previous_success_rate: previous.mean_success,
                            new_success_rate: current.mean_success,
                            sample_size: current.sample_size,
                            confidence_gap: current.confidence_gap,
                            status: current.status.to_string(),
                            trend: current.trend.to_string(),
                        },
                        skills,
                        recommendation: recommendation(&current),
                        warnings: redaction_warning(&redacted).into_iter().collect(),
                        redacted,
                    });
                }
                Err(kenning_core::Error::Conflict { .. }) => backoff(attempt),
                Err(kenning_core::Error::NotFound(_)) => return Err(Error::DecisionNotFound { id: change.next.id.to_string() }),
                Err(other) => return Err(other.into()),
            }
        }
        Err(Error::Busy { target: id.to_owned() })
    }
}
