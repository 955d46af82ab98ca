//! What a capture is to the memories already stored: the same claim (merged into the stored
//! memory), another claim much like one (stored and linked), or something new (stored).
//!
//! The claim rule is the core's ([`kenning_core::claim`]): order, roles, numbers with their
//! units, negation and scope words decide. A capture is judged against its nearest active
//! memories of the same namespace and kind (found once per capture, by vector or, without an
//! embedder, by full text; the contradiction check reads the same neighbours) and against the
//! captures before it in its batch. Only a capture making the same claim is merged; one whose
//! words the rule cannot judge is merged only when the embedder tells paraphrases apart
//! ([`kenning_core::Embedder::paraphrase_similarity`]) and scores the two at least that alike.
//! When in doubt the capture is stored and linked: `possibly-duplicate-of` when it may say the
//! same, `related-to` when it is another claim about the same thing.
//!
//! A merge loses nothing: the capture is stored as its own memory, forgotten and linked
//! `merged-into` the memory it confirms, and the confirmation is a new version of that memory
//! whose reason names the kept memory and quotes its wording. Restoring the kept memory
//! (`memory_restore`) undoes the merge: it becomes an active memory of its own and the
//! confirmation is withdrawn.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kenning_core::claim::{Claim, ClaimRules, Judgement};
use kenning_core::relation::{MERGED_INTO, POSSIBLY_DUPLICATE_OF, RELATED_TO};
use kenning_core::confidence::{SUPPORTING_KEY, evidence_counts};
use kenning_core::input::{EvidenceKind, MAX_LINKS, apply_update, change_status, record_evidence};
use kenning_core::{Embedding, Inserted, Link, Memory, MemoryId, SearchFilter, Status, UpdateInput};

use crate::analysis::{Analyses, Analysis, Needs};
use crate::contradictions::CANDIDATES as CONTRADICTION_CANDIDATES;
use crate::error::Result;
use crate::service::{DomainStore, MemoryService};
use crate::views::{CaptureOutcome, ChangeOutcome, LinkView, RedactionView, redaction_warning};

/// How many of a capture's nearest memories are read: those of its namespace and kind are
/// judged against it, the nearest of any namespace are checked for contradictions.
pub(crate) const NEIGHBOURS: usize = 8;
/// The most memories a capture is linked to as possibly the same or related.
const MAX_SIMILAR_LINKS: usize = 3;
/// Without an embedder, the share of their canonical words (Dice) two claims must have in
/// common to be linked: the vector threshold's stand-in.
const LEXICAL_LINK_OVERLAP: f64 = 0.8;
/// The most characters of a merged capture's wording quoted in the reason of the version
/// that records the merge; the whole wording is in the kept memory.
const QUOTED_CHARS: usize = 600;
/// The longest prefix of a memory's content used as a full-text query for its neighbours.
const QUERY_BYTES: usize = 512;

/// The stored memories near the captures of one batch, each read from the store once however
/// many captures it is near.
pub(crate) struct Nearby {
    memories: Vec<Memory>,
    /// Per capture, best first: the position of each neighbour in `memories`, with their
    /// vector similarity when there is one.
    lists: Vec<Vec<(usize, Option<f64>)>>,
}

/// A stored memory near one or more captures of a batch, with what the checks make of its text
/// (see [`crate::analysis`]), shared by every capture it is near: in a bulk load each memory is
/// the neighbour of several captures.
pub(crate) struct Known<'a> {
    pub memory: &'a Memory,
    pub analysis: Arc<Analysis>,
}

impl Known<'_> {
    fn claim(&self, rules: &ClaimRules) -> &Claim {
        self.analysis.claim(rules)
    }
}

/// A stored memory near a capture, with their vector similarity when there is one.
pub(crate) struct Neighbour<'a> {
    pub known: &'a Known<'a>,
    pub similarity: Option<f64>,
}

impl Nearby {
    /// One [`Known`] per neighbour, for the checks of the whole batch to share, with the
    /// analyses `analyses` did not keep (new, not yet made) and the parts of each that the
    /// checks of `captures` (those [`MemoryService::neighbours_of`] was given) will read.
    pub(crate) fn known(&self, analyses: &Analyses, captures: &[Option<(&Memory, Option<&Embedding>)>]) -> (Vec<Known<'_>>, Vec<(Arc<Analysis>, Needs)>) {
        let mut needs = vec![Needs::default(); self.memories.len()];
        for (capture, list) in captures.iter().zip(&self.lists) {
            let Some((memory, _)) = capture else { continue };
            for (rank, &(at, _)) in list.iter().enumerate() {
                needs[at].claim |= alike(memory, &self.memories[at]);
                needs[at].reading |= rank < CONTRADICTION_CANDIDATES;
            }
        }
        let mut fresh = Vec::new();
        let known = self
            .memories
            .iter()
            .zip(needs)
            .map(|(memory, needs)| {
                let (analysis, new) = analyses.of(memory);
                if new {
                    fresh.push((analysis.clone(), needs));
                }
                Known { memory, analysis }
            })
            .collect();
        (known, fresh)
    }

    /// Each capture's neighbours, best first, as `known` (made by [`Nearby::known`]) holds them.
    pub(crate) fn lists<'a>(&self, known: &'a [Known<'a>]) -> Vec<Vec<Neighbour<'a>>> {
        self.lists.iter().map(|list| list.iter().map(|&(at, similarity)| Neighbour { known: &known[at], similarity }).collect()).collect()
    }
}

/// Whether a capture is judged against `other`: a memory of its namespace and kind, worded
/// otherwise (the same wording is the store's exact duplicate).
fn alike(capture: &Memory, other: &Memory) -> bool {
    other.namespace == capture.namespace && other.kind == capture.kind && other.content.trim() != capture.content.trim()
}

/// What to do with one capture.
#[derive(Debug, Clone)]
pub(crate) enum Plan {
    /// Store it, with these links to memories much like it.
    Store(Vec<Link>),
    /// It makes the same claim as this stored memory: merge it.
    Merge(Memory),
    /// It makes the same claim as the capture at this position of its batch, which is stored.
    MergeIntoBatch(usize),
}

impl MemoryService {
    /// The active memories nearest to each capture of a batch, best first, with their
    /// similarity: by vector with an embedder (one search for the batch), else by full text.
    /// `None` stands for a capture that is not judged. The neighbours of all captures are read
    /// in one look-up.
    pub(crate) fn neighbours_of(&self, entry: &DomainStore, captures: &[Option<(&Memory, Option<&Embedding>)>]) -> Result<Nearby> {
        let filter = SearchFilter::active();
        let mut hits: Vec<Vec<(MemoryId, Option<f64>)>> = vec![Vec::new(); captures.len()];
        let mut by_model: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (at, capture) in captures.iter().enumerate() {
            match capture {
                Some((_, Some(embedding))) => by_model.entry(embedding.model.as_str()).or_default().push(at),
                Some((memory, None)) => {
                    let found = entry.store.search_text(prefix(&memory.content, QUERY_BYTES), &filter, NEIGHBOURS)?;
                    hits[at] = found.into_iter().map(|hit| (hit.id, None)).collect();
                }
                None => {}
            }
        }
        for (model, positions) in by_model {
            let vectors: Vec<&[f32]> = positions.iter().filter_map(|&at| Some(captures[at]?.1?.vector.as_slice())).collect();
            let found = entry.store.search_vector_many(&vectors, model, &filter, NEIGHBOURS)?;
            for (at, list) in positions.into_iter().zip(found) {
                hits[at] = list.into_iter().map(|hit| (hit.id, Some(hit.score))).collect();
            }
        }
        let mut wanted: Vec<MemoryId> = hits.iter().flatten().map(|(id, _)| id.clone()).collect();
        wanted.sort();
        wanted.dedup();
        let mut memories = if wanted.is_empty() { Vec::new() } else { entry.store.get_many(&wanted)? };
        memories.retain(|memory| memory.status == Status::Active);
        let position: HashMap<&MemoryId, usize> = memories.iter().enumerate().map(|(at, memory)| (&memory.id, at)).collect();
        let lists = hits.iter().map(|list| list.iter().filter_map(|(id, similarity)| Some((*position.get(id)?, *similarity))).collect()).collect();
        Ok(Nearby { memories, lists })
    }

    /// Judges a capture against the earlier captures of its batch and its stored neighbours.
    /// `same_earlier` are the captures before it in its batch, stored, whose claim is the same
    /// as its own, in batch order with their positions.
    pub(crate) fn plan_capture<'b>(
        &self,
        memory: &Memory,
        claim: &Claim,
        mut same_earlier: impl Iterator<Item = (usize, &'b Memory)>,
        neighbours: &[Neighbour<'_>],
    ) -> Plan {
        let Some(threshold) = self.deduplication.threshold(&memory.namespace) else { return Plan::Store(Vec::new()) };
        if let Some((index, _)) = same_earlier.find(|(_, before)| alike(memory, before)) {
            return Plan::MergeIntoBatch(index);
        }
        let paraphrase = self.embedder.as_ref().and_then(|embedder| embedder.paraphrase_similarity());
        let mut links: Vec<Link> = Vec::new();
        for neighbour in neighbours.iter().filter(|neighbour| alike(memory, neighbour.known.memory)) {
            let other = neighbour.known.claim(self.claims());
            let close = match neighbour.similarity {
                Some(similarity) => similarity >= threshold,
                None => other.overlap(claim) >= LEXICAL_LINK_OVERLAP,
            };
            let relation = match self.claims().compare(other, claim) {
                Judgement::Same => return Plan::Merge(neighbour.known.memory.clone()),
                Judgement::Unsure if paraphrase.zip(neighbour.similarity).is_some_and(|(least, similarity)| similarity >= least) => {
                    return Plan::Merge(neighbour.known.memory.clone());
                }
                Judgement::Unsure => POSSIBLY_DUPLICATE_OF,
                Judgement::Distinct(_) => RELATED_TO,
            };
            if close && links.len() < MAX_SIMILAR_LINKS && memory.links.len() + links.len() < MAX_LINKS {
                links.push(Link { target: neighbour.known.memory.urn(), relation: relation.to_owned() });
            }
        }
        Plan::Store(links)
    }

    /// Merges a capture into the stored memory making the same claim: the capture is kept as
    /// a forgotten memory linked `merged-into` it, and the stored memory gets a confirmation
    /// whose reason names and quotes the kept one. A wording merged into the same memory
    /// before is not merged again: resending it confirms nothing new.
    pub(crate) fn merge(
        &self,
        entry: &DomainStore,
        existing: &Memory,
        mut kept: Memory,
        embedding: Option<Embedding>,
        redacted: Vec<RedactionView>,
    ) -> Result<CaptureOutcome> {
        let target = existing.urn();
        let embedded = embedding.is_some();
        let mut warnings = redaction_warning(&redacted).into_iter().collect::<Vec<_>>();
        let outcome = |urn: String, reinforced: bool, kept_as: Option<String>, warnings: Vec<String>, redacted: Vec<RedactionView>| CaptureOutcome {
            urn,
            title: existing.title.clone(),
            created: false,
            reinforced,
            kept_as,
            linked: Vec::new(),
            embedded,
            warnings,
            redacted,
            contradictions: Vec::new(),
        };
        if let Some(before) = self.merged_before(entry, existing, &kept, embedding.as_ref())? {
            warnings.insert(0, format!("this wording was merged into {target} before and is kept as {before}; nothing new was stored"));
            return Ok(outcome(target.to_string(), false, Some(before), warnings, redacted));
        }
        kept.status = Status::Forgotten;
        kept.links.truncate(MAX_LINKS - 1);
        kept.links.push(Link { target: target.clone(), relation: MERGED_INTO.to_owned() });
        let kept_urn = kept.urn().to_string();
        if let Some(Inserted::Duplicate(_)) = entry.store.insert(&[(kept.clone(), embedding)])?.first() {
            warnings.insert(0, "an identical memory already exists in this namespace; nothing new was stored".to_owned());
            return Ok(outcome(target.to_string(), false, None, warnings, redacted));
        }
        let wording: String = kept.content.trim().chars().take(QUOTED_CHARS).collect();
        let cut = if kept.content.trim().chars().count() > QUOTED_CHARS { "…" } else { "" };
        let reason = format!("merged {kept_urn}, a capture making the same claim: \"{wording}{cut}\"");
        self.change("urn", &target.to_string(), |current, now| record_evidence(current, EvidenceKind::Supporting, &reason, now).map(Some))?;
        let confirmations = entry.store.get(&existing.id)?.map_or(1, |memory| evidence_counts(&memory.metadata).supporting);
        warnings.insert(
            0,
            format!(
                "a memory making the same claim already exists in this namespace; it was reinforced (confirmed {confirmations} time{}) and this wording is kept as {kept_urn} (`memory_restore` it to undo the merge)",
                if confirmations == 1 { "" } else { "s" }
            ),
        );
        Ok(outcome(target.to_string(), true, Some(kept_urn), warnings, redacted))
    }

    /// The kept memory of an earlier merge of the same wording into `existing`, if any.
    fn merged_before(&self, entry: &DomainStore, existing: &Memory, memory: &Memory, embedding: Option<&Embedding>) -> Result<Option<String>> {
        let filter = SearchFilter { namespaces: vec![memory.namespace.clone()], status: Some(Status::Forgotten), ..SearchFilter::default() };
        let hits = match embedding {
            Some(embedding) => entry.store.search_vector(&embedding.vector, &embedding.model, &filter, MAX_SIMILAR_LINKS)?,
            None => entry.store.search_text(prefix(&memory.content, QUERY_BYTES), &filter, MAX_SIMILAR_LINKS)?,
        };
        let ids: Vec<MemoryId> = hits.into_iter().map(|hit| hit.id).collect();
        if ids.is_empty() {
            return Ok(None);
        }
        let target = existing.urn();
        Ok(entry
            .store
            .get_many(&ids)?
            .into_iter()
            .find(|found| found.content.trim() == memory.content.trim() && found.links.iter().any(|link| link.relation == MERGED_INTO && link.target == target))
            .map(|found| found.urn().to_string()))
    }

    /// Undoes a merge when the memory restored is one a merge kept: it becomes active on its
    /// own (its `merged-into` link now `possibly-duplicate-of`), and the memory it confirmed
    /// loses that confirmation, in a version saying why. `None` for any other memory.
    pub(crate) fn undo_merge(&self, urn: &str, reason: &str) -> Result<Option<ChangeOutcome>> {
        let (parsed, entry) = self.parse_memory_urn("urn", urn)?;
        let Some(current) = entry.store.get(&parsed.id)? else { return Ok(None) };
        let Some(target) = current.links.iter().find(|link| link.relation == MERGED_INTO).map(|link| link.target.clone()) else { return Ok(None) };
        if current.status != Status::Forgotten {
            return Ok(None);
        }
        let outcome = self.change("urn", urn, |current, now| {
            let Some((mut next, previous)) = change_status(current, Status::Active, reason, now)? else { return Ok(None) };
            for link in next.links.iter_mut().filter(|link| link.relation == MERGED_INTO) {
                link.relation = POSSIBLY_DUPLICATE_OF.to_owned();
            }
            Ok(Some((next, previous)))
        })?;
        let withdrawn = format!("the merge of {urn} was undone: it is a memory of its own again");
        let confirmed = self.change("urn", &target.to_string(), |current, now| {
            let mut metadata = current.metadata.clone();
            let supporting = evidence_counts(&metadata).supporting;
            if supporting == 0 {
                return Ok(None);
            }
            if supporting == 1 {
                metadata.remove(SUPPORTING_KEY);
            } else {
                metadata.insert(SUPPORTING_KEY.to_owned(), (supporting - 1).to_string());
            }
            apply_update(current, UpdateInput { reason: withdrawn.clone(), metadata: Some(metadata), ..UpdateInput::default() }, now).map(Some)
        });
        let mut outcome = outcome;
        match confirmed {
            Ok(_) => outcome.warnings.push(format!("the merge into {target} was undone and its confirmation withdrawn")),
            Err(error) => outcome.warnings.push(format!("restored, but the confirmation of {target} could not be withdrawn: {error}")),
        }
        Ok(Some(outcome))
    }
}

/// A link as a capture reports it.
pub(crate) fn link_views(links: &[Link]) -> Vec<LinkView> {
    links.iter().map(|link| LinkView { target: link.target.to_string(), relation: link.relation.clone() }).collect()
}

pub(crate) fn prefix(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
