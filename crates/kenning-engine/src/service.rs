//! [`MemoryService`]: every memory operation, over the domain stores it was given.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use kenning_core::claim::{ClaimRules, SameClaims};
use kenning_core::relation::MERGED_INTO;
use kenning_core::confidence::{self, Deduplication, assess};
use kenning_core::expansion::{RewriteAsk, Vocabulary};
use kenning_core::input::{MAX_LINKS, apply_update, build_memory, change_status};
use kenning_core::confidence::DecayPolicy;
use kenning_core::llm::LanguageModel;
use kenning_core::secrets::Named;
use kenning_core::{
    CaptureInput, Cursor, Domain, Embedder, Embedding, FieldError, Inserted, Link, Memory, MemoryId, MemoryStore, MemoryUrn,
    SearchFilter, Status, UpdateInput, Urn,
};

use crate::access_counts::AccessRecorder;
use crate::analysis::{self, Analyses, Analysis, Needs};
use crate::error::{Error, Result};
use crate::ids::new_memory_id;
use crate::contradictions::{Conflict, RecordedConflicts};
use crate::judgment::{Plan, link_views};
use crate::redaction::redact;
use crate::views::{
    CaptureOutcome, ChangeOutcome, EmbedderStatus, HistoryView, ListingPage, MemoryRef, MemoryView, RedactionView,
    ReindexReport, StatusReport, SyncView, VersionView, domain_status, redaction_warning,
};

pub const RESOURCE_TEMPLATE: &str = "kenning://{domain}/{namespace}/{id}";

/// How many times a write retries after losing a compare-and-swap race to another writer.
pub(crate) const CAS_ATTEMPTS: u32 = 40;
/// Captures of a batch whose neighbours are read and judged together: enough for the
/// neighbours they share to be read once, few enough that what is held of them stays small
/// (a capture's eight neighbours with their readings are tens of kilobytes).
const CHECK_CHUNK: usize = 256;

/// One domain and the store that keeps it.
#[derive(Clone)]
pub struct DomainStore {
    pub domain: Domain,
    pub store: Arc<dyn MemoryStore>,
}

/// A source of the current time, replaceable in tests.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The memory service: validation, ids, embedding and search across domains.
pub struct MemoryService {
    pub(crate) domains: Vec<DomainStore>,
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    pub(crate) access: Arc<AccessRecorder>,
    clock: Arc<dyn Clock>,
    /// The configured user id, recorded as the author of a capture that names none.
    author: Option<String>,
    /// The top of the repository's work tree, which recall's `file` paths are relative to.
    repository_root: Option<PathBuf>,
    /// The configured language model (or fallback chain of them), if any.
    llm: Option<Arc<dyn LanguageModel>>,
    /// Half-lives and the dormancy threshold that recall's confidence is assessed with.
    pub(crate) decay: DecayPolicy,
    /// How alike (by vector) a capture must be to a stored memory to be judged against it.
    pub(crate) deduplication: Deduplication,
    /// The claim rule captures are judged by, with the vocabulary's synonyms: built at the first
    /// capture, since stemming its phrase lists costs a process that only recalls (a hook) about
    /// half a millisecond.
    claims: Arc<OnceLock<ClaimRules>>,
    /// What the claim rule and the contradiction rules made of the memories read last.
    pub(crate) analyses: Arc<Analyses>,
    /// The synonyms recall widens a query with: built in, plus the project's own.
    pub(crate) vocabulary: Arc<Vocabulary>,
    /// What recall asks the language model (when there is one) about each query: other search
    /// terms, the questions it is made of, both or nothing.
    pub(crate) rewrite: RewriteAsk,
    /// The recalls this service (and every view of it) is running now: a recall searches its
    /// legs on two threads only while a core is left for the second.
    pub(crate) recalls_running: Arc<AtomicUsize>,
}

impl MemoryService {
    /// `domains` in search priority order; the first is the default for captures. There must be
    /// at least one, and no domain twice.
    pub fn new(domains: Vec<DomainStore>, embedder: Option<Arc<dyn Embedder>>) -> Self {
        assert!(!domains.is_empty(), "a memory service needs at least one domain");
        let access = Arc::new(AccessRecorder::new(domains.clone()));
        MemoryService { domains, embedder, access, clock: Arc::new(SystemClock), author: None, repository_root: None, llm: None, decay: DecayPolicy::default(), deduplication: Deduplication::default(), claims: Arc::new(OnceLock::new()), analyses: Arc::default(), vocabulary: Arc::new(Vocabulary::built_in()), rewrite: RewriteAsk::default(), recalls_running: Arc::default() }
    }

    /// The same service limited to the domains `keep` accepts (what an API key scoped to some
    /// domains may use), sharing its stores, embedder and settings; `None` when `keep` accepts
    /// none of them. Through the view a memory of a domain left out is not found, a domain left
    /// out cannot be named, and captures that name no domain go to the first domain kept.
    pub fn restricted(&self, keep: impl Fn(&Domain) -> bool) -> Option<MemoryService> {
        let domains: Vec<DomainStore> = self.domains.iter().filter(|entry| keep(&entry.domain)).cloned().collect();
        if domains.is_empty() {
            return None;
        }
        Some(MemoryService {
            domains,
            embedder: self.embedder.clone(),
            access: self.access.clone(),
            clock: self.clock.clone(),
            author: self.author.clone(),
            repository_root: self.repository_root.clone(),
            llm: self.llm.clone(),
            decay: self.decay,
            deduplication: self.deduplication.clone(),
            claims: self.claims.clone(),
            analyses: self.analyses.clone(),
            vocabulary: self.vocabulary.clone(),
            rewrite: self.rewrite,
            recalls_running: self.recalls_running.clone(),
        })
    }

    /// Names the user whose memories this service writes: every capture (and promotion) that
    /// names no author records this one.
    pub fn with_author(mut self, author: Option<String>) -> Self {
        self.author = author;
        self
    }

    /// Names the repository the project domain belongs to: recall's `file` paths are taken
    /// relative to its root, and an absolute one must lie inside it.
    pub fn with_repository_root(mut self, root: Option<PathBuf>) -> Self {
        self.repository_root = root;
        self
    }

    /// Sets the half-lives and dormancy threshold confidence is assessed with.
    pub fn with_decay(mut self, decay: DecayPolicy) -> Self {
        self.decay = decay;
        self
    }

    /// Sets the vector similarity, per namespace, above which a capture reinforces a stored memory.
    pub fn with_deduplication(mut self, deduplication: Deduplication) -> Self {
        self.deduplication = deduplication;
        self
    }

    /// The claim rule, with the vocabulary's synonyms.
    pub(crate) fn claims(&self) -> &ClaimRules {
        self.claims.get_or_init(|| ClaimRules::new(&self.vocabulary))
    }

    /// Sets the synonyms recall widens queries with (see [`Vocabulary`]).
    pub fn with_vocabulary(mut self, vocabulary: Vocabulary) -> Self {
        self.claims = Arc::new(OnceLock::new());
        self.analyses = Arc::default();
        self.vocabulary = Arc::new(vocabulary);
        self
    }

    /// Has recall ask the language model, when one is configured, for other search terms: it
    /// finds notes worded otherwise, at the cost of a model call per recall.
    pub fn with_query_rewrite(mut self, rewrite: bool) -> Self {
        self.rewrite.terms = rewrite;
        self
    }

    /// Has recall ask the language model, when one is configured, whether a query needs several
    /// memories to answer and which questions it is made of, and search each of them as well: the
    /// memories that answer one part each reach the first page together, at the cost of a model
    /// call per recall (one with [`MemoryService::with_query_rewrite`]) and a search per part.
    pub fn with_query_decomposition(mut self, decompose: bool) -> Self {
        self.rewrite.parts = decompose;
        self
    }

    /// Gives the service a language model for the features that can use one.
    pub fn with_llm(mut self, llm: Option<Arc<dyn LanguageModel>>) -> Self {
        self.llm = llm;
        self
    }

    pub fn llm(&self) -> Option<&Arc<dyn LanguageModel>> {
        self.llm.as_ref()
    }

    pub fn repository_root(&self) -> Option<&Path> {
        self.repository_root.as_deref()
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The capture with the default author filled in when it names none.
    pub(crate) fn authored(&self, mut input: CaptureInput) -> CaptureInput {
        if input.author.is_none() {
            input.author = self.author.clone();
        }
        input
    }

    pub fn domains(&self) -> impl Iterator<Item = &Domain> {
        self.domains.iter().map(|entry| &entry.domain)
    }

    /// Every configured domain with its store, the default domain first.
    pub(crate) fn domain_stores(&self) -> &[DomainStore] {
        &self.domains
    }

    pub fn default_domain(&self) -> &Domain {
        &self.domains[0].domain
    }

    /// The embedder, shared with the code index so code and memories use one model.
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.embedder.clone()
    }

    pub fn embedder_model(&self) -> Option<&str> {
        self.embedder.as_deref().map(|embedder| embedder.model_id())
    }

    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Finds the configured domain a caller named: `project`, `user`, `org`, or a full
    /// `project:{id}` / `org:{id}`.
    pub(crate) fn resolve_domain(&self, field: &str, text: &str) -> Result<&DomainStore, FieldError> {
        let text = text.trim();
        let found = self.domains.iter().find(|entry| {
            if text.contains(':') { entry.domain.to_string() == text } else { entry.domain.scope() == text }
        });
        found.ok_or_else(|| {
            let configured: Vec<String> = self.domains.iter().map(|entry| entry.domain.to_string()).collect();
            FieldError::new(
                field,
                "is not a domain this server has",
                text,
                format!(
                    "use one of: {} (a project domain exists only inside a git repository)",
                    configured.join(", ")
                ),
            )
        })
    }

    fn store_for(&self, domain: &Domain) -> Result<&DomainStore> {
        let exact = self.domains.iter().find(|entry| &entry.domain == domain);
        // One repository's notes are one project whatever id a URN gives it, so an id the
        // project had before (a remote added, renamed or removed, a rename on purpose) still
        // reaches its memories: a memory id is unique, so another project's URN finds nothing.
        let project = || matches!(domain, Domain::Project(_)).then(|| self.domains.iter().find(|entry| matches!(entry.domain, Domain::Project(_)))).flatten();
        exact.or_else(project).ok_or_else(|| Error::NotFound { target: Urn::Domain(domain.clone()).to_string() })
    }

    /// The domain of this service that keeps what `domain` names: itself, or for an earlier id
    /// of the project, the project's domain as it is now.
    pub fn canonical_domain(&self, domain: &Domain) -> Option<&Domain> {
        self.store_for(domain).ok().map(|entry| &entry.domain)
    }

    pub(crate) fn parse_memory_urn(&self, field: &str, text: &str) -> Result<(MemoryUrn, &DomainStore)> {
        let urn = MemoryUrn::parse(field, text)?;
        let entry = self.store_for(&urn.domain).map_err(|_| Error::NotFound { target: urn.to_string() })?;
        Ok((urn, entry))
    }

    /// The current model's vector for one text, or `None` without an embedder.
    pub(crate) fn embed_one(&self, text: &str) -> Result<Option<Embedding>> {
        let Some(embedder) = &self.embedder else { return Ok(None) };
        let mut vectors = embedder.embed(&[text]).map_err(|error| Error::Embedding(error.to_string()))?;
        let vector = vectors.pop().ok_or_else(|| Error::Embedding("the embedder returned no vector".into()))?;
        Ok(Some(Embedding { model: embedder.model_id().to_owned(), vector }))
    }

    /// The vector for `next`, a new version of `current`, when the text it is searched by
    /// changed and there is an embedder; otherwise `None`, with which a store keeps the vector of
    /// an unchanged text.
    pub(crate) fn embed_change(&self, current: &Memory, next: &Memory) -> Result<Option<Embedding>> {
        let text = next.search_text();
        if text == current.search_text() { Ok(None) } else { self.embed_one(&text) }
    }

    /// Validates and stores a new memory in `domain` (or the default domain).
    pub fn capture(&self, input: CaptureInput, domain: Option<&str>) -> Result<CaptureOutcome> {
        let mut outcomes = self.capture_many(vec![input], domain)?;
        Ok(outcomes.pop().expect("one outcome per input"))
    }

    /// Which of these captures the default domain (or `domain`) already holds word for word as
    /// an active memory of the same namespace, so that capturing them again would store
    /// nothing. A hook that reads a whole transcript asks first, so that what an earlier stop
    /// stored is neither redacted nor judged again (the stored text is redacted already, so a
    /// finding holding a secret never matches it and is captured as usual). An input that would
    /// not validate is not held.
    pub fn held_already(&self, inputs: &[CaptureInput], domain: Option<&str>) -> Result<Vec<bool>> {
        let entry = match domain {
            Some(text) => self.resolve_domain("domain", text)?,
            None => &self.domains[0],
        };
        let now = self.now();
        let built: Vec<Option<Memory>> = inputs
            .iter()
            .map(|input| {
                let id = MemoryId::parse(&new_memory_id(now)).expect("generated ids are valid");
                build_memory(self.authored(input.clone()), entry.domain.clone(), id, now).ok()
            })
            .collect();
        let mut holders = entry.store.active_holders(&built.iter().flatten().collect::<Vec<&Memory>>())?.into_iter();
        Ok(built.iter().map(|memory| memory.is_some() && holders.next().flatten().is_some()).collect())
    }

    /// Captures a batch atomically per store: all inputs are validated first, so one invalid
    /// input rejects the batch before anything is written. Secrets are redacted from every input
    /// before validation, so none reaches the store, its history or the search index.
    pub fn capture_many(&self, inputs: Vec<CaptureInput>, domain: Option<&str>) -> Result<Vec<CaptureOutcome>> {
        let entry = match domain {
            Some(text) => self.resolve_domain("domain", text)?,
            None => &self.domains[0],
        };
        let now = self.now();
        let mut redactions = Vec::with_capacity(inputs.len());
        // What the store knows of the moment (a git store: branch and commit) joins the
        // metadata, unless the caller already said it.
        let context = entry.store.capture_context();
        let memories = inputs
            .into_iter()
            .map(|mut input| {
                redactions.push(redact(&mut input));
                let id = MemoryId::parse(&new_memory_id(now)).expect("generated ids are valid");
                let mut memory = build_memory(self.authored(input), entry.domain.clone(), id, now)?;
                for (key, value) in &context {
                    memory.metadata.entry(key.clone()).or_insert_with(|| value.clone());
                }
                Ok(memory)
            })
            .collect::<Result<Vec<Memory>, FieldError>>()?;
        let embeddings = self.embed_memories(&memories)?;
        // A capture whose exact content is already stored is skipped by the store's insert, so
        // it is not judged: one indexed lookup for the batch spares its claim and its neighbour
        // search. A hook that reads a whole transcript again finds most of its findings stored.
        let holders = entry.store.active_holders(&memories.iter().collect::<Vec<&Memory>>())?;
        // Each capture to judge is read once, ahead on every core for a large batch; a skipped
        // capture is never compared (it counts as not stored for the later ones).
        let analyses: Vec<Option<Arc<Analysis>>> = holders.iter().zip(&memories).map(|(holder, memory)| holder.is_none().then(|| Arc::new(Analysis::new(&memory.content)))).collect();
        analysis::prepare(self.claims(), &analyses.iter().flatten().map(|analysis| (analysis.as_ref(), Needs::ALL)).collect::<Vec<_>>());
        // Each capture is judged against its nearest stored memories and the captures before
        // it in the batch (see `crate::judgment`), and the same neighbours are checked for
        // contradictions, recorded once it is stored. The neighbours are read a chunk of the
        // batch at a time, so that what a large batch holds of them stays bounded.
        let judged: Vec<Option<(&Memory, Option<&Embedding>)>> =
            memories.iter().zip(&embeddings).zip(&holders).map(|((memory, embedding), holder)| holder.is_none().then_some((memory, embedding.as_ref()))).collect();
        let mut plans: Vec<Plan> = Vec::with_capacity(memories.len());
        let mut conflicts: Vec<Vec<Conflict>> = Vec::with_capacity(memories.len());
        let mut early_warnings: Vec<Vec<String>> = vec![Vec::new(); memories.len()];
        let mut same_in_batch = SameClaims::default();
        for (chunk, judged) in judged.chunks(CHECK_CHUNK).enumerate() {
            let nearby = self.neighbours_of(entry, judged)?;
            let (known, fresh) = nearby.known(&self.analyses, judged);
            // Many new neighbours (a bulk load) are read ahead on every core, each as far as
            // the checks below will read it.
            analysis::prepare(self.claims(), &fresh.iter().map(|(analysis, needs)| (analysis.as_ref(), *needs)).collect::<Vec<_>>());
            let lists = nearby.lists(&known);
            // The plans in batch order, since each capture is judged against the ones before
            // it; then the contradictions of those to be stored, which depend on no other.
            let mut checked = Vec::new();
            for (offset, neighbours) in lists.iter().enumerate() {
                let index = chunk * CHECK_CHUNK + offset;
                let Some(analysis) = &analyses[index] else {
                    plans.push(Plan::Store(Vec::new()));
                    continue;
                };
                let claim = analysis.claim(self.claims());
                let same_earlier = same_in_batch.same_as(claim).into_iter().map(|before| (before, &memories[before]));
                let plan = self.plan_capture(&memories[index], claim, same_earlier, neighbours);
                if let Plan::Store(_) = plan {
                    same_in_batch.insert(claim, index);
                    checked.push((index, analysis.reading(), neighbours.as_slice()));
                }
                plans.push(plan);
            }
            conflicts.resize_with(plans.len(), Vec::new);
            for ((index, ..), (found, warnings)) in checked.iter().zip(self.conflicts_of_many(entry, &memories, &checked)) {
                conflicts[*index] = found;
                early_warnings[*index].extend(warnings);
            }
        }
        // Captures merged into an earlier one of the batch are kept beside it, forgotten; the
        // earlier one is stored already confirmed.
        let mut memories = memories;
        for index in 0..memories.len() {
            if let Plan::MergeIntoBatch(target) = plans[index] {
                let target_urn = memories[target].urn();
                confidence::add_supporting(&mut memories[target]);
                let kept = &mut memories[index];
                kept.status = Status::Forgotten;
                kept.links.truncate(MAX_LINKS - 1);
                kept.links.push(Link { target: target_urn, relation: MERGED_INTO.to_owned() });
            }
        }
        let mut outcomes: Vec<Option<CaptureOutcome>> = Vec::with_capacity(memories.len());
        let mut batch: Vec<(Memory, Option<Embedding>)> = Vec::with_capacity(memories.len());
        let mut batch_links: Vec<Vec<Link>> = Vec::with_capacity(memories.len());
        let mut batch_analyses: Vec<Option<Arc<Analysis>>> = Vec::with_capacity(memories.len());
        for ((((mut memory, embedding), redacted), plan), analysis) in memories.into_iter().zip(embeddings).zip(redactions.iter()).zip(&plans).zip(analyses) {
            match plan {
                Plan::Merge(existing) => outcomes.push(Some(self.merge(entry, existing, memory, embedding, redacted.clone())?)),
                Plan::Store(links) => {
                    memory.links.extend(links.iter().cloned());
                    outcomes.push(None);
                    batch.push((memory, embedding));
                    batch_links.push(links.clone());
                    batch_analyses.push(analysis);
                }
                Plan::MergeIntoBatch(_) => {
                    outcomes.push(None);
                    batch.push((memory, embedding));
                    batch_links.push(Vec::new());
                    batch_analyses.push(None);
                }
            }
        }
        let inserted = if batch.is_empty() { Vec::new() } else { entry.store.insert(&batch)? };
        // What was just stored active is the likeliest neighbour of the next captures.
        for (((memory, _), inserted), analysis) in batch.iter().zip(&inserted).zip(batch_analyses) {
            if let (Inserted::Created, Status::Active, Some(analysis)) = (inserted, memory.status, analysis) {
                self.analyses.keep(&memory.id, analysis);
            }
        }
        // The contradictions of the captures stored anew are recorded together, once they are
        // stored.
        let mut found = Vec::new();
        let mut found_at = Vec::new();
        let mut stored = batch.iter().zip(&inserted);
        for (index, (outcome, conflicts)) in outcomes.iter().zip(conflicts).enumerate() {
            if outcome.is_some() {
                continue;
            }
            let ((memory, _), inserted) = stored.next().expect("one insert result per stored memory");
            if matches!(inserted, Inserted::Created) && memory.status != Status::Forgotten {
                found.push((memory, conflicts));
                found_at.push(index);
            }
        }
        let mut recorded: Vec<RecordedConflicts> = (0..outcomes.len()).map(|_| RecordedConflicts::default()).collect();
        for (index, conflicts) in found_at.into_iter().zip(self.record_conflicts(entry, found)) {
            recorded[index] = conflicts;
        }
        let mut stored = batch.iter().zip(inserted).zip(batch_links);
        outcomes
            .into_iter()
            .zip(redactions)
            .zip(recorded.into_iter().zip(early_warnings))
            .map(|((outcome, redacted), (recorded, early_warnings))| {
                if let Some(outcome) = outcome {
                    return Ok(outcome);
                }
                let (((memory, embedding), inserted), links) = stored.next().expect("one insert result per stored memory");
                let mut warnings = Vec::new();
                if let Some(near) = memory.namespace.near_built_in() {
                    warnings.push(format!(
                        "namespace `{}` is new and close to the built-in `{near}`; use `{near}` if that was meant",
                        memory.namespace
                    ));
                }
                warnings.extend(redaction_warning(&redacted));
                Ok(match inserted {
                    Inserted::Created if memory.status == Status::Forgotten => {
                        let target = memory.links.iter().find(|link| link.relation == MERGED_INTO).map(|link| link.target.to_string()).unwrap_or_default();
                        warnings.insert(0, format!("an earlier capture of this batch makes the same claim; it was stored confirmed and this wording is kept as {} (`memory_restore` it to undo the merge)", memory.urn()));
                        CaptureOutcome {
                            urn: target,
                            title: memory.title.clone(),
                            created: false,
                            reinforced: true,
                            kept_as: Some(memory.urn().to_string()),
                            linked: Vec::new(),
                            embedded: embedding.is_some(),
                            warnings,
                            redacted,
                            contradictions: Vec::new(),
                        }
                    }
                    Inserted::Created => {
                        warnings.extend(early_warnings);
                        warnings.extend(recorded.warnings);
                        let contradictions = recorded.notes;
                        CaptureOutcome {
                            urn: memory.urn().to_string(),
                            title: memory.title.clone(),
                            created: true,
                            reinforced: false,
                            kept_as: None,
                            linked: link_views(&links),
                            embedded: embedding.is_some(),
                            warnings,
                            redacted,
                            contradictions,
                        }
                    }
                    Inserted::Duplicate(existing_id) => {
                        warnings.push("an identical memory already exists in this namespace; nothing new was stored".into());
                        let existing = entry.store.get(&existing_id)?;
                        CaptureOutcome {
                            urn: MemoryUrn::new(entry.domain.clone(), memory.namespace.clone(), existing_id).to_string(),
                            title: existing.map_or_else(|| memory.title.clone(), |existing| existing.title),
                            created: false,
                            reinforced: false,
                            kept_as: None,
                            linked: Vec::new(),
                            embedded: embedding.is_some(),
                            warnings,
                            redacted,
                            contradictions: Vec::new(),
                        }
                    }
                })
            })
            .collect()
    }

    /// Copies a project or user memory into another domain (the organisation's, typically), so
    /// that what one repository taught reaches the team. The copy is a new memory, version 1,
    /// authored by the configured user, with everything the original says and a
    /// `promoted-from` link back to it. Promoting content the target already holds returns
    /// that memory (`created: false`).
    pub fn promote(&self, urn: &str, to: &str) -> Result<CaptureOutcome> {
        let (source_urn, source_entry) = self.parse_memory_urn("urn", urn)?;
        let target = self.resolve_domain("to", to)?;
        if target.domain == source_entry.domain {
            return Err(FieldError::new(
                "to",
                "is the domain the memory is already in",
                to,
                "promote a project or user memory to `org`",
            )
            .into());
        }
        let source = source_entry.store.get(&source_urn.id)?.ok_or_else(|| Error::NotFound { target: source_urn.to_string() })?;
        if source.status != Status::Active {
            return Err(FieldError::new("urn", "names a forgotten memory", urn, "restore it first, or promote an active memory").into());
        }
        let now = self.now();
        // A memory stored before a rule existed may still hold what the rule now finds.
        let mut source = source;
        let redacted = redact(&mut source);
        let mut links = source.links.clone();
        links.push(kenning_core::Link { target: source_urn.clone(), relation: "promoted-from".to_owned() });
        let copy = Memory {
            id: MemoryId::parse(&new_memory_id(now)).expect("generated ids are valid"),
            domain: target.domain.clone(),
            created_at: now,
            updated_at: now,
            last_accessed_at: None,
            access_count: 0,
            links,
            version: 1,
            author: self.author.clone().or_else(|| source.author.clone()),
            ..source
        };
        let embedding = self.embed_memories(std::slice::from_ref(&copy))?.pop().flatten();
        let embedded = embedding.is_some();
        let inserted = target.store.insert(&[(copy.clone(), embedding)])?;
        Ok(match inserted.first() {
            Some(Inserted::Duplicate(existing)) => CaptureOutcome {
                urn: MemoryUrn::new(target.domain.clone(), copy.namespace.clone(), existing.clone()).to_string(),
                title: copy.title,
                created: false,
                embedded,
                reinforced: false,
                kept_as: None,
                linked: Vec::new(),
                warnings: vec![format!("{} already holds this content; nothing new was stored", target.domain)],
                redacted,
                contradictions: Vec::new(),
            },
            _ => CaptureOutcome {
                urn: copy.urn().to_string(),
                title: copy.title.clone(),
                created: true,
                reinforced: false,
                kept_as: None,
                linked: Vec::new(),
                embedded,
                warnings: redaction_warning(&redacted).into_iter().collect(),
                redacted,
                contradictions: Vec::new(),
            },
        })
    }

    pub(crate) fn embed_memories(&self, memories: &[Memory]) -> Result<Vec<Option<Embedding>>> {
        let Some(embedder) = &self.embedder else { return Ok(vec![None; memories.len()]) };
        let texts: Vec<String> = memories.iter().map(Memory::search_text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = embedder.embed(&refs).map_err(|error| Error::Embedding(error.to_string()))?;
        Ok(vectors
            .into_iter()
            .map(|vector| Some(Embedding { model: embedder.model_id().to_owned(), vector }))
            .collect())
    }

    /// Reads one memory by URN and records the access. The count it reports includes every
    /// earlier read, recalls too.
    pub fn get(&self, urn: &str) -> Result<MemoryView> {
        let (urn, entry) = self.parse_memory_urn("urn", urn)?;
        self.access.flush();
        let mut memory = entry.store.get(&urn.id)?.ok_or_else(|| Error::NotFound { target: urn.to_string() })?;
        let now = self.now();
        // Assessed as it stood before this read, which reinforces it from now on.
        let assessment = assess(&memory, now, &self.decay);
        entry.store.record_access(std::slice::from_ref(&memory.id), now)?;
        memory.access_count += 1;
        memory.last_accessed_at = Some(now);
        let confidence_now = Some((assessment.confidence * 1000.0).round() / 1000.0);
        Ok(MemoryView { confidence_now, dormant: assessment.dormant, ..MemoryView::from(&memory) })
    }

    /// Applies an update, keeping the previous version with the reason. Secrets are redacted
    /// from the update before it is applied.
    pub fn update(&self, urn: &str, mut input: UpdateInput) -> Result<ChangeOutcome> {
        let redacted = redact(&mut input);
        let outcome = self.change("urn", urn, |current, now| apply_update(current, input.clone(), now).map(Some))?;
        Ok(with_redactions(outcome, redacted))
    }

    /// Soft-deletes a memory: it leaves recall but keeps its record and history.
    pub fn forget(&self, urn: &str, reason: &str) -> Result<ChangeOutcome> {
        self.change_status(urn, Status::Forgotten, reason)
    }

    /// Brings a forgotten memory back into recall. Restoring the memory a merge kept a
    /// capture's wording in undoes the merge (see `crate::judgment`).
    pub fn restore(&self, urn: &str, reason: &str) -> Result<ChangeOutcome> {
        if let Some(outcome) = self.undo_merge(urn, reason)? {
            return Ok(outcome);
        }
        self.change_status(urn, Status::Active, reason)
    }

    /// Moves a memory to `status`; the reason, kept in its history, is redacted first.
    fn change_status(&self, urn: &str, status: Status, reason: &str) -> Result<ChangeOutcome> {
        let mut reason = reason.to_owned();
        let redacted = redact(&mut Named("reason", &mut reason));
        let outcome = self.change("urn", urn, |current, now| change_status(current, status, &reason, now))?;
        Ok(with_redactions(outcome, redacted))
    }

    /// Read, change, compare-and-swap; on losing a race to another writer, re-read and retry.
    pub(crate) fn change(
        &self,
        field: &str,
        urn: &str,
        apply: impl Fn(&Memory, DateTime<Utc>) -> Result<Option<(Memory, kenning_core::MemoryVersion)>, FieldError>,
    ) -> Result<ChangeOutcome> {
        let (urn, entry) = self.parse_memory_urn(field, urn)?;
        for attempt in 0..CAS_ATTEMPTS {
            let current = entry.store.get(&urn.id)?.ok_or_else(|| Error::NotFound { target: urn.to_string() })?;
            let Some((next, previous)) = apply(&current, self.now())? else {
                return Ok(ChangeOutcome {
                    urn: urn.to_string(),
                    status: current.status.to_string(),
                    version: current.version,
                    changed: false,
                    redacted: Vec::new(),
                    warnings: Vec::new(),
                });
            };
            let embedding = self.embed_change(&current, &next)?;
            match entry.store.replace(&next, &previous, embedding.as_ref()) {
                Ok(()) => {
                    return Ok(ChangeOutcome {
                        urn: urn.to_string(),
                        status: next.status.to_string(),
                        version: next.version,
                        changed: true,
                        redacted: Vec::new(),
                        warnings: Vec::new(),
                    });
                }
                Err(kenning_core::Error::Conflict { .. }) => backoff(attempt),
                Err(kenning_core::Error::Invalid(field)) => return Err(Error::Invalid(field)),
                Err(other) => return Err(other.into()),
            }
        }
        Err(Error::Busy { target: urn.to_string() })
    }

    /// The current record and every superseded version, newest first.
    pub fn history(&self, urn: &str) -> Result<HistoryView> {
        let (urn, entry) = self.parse_memory_urn("urn", urn)?;
        let current = entry.store.get(&urn.id)?.ok_or_else(|| Error::NotFound { target: urn.to_string() })?;
        let mut versions: Vec<VersionView> = entry.store.history(&urn.id)?.iter().map(VersionView::from).collect();
        versions.reverse();
        Ok(HistoryView { urn: urn.to_string(), current: MemoryView::from(&current), versions })
    }

    /// Counts per domain, namespace and kind, store locations, the embedder and index health.
    pub fn status(&self) -> Result<StatusReport> {
        let model = self.embedder_model();
        let mut domains = Vec::with_capacity(self.domains.len());
        let mut notes = Vec::new();
        for entry in &self.domains {
            match entry.store.stats() {
                Ok(stats) => domains.push(domain_status(&entry.domain, stats, model)),
                // A database that is down leaves its domain out of the figures, and says so.
                Err(kenning_core::Error::Unavailable(message)) => notes.push(format!("{} is unavailable: {message}", entry.domain)),
                Err(other) => return Err(other.into()),
            }
        }
        if self.embedder.is_none() {
            notes.push("no embedding model is configured: recall uses full-text (BM25) search only".to_owned());
        }
        for status in &domains {
            notes.extend(status.warnings.iter().map(|warning| format!("{}: {warning}", status.domain)));
            if !status.index.text_index_ok {
                notes.push(format!("the full-text index of {} is out of step; run `kenning reindex`", status.domain));
            }
            if status.index.missing_vectors > 0 {
                notes.push(format!(
                    "{} memories in {} have no vector from the current model; run `kenning reindex`",
                    status.index.missing_vectors, status.domain
                ));
            }
        }
        Ok(StatusReport {
            total_memories: domains.iter().map(|status| status.total).sum(),
            default_domain: self.default_domain().to_string(),
            search_mode: if self.embedder.is_some() { "hybrid" } else { "text" }.to_owned(),
            embedder: self.embedder.as_deref().map(|embedder| EmbedderStatus {
                model: embedder.model_id().to_owned(),
                dimensions: embedder.dimensions(),
            }),
            notes,
            domains,
            resource_template: RESOURCE_TEMPLATE.to_owned(),
        })
    }

    /// A page of memories in a domain, optionally one namespace, newest first. Includes
    /// forgotten memories only when `status` is `None`.
    pub fn list(&self, domain: &Domain, filter: &SearchFilter, cursor: Option<&str>, limit: usize) -> Result<ListingPage> {
        let entry = self.store_for(domain)?;
        let offset = cursor.map(Cursor::decode).transpose()?.map_or(0, |cursor| cursor.offset);
        let total = entry.store.count(filter)?;
        let memories = entry.store.list(filter, offset, limit)?;
        let end = offset + memories.len();
        let uri = match filter.namespaces.as_slice() {
            [namespace] => Urn::Namespace(domain.clone(), namespace.clone()),
            _ => Urn::Domain(domain.clone()),
        };
        Ok(ListingPage {
            uri: uri.to_string(),
            total,
            memories: memories.iter().map(MemoryRef::from).collect(),
            next_cursor: ((end as u64) < total).then(|| Cursor { offset: end }.encode()),
        })
    }

    /// The newest `limit` memories of `domain` passing `filter`, without the page's total:
    /// counting them scans every row that passes, which a caller that shows only the newest
    /// few (a hook's session-start context) should not pay for.
    pub fn newest(&self, domain: &Domain, filter: &SearchFilter, limit: usize) -> Result<Vec<MemoryRef>> {
        Ok(self.newest_memories(domain, filter, limit)?.iter().map(MemoryRef::from).collect())
    }

    /// [`MemoryService::newest`] with the whole records, for a caller that shows their text.
    pub fn newest_memories(&self, domain: &Domain, filter: &SearchFilter, limit: usize) -> Result<Vec<Memory>> {
        Ok(self.store_for(domain)?.store.list(filter, 0, limit)?)
    }

    /// A mark over every domain that changes whenever a memory of any of them changes, by
    /// this process or another, and stays put while they are only read (see
    /// `MemoryStore::change_mark`). A domain that cannot be reached counts as unchanged.
    pub fn change_mark(&self) -> Result<String> {
        let mut mark = String::new();
        for entry in &self.domains {
            let part = match entry.store.change_mark() {
                Ok(part) => part.unwrap_or_default(),
                Err(kenning_core::Error::Unavailable(_)) => "unavailable".to_owned(),
                Err(other) => return Err(other.into()),
            };
            mark.push_str(&format!("{}={part};", entry.domain));
        }
        Ok(mark)
    }

    /// Prepares every store's search index for recall with the current model, so that the
    /// first recall does not wait for it to be built.
    pub fn warm_up(&self) -> Result<()> {
        for entry in &self.domains {
            entry.store.warm_up(self.embedder_model())?;
        }
        Ok(())
    }

    /// Embeds every memory that lacks a vector from the current model, and rebuilds text indexes.
    pub fn reindex(&self, batch_size: usize) -> Result<ReindexReport> {
        let mut report = ReindexReport { model: self.embedder_model().map(str::to_owned), embedded: 0, text_indexed: 0 };
        for entry in &self.domains {
            report.text_indexed += entry.store.rebuild_index()?;
            report.embedded += self.embed_missing(entry, batch_size)?;
        }
        Ok(report)
    }

    /// Embeds the memories of one store that lack a vector from the current model.
    fn embed_missing(&self, entry: &DomainStore, batch_size: usize) -> Result<u64> {
        let Some(embedder) = &self.embedder else { return Ok(0) };
        let mut embedded = 0;
        loop {
            let pending = entry.store.missing_embeddings(embedder.model_id(), batch_size.max(1))?;
            if pending.is_empty() {
                return Ok(embedded);
            }
            let embeddings = self.embed_memories(&pending)?;
            let items: Vec<(MemoryId, Embedding)> = pending
                .iter()
                .zip(embeddings)
                .filter_map(|(memory, embedding)| embedding.map(|embedding| (memory.id.clone(), embedding)))
                .collect();
            if items.is_empty() {
                return Ok(embedded);
            }
            entry.store.set_embeddings(&items)?;
            embedded += items.len() as u64;
        }
    }

    /// Exchanges a domain's memories with a remote copy (the project domain's git remote,
    /// `origin` unless named), then embeds what arrived so recall finds it by meaning too.
    pub fn sync(&self, domain: Option<&str>, remote: Option<&str>) -> Result<SyncView> {
        let entry = match domain {
            Some(text) => self.resolve_domain("domain", text)?,
            None => self.domains.iter().find(|entry| matches!(entry.domain, Domain::Project(_))).ok_or_else(|| {
                FieldError::new(
                    "domain",
                    "has no project domain to sync",
                    "",
                    "run kenning inside a git repository: the project domain lives in its git notes",
                )
            })?,
        };
        let remote = remote.map(str::trim).filter(|remote| !remote.is_empty()).unwrap_or("origin");
        let report = entry.store.sync(remote)?;
        let embedded = self.embed_missing(entry, SYNC_EMBED_BATCH)?;
        Ok(SyncView {
            domain: entry.domain.to_string(),
            remote: report.remote,
            received: report.received,
            merged: report.merged,
            sent: report.sent,
            attempts: report.attempts,
            embedded,
        })
    }
}

/// The outcome of a change, with what redaction replaced in its input and a warning saying so.
fn with_redactions(mut outcome: ChangeOutcome, redacted: Vec<RedactionView>) -> ChangeOutcome {
    outcome.warnings.extend(redaction_warning(&redacted));
    outcome.redacted = redacted;
    outcome
}

/// Memories embedded per batch after a sync.
const SYNC_EMBED_BATCH: usize = 256;

/// Pauses after losing a compare-and-swap race. Writers that lost a race would otherwise collide
/// again in lockstep; a short random pause, growing with each attempt, lets one of them through.
pub(crate) fn backoff(attempt: u32) {
    let ceiling_ms = u64::from(attempt.min(10) + 1) * 2;
    std::thread::sleep(std::time::Duration::from_millis(fastrand::u64(0..=ceiling_ms)));
}
