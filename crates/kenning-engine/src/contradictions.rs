//! Contradictions between memories: found when a memory is captured, kept as records in the
//! domain's working state (`StateKind::Contradiction`), listed, counted, and settled by
//! [`MemoryService::resolve_truth`].
//!
//! At capture the new memory is compared with its few nearest active memories of the same
//! domain (the vector search with an embedder, else the full-text search) by the core's rules
//! ([`kenning_core::contradiction::detect`]); with a language model configured, each conflict the
//! rules find is put to the model, which may dismiss it. A newer memory that says itself that the
//! older one's fact changed ("we moved from MySQL to PostgreSQL") settles the contradiction at
//! once: the older memory gets contradicting evidence and a `superseded-by` link, which recall
//! ranks below its replacement. Any other contradiction stays open until `resolve_truth`, and a
//! new conflict with the winner of a settled one reopens that one; meanwhile a newer statement
//! of the same fact with another value or the opposite sense is preferred (the older one gets
//! the `superseded-by` link, which a settlement for the older one takes away again).

use std::cell::RefCell;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kenning_core::contradiction::judge::{Note, judge_request, parse_judgement, parse_resolution, resolve_request};
use kenning_core::contradiction::{
    Contradiction, ContradictionKind, ContradictionState, Detection, ID_PREFIX, Reading, Resolution, Verdict, check_id, detect_read,
    marked_superseded, no_longer_superseded, rule_resolution, settled_against, supersession_resolution,
};
use kenning_core::llm::LlmUse;
use kenning_core::state::{StateKind, StateRecord, StateStore};
use kenning_core::{Cursor, FieldError, Memory, MemoryId, MemoryUrn, PurgeMode, Replacement};

use crate::analysis;
use crate::error::{Error, Result};
use crate::ids::new_memory_id;
use crate::judgment::Neighbour;
use crate::service::{CAS_ATTEMPTS, DomainStore, MemoryService, backoff};
use crate::views::{ContradictionCounts, ContradictionNote, ContradictionPage, ContradictionView, LlmUseView, ResolutionView, timestamp};

/// How many of the nearest memories a new one is compared with: the conflicting statement of
/// the same fact is among the closest, and each comparison is cheap but not free.
pub(crate) const CANDIDATES: usize = 5;
/// The most contradiction records of one domain read to list or count them; a domain with more
/// is read up to this many, most recently changed first. Those a conflict reopens are found by
/// their memories instead, however many there are.
const MAX_RECORDS: usize = 10_000;
/// Records read per page of the state store.
const PAGE: usize = 500;
/// Namespaces whose memories are renderings of other records (decisions and mined patterns),
/// changed only with those records, so never settled against here.
const DERIVED_NAMESPACES: &[&str] = &["decisions", "patterns"];
pub const DEFAULT_CONTRADICTION_LIMIT: usize = 20;
pub const MAX_CONTRADICTION_LIMIT: usize = 100;

/// A contradiction found at capture, before it is recorded.
pub(crate) struct Conflict {
    older: Memory,
    detection: Detection,
}

/// What recording a capture's contradictions made: a note per contradiction recorded, and a
/// warning per failure.
#[derive(Default)]
pub(crate) struct RecordedConflicts {
    pub notes: Vec<ContradictionNote>,
    pub warnings: Vec<String>,
}

/// How a capture changes an older memory it contradicts: settled against it, or marked
/// superseded by it until the contradiction is settled.
struct Supersession {
    older: MemoryUrn,
    newer: MemoryUrn,
    reason: String,
    settled: bool,
}

impl Supersession {
    fn apply(&self, current: &Memory, now: DateTime<Utc>) -> Option<(Memory, kenning_core::MemoryVersion)> {
        if self.settled {
            Some(settled_against(current, Some(&self.newer), &self.reason, now))
        } else {
            marked_superseded(current, &self.newer, &self.reason, now)
        }
    }
}

impl MemoryService {
    /// The contradictions each capture of `checked` (its position in `memories`, its reading
    /// and its neighbours) makes with its nearest neighbours, found before it is stored and
    /// recorded by [`MemoryService::record_conflicts`] once it is, with the warnings of the
    /// search; in the order of `checked`. A domain that keeps no records is not checked. Many
    /// captures (a bulk load) are checked on every core, unless a language model confirms
    /// what the rules find: its calls are made one at a time.
    pub(crate) fn conflicts_of_many(
        &self,
        entry: &DomainStore,
        memories: &[Memory],
        checked: &[(usize, &Reading<'_>, &[Neighbour<'_>])],
    ) -> Vec<(Vec<Conflict>, Vec<String>)> {
        if entry.store.state().is_none() {
            return checked.iter().map(|_| (Vec::new(), Vec::new())).collect();
        }
        let check = |at: usize| {
            let (index, newer, neighbours) = checked[at];
            let mut warnings = Vec::new();
            let found = self.find_conflicts(&memories[index], newer, neighbours, &mut warnings);
            (found, warnings)
        };
        if self.llm().is_some() {
            return (0..checked.len()).map(check).collect();
        }
        analysis::on_every_core(checked.len(), check)
    }

    /// Records the contradictions found for the memories of a batch just stored, each memory
    /// with its conflicts, in batch order, and answers each one's notes and warnings in that
    /// order. The records go in one write and the older memories they supersede in one more,
    /// so that a batch makes two durable writes however many contradictions its captures make.
    /// A failure here fails no capture, which is stored already: it becomes a warning of each
    /// capture whose contradictions it left unrecorded.
    pub(crate) fn record_conflicts(&self, entry: &DomainStore, found: Vec<(&Memory, Vec<Conflict>)>) -> Vec<RecordedConflicts> {
        let mut recorded: Vec<RecordedConflicts> = found.iter().map(|_| RecordedConflicts::default()).collect();
        let Some(state) = entry.store.state() else { return recorded };
        if found.iter().all(|(_, conflicts)| conflicts.is_empty()) {
            return recorded;
        }
        let contradicted = found.iter().flat_map(|(_, conflicts)| conflicts.iter().map(|conflict| conflict.older.urn().to_string())).collect();
        let settled = SettledRecords::about(contradicted);
        let mut writes = Vec::new();
        // Per contradiction found: the capture it is of, its note, where its record is among
        // the writes, and how it changes the older memory.
        let mut made: Vec<(usize, ContradictionNote, usize, Option<Supersession>)> = Vec::new();
        for (at, (memory, conflicts)) in found.into_iter().enumerate() {
            for conflict in conflicts {
                match self.make_record(state, &settled, memory, conflict, &mut writes) {
                    Ok((note, written_at, supersession)) => made.push((at, note, written_at, supersession)),
                    Err(error) => {
                        // What the store holds of the settled records is not known now: the
                        // next conflict reads them afresh.
                        settled.forget();
                        recorded[at].warnings.push(format!("a contradiction could not be recorded: {error}"));
                    }
                }
            }
        }
        // Written in the order of their ids (a record's revisions keep theirs), so that two
        // batches reopening some of the same records lock them in the same order: a deadlock
        // costs PostgreSQL's `deadlock_timeout`, a second by default.
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.sort_by(|&a, &b| writes[a].id.cmp(&writes[b].id));
        let sorted: Vec<StateRecord> = order.iter().map(|&at| writes[at].clone()).collect();
        let written = match state.put_states(&sorted) {
            Ok(sorted_written) => {
                let mut written = vec![false; writes.len()];
                for (&at, was_written) in order.iter().zip(sorted_written) {
                    written[at] = was_written;
                }
                written
            }
            Err(error) => {
                let message = format!("the contradictions this capture makes could not be recorded: {error}");
                warn_each(&mut recorded, made.iter().map(|&(at, ..)| at), &message);
                return recorded;
            }
        };
        let mut supersessions = Vec::new();
        for (at, note, written_at, supersession) in made {
            if !written[written_at] {
                recorded[at].warnings.push(format!("contradiction {} could not be recorded: another writer holds its id", note.id));
                continue;
            }
            recorded[at].notes.push(note);
            supersessions.extend(supersession.map(|supersession| (at, supersession)));
        }
        if let Err(error) = self.supersede(entry, &supersessions) {
            let message = format!("the memories this capture contradicts could not be marked superseded: {error}");
            warn_each(&mut recorded, supersessions.iter().map(|&(at, _)| at), &message);
        }
        recorded
    }

    /// Applies `supersessions` (with the position of the capture each is of) to the current
    /// versions of their older memories in one compare-and-swap write, in order: when two
    /// captures change one memory, the second change starts from the first. Read again and
    /// tried again when another writer got there first; a memory gone meanwhile is left out.
    fn supersede(&self, entry: &DomainStore, supersessions: &[(usize, Supersession)]) -> Result<()> {
        let Some((_, first)) = supersessions.first() else { return Ok(()) };
        let mut olders: Vec<MemoryId> = supersessions.iter().map(|(_, supersession)| supersession.older.id.clone()).collect();
        olders.sort();
        olders.dedup();
        for attempt in 0..CAS_ATTEMPTS {
            let now = self.now();
            let mut latest: HashMap<MemoryId, Memory> = entry.store.get_many(&olders)?.into_iter().map(|memory| (memory.id.clone(), memory)).collect();
            let mut changes = Vec::with_capacity(supersessions.len());
            for (_, supersession) in supersessions {
                let Some(current) = latest.get(&supersession.older.id) else { continue };
                let Some((next, previous)) = supersession.apply(current, now) else { continue };
                let embedding = self.embed_change(current, &next)?;
                latest.insert(next.id.clone(), next.clone());
                changes.push((next, previous, embedding));
            }
            if changes.is_empty() {
                return Ok(());
            }
            // In the order of the memories' ids (one memory's changes keep theirs), for the
            // reason the records are written in theirs.
            changes.sort_by(|a, b| a.0.id.cmp(&b.0.id));
            let replacements: Vec<Replacement<'_>> =
                changes.iter().map(|(next, previous, embedding)| Replacement { next, previous, embedding: embedding.as_ref() }).collect();
            match entry.store.replace_many(&replacements) {
                Ok(()) => return Ok(()),
                Err(kenning_core::Error::Conflict { .. }) => backoff(attempt),
                Err(other) => return Err(other.into()),
            }
        }
        Err(Error::Busy { target: first.older.to_string() })
    }

    /// The nearest active memories (of the capture's neighbours, which its judgement read)
    /// that the new one contradicts, by the rules and, with a model, confirmed by it.
    fn find_conflicts(&self, memory: &Memory, newer: &Reading<'_>, neighbours: &[Neighbour<'_>], warnings: &mut Vec<String>) -> Vec<Conflict> {
        let mut candidates: Vec<&Neighbour<'_>> = neighbours.iter().filter(|neighbour| neighbour.known.memory.id != memory.id).take(CANDIDATES).collect();
        // Oldest first, so the report reads in the order things were said.
        candidates.sort_by(|a, b| a.known.memory.created_at.cmp(&b.known.memory.created_at).then_with(|| a.known.memory.id.cmp(&b.known.memory.id)));
        let mut found = Vec::new();
        for Neighbour { known, similarity } in candidates {
            let older = known.memory;
            if older.status != kenning_core::Status::Active || DERIVED_NAMESPACES.contains(&older.namespace.as_str()) {
                continue;
            }
            let Some(mut detection) = detect_read(known.analysis.reading(), newer, *similarity) else { continue };
            if let Some(llm) = self.llm() {
                let (older_time, newer_time) = (timestamp(older.created_at), timestamp(memory.created_at));
                let request = judge_request(note(older, &older_time), note(memory, &newer_time), &detection);
                match llm.complete(&request).map_err(|error| error.to_string()).and_then(|answer| parse_judgement(&answer.text)) {
                    Ok(judgement) if !judgement.conflict => continue,
                    Ok(judgement) => {
                        if let Some(kind) = judgement.kind
                            && kind != detection.kind
                        {
                            // Recency settles only what the rules saw stated as a change.
                            detection.newer_states_change &= kind == ContradictionKind::Superseded;
                            detection.kind = kind;
                        }
                    }
                    Err(error) => warnings.push(format!(
                        "the language model could not judge a possible contradiction with {} ({error}); the rule's finding was kept",
                        older.urn()
                    )),
                }
            }
            found.push(Conflict { older: older.clone(), detection });
        }
        found
    }

    /// The record of one contradiction found at capture, added to `writes` (answered with its
    /// position there); settled at once when the new memory states the change itself, and
    /// otherwise with the settled contradictions the contradicted memory had won reopened
    /// (their new revisions added to `writes` after it).
    fn make_record(
        &self,
        state: &dyn StateStore,
        settled: &SettledRecords,
        memory: &Memory,
        found: Conflict,
        writes: &mut Vec<StateRecord>,
    ) -> Result<(ContradictionNote, usize, Option<Supersession>)> {
        let now = self.now();
        let (older_urn, newer_urn) = (found.older.urn(), memory.urn());
        let id = format!("{ID_PREFIX}{}", new_memory_id(now));
        let mut record = Contradiction::open(id, older_urn.to_string(), newer_urn.to_string(), &found.detection, "found when the newer memory was captured", now);
        let settle_now = found.detection.kind == ContradictionKind::Superseded && found.detection.newer_states_change;
        if settle_now {
            record.settle(supersession_resolution(&found.detection), now)?;
        }
        let stored = StateRecord {
            kind: StateKind::Contradiction,
            id: record.id.clone(),
            revision: 1,
            updated_at: now,
            body: record.to_body(),
            subjects: vec![record.a.clone(), record.b.clone()],
        };
        let written_at = writes.len();
        let supersession = if settle_now {
            writes.push(stored.clone());
            settled.add(stored, record.clone());
            let reason = format!("superseded by {newer_urn} (contradiction {})", record.id);
            Some(Supersession { older: older_urn.clone(), newer: newer_urn, reason, settled: true })
        } else {
            writes.push(stored);
            self.reopen_won_by(state, settled, &older_urn.to_string(), &newer_urn.to_string(), &record.id, writes)?;
            // A newer statement of the same fact with another value or the opposite sense is
            // preferred by recall until the contradiction is settled otherwise.
            matches!(found.detection.kind, ContradictionKind::ChangedValue | ContradictionKind::Negation).then(|| {
                let reason = format!("superseded by {newer_urn} until contradiction {} is settled", record.id);
                Supersession { older: older_urn.clone(), newer: newer_urn, reason, settled: false }
            })
        };
        let note = ContradictionNote { id: record.id, kind: record.kind.to_string(), with: older_urn.to_string(), state: record.state.to_string() };
        Ok((note, written_at, supersession))
    }

    /// Reopens every settled contradiction that `contradicted` won, or that was found to depend
    /// on context with it, now that `by` contradicts it: their new revisions are added to
    /// `writes`. One that another writer changed meanwhile is refused by that write and left
    /// as it is, since the record has moved on.
    fn reopen_won_by(&self, state: &dyn StateStore, settled: &SettledRecords, contradicted: &str, by: &str, except: &str, writes: &mut Vec<StateRecord>) -> Result<()> {
        for (stored, mut record) in settled.take(state, contradicted, except)? {
            let now = self.now();
            record.reopen(by, now)?;
            writes.push(StateRecord { revision: stored.revision + 1, updated_at: now, body: record.to_body(), ..stored });
        }
        Ok(())
    }

    /// Settles an open or reopened contradiction. With a language model, the model decides
    /// (`a_wins`, `b_wins`, or `context_dependent` with its conditions); without one, or when it
    /// fails, the rule: the newer statement wins unless the older one's source is more reliable
    /// by a margin. The losing memory gets contradicting evidence in a new version that says
    /// why; `context_dependent` penalises neither.
    pub fn resolve_truth(&self, contradiction_id: &str) -> Result<ResolutionView> {
        let id = check_id("contradiction_id", contradiction_id)?;
        let (state, stored, record) = self.find_record(&id)?;
        check_unsettled(&record)?;
        let a = self.memory_of(&record.a)?;
        let b = self.memory_of(&record.b)?;
        let (resolution, llm) = match self.llm() {
            None => (rule_resolution(&a, &b), LlmUse::NotConfigured { fallback: "rule".into() }),
            Some(model) => {
                let (a_time, b_time) = (timestamp(a.created_at), timestamp(b.created_at));
                let request = resolve_request(&record, note(&a, &a_time), note(&b, &b_time));
                match model.complete(&request) {
                    Ok(answer) => match parse_resolution(&answer.text, &answer.model) {
                        Ok(resolution) => (resolution, LlmUse::Used { model: answer.model.clone() }),
                        Err(error) => (rule_resolution(&a, &b), LlmUse::Failed { error: format!("{}: {error}", model.name()), fallback: "rule".into() }),
                    },
                    Err(error) => (rule_resolution(&a, &b), LlmUse::Failed { error: error.to_string(), fallback: "rule".into() }),
                }
            }
        };
        let record = self.write_settlement(state, stored, record, &resolution)?;
        let loser = match resolution.verdict {
            Verdict::AWins => Some(&record.b),
            Verdict::BWins => Some(&record.a),
            Verdict::ContextDependent => None,
        };
        if let Some(loser) = loser {
            let reason = format!("contradiction {} settled against it ({}): {}", record.id, resolution.decided_by, resolution.explanation);
            self.change("urn", loser, |current, now| Ok(Some(settled_against(current, None, &reason, now))))?;
        }
        // The older memory won (or both hold): it is no longer marked superseded by the newer.
        if resolution.verdict != Verdict::BWins
            && let Ok(newer) = MemoryUrn::parse("b", &record.b)
        {
            let reason = format!("contradiction {} settled: {}", record.id, resolution.verdict);
            self.change("urn", &record.a, |current, now| Ok(no_longer_superseded(current, &newer, &reason, now)))?;
        }
        Ok(ResolutionView {
            contradiction_id: record.id.clone(),
            resolution: resolution.verdict.to_string(),
            conditions: resolution.conditions.clone(),
            explanation: resolution.explanation.clone(),
            decided_by: resolution.decided_by.clone(),
            llm: LlmUseView::from(&llm),
            state: record.state.to_string(),
            a: record.a.clone(),
            b: record.b.clone(),
            penalised: loser.cloned(),
        })
    }

    /// Writes a settlement with compare-and-swap, re-reading the record after a lost race (and
    /// refusing if the other writer settled it).
    fn write_settlement(&self, state: &dyn StateStore, mut stored: StateRecord, mut record: Contradiction, resolution: &Resolution) -> Result<Contradiction> {
        for attempt in 0..CAS_ATTEMPTS {
            let now = self.now();
            record.settle(resolution.clone(), now)?;
            let next = StateRecord { revision: stored.revision + 1, updated_at: now, body: record.to_body(), ..stored.clone() };
            match state.put_state(&next) {
                Ok(()) => return Ok(record),
                Err(kenning_core::Error::Conflict { .. }) => {
                    backoff(attempt);
                    stored = state.get_state(StateKind::Contradiction, &stored.id)?.ok_or_else(|| Error::NotFound { target: stored.id.clone() })?;
                    record = Contradiction::from_body(&stored.body)?;
                    check_unsettled(&record)?;
                }
                Err(other) => return Err(other.into()),
            }
        }
        Err(Error::Busy { target: record.id })
    }

    /// One contradiction with its history.
    pub fn contradiction(&self, contradiction_id: &str) -> Result<ContradictionView> {
        let id = check_id("contradiction_id", contradiction_id)?;
        let (_, _, record) = self.find_record(&id)?;
        Ok(ContradictionView::from(&record))
    }

    /// Contradictions of every domain, most recently changed first, in `state` if given.
    pub fn contradictions(&self, state: Option<&str>, cursor: Option<&str>, limit: Option<usize>) -> Result<ContradictionPage> {
        let state = state.map(|text| ContradictionState::parse(text.trim())).transpose()?;
        let limit = limit.unwrap_or(DEFAULT_CONTRADICTION_LIMIT);
        if !(1..=MAX_CONTRADICTION_LIMIT).contains(&limit) {
            return Err(FieldError::new("limit", format!("must be between 1 and {MAX_CONTRADICTION_LIMIT}"), limit, "use the cursor to page through more").into());
        }
        let offset = cursor.map(Cursor::decode).transpose()?.map_or(0, |cursor| cursor.offset);
        let mut records: Vec<Contradiction> = self.all_records()?.into_iter().filter(|record| state.is_none_or(|state| record.state == state)).collect();
        records.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id)));
        let total = records.len();
        let page: Vec<ContradictionView> = records.iter().skip(offset).take(limit).map(ContradictionView::from).collect();
        let end = offset + page.len();
        Ok(ContradictionPage { contradictions: page, total: total as u64, next_cursor: (end < total).then(|| Cursor { offset: end }.encode()) })
    }

    /// How many contradictions are in each state, in `domain` (`project`, `user`, `org` or a
    /// full name) or, without one, over every domain.
    pub fn contradiction_counts(&self, domain: Option<&str>) -> Result<ContradictionCounts> {
        let records = match domain {
            None => self.all_records()?,
            Some(text) => match self.resolve_domain("domain", text)?.store.state() {
                Some(state) => read_records(state)?.into_iter().map(|(_, record)| record).collect(),
                None => Vec::new(),
            },
        };
        let mut counts = ContradictionCounts::default();
        for record in records {
            *match record.state {
                ContradictionState::Open => &mut counts.open,
                ContradictionState::Resolved => &mut counts.resolved,
                ContradictionState::ContextDependent => &mut counts.context_dependent,
                ContradictionState::Reopened => &mut counts.reopened,
            } += 1;
        }
        Ok(counts)
    }

    fn all_records(&self) -> Result<Vec<Contradiction>> {
        let mut all = Vec::new();
        for entry in self.domain_stores() {
            let Some(state) = entry.store.state() else { continue };
            all.extend(read_records(state)?.into_iter().map(|(_, record)| record));
        }
        Ok(all)
    }

    fn find_record(&self, id: &str) -> Result<(&dyn StateStore, StateRecord, Contradiction)> {
        for entry in self.domain_stores() {
            let Some(state) = entry.store.state() else { continue };
            if let Some(stored) = state.get_state(StateKind::Contradiction, id)? {
                let record = Contradiction::from_body(&stored.body)?;
                return Ok((state, stored, record));
            }
        }
        Err(Error::Invalid(FieldError::new(
            "contradiction_id",
            "names no contradiction in any configured domain",
            id,
            "use an id a capture reported or `memory_contradictions` lists",
        )))
    }

    fn memory_of(&self, urn: &str) -> Result<Memory> {
        let (urn, entry) = self.parse_memory_urn("urn", urn)?;
        entry.store.get(&urn.id)?.ok_or_else(|| Error::NotFound { target: urn.to_string() })
    }
}

/// Refuses to settle a contradiction that is settled already, with the error of the state move.
fn check_unsettled(record: &Contradiction) -> Result<(), FieldError> {
    if record.state.is_unsettled() {
        return Ok(());
    }
    let mut probe = record.clone();
    probe.transition(ContradictionState::Resolved, "probe", DateTime::<Utc>::UNIX_EPOCH).map_err(|error| FieldError { field: "contradiction_id".into(), ..error })
}

/// The settled contradiction records of one domain (won by one side, or found to depend on
/// context), the only ones a new conflict can reopen, as the captures of one batch see them:
/// those in the store about the memories the batch's conflicts contradict, read in one go on
/// the first conflict that looks, and those the batch has settled, which it writes with its
/// other records at the end; kept current with what the batch reopens, so that a bulk load
/// reads the records it may reopen once a batch, and never the others.
struct SettledRecords {
    /// The URNs of the memories the batch's conflicts contradict.
    contradicted: Vec<String>,
    read: RefCell<Option<Settled>>,
    settled_by_batch: RefCell<Settled>,
}

impl SettledRecords {
    fn about(mut contradicted: Vec<String>) -> SettledRecords {
        contradicted.sort();
        contradicted.dedup();
        SettledRecords { contradicted, read: RefCell::default(), settled_by_batch: RefCell::default() }
    }

    /// Takes out the records a conflict with `contradicted` (one of the batch's) reopens, all
    /// but the one whose id is `except`, read first if they were not: the caller reopens them.
    fn take(&self, state: &dyn StateStore, contradicted: &str, except: &str) -> Result<Vec<(StateRecord, Contradiction)>> {
        let mut read = self.read.borrow_mut();
        if read.is_none() {
            let subjects: Vec<&str> = self.contradicted.iter().map(String::as_str).collect();
            let mut settled = Settled::default();
            for stored in state.state_about(StateKind::Contradiction, &subjects)? {
                let record = Contradiction::from_body(&stored.body)?;
                settled.add(stored, record);
            }
            *read = Some(settled);
        }
        let mut taken = read.as_mut().expect("read above").take(contradicted, except);
        taken.extend(self.settled_by_batch.borrow_mut().take(contradicted, except));
        Ok(taken)
    }

    /// A record the batch has settled, not yet written.
    fn add(&self, stored: StateRecord, record: Contradiction) {
        self.settled_by_batch.borrow_mut().add(stored, record);
    }

    /// Forgets what was read of the store, to be read again.
    fn forget(&self) {
        self.read.borrow_mut().take();
    }
}

/// Settled records in the order they came, each found by the memories a new conflict would
/// reopen it for, so that a batch with many conflicts among many records does not look through
/// every record for each.
#[derive(Default)]
struct Settled {
    records: Vec<Option<(StateRecord, Contradiction)>>,
    by_memory: HashMap<String, Vec<usize>>,
}

impl Settled {
    /// Keeps `record` if it is settled: under its winner, or under both of its memories when
    /// it was found to depend on context.
    fn add(&mut self, stored: StateRecord, record: Contradiction) {
        let reopened_for: Vec<&str> = match record.winner() {
            Some(winner) => vec![winner],
            None if record.state == ContradictionState::ContextDependent => vec![&record.a, &record.b],
            None => return,
        };
        let at = self.records.len();
        for urn in reopened_for {
            let positions = self.by_memory.entry(urn.to_owned()).or_default();
            if positions.last() != Some(&at) {
                positions.push(at);
            }
        }
        self.records.push(Some((stored, record)));
    }

    /// Takes out, in the order they came, the records a conflict with `contradicted` reopens
    /// but the one whose id is `except`.
    fn take(&mut self, contradicted: &str, except: &str) -> Vec<(StateRecord, Contradiction)> {
        let Some(positions) = self.by_memory.get(contradicted) else { return Vec::new() };
        positions.iter().filter_map(|&at| self.records[at].take_if(|(_, record)| record.id != except)).collect()
    }
}

/// Subjects asked about in one read when purging: the read's statement carries them all.
const PURGE_CHUNK: usize = 500;

/// Removes (or in a [`PurgeMode::DryRun`] only counts) the contradiction records of one store
/// that name any of the memories of `urns`, which the data-rights purge removes: a record
/// quotes the words of both its memories.
pub(crate) fn purge_about(state: &dyn StateStore, urns: &[String], mode: PurgeMode) -> Result<u64> {
    let mut ids: Vec<String> = Vec::new();
    for chunk in urns.chunks(PURGE_CHUNK) {
        let subjects: Vec<&str> = chunk.iter().map(String::as_str).collect();
        ids.extend(state.state_about(StateKind::Contradiction, &subjects)?.into_iter().map(|record| record.id));
    }
    // A record of two purged memories is found by each.
    ids.sort();
    ids.dedup();
    if mode == PurgeMode::Apply {
        for id in &ids {
            state.delete_state(StateKind::Contradiction, id)?;
        }
    }
    Ok(ids.len() as u64)
}

/// Adds `message` once to the warnings of each capture at `positions`, which may repeat.
fn warn_each(recorded: &mut [RecordedConflicts], positions: impl Iterator<Item = usize>, message: &str) {
    let mut warned = Vec::new();
    for at in positions {
        if !warned.contains(&at) {
            warned.push(at);
            recorded[at].warnings.push(message.to_owned());
        }
    }
}

/// Every contradiction record of one domain, most recently changed first, up to [`MAX_RECORDS`].
fn read_records(state: &dyn StateStore) -> Result<Vec<(StateRecord, Contradiction)>> {
    let mut records = Vec::new();
    while records.len() < MAX_RECORDS {
        let page = state.list_state(StateKind::Contradiction, records.len(), PAGE)?;
        let full = page.len() == PAGE;
        for stored in page {
            let record = Contradiction::from_body(&stored.body)?;
            records.push((stored, record));
        }
        if !full {
            break;
        }
    }
    Ok(records)
}

fn note<'a>(memory: &'a Memory, captured: &'a str) -> Note<'a> {
    Note { content: &memory.content, source: memory.source.as_str(), captured }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, a: &str, b: &str, verdict: Option<Verdict>) -> (StateRecord, Contradiction) {
        let detection = Detection { kind: ContradictionKind::ChangedValue, older: Vec::new(), newer: Vec::new(), newer_states_change: false };
        let mut record = Contradiction::open(id.to_owned(), a.to_owned(), b.to_owned(), &detection, "found", DateTime::<Utc>::UNIX_EPOCH);
        if let Some(verdict) = verdict {
            let resolution = Resolution { verdict, conditions: None, explanation: "test".into(), decided_by: "rule:recency".into() };
            record.settle(resolution, DateTime::<Utc>::UNIX_EPOCH).unwrap();
        }
        let stored = StateRecord {
            kind: StateKind::Contradiction,
            id: id.to_owned(),
            revision: 2,
            updated_at: DateTime::<Utc>::UNIX_EPOCH,
            body: record.to_body(),
            subjects: vec![a.to_owned(), b.to_owned()],
        };
        (stored, record)
    }

    fn ids(taken: &[(StateRecord, Contradiction)]) -> Vec<&str> {
        taken.iter().map(|(_, record)| record.id.as_str()).collect()
    }

    /// A conflict with a memory reopens the records it won and those found to depend on
    /// context with it, on either side, in the order they came, each once; an open record, or
    /// one the other side won, is not reopened.
    #[test]
    fn settled_records_are_taken_by_the_memory_a_conflict_reopens_them_for() {
        let mut settled = Settled::default();
        for (stored, record) in [
            record("c1", "m1", "m2", Some(Verdict::AWins)),
            record("c2", "m3", "m1", Some(Verdict::AWins)),
            record("c3", "m1", "m4", Some(Verdict::ContextDependent)),
            record("c4", "m5", "m1", None),
            record("c5", "m6", "m1", Some(Verdict::BWins)),
            record("c6", "m7", "m1", Some(Verdict::ContextDependent)),
        ] {
            settled.add(stored, record);
        }
        assert_eq!(ids(&settled.take("m1", "c5")), ["c1", "c3", "c6"]);
        assert_eq!(ids(&settled.take("m1", "none")), ["c5"], "each record is taken once");
        assert_eq!(ids(&settled.take("m4", "none")), Vec::<&str>::new(), "c3 was taken already");
        assert_eq!(ids(&settled.take("m3", "none")), ["c2"]);
        assert_eq!(ids(&settled.take("m5", "none")), Vec::<&str>::new(), "an open record is not settled");
    }
}
