//! Hybrid recall: full-text and vector legs over every selected domain, fused by their scaled
//! scores, plus those of each part of a compound question (cut by rule, or by the language model
//! when query decomposition is on); the best hits then lend part of their
//! score to the memories another author captured next to them in the same session, and the best
//! candidates gain part of the best score among the other candidates of their session. Each
//! candidate's relevance is then weighed by its confidence now
//! ([`kenning_core::confidence`]): dormant memories and those under `min_confidence` drop out. The
//! ranking is paged by cursor and cut to a token budget.
//!
//! The score scale, which paging relies on: the fused ranking is sorted best first, and weighing
//! multiplies a candidate's relevance by a weight in `[0, MOST_WEIGHT]` (today at most 1: the
//! confidence's ranking factor times, for a superseded memory, its share). So no candidate can
//! score more than `MOST_WEIGHT` times its relevance, and the weighing stops reading once the page
//! is settled ([`page_is_settled`]). A signal that boosts must raise `MOST_WEIGHT`, or paging
//! would drop hits it lifts; debug builds assert both halves. Scores of the page are the weighed
//! ones: the hooks' relevance floor compares against them.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, TimeDelta, Utc};

use kenning_core::contradiction::is_superseded;
use kenning_core::relation::SUPERSEDED_BY;
use kenning_core::confidence::{Assessment, assess, ranking_factor};
use kenning_core::expansion::{MAX_EXPANSION_TERMS, Rewrite, parse_rewrite, rewrite_request};
use kenning_core::input::{MAX_TAGS, parse_time};
use kenning_core::provenance::{repository_path, session_of};
use kenning_core::question::question_parts;
use kenning_core::search::{FUSION_SCALE_DEPTH, FusionList, check_query_length, estimate_tokens, score_fusion, snippet};
use kenning_core::when::{asks_about_the_past, find_time_expression};
use kenning_core::{Cursor, Detail, FieldError, Memory, MemoryId, MemoryKind, Namespace, ScoredId, SearchFilter};

use crate::error::{Result, check_interrupt};
use crate::service::{DomainStore, MemoryService, RESOURCE_TEMPLATE};
use crate::views::{DomainNote, LinkView, ListingPage, RecallHit, RecallPage, timestamp};

pub const DEFAULT_RECALL_LIMIT: usize = 10;
pub const MAX_RECALL_LIMIT: usize = 100;
/// The most values a recall's kind, namespace or tag filter takes: a longer list is a mistake or
/// an attack, and each value costs the search a condition.
pub const MAX_FILTER_VALUES: usize = MAX_TAGS;
pub const DEFAULT_MAX_TOKENS: usize = 4000;
const SNIPPET_CHARS: usize = 240;
/// The most candidates one leg contributes; deeper pages than this are not reachable.
const MAX_CANDIDATES: usize = 1000;
/// The share of its score a hit passes on to each memory another author captured next to it in
/// its session. A reply completes what it answers (the answer after a question, "Yes, last
/// week!" after "Have you been to the lake?"), yet it is less likely to be relevant than the hit
/// itself: half is the neutral choice. The hit's own author's next memory gets nothing: an
/// agent's next note in its session, like a maintainer's next commit, is a statement of its own
/// about whatever it names, and lending to it put unrelated notes above the evidence. Neither
/// does a memory of unknown author, nor one of another session, however close in time: two
/// agents' notes captured a minute apart are not about one thing.
const NEIGHBOUR_SHARE: f64 = 0.5;
/// How many of the best hits pass score on to their neighbours.
const NEIGHBOUR_SOURCES: usize = 10;
/// Memories captured next to each other belong to one context only if they occurred this close
/// in time: the same sitting, not the last note of one day and the first of the next.
const NEIGHBOUR_WINDOW: TimeDelta = TimeDelta::hours(1);
/// The share of the best score among the other leading candidates of its session that a
/// leading candidate gains. A session in which several memories match a query is about its
/// subject, and the memories of it that match less well often hold the rest of the answer (why
/// the first attempt failed, what was decided after); a third lifts them past lone matches of
/// other sessions without letting a weak match outrank the strong one it rides on. The best
/// other score, not their sum: a session of many faint matches is not thereby about the query.
const SESSION_SHARE: f64 = 0.3;
/// How many of the best candidates lend and gain by session: those whose records
/// [`MemoryService::spread_to_neighbours`] reads anyway, so the lift reads almost nothing more.
const SESSION_POOL: usize = 2 * NEIGHBOUR_SOURCES;
/// How much a memory from the span of time a query names gains, times its relevance among the
/// memories of that span: half the range of a fused score.
const TIME_PREFERENCE: f64 = 0.5;

/// The share of its score each part of a compound question ([`question_parts`]) adds to the
/// whole question's: the whole question's best match is one part's best too, and the other
/// part's best, which shares few of the whole question's words, gains enough to reach the
/// first page beside it. Added, not the larger of the two: a part's best match taken alone
/// would rank any memory that shares a part's two common words level with the whole question's
/// best.
const PART_SHARE: f64 = 0.5;
/// How many of the best memories of each part a language model split the query into score at
/// least their score for that part: two, for the answer and the note beside it, while a part
/// that went wrong lifts no more than that.
const PART_LEADERS: usize = 2;

/// The share of the full-text weight that goes to the query's expansion (its synonyms, or a
/// model's rewrite): enough that a note using another name for the same thing is found, not so
/// much that it outranks one using the caller's own words.
const EXPANSION_SHARE: f64 = 0.3;

/// How much of its score a memory keeps when a newer memory superseded it (it carries a
/// `superseded-by` link, see `kenning_core::contradiction`), on top of what its contradicting
/// evidence takes from its confidence: half, so that the replacement, about as relevant, comes
/// first, while the old statement is still found as history. A question about the past
/// ([`asks_about_the_past`]) turns this around: the replacement keeps half, the old statement all.
const SUPERSEDED_SHARE: f64 = 0.5;

/// A recall as callers phrase it; vocabulary fields are strings so errors can name them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecallRequest {
    pub query: String,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    pub max_tokens: Option<usize>,
    pub detail: Option<String>,
    pub kinds: Vec<String>,
    pub namespaces: Vec<String>,
    pub tags: Vec<String>,
    pub domains: Vec<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub min_confidence: Option<f64>,
    /// Only memories captured on this branch.
    pub branch: Option<String>,
    /// Only memories about this file or directory (see `kenning_core::provenance`): relative
    /// to the repository root, or absolute inside it.
    pub file: Option<String>,
    /// The time relative expressions in the query count from ("yesterday", "last May", "since
    /// March"), RFC 3339 or YYYY-MM-DD; the clock when absent.
    pub as_of: Option<String>,
    /// Also return dormant memories (confidence under the dormancy threshold).
    pub include_dormant: bool,
}

/// A recall request after validation.
struct RecallPlan<'a> {
    query: String,
    offset: usize,
    limit: usize,
    max_tokens: usize,
    detail: Detail,
    filter: SearchFilter,
    /// What "now" is for the query's relative time expressions.
    now: DateTime<Utc>,
    /// Whether the query asks about the time before a change rather than the present.
    past: bool,
    /// Other names of what the query names, searched as a lighter full-text leg.
    expansion: Vec<String>,
    /// The questions the language model split the query into, each searched as a part; empty
    /// when none was asked or it kept the query whole.
    model_parts: Vec<String>,
    /// How the model's rewrite went, when one is configured.
    query_rewrite: Option<String>,
    /// The least confidence (as assessed now, not as stated) a hit may have.
    min_confidence: Option<f64>,
    include_dormant: bool,
    stores: Vec<&'a DomainStore>,
    /// Stores (by index) that could not be reached during this recall, with the reason; they
    /// are left out of the rest of it, and the page says so.
    unavailable: RefCell<Vec<(usize, String)>>,
    /// The records read so far in this recall, so that no step reads one twice.
    fetched: RefCell<HashMap<(usize, MemoryId), Memory>>,
    /// Records read ahead while the vector legs ran, moved to `fetched` when a step asks for
    /// them: what `fetched` holds (which a question about the past reads every record of) must
    /// not depend on how far the reading ahead got.
    read_ahead: RefCell<HashMap<(usize, MemoryId), Memory>>,
}

impl RecallPlan<'_> {
    /// How many of the best candidates confidence weighing reads the records of first.
    fn first_weighed(&self) -> usize {
        (self.offset + self.limit).max(CONFIDENCE_BATCH) + CONFIDENCE_BATCH
    }

    fn is_available(&self, index: usize) -> bool {
        !self.unavailable.borrow().iter().any(|(known, _)| *known == index)
    }

    /// Passes a store's answer on; a store that cannot be reached is noted and answers nothing,
    /// so that one database being down does not silence the other domains.
    fn answer<T>(&self, index: usize, result: kenning_core::Result<T>) -> Result<Option<T>> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(kenning_core::Error::Unavailable(message)) => {
                tracing::warn!(domain = %self.stores[index].domain, %message, "recall left out a domain that cannot be reached");
                if self.is_available(index) {
                    self.unavailable.borrow_mut().push((index, message));
                }
                Ok(None)
            }
            Err(other) => Err(other.into()),
        }
    }
}

/// One recall running on a service, counted while it lives. A recall's legs run on two threads
/// only while fewer recalls than cores run: a lone recall then finishes sooner, while under
/// concurrent recalls the cores are busy anyway, and a thread's start (some 50 µs on a virtual
/// machine) would be paid for nothing.
struct RunningRecall<'a>(&'a AtomicUsize);

impl RunningRecall<'_> {
    fn start(running: &AtomicUsize) -> RunningRecall<'_> {
        running.fetch_add(1, Ordering::Relaxed);
        RunningRecall(running)
    }
}

impl Drop for RunningRecall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl MemoryService {
    /// Finds the memories most relevant to a query across the selected domains.
    pub fn recall(&self, request: RecallRequest) -> Result<RecallPage> {
        let _running = RunningRecall::start(&self.recalls_running);
        let plan = self.plan(request)?;
        // Every leg reaches at least as deep as fusion scales, so the fused order does not
        // depend on the page asked for.
        let depth = (plan.offset.saturating_add(plan.limit).saturating_mul(3).saturating_add(30)).clamp(FUSION_SCALE_DEPTH, MAX_CANDIDATES);

        // A query with no word the model knows embeds to the zero vector, which is equally far
        // from everything: the vector leg would only add noise, so the recall is text-only.
        let query_vector =
            self.embed_one(&plan.query)?.map(|embedding| embedding.vector).filter(|vector| vector.iter().any(|value| *value != 0.0));
        let fused = score_fusion(&self.legs(&plan, &plan.query, &plan.expansion, &plan.filter, query_vector.as_deref(), depth)?);
        check_interrupt()?;
        let fused = self.add_question_parts(&plan, fused, depth)?;
        check_interrupt()?;
        let fused = self.prefer_time_span(&plan, fused, query_vector.as_deref(), depth)?;
        check_interrupt()?;
        let fused = self.spread_to_neighbours(&plan, fused)?;
        check_interrupt()?;
        let fused = lift_sessions(&plan, fused)?;
        let fused = self.lend_to_replacements(&plan, fused)?;
        check_interrupt()?;
        let (weighed, more) = self.weigh_by_confidence(&plan, &fused)?;

        let page: Vec<&Weighed> = weighed.iter().skip(plan.offset).take(plan.limit).collect();
        let memories = plan.fetched.take();

        let mut results = Vec::with_capacity(page.len());
        let mut used_tokens = 0;
        let mut truncated = false;
        for candidate in &page {
            let Some(memory) = memories.get(&candidate.key) else { continue };
            let mut hit = render_hit(memory, candidate, plan.detail, &plan.query);
            let mut cost = hit_tokens(&hit);
            if used_tokens + cost > plan.max_tokens {
                if !results.is_empty() {
                    truncated = true;
                    break;
                }
                // The best hit alone is over budget: return it with its text cut to fit, so a
                // small budget still answers rather than returning nothing.
                shrink_to_fit(&mut hit, plan.max_tokens);
                cost = hit_tokens(&hit);
                truncated = true;
            }
            used_tokens += cost;
            results.push(hit);
            if truncated {
                break;
            }
        }

        let end = plan.offset + results.len();
        let now = self.now();
        let degraded = plan
            .stores
            .iter()
            .enumerate()
            .filter(|(index, _)| plan.is_available(*index))
            .filter_map(|(_, entry)| entry.store.degraded().map(|message| DomainNote { domain: entry.domain.to_string(), message }))
            .collect();
        for (index, entry) in plan.stores.iter().enumerate() {
            let ids = page.iter().take(results.len()).filter(|candidate| candidate.key.0 == index).map(|candidate| candidate.key.1.clone());
            self.access.record(&entry.domain, ids, now);
        }
        Ok(RecallPage {
            results,
            next_cursor: (end < weighed.len() || more).then(|| Cursor { offset: end }.encode()),
            mode: if query_vector.is_some() { "hybrid" } else { "text" }.to_owned(),
            truncated,
            estimated_tokens: used_tokens,
            resource_template: RESOURCE_TEMPLATE.to_owned(),
            unavailable: plan
                .unavailable
                .take()
                .into_iter()
                .map(|(index, message)| DomainNote { domain: plan.stores[index].domain.to_string(), message })
                .collect(),
            degraded,
            expanded_with: plan.expansion,
            query_rewrite: plan.query_rewrite,
        })
    }

    /// The weighted legs of a search for `query` (with its `expansion`, and `query_vector`, its
    /// embedding): full text and, with a query vector, vectors, each merged across stores and cut
    /// to `depth`.
    fn legs(
        &self,
        plan: &RecallPlan<'_>,
        query: &str,
        expansion: &[String],
        filter: &SearchFilter,
        query_vector: Option<&[f32]>,
        depth: usize,
    ) -> Result<Vec<FusionList<(usize, MemoryId)>>> {
        let mut text_leg: Vec<(f64, (usize, MemoryId))> = Vec::new();
        let mut vector_leg: Vec<(f64, (usize, MemoryId))> = Vec::new();
        let mut expansion_leg: Vec<(f64, (usize, MemoryId))> = Vec::new();
        let vector_search = query_vector.zip(self.embedder_model());
        let expansion_query = (!expansion.is_empty()).then(|| expansion.join(" "));
        let searched: Vec<(usize, &DomainStore)> = plan.stores.iter().copied().enumerate().filter(|(index, _)| plan.is_available(*index)).collect();
        let search_vectors = |(vector, model): (&[f32], &str)| -> Vec<kenning_core::Result<Vec<ScoredId>>> {
            searched.iter().map(|(_, entry)| entry.store.search_vector(vector, model, filter, depth)).collect()
        };
        std::thread::scope(|scope| -> Result<()> {
            // With a core to spare, the vector legs run on a thread of their own while this one
            // runs the full-text legs: a lone recall takes the longer of the two rather than both.
            let core_to_spare = self.recalls_running.load(Ordering::Relaxed) < crate::cores();
            let beside = vector_search.filter(|_| core_to_spare).map(|search| {
                let interrupt = kenning_core::interrupt::current();
                scope.spawn(move || match interrupt {
                    Some(interrupt) => interrupt.run(|| search_vectors(search)),
                    None => search_vectors(search),
                })
            });
            let mut answered: Vec<usize> = Vec::with_capacity(searched.len());
            for (index, entry) in &searched {
                check_interrupt()?;
                let Some(hits) = plan.answer(*index, entry.store.search_text(query, filter, depth))? else { continue };
                text_leg.extend(hits.into_iter().map(|hit| (hit.score, (*index, hit.id))));
                if let Some(expansion) = &expansion_query {
                    let Some(hits) = plan.answer(*index, entry.store.search_text(expansion, filter, depth))? else { continue };
                    expansion_leg.extend(hits.into_iter().map(|hit| (hit.score, (*index, hit.id))));
                }
                answered.push(*index);
            }
            let Some((vector, model)) = vector_search else { return Ok(()) };
            if let Some(helper) = &beside {
                // Until the vector legs are done, this thread reads the records of the best
                // full-text hits, best first: the recall reads its first candidates' records
                // next, and most of those are among them. It stops as soon as the vector legs
                // are done, so at most one read is wasted, and at a failed read, which the
                // recall's own read of that record meets and reports in its turn.
                let mut best_text: Vec<&(f64, (usize, MemoryId))> = text_leg.iter().collect();
                best_text.sort_by(|a, b| b.0.total_cmp(&a.0));
                for (_, key) in best_text.into_iter().take(plan.first_weighed()) {
                    if helper.is_finished() {
                        break;
                    }
                    // The legs of a question's parts meet records the whole question read.
                    if plan.fetched.borrow().contains_key(key) || plan.read_ahead.borrow().contains_key(key) {
                        continue;
                    }
                    let Ok(found) = plan.stores[key.0].store.get_many(std::slice::from_ref(&key.1)) else { break };
                    plan.read_ahead.borrow_mut().extend(found.into_iter().map(|memory| ((key.0, memory.id.clone()), memory)));
                }
            }
            let mut found_beside = beside.map(|helper| helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            // A store whose full-text leg failed is left out of the vector leg too, as it is
            // left out of the rest of the recall.
            for (position, (index, entry)) in searched.iter().enumerate() {
                if !answered.contains(index) || !plan.is_available(*index) {
                    continue;
                }
                check_interrupt()?;
                let found = match &mut found_beside {
                    Some(found) => std::mem::replace(&mut found[position], Ok(Vec::new())),
                    None => entry.store.search_vector(vector, model, filter, depth),
                };
                let Some(hits) = plan.answer(*index, found)? else { continue };
                vector_leg.extend(hits.into_iter().map(|hit| (hit.score, (*index, hit.id))));
            }
            Ok(())
        })?;
        let text_weight = match (query_vector, &self.embedder) {
            (Some(_), Some(embedder)) => 1.0 - embedder.recall_weight(),
            _ => 1.0,
        };
        // An expansion no memory mentions gives its weight back, so it changes no score.
        let expansion_weight = if expansion_leg.is_empty() { 0.0 } else { EXPANSION_SHARE * text_weight };
        // A memory a full-text leg leaves out shares no word with its query: it scores 0.
        let mut legs = vec![FusionList { weight: text_weight - expansion_weight, hits: ranked(text_leg, depth), unlisted_score: Some(0.0) }];
        if !expansion_leg.is_empty() {
            legs.push(FusionList { weight: expansion_weight, hits: ranked(expansion_leg, depth), unlisted_score: Some(0.0) });
        }
        if query_vector.is_some() {
            legs.push(FusionList { weight: 1.0 - text_weight, hits: ranked(vector_leg, depth), unlisted_score: None });
        }
        Ok(legs)
    }

    /// When the query asks two things or more ([`question_parts`]: "what did we decide about the
    /// auth flow, and why did the first attempt fail"), adds to each memory [`PART_SHARE`] times
    /// its fused score for each part searched alone (its own words and embedding, without the
    /// expansion). The memory answering the part whose words are fewer or rarer then reaches the
    /// first page, where the whole question's scores leave it below lone matches of the other
    /// part. A question that asks one thing costs nothing more.
    ///
    /// When the language model split the query, its parts are whole questions, each answered by
    /// one memory, rather than pieces of the query's wording that lean on the rest: the
    /// [`PART_LEADERS`] best memories of each part also score at least their score for that
    /// part. The best answer to each part then ranks level with the best answer to the whole,
    /// above memories that only repeat the query's words, and a part that went wrong (a fragment
    /// such as "and what fixed it", which finds anything) puts no more than those few on the page.
    fn add_question_parts(&self, plan: &RecallPlan<'_>, fused: Ranking, depth: usize) -> Result<Ranking> {
        let mut ranking = fused;
        let by_model = !plan.model_parts.is_empty();
        let parts = if by_model { plan.model_parts.clone() } else { question_parts(&plan.query) };
        for part in parts {
            check_interrupt()?;
            let part_vector = self.embed_one(&part)?.map(|embedding| embedding.vector).filter(|vector| vector.iter().any(|value| *value != 0.0));
            let mut scores = score_fusion(&self.legs(plan, &part, &[], &plan.filter, part_vector.as_deref(), depth)?);
            let others = scores.split_off(if by_model { scores.len().min(PART_LEADERS) } else { 0 });
            ranking = combine_scores(ranking, scores, |score, part| (score + PART_SHARE * part).max(part));
            ranking = combine_scores(ranking, others, |score, part| score + PART_SHARE * part);
        }
        Ok(ranking)
    }

    /// When the query names a span of time ("last May", "on 13 October, 2023"), adds to the
    /// score of each memory that occurred in it [`TIME_PREFERENCE`] times its relevance among
    /// the memories of that span (the same legs and fusion, restricted to the span). So the
    /// memories of that time come first, the best of them first, and the rest still follow: a
    /// memory is often recalled by the day it was mentioned rather than the day it happened.
    fn prefer_time_span(&self, plan: &RecallPlan<'_>, fused: Ranking, query_vector: Option<&[f32]>, depth: usize) -> Result<Ranking> {
        let Some(reference) = find_time_expression(&plan.query) else { return Ok(fused) };
        let Some(span) = reference.span(Some(plan.now)) else { return Ok(fused) };
        let since = plan.filter.since.map_or(span.start, |since| since.max(span.start));
        let last = span.end - TimeDelta::nanoseconds(1);
        let until = plan.filter.until.map_or(last, |until| until.min(last));
        if since > until {
            return Ok(fused);
        }
        let in_span = SearchFilter { since: Some(since), until: Some(until), ..plan.filter.clone() };
        let preferred: Ranking = score_fusion(&self.legs(plan, &plan.query, &plan.expansion, &in_span, query_vector, depth)?)
            .into_iter()
            .map(|(key, score)| (key, TIME_PREFERENCE * score))
            .collect();
        Ok(add_scores(fused, preferred))
    }

    /// The filters of a recall request as a [`SearchFilter`] of active memories, each checked
    /// with a field error naming it.
    fn recall_filter(&self, request: &RecallRequest) -> Result<SearchFilter, FieldError> {
        for (field, values) in [("kinds", &request.kinds), ("namespaces", &request.namespaces), ("tags", &request.tags)] {
            if values.len() > MAX_FILTER_VALUES {
                return Err(FieldError::new(
                    field,
                    format!("has {} values, more than {MAX_FILTER_VALUES}", values.len()),
                    values.len(),
                    format!("filter by at most {MAX_FILTER_VALUES} {field}; a memory has at most {MAX_TAGS} tags"),
                ));
            }
        }
        let min_confidence = match request.min_confidence {
            Some(value) if !(0.0..=1.0).contains(&value) => {
                return Err(FieldError::new("min_confidence", "must be between 0 and 1", value, "use e.g. min_confidence: 0.5"));
            }
            other => other,
        };
        let filter = SearchFilter {
            kinds: request
                .kinds
                .iter()
                .map(|kind| MemoryKind::parse(kind).map_err(|error| FieldError { field: "kinds".into(), ..error }))
                .collect::<Result<_, _>>()?,
            namespaces: request
                .namespaces
                .iter()
                .map(|namespace| Namespace::parse(namespace).map_err(|error| FieldError { field: "namespaces".into(), ..error }))
                .collect::<Result<_, _>>()?,
            tags: request.tags.iter().map(|tag| tag.trim().to_lowercase()).filter(|tag| !tag.is_empty()).collect(),
            since: request.since.as_deref().map(|text| parse_time("since", text)).transpose()?,
            until: request.until.as_deref().map(|text| parse_time("until", text)).transpose()?,
            min_confidence,
            status: Some(kenning_core::Status::Active),
            branch: match request.branch.as_deref().map(str::trim) {
                Some("") => return Err(FieldError::new("branch", "is empty", "", "name a branch, e.g. `main`, or leave `branch` out")),
                other => other.map(str::to_owned),
            },
            file: request.file.as_deref().map(|file| repository_path("file", file, self.repository_root())).transpose()?,
            session: None,
        };
        if let (Some(since), Some(until)) = (filter.since, filter.until)
            && since > until {
                return Err(FieldError::new("since", "is later than `until`", timestamp(since), "swap the two bounds"));
            }
        Ok(filter)
    }

    /// The memories passing a recall request's filters, without a query, newest first: for
    /// browsing. One domain is listed (the first the request names, else the default), paged
    /// by `cursor` and `limit`; forgotten memories are included when `include_forgotten`.
    pub fn browse(&self, request: RecallRequest, include_forgotten: bool) -> Result<ListingPage> {
        let mut filter = self.recall_filter(&request)?;
        if include_forgotten {
            filter.status = None;
        }
        let limit = request.limit.unwrap_or(DEFAULT_RECALL_LIMIT);
        if !(1..=MAX_RECALL_LIMIT).contains(&limit) {
            return Err(FieldError::new("limit", format!("must be between 1 and {MAX_RECALL_LIMIT}"), limit, "use the cursor to page through more").into());
        }
        let domain = match request.domains.first() {
            Some(text) => self.resolve_domain("domains", text)?.domain.clone(),
            None => self.default_domain().clone(),
        };
        self.list(&domain, &filter, request.cursor.as_deref(), limit)
    }

    fn plan(&self, request: RecallRequest) -> Result<RecallPlan<'_>, FieldError> {
        check_query_length("query", &request.query)?;
        let query = request.query.trim().to_owned();
        if query.is_empty() {
            return Err(FieldError::new(
                "query",
                "is empty",
                request.query,
                "describe what you are looking for, e.g. `database connection pool size`; to browse, read the namespace resources",
            ));
        }
        let limit = request.limit.unwrap_or(DEFAULT_RECALL_LIMIT);
        if !(1..=MAX_RECALL_LIMIT).contains(&limit) {
            return Err(FieldError::new("limit", format!("must be between 1 and {MAX_RECALL_LIMIT}"), limit, "use the cursor to page through more results"));
        }
        let max_tokens = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        if max_tokens < 50 {
            return Err(FieldError::new("max_tokens", "must be at least 50", max_tokens, format!("use the default of {DEFAULT_MAX_TOKENS}, or `detail: light` for more results per token")));
        }
        let detail = request.detail.as_deref().map(Detail::parse).transpose()?.unwrap_or_default();
        let offset = request.cursor.as_deref().map(Cursor::decode).transpose()?.map_or(0, |cursor| cursor.offset);
        if offset >= MAX_CANDIDATES {
            return Err(FieldError::new(
                "cursor",
                format!("points past the deepest page recall reaches ({MAX_CANDIDATES} results)"),
                request.cursor.unwrap_or_default(),
                "pass the `next_cursor` of the previous page unchanged, or narrow the query with filters",
            ));
        }
        let now = match request.as_of.as_deref() {
            Some(text) => parse_time("as_of", text)?,
            None => self.now(),
        };
        let mut filter = self.recall_filter(&request)?;
        // Recall weighs the confidence assessed now; the stores only know the stated one.
        let min_confidence = filter.min_confidence.take();
        let stores = if request.domains.is_empty() {
            self.domains.iter().collect()
        } else {
            let mut stores: Vec<&DomainStore> = Vec::new();
            for text in &request.domains {
                let entry = self.resolve_domain("domains", text)?;
                if !stores.iter().any(|known| known.domain == entry.domain) {
                    stores.push(entry);
                }
            }
            stores
        };
        let (expansion, model_parts, query_rewrite) = self.expand(&query);
        let past = asks_about_the_past(&query, Some(now));
        Ok(RecallPlan {
            query,
            offset,
            limit,
            max_tokens,
            detail,
            filter,
            past,
            now,
            expansion,
            model_parts,
            query_rewrite,
            min_confidence,
            include_dormant: request.include_dormant,
            stores,
            unavailable: RefCell::default(),
            fetched: RefCell::default(),
            read_ahead: RefCell::default(),
        })
    }

    /// The query's expansion (the vocabulary's synonyms, and with query rewriting on and a model
    /// configured, the model's terms) and, with query decomposition on, the questions the model
    /// split it into; with a note of what the model did. A failed request leaves the synonyms and
    /// the split by rule ([`question_parts`]), and says why.
    fn expand(&self, query: &str) -> (Vec<String>, Vec<String>, Option<String>) {
        let mut terms = self.vocabulary.expand(query);
        let ask = self.rewrite;
        let Some(model) = self.llm().filter(|_| ask.terms || ask.parts) else { return (terms, Vec::new(), None) };
        let fallback = match (ask.terms, ask.parts) {
            (true, true) => "synonyms and parts by rule only",
            (true, false) => "synonyms only",
            _ => "parts by rule only",
        };
        let (parts, note) = match model.complete(&rewrite_request(query, ask)) {
            Ok(completion) => match parse_rewrite(query, &completion.text, ask) {
                Some(Rewrite { terms: rewritten, parts }) => {
                    let mut said = Vec::new();
                    if ask.terms {
                        said.push(format!("added {} term(s)", rewritten.len()));
                    }
                    if ask.parts {
                        said.push(match parts.len() {
                            0 => "kept the query whole".to_owned(),
                            count => format!("split the query into {count} parts: {}", parts.iter().map(|part| format!("\"{part}\"")).collect::<Vec<_>>().join("; ")),
                        });
                    }
                    for term in rewritten {
                        if !terms.contains(&term) && terms.len() < MAX_EXPANSION_TERMS {
                            terms.push(term);
                        }
                    }
                    (parts, format!("{} {}", model.name(), said.join(" and ")))
                }
                None => (Vec::new(), format!("{} answered without the lists asked for; {fallback}", model.name())),
            },
            Err(error) => (Vec::new(), format!("failed ({error}); {fallback}")),
        };
        (terms, parts, Some(note))
    }

    /// Gives the memories captured just before and after each of the best hits, in the hit's
    /// session and by another author, a share of that hit's score on top of their own, and ranks
    /// again. A hit of no known session or author lends nothing. A memory between two hits gets
    /// the larger of their shares, not both: with both, a middling match between two good ones
    /// could outrank the best of them.
    fn spread_to_neighbours(&self, plan: &RecallPlan<'_>, fused: Ranking) -> Result<Ranking> {
        let sources: Vec<&((usize, MemoryId), f64)> = fused.iter().take(NEIGHBOUR_SOURCES).collect();
        // The records confidence weighing reads first are read with these, in one call.
        fetch(plan, fused.iter().take(NEIGHBOUR_SOURCES.max(plan.first_weighed())).map(|(key, _)| key))?;
        // The hits of one store and session have their neighbours looked up in one call: for a
        // store on a server each call is a round trip, and the best hits often share a session.
        let mut by_session: Vec<((usize, String), Vec<(&(usize, MemoryId), f64)>)> = Vec::new();
        {
            let fetched = plan.fetched.borrow();
            for (key, score) in sources {
                let Some(session) = fetched.get(key).filter(|memory| memory.author.is_some()).and_then(session_of) else { continue };
                let group = (key.0, session.to_owned());
                match by_session.iter_mut().find(|(known, _)| *known == group) {
                    Some((_, hits)) => hits.push((key, *score)),
                    None => by_session.push((group, vec![(key, *score)])),
                }
            }
        }
        let mut lenders: Vec<(&(usize, MemoryId), f64, Vec<MemoryId>)> = Vec::new();
        for ((index, session), hits) in by_session {
            if !plan.is_available(index) {
                continue;
            }
            let in_session = SearchFilter { session: Some(session), ..plan.filter.clone() };
            let ids: Vec<MemoryId> = hits.iter().map(|((_, id), _)| id.clone()).collect();
            let store = &plan.stores[index].store;
            let Some(neighbours) = plan.answer(index, store.neighbours(&ids, &in_session, NEIGHBOUR_WINDOW))? else { continue };
            for ((key, score), neighbours) in hits.into_iter().zip(neighbours) {
                lenders.push((key, score, neighbours));
            }
        }
        // The neighbours' records, for their authors, in one read; most are candidates whose
        // records confidence weighing reads anyway.
        let neighbour_keys: Vec<(usize, MemoryId)> =
            lenders.iter().flat_map(|((index, _), _, neighbours)| neighbours.iter().map(|neighbour| (*index, neighbour.clone()))).collect();
        fetch(plan, neighbour_keys.iter())?;
        let fetched = plan.fetched.borrow();
        let mut shares: HashMap<(usize, MemoryId), f64> = HashMap::new();
        for (key, score, neighbours) in lenders {
            let Some(hit) = fetched.get(key) else { continue };
            for neighbour in neighbours {
                let neighbour = (key.0, neighbour);
                if !fetched.get(&neighbour).is_some_and(|memory| by_another_author(hit, memory)) {
                    continue;
                }
                let share = shares.entry(neighbour).or_default();
                *share = share.max(NEIGHBOUR_SHARE * score);
            }
        }
        drop(fetched);
        let mut shares: Vec<((usize, MemoryId), f64)> = shares.into_iter().collect();
        // In id order, so that equal scores rank the same way every time.
        shares.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(add_scores(fused, shares))
    }

    /// Gives the memory that replaced a well-ranked one (its `superseded-by` link), when it is
    /// a candidate too, at least that one's score, unless the query asks about the past: a newer statement of a changed fact
    /// often does not repeat the words the question shares with the older one ("we replaced
    /// flake8 with ruff" after "we lint Python code with flake8"), and it is the answer now.
    fn lend_to_replacements(&self, plan: &RecallPlan<'_>, fused: Ranking) -> Result<Ranking> {
        if plan.past {
            return Ok(fused);
        }
        let mut lent: HashMap<(usize, MemoryId), f64> = HashMap::new();
        {
            let fetched = plan.fetched.borrow();
            for (key, score) in fused.iter().take(NEIGHBOUR_SOURCES) {
                let Some(memory) = fetched.get(key) else { continue };
                for link in memory.links.iter().filter(|link| link.relation == SUPERSEDED_BY) {
                    let Some(index) = plan.stores.iter().position(|entry| entry.domain == link.target.domain) else { continue };
                    let share = lent.entry((index, link.target.id.clone())).or_default();
                    *share = share.max(*score);
                }
            }
        }
        if lent.is_empty() {
            return Ok(fused);
        }
        // Only to a replacement among the candidates: those passed the recall's filters.
        let mut ranking: Ranking = fused
            .into_iter()
            .map(|(key, score)| {
                let score = lent.get(&key).map_or(score, |share| score.max(*share));
                (key, score)
            })
            .collect();
        ranking.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(ranking)
    }

    /// Multiplies each candidate's relevance by its confidence's [`ranking_factor`] (and by
    /// [`SUPERSEDED_SHARE`] for a memory a newer one superseded, or for a question about the
    /// past the memory that superseded it) and ranks again, leaving out dormant memories (unless asked for) and those under `min_confidence`.
    /// Only as many records are read as the requested page needs: a factor is at most 1, so
    /// once the page's last weighed score is at least the next candidate's unweighed relevance,
    /// nothing further down can enter the page. Returns the weighed candidates, best first, and
    /// whether candidates were left unread.
    fn weigh_by_confidence(&self, plan: &RecallPlan<'_>, fused: &Ranking) -> Result<(Vec<Weighed>, bool)> {
        let needed = plan.offset + plan.limit;
        let batch = needed.max(CONFIDENCE_BATCH);
        let now = self.now();
        let mut weighed: Vec<Weighed> = Vec::with_capacity(needed + batch);
        let mut next = 0;
        debug_assert!(fused.windows(2).all(|pair| pair[0].1 >= pair[1].1), "the fused ranking is not sorted best first");
        while next < fused.len() {
            if weighed.len() >= needed {
                weighed.sort_by(|a, b| b.score.total_cmp(&a.score));
                if page_is_settled(fused[next].1, weighed[needed - 1].score, MOST_WEIGHT) {
                    break;
                }
            }
            let candidates = &fused[next..(next + batch).min(fused.len())];
            fetch(plan, candidates.iter().map(|(key, _)| key))?;
            let fetched = plan.fetched.borrow();
            // For a question about the past, the memories that replaced one read so far.
            let replacements: HashSet<String> = if plan.past {
                fetched.values().flat_map(|memory| memory.links.iter().filter(|link| link.relation == SUPERSEDED_BY).map(|link| link.target.to_string())).collect()
            } else {
                HashSet::new()
            };
            for (key, relevance) in candidates {
                let Some(memory) = fetched.get(key) else { continue };
                let assessment = assess(memory, now, &self.decay);
                if (assessment.dormant && !plan.include_dormant) || plan.min_confidence.is_some_and(|least| assessment.confidence < least) {
                    continue;
                }
                // A hit that is also the neighbour of others, or in the time span the query
                // names, can score above 1: it ranks by that, though it shows no more than 1.
                let superseded = match plan.past {
                    false if is_superseded(memory) => SUPERSEDED_SHARE,
                    true if replacements.contains(&memory.urn().to_string()) => SUPERSEDED_SHARE,
                    _ => 1.0,
                };
                let weight = ranking_factor(assessment.confidence) * superseded;
                debug_assert!((0.0..=MOST_WEIGHT).contains(&weight), "a weight of {weight} is outside [0, {MOST_WEIGHT}]");
                let score = relevance * weight;
                weighed.push(Weighed { key: key.clone(), relevance: *relevance, score, assessment });
            }
            next += candidates.len();
            check_interrupt()?;
        }
        weighed.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok((weighed, next < fused.len()))
    }
}

/// Adds to each of the first [`SESSION_POOL`] candidates [`SESSION_SHARE`] times the best
/// score among the other candidates of that pool in its session, and ranks again. A candidate of
/// no known session, or alone in its session, gains nothing; the rest of the ranking is untouched,
/// so every page sees the same order.
fn lift_sessions(plan: &RecallPlan<'_>, fused: Ranking) -> Result<Ranking> {
    let pool = fused.len().min(SESSION_POOL);
    fetch(plan, fused[..pool].iter().map(|(key, _)| key))?;
    let sessions: Vec<Option<(usize, String)>> = {
        let fetched = plan.fetched.borrow();
        fused[..pool].iter().map(|(key, _)| fetched.get(key).and_then(session_of).map(|session| (key.0, session.to_owned()))).collect()
    };
    // The two best scores of each session in the pool: a candidate's best other is the best,
    // or the second best when it is the best itself.
    let mut best_two: HashMap<&(usize, String), (usize, f64, f64)> = HashMap::new();
    for (position, session) in sessions.iter().enumerate() {
        let Some(session) = session else { continue };
        let score = fused[position].1;
        // The ranking is sorted, so a session's first candidate is its best.
        let entry = best_two.entry(session).or_insert((position, score, 0.0));
        if entry.0 != position {
            entry.2 = entry.2.max(score);
        }
    }
    let mut ranking = fused;
    let mut lifted = false;
    for (position, session) in sessions.iter().enumerate() {
        let Some((best_position, best, second)) = session.as_ref().and_then(|session| best_two.get(session)) else { continue };
        let other = if *best_position == position { *second } else { *best };
        ranking[position].1 += SESSION_SHARE * other;
        lifted |= other > 0.0;
    }
    if lifted {
        ranking.sort_by(|a, b| b.1.total_cmp(&a.1));
    }
    Ok(ranking)
}

/// Whether both memories name their author and the authors differ: whether `reply` can answer
/// or complete `said` in a conversation, rather than being its author's next statement.
fn by_another_author(said: &Memory, reply: &Memory) -> bool {
    matches!((&said.author, &reply.author), (Some(first), Some(second)) if first != second)
}

/// The largest weight [`MemoryService::weigh_by_confidence`] gives a candidate's relevance.
const MOST_WEIGHT: f64 = 1.0;

/// Whether a page whose last weighed score is `last_in_page` is settled: no candidate whose
/// relevance is at most `next_relevance` can reach above it when no weight exceeds `most_weight`.
fn page_is_settled(next_relevance: f64, last_in_page: f64, most_weight: f64) -> bool {
    next_relevance * most_weight <= last_in_page
}

/// How many candidates [`MemoryService::weigh_by_confidence`] reads at least at a time.
const CONFIDENCE_BATCH: usize = 10;

/// A recall candidate with its relevance weighed by its confidence.
struct Weighed {
    key: (usize, MemoryId),
    relevance: f64,
    /// Relevance times the confidence's ranking factor (halved again for a superseded memory):
    /// what the results are ordered by.
    score: f64,
    assessment: Assessment,
}

/// Adds `extra` scores to a ranking (appending what it lacks) and ranks again. The sort is
/// stable, so equal scores keep the ranking's order, then `extra`'s.
fn add_scores(ranking: Ranking, extra: Ranking) -> Ranking {
    combine_scores(ranking, extra, |score, extra| score + extra)
}

/// Each memory's score combined with its score in `extra` (0 where either lacks it), ranked again.
fn combine_scores(ranking: Ranking, extra: Ranking, combine: impl Fn(f64, f64) -> f64) -> Ranking {
    if extra.is_empty() {
        return ranking;
    }
    let mut extra_scores: HashMap<(usize, MemoryId), f64> = HashMap::with_capacity(extra.len());
    let mut newcomers = Vec::new();
    for (key, score) in extra {
        if extra_scores.insert(key.clone(), score).is_none() {
            newcomers.push(key);
        }
    }
    let mut combined: Ranking = ranking
        .into_iter()
        .map(|(key, score)| {
            let extra = extra_scores.remove(&key).unwrap_or_default();
            (key, combine(score, extra))
        })
        .collect();
    combined.extend(newcomers.into_iter().filter_map(|key| extra_scores.remove(&key).map(|score| (key, combine(0.0, score)))));
    combined.sort_by(|a, b| b.1.total_cmp(&a.1));
    combined
}

/// Memories (by store index and id) with scores, best first.
type Ranking = Vec<((usize, MemoryId), f64)>;

/// Merges one leg's hits from several stores into a single ranking by score.
fn ranked(mut hits: Vec<(f64, (usize, MemoryId))>, depth: usize) -> Ranking {
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    hits.into_iter().take(depth).map(|(score, key)| (key, score)).collect()
}

/// Reads the records of `keys` not read yet in this recall into `plan.fetched`, taking those
/// read ahead from `plan.read_ahead`.
fn fetch<'k>(plan: &RecallPlan<'_>, keys: impl Iterator<Item = &'k (usize, MemoryId)>) -> Result<()> {
    let mut by_store: HashMap<usize, Vec<MemoryId>> = HashMap::new();
    {
        let mut fetched = plan.fetched.borrow_mut();
        let mut read_ahead = plan.read_ahead.borrow_mut();
        for key in keys {
            if fetched.contains_key(key) {
                continue;
            }
            match read_ahead.remove(key) {
                Some(memory) => {
                    fetched.insert(key.clone(), memory);
                }
                None => by_store.entry(key.0).or_default().push(key.1.clone()),
            }
        }
    }
    for (index, ids) in by_store {
        let Some(found) = plan.answer(index, plan.stores[index].store.get_many(&ids))? else { continue };
        let mut fetched = plan.fetched.borrow_mut();
        for memory in found {
            fetched.insert((index, memory.id.clone()), memory);
        }
    }
    Ok(())
}

fn render_hit(memory: &Memory, candidate: &Weighed, detail: Detail, query: &str) -> RecallHit {
    let full = detail == Detail::Full;
    let round = |value: f64| (value * 1000.0).round() / 1000.0;
    RecallHit {
        urn: memory.urn().to_string(),
        title: memory.title.clone(),
        domain: memory.domain.to_string(),
        namespace: memory.namespace.to_string(),
        kind: memory.kind.to_string(),
        tags: memory.tags.clone(),
        score: round(candidate.score.min(1.0)),
        relevance: round(candidate.relevance.min(1.0)),
        confidence: round(candidate.assessment.confidence),
        dormant: candidate.assessment.dormant,
        occurred_at: timestamp(memory.occurred_at()),
        snippet: (!full).then(|| snippet(&memory.content, query, SNIPPET_CHARS)),
        content: full.then(|| memory.content.clone()),
        source: full.then(|| memory.source.to_string()),
        metadata: (full && !memory.metadata.is_empty()).then(|| memory.metadata.clone()),
        links: (full && !memory.links.is_empty()).then(|| {
            memory.links.iter().map(|link| LinkView { target: link.target.to_string(), relation: link.relation.clone() }).collect()
        }),
    }
}

fn hit_tokens(hit: &RecallHit) -> usize {
    estimate_tokens(&serde_json::to_string(hit).expect("hits serialise"))
}

/// Cuts the hit's text so the whole hit fits in `max_tokens`, marking the cut with an ellipsis.
fn shrink_to_fit(hit: &mut RecallHit, max_tokens: usize) {
    let overhead = hit_tokens(&RecallHit { content: None, snippet: None, ..hit.clone() });
    let text = hit.content.as_mut().or(hit.snippet.as_mut()).expect("a hit has content or a snippet");
    let keep_chars = max_tokens.saturating_sub(overhead + 2) * 4;
    if text.chars().count() > keep_chars {
        *text = text.chars().take(keep_chars).collect::<String>() + "…";
    }
}

#[cfg(test)]
mod tests {
    use super::page_is_settled;

    /// The best `needed` of `relevances` (sorted best first) weighed by `weights`, read in
    /// batches that stop as `weigh_by_confidence` does once the page is settled.
    fn paged(relevances: &[f64], weights: &[f64], needed: usize, batch: usize, most_weight: f64) -> Vec<usize> {
        let mut weighed: Vec<(usize, f64)> = Vec::new();
        let mut next = 0;
        while next < relevances.len() {
            if weighed.len() >= needed {
                weighed.sort_by(|a, b| b.1.total_cmp(&a.1));
                if page_is_settled(relevances[next], weighed[needed - 1].1, most_weight) {
                    break;
                }
            }
            let end = (next + batch).min(relevances.len());
            weighed.extend((next..end).map(|index| (index, relevances[index] * weights[index])));
            next = end;
        }
        weighed.sort_by(|a, b| b.1.total_cmp(&a.1));
        weighed.into_iter().take(needed).map(|(index, _)| index).collect()
    }

    fn every_candidate(relevances: &[f64], weights: &[f64], needed: usize) -> Vec<usize> {
        paged(relevances, weights, needed, relevances.len(), f64::INFINITY)
    }

    /// A signal that boosts (weights up to 3) keeps paging exact once the bound is raised to
    /// match; with the bound left at 1, the same data loses hits, which is what the bound is for.
    #[test]
    fn a_boosting_weight_keeps_paging_exact_when_the_bound_says_so() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut random = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut wrong_with_bound_one = 0;
        for _ in 0..500 {
            let mut relevances: Vec<f64> = (0..40).map(|_| random()).collect();
            relevances.sort_by(|a, b| b.total_cmp(a));
            let weights: Vec<f64> = (0..40).map(|_| 3.0 * random()).collect();
            let needed = 1 + (random() * 12.0) as usize;
            let exact = every_candidate(&relevances, &weights, needed);
            assert_eq!(paged(&relevances, &weights, needed, 10, 3.0), exact);
            wrong_with_bound_one += usize::from(paged(&relevances, &weights, needed, 10, 1.0) != exact);
        }
        assert!(wrong_with_bound_one > 0, "the data never tested the bound");
    }

    #[test]
    fn weights_at_most_one_page_exactly_with_the_bound_of_one() {
        let relevances = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01, 0.0];
        let weights = [0.2, 1.0, 0.5, 1.0, 0.9, 1.0, 0.1, 1.0, 1.0, 0.7, 1.0, 0.3];
        for needed in 1..relevances.len() {
            assert_eq!(paged(&relevances, &weights, needed, 2, 1.0), every_candidate(&relevances, &weights, needed), "{needed}");
        }
    }
}
