//! Consolidation runs: a domain's episodic memories grouped by meaning, each group written up
//! as one semantic principle linked `derived-from` to its episodes, every run recorded in the
//! domain's working state and reversible.
//!
//! The grouping and the extractive principle are the core's ([`kenning_core::consolidation`]).
//! A group keeps only episodes that agree: one that another member contradicts by the
//! contradiction rules is left out of it, and an episode a newer memory superseded is not
//! consolidated at all.
//! With a language model the principle's text is the model's; when the model fails or answers
//! out of shape, the extractive principle stands in and the run says so ([`LlmUseView`]).
//!
//! A run is safe against a crash midway. Before it writes anything its record is saved as
//! `running` with the whole plan: the URN each principle will have (ids are chosen up front) and
//! the URN of every episode it will mark. A rollback undoes what the record names and skips what
//! never came to be (a principle not stored, an episode not marked by this run), so a run that
//! stopped anywhere is rolled back like a completed one. The record is saved once more at the
//! end, `completed` or `failed`, naming what was actually done; two saves per run, whatever its
//! size. Episodes are marked in their metadata
//! ([`CONSOLIDATED_INTO_KEY`], [`CONSOLIDATION_RUN_KEY`]), which keeps later runs from grouping
//! them again; a rollback removes the marks its run made, and no other.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, Utc};
use kenning_core::consolidation::{
    Cluster, ClusterParams, EpisodeText, Principle, cluster, extractive_principle, nearest_episodes, parse_principle, principle_request,
};
use kenning_core::contradiction::{Reading, detect_read, is_superseded};
use kenning_core::input::{apply_update, build_memory};
use kenning_core::llm::LlmUse;
use kenning_core::relation;
use kenning_core::state::{StateKind, StateRecord, StateStore};
use kenning_core::{
    CaptureInput, FieldError, Inserted, LinkInput, Memory, MemoryId, MemoryKind, MemoryUrn, MemoryVersion, Namespace, SearchFilter, Status,
    UpdateInput,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, check_interrupt};
use crate::ids::new_memory_id;
use crate::redaction::redact;
use crate::service::{CAS_ATTEMPTS, DomainStore, MemoryService, backoff};
use crate::views::{LlmUseView, timestamp};

/// Metadata key on a consolidated episode: the URN of the principle drawn from it.
pub const CONSOLIDATED_INTO_KEY: &str = "consolidated_into";
/// Metadata key on a consolidated episode and on a principle: the run that wrote it.
pub const CONSOLIDATION_RUN_KEY: &str = "consolidation_run";
/// Metadata key on a principle: `extractive` or `model`.
pub const CONSOLIDATION_METHOD_KEY: &str = "consolidation_method";
/// Run ids are this prefix and a ULID.
pub const RUN_ID_PREFIX: &str = "cr_";
/// How many episodes a run looks at unless told otherwise (the newest ones not yet consolidated).
pub const DEFAULT_EPISODES: usize = 10_000;
/// The most episodes one run looks at: each is embedded and held in memory with its vector
/// while the run groups them.
pub const MAX_EPISODES: usize = 100_000;
/// How many clusters are checked for members that disagree between two progress reports.
const AGREEING_STEP: usize = 16;
/// The namespace of a principle whose episodes come from several namespaces.
pub const MIXED_NAMESPACE: &str = "learnings";
/// How many of an episode's nearest episodes clustering looks through for a cluster to join.
pub const CLUSTER_NEIGHBOURS: usize = 32;
/// The rule that writes a principle without a model, as responses name it.
pub const EXTRACTIVE_FALLBACK: &str = "extractive summary: each principle quotes its cluster's most representative sentences";
/// The most runs a listing looks through per domain.
const MAX_LISTED_RUNS: usize = 1000;
/// Episodes are listed a page at a time, each as large as what is still wanted within these
/// bounds: a page deeper in the listing costs a skip over the rows before it, so a few large
/// pages cost far less than many small ones, and each page is one progress report.
const LIST_PAGE: usize = 500;
const LIST_PAGE_MOST: usize = 10_000;
const EMBED_BATCH: usize = 64;

/// What to consolidate and how; every field is optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsolidateRequest {
    /// The domain whose episodes are consolidated; default the first configured one.
    pub domain: Option<String>,
    /// Only episodes of this namespace.
    pub namespace: Option<String>,
    pub min_cluster_size: Option<usize>,
    pub similarity_threshold: Option<f64>,
    /// The most episodes to look at, newest first; default [`DEFAULT_EPISODES`], at most [`MAX_EPISODES`].
    pub limit: Option<usize>,
    /// Plan only: group and show, write nothing, record no run.
    pub dry_run: bool,
}

/// Which part of a run is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading the episodes not yet consolidated, up to the run's limit.
    Listing,
    Embedding,
    /// Finding each episode's nearest episodes.
    Neighbours,
    Clustering,
    /// Leaving out of each cluster the episodes its members contradict.
    Agreeing,
    Writing,
}

/// How far a run has got, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub stage: Stage,
    pub done: usize,
    pub total: usize,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (verb, noun) = match self.stage {
            Stage::Listing => ("listed", "episodes"),
            Stage::Embedding => ("embedded", "episodes"),
            Stage::Neighbours => ("compared", "episodes with their nearest"),
            Stage::Clustering => ("clustered", "episodes"),
            Stage::Agreeing => ("checked", "clusters for episodes that disagree"),
            Stage::Writing => ("wrote", "principles"),
        };
        write!(f, "{verb} {} of {} {noun}", thousands(self.done), thousands(self.total))
    }
}

/// `3400` as `3,400`.
fn thousands(value: usize) -> String {
    let digits = value.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

/// The parameters a run used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunParameters {
    pub similarity_threshold: f64,
    pub min_cluster_size: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub limit: usize,
}

/// One group of episodes and the principle written (or, in a dry run, to be written) from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// The principle's namespace: the episodes' own if they share one, else `learnings`.
    pub namespace: String,
    pub title: String,
    /// The episodes' URNs, most central first.
    pub episodes: Vec<String>,
    /// The episodes' mean cosine similarity to their centroid.
    pub cohesion: f64,
    /// The principle's URN (absent in a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principle: Option<String>,
}

/// A consolidation run, as recorded in the domain's working state and returned to callers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationRun {
    /// `cr_…`; absent in a dry run, which records nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub domain: String,
    /// running, completed, failed, rolled_back, or dry_run.
    pub status: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back_at: Option<String>,
    pub parameters: RunParameters,
    pub episodes_evaluated: usize,
    pub clusters_found: usize,
    pub principles_extracted: usize,
    /// URNs of the principles the run created.
    pub created: Vec<String>,
    /// URNs of the episodes the run marked as consolidated.
    pub changed: Vec<String>,
    pub clusters: Vec<ClusterView>,
    /// Whether a language model wrote the principles; absent when one is configured but had
    /// nothing to write (no cluster, or a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmUseView>,
    /// Why a failed run stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Run status names.
pub mod status {
    pub const RUNNING: &str = "running";
    pub const COMPLETED: &str = "completed";
    pub const FAILED: &str = "failed";
    pub const ROLLED_BACK: &str = "rolled_back";
    pub const DRY_RUN: &str = "dry_run";
}

fn encode(run: &ConsolidationRun, revision: u64, now: DateTime<Utc>) -> Result<StateRecord> {
    Ok(StateRecord {
        kind: StateKind::ConsolidationRun,
        id: run.run_id.clone().unwrap_or_default(),
        revision,
        updated_at: now,
        body: serde_json::to_string(run).map_err(|error| Error::Storage(format!("consolidation run JSON: {error}")))?,
        subjects: Vec::new(),
    })
}

pub(crate) fn decode(record: &StateRecord) -> Result<ConsolidationRun> {
    serde_json::from_str(&record.body)
        .map_err(|error| Error::Storage(format!("stored consolidation run {} does not read: {error}", record.id)))
}

fn check_run_id<'a>(field: &str, text: &'a str) -> Result<&'a str> {
    let id = text.trim();
    let valid = id.starts_with(RUN_ID_PREFIX) && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(id)
    } else {
        Err(FieldError::new(field, "is not a consolidation run id", text, "pass the `cr_…` runId a run returned; `kenning consolidate --list` lists them").into())
    }
}

/// The clusters with only episodes that agree: a principle states what its episodes share, so
/// an episode that a member captured before it contradicts (by the rules of
/// [`kenning_core::contradiction::detect`]: another value of the same setting, the opposite
/// sense, a change of what the member states) leaves the group and stays as it is. A cluster
/// left with fewer than `min_size` episodes is dropped; each one kept comes with its plan.
///
/// Clusters are checked apart from one another, so the machine's cores share them: each core
/// takes the next cluster not yet taken (a large cluster costs far more than a small one, so
/// fixed shares would leave a core idle), this thread among them, reporting progress every
/// [`AGREEING_STEP`] clusters; the kept ones come back in their order.
fn agreeing(episodes: &[Memory], clusters: Vec<Cluster>, min_size: usize, progress: &mut dyn FnMut(&Progress)) -> Result<Vec<(Cluster, ClusterView)>> {
    let total = clusters.len();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let next = AtomicUsize::new(0);
    let take = |checked: &mut Vec<(usize, Option<(Cluster, ClusterView)>)>| {
        let at = next.fetch_add(1, Ordering::Relaxed);
        let cluster = clusters.get(at)?;
        let kept = agreeing_members(episodes, cluster, min_size).map(|kept| {
            let view = plan(episodes, &kept);
            (kept, view)
        });
        checked.push((at, kept));
        Some(at)
    };
    let (mine, theirs) = std::thread::scope(|scope| {
        let spawned: Vec<_> = (1..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut checked = Vec::new();
                    while take(&mut checked).is_some() {}
                    checked
                })
            })
            .collect();
        let mut mine = Vec::new();
        let mut outcome = Ok(());
        let mut reported = 0;
        while let Some(at) = take(&mut mine) {
            if let Err(error) = check_interrupt() {
                // The other cores find nothing left to take and stop.
                next.store(total, Ordering::Relaxed);
                outcome = Err(error);
                break;
            }
            // The clusters taken so far, by every core.
            if at + 1 >= reported + AGREEING_STEP && at + 1 < total {
                reported = at + 1;
                progress(&Progress { stage: Stage::Agreeing, done: reported, total });
            }
        }
        let theirs: Vec<Vec<(usize, Option<(Cluster, ClusterView)>)>> = spawned.into_iter().map(|worker| worker.join().expect("the contradiction rules do not panic")).collect();
        (outcome.map(|()| mine), theirs)
    });
    let mut checked = mine?;
    checked.extend(theirs.into_iter().flatten());
    checked.sort_unstable_by_key(|(at, _)| *at);
    progress(&Progress { stage: Stage::Agreeing, done: total, total });
    Ok(checked.into_iter().filter_map(|(_, kept)| kept).collect())
}

/// One cluster with only the members that agree (see [`agreeing`]), or `None` when fewer than
/// `min_size` are left.
fn agreeing_members(episodes: &[Memory], cluster: &Cluster, min_size: usize) -> Option<Cluster> {
    // Each member is read once and compared with every member kept before it.
    let readings: Vec<Reading<'_>> = cluster.members.iter().map(|&member| Reading::new(&episodes[member].content)).collect();
    // Positions in the cluster of the members kept so far.
    let mut kept: Vec<usize> = Vec::with_capacity(cluster.members.len());
    for (at, &member) in cluster.members.iter().enumerate() {
        let conflicts = kept.iter().any(|&other_at| {
            let other = cluster.members[other_at];
            let (older, newer) = if episodes[other].created_at <= episodes[member].created_at { (other_at, at) } else { (at, other_at) };
            detect_read(&readings[older], &readings[newer], None).is_some()
        });
        if !conflicts {
            kept.push(at);
        }
    }
    (kept.len() >= min_size).then(|| Cluster {
        members: kept.iter().map(|&at| cluster.members[at]).collect(),
        centrality: kept.iter().map(|&at| cluster.centrality[at]).collect(),
    })
}

/// Groups the episodes (see [`cluster`]), each compared with the clusters of its nearest
/// episodes among those of the run ([`nearest_episodes`]).
fn cluster_episodes(vectors: &[Vec<f32>], params: &ClusterParams, progress: &mut dyn FnMut(&Progress)) -> Result<Vec<Cluster>> {
    let mut neighbours = nearest_episodes(vectors, CLUSTER_NEIGHBOURS, &mut |done, total| {
        progress(&Progress { stage: Stage::Neighbours, done, total });
        !kenning_core::interrupt::interrupted()
    })
    .ok_or(Error::Interrupted)?;
    // `cluster` asks for each episode's neighbours once.
    let mut near = |position: usize| neighbours[position].take();
    cluster(vectors, params, &mut near, &mut |done, total| {
        progress(&Progress { stage: Stage::Clustering, done, total });
        !kenning_core::interrupt::interrupted()
    })
    .ok_or(Error::Interrupted)
}

/// The metadata edit of one episode, as a versioned change, or `None` when it changes nothing.
fn edit_metadata(
    current: &Memory,
    reason: &str,
    now: DateTime<Utc>,
    edit: impl Fn(&mut BTreeMap<String, String>),
) -> Result<Option<(Memory, MemoryVersion)>, FieldError> {
    let mut metadata = current.metadata.clone();
    edit(&mut metadata);
    if metadata == current.metadata {
        return Ok(None);
    }
    apply_update(current, UpdateInput { reason: reason.to_owned(), metadata: Some(metadata), ..UpdateInput::default() }, now).map(Some)
}

impl MemoryService {
    fn state_of<'a>(&self, entry: &'a DomainStore) -> Result<&'a dyn StateStore> {
        entry.store.state().ok_or_else(|| {
            Error::Invalid(FieldError::new(
                "domain",
                "is kept in a store that cannot record consolidation runs",
                entry.domain.to_string(),
                "use a domain kept in SQLite, git notes or PostgreSQL (`kenning status` lists them)",
            ))
        })
    }

    /// Groups the domain's active episodic memories that no run has consolidated yet and writes
    /// one semantic principle per group, recording the run (see the module's documentation).
    /// `progress` hears how far the run has got. A dry run groups and returns the plan, and
    /// writes nothing.
    pub fn consolidate(&self, request: ConsolidateRequest, progress: &mut dyn FnMut(&Progress)) -> Result<ConsolidationRun> {
        let params = ClusterParams::new(request.similarity_threshold, request.min_cluster_size)?;
        let namespace = request.namespace.as_deref().map(str::trim).filter(|text| !text.is_empty()).map(Namespace::parse).transpose()?;
        let limit = match request.limit {
            None => DEFAULT_EPISODES,
            Some(limit) if (1..=MAX_EPISODES).contains(&limit) => limit,
            Some(limit) => {
                return Err(FieldError::new(
                    "limit",
                    format!("must be between 1 and {}", thousands(MAX_EPISODES)),
                    limit,
                    format!("omit it to look at the newest {} episodes", thousands(DEFAULT_EPISODES)),
                )
                .into());
            }
        };
        let entry = match request.domain.as_deref() {
            Some(text) => self.resolve_domain("domain", text)?,
            None => &self.domain_stores()[0],
        };
        let state = if request.dry_run { None } else { Some(self.state_of(entry)?) };
        if self.embedder.is_none() {
            return Err(FieldError::new(
                "embedder",
                "is not configured: consolidation groups episodes by the similarity of their vectors",
                "none",
                "configure an embedding model in kenning.toml (the built-in one is the default)",
            )
            .into());
        }
        let started = self.now();
        let episodes = self.unconsolidated_episodes(entry, namespace.as_ref(), limit, progress)?;
        let vectors = self.episode_vectors(&episodes, progress)?;
        let clusters = cluster_episodes(&vectors, &params, progress)?;
        let (clusters, views): (Vec<Cluster>, Vec<ClusterView>) = agreeing(&episodes, clusters, params.min_cluster_size, progress)?.into_iter().unzip();
        let mut run = ConsolidationRun {
            run_id: None,
            domain: entry.domain.to_string(),
            status: status::RUNNING.to_owned(),
            started_at: timestamp(started),
            finished_at: None,
            rolled_back_at: None,
            parameters: RunParameters {
                similarity_threshold: params.similarity_threshold,
                min_cluster_size: params.min_cluster_size,
                namespace: namespace.as_ref().map(|namespace| namespace.to_string()),
                limit,
            },
            episodes_evaluated: episodes.len(),
            clusters_found: clusters.len(),
            principles_extracted: 0,
            created: Vec::new(),
            changed: Vec::new(),
            clusters: views,
            llm: self.llm().is_none().then(|| LlmUseView::from(&LlmUse::NotConfigured { fallback: EXTRACTIVE_FALLBACK.to_owned() })),
            error: None,
            warnings: Vec::new(),
        };
        let Some(state) = state else {
            run.status = status::DRY_RUN.to_owned();
            return Ok(run);
        };
        run.run_id = Some(format!("{RUN_ID_PREFIX}{}", new_memory_id(started)));
        // The plan, saved before the first write: the principles' URNs and every episode to mark.
        let ids: Vec<MemoryId> =
            clusters.iter().map(|_| MemoryId::parse(&new_memory_id(started)).expect("generated ids are valid")).collect();
        for (view, id) in run.clusters.iter_mut().zip(&ids) {
            view.principle = Some(MemoryUrn::new(entry.domain.clone(), Namespace::parse(&view.namespace)?, id.clone()).to_string());
        }
        run.created = run.clusters.iter().filter_map(|view| view.principle.clone()).collect();
        run.changed = run.clusters.iter().flat_map(|view| view.episodes.iter().cloned()).collect();
        state.put_state(&encode(&run, 1, started)?)?;
        // From here on the run's lists say what was done, for the closing save.
        run.created.clear();
        run.changed.clear();
        let outcome = self.write_principles(entry, &mut run, &episodes, &clusters, ids, progress);
        run.finished_at = Some(timestamp(self.now()));
        match outcome {
            Ok(()) => {
                run.status = status::COMPLETED.to_owned();
                state.put_state(&encode(&run, 2, self.now())?)?;
                Ok(run)
            }
            Err(error) => {
                run.status = status::FAILED.to_owned();
                run.error = Some(error.to_string());
                // The error that stopped the run is the one to report; a record that cannot
                // be saved as failed stays `running` with its plan, which a rollback undoes alike.
                if let Err(record_error) = encode(&run, 2, self.now()).and_then(|record| Ok(state.put_state(&record)?)) {
                    tracing::warn!(run = ?run.run_id, %record_error, "could not record a consolidation run as failed");
                }
                Err(error)
            }
        }
    }

    /// The newest `limit` active episodic memories of the domain (one namespace, if given) not
    /// yet consolidated, oldest first.
    fn unconsolidated_episodes(
        &self,
        entry: &DomainStore,
        namespace: Option<&Namespace>,
        limit: usize,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Vec<Memory>> {
        let filter = SearchFilter {
            kinds: vec![MemoryKind::Episodic],
            namespaces: namespace.cloned().into_iter().collect(),
            status: Some(Status::Active),
            ..SearchFilter::default()
        };
        let mut found = Vec::new();
        let mut offset = 0;
        loop {
            check_interrupt()?;
            let room = limit - found.len();
            let asked = room.clamp(LIST_PAGE, LIST_PAGE_MOST);
            let page = entry.store.list(&filter, offset, asked)?;
            let read = page.len();
            offset += read;
            // A fact a newer memory replaced is history: no principle is drawn from it.
            found.extend(page.into_iter().filter(|memory| !memory.metadata.contains_key(CONSOLIDATED_INTO_KEY) && !is_superseded(memory)).take(room));
            progress(&Progress { stage: Stage::Listing, done: found.len(), total: limit });
            if found.len() >= limit || read < asked {
                break;
            }
        }
        found.reverse();
        Ok(found)
    }

    /// The current model's vector of each episode, embedded afresh so that every vector comes
    /// from one model.
    fn episode_vectors(&self, episodes: &[Memory], progress: &mut dyn FnMut(&Progress)) -> Result<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(episodes.len());
        for batch in episodes.chunks(EMBED_BATCH) {
            check_interrupt()?;
            for embedding in self.embed_memories(batch)? {
                vectors.push(embedding.map(|embedding| embedding.vector).unwrap_or_default());
            }
            progress(&Progress { stage: Stage::Embedding, done: vectors.len(), total: episodes.len() });
        }
        Ok(vectors)
    }

    /// Writes each cluster's principle under the id planned for it and marks its episodes,
    /// adding to the run's lists what it did.
    fn write_principles(
        &self,
        entry: &DomainStore,
        run: &mut ConsolidationRun,
        episodes: &[Memory],
        clusters: &[Cluster],
        ids: Vec<MemoryId>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<()> {
        let run_id = run.run_id.clone().unwrap_or_default();
        let reason = format!("consolidated by run {run_id}");
        let mut answered = 0;
        let mut failures: Vec<String> = Vec::new();
        for ((number, group), id) in clusters.iter().enumerate().zip(ids) {
            check_interrupt()?;
            let members: Vec<&Memory> = group.members.iter().map(|&position| &episodes[position]).collect();
            let texts: Vec<EpisodeText<'_>> =
                members.iter().map(|memory| EpisodeText { title: &memory.title, content: &memory.content }).collect();
            let (principle, by_model) = match self.llm() {
                None => (extractive_principle(&texts), false),
                Some(llm) => match llm.complete(&principle_request(&texts)).map_err(|error| error.to_string()).and_then(|answer| parse_principle(&answer.text)) {
                    Ok(principle) => {
                        answered += 1;
                        (principle, true)
                    }
                    Err(error) => {
                        failures.push(error);
                        (extractive_principle(&texts), false)
                    }
                },
            };
            let namespace = Namespace::parse(&run.clusters[number].namespace)?;
            let principle_urn = match self.store_principle(entry, id.clone(), &namespace, principle, by_model, &members, &run_id)? {
                Inserted::Created => {
                    run.principles_extracted += 1;
                    let urn = MemoryUrn::new(entry.domain.clone(), namespace, id).to_string();
                    run.created.push(urn.clone());
                    urn
                }
                Inserted::Duplicate(existing) => {
                    let existing = MemoryUrn::new(entry.domain.clone(), namespace, existing).to_string();
                    run.warnings.push(format!("the principle of cluster {} already exists as {existing}; its episodes point to it", number + 1));
                    existing
                }
            };
            run.clusters[number].principle = Some(principle_urn.clone());
            for source in members.iter().map(|memory| memory.urn().to_string()) {
                let marked = self.change("urn", &source, |current, now| {
                    edit_metadata(current, &reason, now, |metadata| {
                        if !metadata.contains_key(CONSOLIDATED_INTO_KEY) {
                            metadata.insert(CONSOLIDATED_INTO_KEY.to_owned(), principle_urn.clone());
                            metadata.insert(CONSOLIDATION_RUN_KEY.to_owned(), run_id.clone());
                        }
                    })
                });
                match marked {
                    Ok(outcome) if outcome.changed => run.changed.push(source),
                    Ok(_) => run.warnings.push(format!("{source} was consolidated by another run meanwhile and is left as it is")),
                    Err(Error::Invalid(error)) => run.warnings.push(format!("{source} could not be marked as consolidated: {error}")),
                    Err(error) => return Err(error),
                }
            }
            progress(&Progress { stage: Stage::Writing, done: number + 1, total: clusters.len() });
        }
        if let Some(llm) = self.llm() {
            if let Some(first) = failures.first() {
                run.llm = Some(LlmUseView::from(&LlmUse::Failed {
                    error: format!("{first} ({} of {} principles)", failures.len(), clusters.len()),
                    fallback: EXTRACTIVE_FALLBACK.to_owned(),
                }));
            } else if answered > 0 {
                run.llm = Some(LlmUseView::from(&LlmUse::Used { model: llm.name() }));
            }
        }
        Ok(())
    }

    /// Stores one principle under the id already recorded for it.
    #[allow(clippy::too_many_arguments)]
    fn store_principle(
        &self,
        entry: &DomainStore,
        id: MemoryId,
        namespace: &Namespace,
        principle: Principle,
        by_model: bool,
        members: &[&Memory],
        run_id: &str,
    ) -> Result<Inserted> {
        let metadata = [
            (CONSOLIDATION_RUN_KEY.to_owned(), run_id.to_owned()),
            (CONSOLIDATION_METHOD_KEY.to_owned(), if by_model { "model" } else { "extractive" }.to_owned()),
        ];
        let mut input = CaptureInput {
            content: principle.content,
            title: Some(principle.title),
            kind: Some(MemoryKind::Semantic.as_str().to_owned()),
            namespace: Some(namespace.to_string()),
            tags: vec!["consolidated".to_owned()],
            source: Some(if by_model { "model-generated" } else { "inference" }.to_owned()),
            links: members
                .iter()
                .map(|memory| LinkInput { target: memory.urn().to_string(), relation: Some(relation::DERIVED_FROM.to_owned()) })
                .collect(),
            metadata: metadata.into_iter().collect(),
            ..CaptureInput::default()
        };
        // A model's text may repeat a secret an episode held before redaction existed, or make one up.
        redact(&mut input);
        let memory = build_memory(self.authored(input), entry.domain.clone(), id, self.now())?;
        let embedding = self.embed_memories(std::slice::from_ref(&memory))?.pop().flatten();
        let mut inserted = entry.store.insert(&[(memory, embedding)])?;
        Ok(inserted.pop().unwrap_or(Inserted::Created))
    }

    /// Finds a recorded run in any domain that keeps working state.
    fn find_run(&self, field: &str, id: &str) -> Result<(&dyn StateStore, StateRecord)> {
        for entry in self.domain_stores() {
            if let Some(state) = entry.store.state() {
                if let Some(record) = state.get_state(StateKind::ConsolidationRun, id)? {
                    return Ok((state, record));
                }
            }
        }
        Err(FieldError::new(field, "names no consolidation run in any configured domain", id, "`kenning consolidate --list` lists the runs").into())
    }

    /// One recorded run by id.
    pub fn consolidation_run(&self, run_id: &str) -> Result<ConsolidationRun> {
        let id = check_run_id("run_id", run_id)?;
        decode(&self.find_run("run_id", id)?.1)
    }

    /// Undoes a run: the principles it created are forgotten with a reason naming the run, and
    /// the marks it left on episodes are removed, so that the next run groups them again. The
    /// run becomes `rolled_back`. A run rolled back already, or unknown, is refused.
    pub fn rollback_consolidation(&self, run_id: &str) -> Result<ConsolidationRun> {
        let id = check_run_id("rollback", run_id)?;
        let reason = format!("rolled back consolidation run {id}");
        for attempt in 0..CAS_ATTEMPTS {
            check_interrupt()?;
            let (state, record) = self.find_run("rollback", id)?;
            let mut run = decode(&record)?;
            if run.status == status::ROLLED_BACK {
                return Err(FieldError::new(
                    "rollback",
                    format!("names a run that was already rolled back (at {})", run.rolled_back_at.as_deref().unwrap_or("an unknown time")),
                    id,
                    "nothing is left to undo; `kenning consolidate --list` shows each run's status",
                )
                .into());
            }
            // Undoing is idempotent: a forgotten principle stays forgotten and a removed mark
            // stays removed, so a retry after a lost race repeats it harmlessly.
            for urn in &run.created {
                match self.forget(urn, &reason) {
                    Ok(_) | Err(Error::NotFound { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            for urn in &run.changed {
                let unmarked = self.change("urn", urn, |current, now| {
                    edit_metadata(current, &reason, now, |metadata| {
                        if metadata.get(CONSOLIDATION_RUN_KEY).map(String::as_str) == Some(id) {
                            metadata.remove(CONSOLIDATED_INTO_KEY);
                            metadata.remove(CONSOLIDATION_RUN_KEY);
                        }
                    })
                });
                match unmarked {
                    Ok(_) | Err(Error::NotFound { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            let now = self.now();
            run.status = status::ROLLED_BACK.to_owned();
            run.rolled_back_at = Some(timestamp(now));
            match state.put_state(&encode(&run, record.revision + 1, now)?) {
                Ok(()) => return Ok(run),
                Err(kenning_core::Error::Conflict { .. }) => backoff(attempt),
                Err(error) => return Err(error.into()),
            }
        }
        Err(Error::Busy { target: id.to_owned() })
    }

    /// Recorded runs of every domain (or the one named), newest first, at most `limit`.
    pub fn consolidation_runs(&self, domain: Option<&str>, limit: usize) -> Result<Vec<ConsolidationRun>> {
        let entries: Vec<&DomainStore> = match domain {
            Some(text) => vec![self.resolve_domain("domain", text)?],
            None => self.domain_stores().iter().collect(),
        };
        let mut runs = Vec::new();
        for entry in entries {
            if let Some(state) = entry.store.state() {
                for record in state.list_state(StateKind::ConsolidationRun, 0, MAX_LISTED_RUNS)? {
                    runs.push(decode(&record)?);
                }
            }
        }
        // Run ids are ULIDs after the prefix, so they sort by start time across domains.
        runs.sort_by(|a, b| b.run_id.cmp(&a.run_id));
        runs.truncate(limit);
        Ok(runs)
    }
}

/// The plan for one cluster: its namespace, the extractive title, its episodes.
fn plan(episodes: &[Memory], group: &Cluster) -> ClusterView {
    let members: Vec<&Memory> = group.members.iter().map(|&position| &episodes[position]).collect();
    let first = &members[0].namespace;
    let namespace = if members.iter().all(|memory| &memory.namespace == first) { first.to_string() } else { MIXED_NAMESPACE.to_owned() };
    let texts: Vec<EpisodeText<'_>> = members.iter().map(|memory| EpisodeText { title: &memory.title, content: &memory.content }).collect();
    ClusterView {
        namespace,
        title: extractive_principle(&texts).title,
        episodes: members.iter().map(|memory| memory.urn().to_string()).collect(),
        cohesion: (group.cohesion() * 1000.0).round() / 1000.0,
        principle: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_a_sentence_with_grouped_digits() {
        assert_eq!(Progress { stage: Stage::Clustering, done: 1200, total: 3400 }.to_string(), "clustered 1,200 of 3,400 episodes");
        assert_eq!(Progress { stage: Stage::Embedding, done: 64, total: 1_234_567 }.to_string(), "embedded 64 of 1,234,567 episodes");
        assert_eq!(Progress { stage: Stage::Writing, done: 0, total: 3 }.to_string(), "wrote 0 of 3 principles");
        assert_eq!(
            Progress { stage: Stage::Neighbours, done: 50_000, total: 100_000 }.to_string(),
            "compared 50,000 of 100,000 episodes with their nearest"
        );
        assert_eq!(Progress { stage: Stage::Listing, done: 10_000, total: 100_000 }.to_string(), "listed 10,000 of 100,000 episodes");
        assert_eq!(Progress { stage: Stage::Agreeing, done: 256, total: 1864 }.to_string(), "checked 256 of 1,864 clusters for episodes that disagree");
    }

    #[test]
    fn clusters_checked_on_several_cores_come_back_as_checked_one_by_one_in_their_order() {
        let texts = [
            "The staging deploy uses port 8080.",
            "The staging deploy uses port 9090.",
            "The staging deploy uses port 8080 behind the proxy.",
            "The nightly job retries 3 times.",
            "The nightly job retries 5 times.",
            "The nightly job retries 3 times before it pages.",
        ];
        let now = Utc::now();
        let episodes: Vec<Memory> = texts
            .iter()
            .enumerate()
            .map(|(at, text)| {
                let input = CaptureInput { content: (*text).to_owned(), ..CaptureInput::default() };
                let id = MemoryId::parse(&new_memory_id(now)).unwrap();
                kenning_core::input::build_memory(input, kenning_core::Domain::User, id, now + chrono::TimeDelta::seconds(at as i64)).unwrap()
            })
            .collect();
        // Enough clusters for every core to take many; each holds three episodes from one
        // topic or the other, in turn.
        let clusters: Vec<Cluster> = (0..AGREEING_STEP * 20 + 3)
            .map(|at| {
                let first = if at % 2 == 0 { 0 } else { 3 };
                Cluster { members: vec![first, first + 1, first + 2], centrality: vec![0.9, 0.8, 0.7 + at as f64 * 1e-4] }
            })
            .collect();
        let one_by_one: Vec<Cluster> = clusters.iter().filter_map(|cluster| agreeing_members(&episodes, cluster, 2)).collect();
        assert_eq!(one_by_one.len(), clusters.len(), "each cluster keeps two of its three");
        assert!(one_by_one.iter().all(|cluster| cluster.members.len() == 2), "the episode of another value leaves: {:?}", one_by_one[..2].to_vec());
        let mut heard = Vec::new();
        let kept: Vec<(Cluster, ClusterView)> = agreeing(&episodes, clusters.clone(), 2, &mut |progress| heard.push(progress.done)).unwrap();
        assert!(kept.iter().all(|(cluster, view)| view.episodes.len() == cluster.members.len()), "each kept cluster comes with its plan");
        assert_eq!(kept.into_iter().map(|(cluster, _)| cluster).collect::<Vec<_>>(), one_by_one);
        assert!(heard.len() >= 2 && heard.windows(2).all(|pair| pair[0] < pair[1]), "{heard:?}");
        assert_eq!(heard.last(), Some(&clusters.len()));
        assert!(agreeing(&episodes, clusters, 3, &mut |_| ()).unwrap().is_empty());
    }

    #[test]
    fn run_ids_are_checked() {
        assert!(check_run_id("rollback", " cr_01jabc ").is_ok());
        for bad in ["", "wf_01", "cr_../x", "cr_a b"] {
            let Err(Error::Invalid(error)) = check_run_id("rollback", bad) else { panic!("{bad} was accepted") };
            assert_eq!(error.field, "rollback");
        }
    }
}
