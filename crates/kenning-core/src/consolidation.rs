//! Consolidation: many episodic memories about one thing become one semantic principle.
//!
//! Three pure steps, which the engine runs over a domain's episodes and records as a run:
//!
//! - [`cluster`] groups vectors by cosine similarity, greedily by centroid: episodes are taken in
//!   the order given (the engine gives capture order, oldest first), and each joins the open
//!   cluster whose centroid (the mean of its members' vectors) is most similar to it, if that
//!   similarity reaches the threshold and the cluster has fewer than [`MAX_CLUSTER_SIZE`]
//!   members; otherwise it opens a cluster of its own. Ties go to the cluster opened first.
//!   A second sweep then merges each cluster into the earlier one whose centroid is most
//!   similar to its own, by the same threshold and cap, so that an episode that came before
//!   its topic's cluster formed is not left alone. Clusters smaller than the minimum size are
//!   dropped: their episodes stay as they are. The rule is deterministic (the same vectors in
//!   the same order give the same clusters). An episode (and in the sweep a cluster) is
//!   compared only with the clusters holding one of its nearest episodes, which the caller
//!   finds (the engine with [`nearest_episodes`], among the episodes themselves), rather than
//!   with every cluster: a centroid similar enough to join has its members near the episode, so
//!   this finds what comparing every pair would unless every member of that cluster is farther
//!   than all of the episode's neighbours (`kenning-bench consolidation` measures the difference).
//! - [`extractive_principle`] writes a principle from a cluster without a language model: its
//!   title is the most central episode's, its content the members' sentences that carry most of
//!   the words the cluster shares, with those shared terms; it says that it is extractive.
//! - [`principle_request`] and [`parse_principle`] are the prompt a language model gets for a
//!   cluster and the strict reading of its answer, for the engine to fall back on the extractive
//!   principle when the answer does not read.

mod nearest;

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::error::FieldError;
use crate::input::{MAX_CONTENT_BYTES, MAX_LINKS, MAX_TITLE_CHARS};
use crate::llm::{CompletionRequest, Message};

pub use nearest::nearest_episodes;

/// How similar (cosine) an episode must be to a cluster's centroid to join it, as seed 001 sets it.
const DEFAULT_SIMILARITY_THRESHOLD: f64 = 0.80;
/// The fewest episodes that make a principle, as seed 001 sets it.
const DEFAULT_MIN_CLUSTER_SIZE: usize = 3;
/// The most episodes one principle is drawn from: a principle links each of its sources, and a
/// memory holds at most [`MAX_LINKS`] links. A larger group of alike episodes fills one cluster
/// and goes on in the next.
const MAX_CLUSTER_SIZE: usize = MAX_LINKS;
/// How many episodes [`cluster`] takes between two reports of its progress.
const PROGRESS_STEP: usize = 100;

/// The most sentences an extractive principle quotes.
const EXTRACT_SENTENCES: usize = 3;
/// The most shared terms an extractive principle names.
const SHARED_TERMS: usize = 6;
/// The longest sentence quoted whole; a longer one is cut at a word boundary.
const MAX_SENTENCE_CHARS: usize = 300;
/// How much of each episode a prompt carries.
const PROMPT_EPISODE_CHARS: usize = 600;
/// The longest principle accepted from a model, in bytes.
const MAX_MODEL_PRINCIPLE_BYTES: usize = 4000;

/// How episodes are grouped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClusterParams {
    pub similarity_threshold: f64,
    pub min_cluster_size: usize,
}

impl Default for ClusterParams {
    fn default() -> Self {
        ClusterParams { similarity_threshold: DEFAULT_SIMILARITY_THRESHOLD, min_cluster_size: DEFAULT_MIN_CLUSTER_SIZE }
    }
}

impl ClusterParams {
    /// Checks a caller's choices; an absent one takes its default.
    pub fn new(similarity_threshold: Option<f64>, min_cluster_size: Option<usize>) -> Result<ClusterParams, FieldError> {
        let similarity_threshold = similarity_threshold.unwrap_or(DEFAULT_SIMILARITY_THRESHOLD);
        if !(similarity_threshold.is_finite() && similarity_threshold > 0.0 && similarity_threshold <= 1.0) {
            return Err(FieldError::new(
                "similarity_threshold",
                "must be a number above 0 and at most 1",
                similarity_threshold,
                "omit it for 0.80; a higher threshold makes tighter clusters",
            ));
        }
        let min_cluster_size = min_cluster_size.unwrap_or(DEFAULT_MIN_CLUSTER_SIZE);
        if !(2..=MAX_CLUSTER_SIZE).contains(&min_cluster_size) {
            return Err(FieldError::new(
                "min_cluster_size",
                format!("must be between 2 and {MAX_CLUSTER_SIZE}"),
                min_cluster_size,
                "omit it for 3 episodes per principle",
            ));
        }
        Ok(ClusterParams { similarity_threshold, min_cluster_size })
    }
}

/// One group of alike episodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// Positions in the input, most central first (ties by position).
    pub members: Vec<usize>,
    /// Each member's cosine similarity to the cluster's centroid, in the order of `members`.
    pub centrality: Vec<f64>,
}

impl Cluster {
    /// The members' mean similarity to their centroid: how tight the cluster is.
    pub fn cohesion(&self) -> f64 {
        if self.centrality.is_empty() { 0.0 } else { self.centrality.iter().sum::<f64>() / self.centrality.len() as f64 }
    }
}

/// A cluster while episodes are still joining: the sum of its members' vectors (the centroid's
/// direction) and that sum's length.
struct Open {
    sum: Vec<f64>,
    norm: f64,
    members: Vec<usize>,
    /// Holds an episode that cannot be found among neighbours, so every episode is compared with it.
    unfindable: bool,
}

fn norm(vector: &[f32]) -> f64 {
    vector.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt()
}

/// Cosine similarity of a vector (of length `length`) with a centroid direction; 0 when either is zero.
fn cosine_to(vector: &[f32], length: f64, sum: &[f64], sum_norm: f64) -> f64 {
    if length == 0.0 || sum_norm == 0.0 {
        return 0.0;
    }
    let dot: f64 = vector.iter().zip(sum).map(|(x, y)| f64::from(*x) * y).sum();
    dot / (length * sum_norm)
}

/// Groups `vectors` by the rule in the module's documentation. `near` names, for an episode,
/// the episodes nearest it (positions in `vectors`, in any order, itself included or not):
/// the episode is compared only with the clusters holding one of them, so that the work grows
/// with the number of episodes times the cost of finding neighbours, not with its square. It
/// answers `None` for an episode that cannot be found among neighbours (one without a stored
/// vector, say): such an episode is compared with every cluster, and every cluster it joins
/// with every later episode. `progress` is told how many episodes have been placed, of how
/// many, every [`PROGRESS_STEP`] and at the end; when it answers `false` the clustering stops
/// and `None` is returned. Vectors of another length than the first never join its clusters.
pub fn cluster(
    vectors: &[Vec<f32>],
    params: &ClusterParams,
    near: &mut dyn FnMut(usize) -> Option<Vec<usize>>,
    progress: &mut dyn FnMut(usize, usize) -> bool,
) -> Option<Vec<Cluster>> {
    let total = vectors.len();
    let lengths: Vec<f64> = vectors.iter().map(|vector| norm(vector)).collect();
    let mut open: Vec<Open> = Vec::new();
    let mut neighbours: Vec<Option<Vec<usize>>> = Vec::with_capacity(total);
    // The open cluster of each episode placed so far.
    let mut home: Vec<usize> = Vec::with_capacity(total);
    for (position, vector) in vectors.iter().enumerate() {
        if position > 0 && position % PROGRESS_STEP == 0 && !progress(position, total) {
            return None;
        }
        let found = near(position);
        let candidates = candidate_clusters(found.as_deref(), &home, &open);
        let mut best: Option<(usize, f64)> = None;
        for index in candidates {
            let candidate = &open[index];
            if candidate.members.len() >= MAX_CLUSTER_SIZE || candidate.sum.len() != vector.len() {
                continue;
            }
            let similarity = cosine_to(vector, lengths[position], &candidate.sum, candidate.norm);
            if similarity >= params.similarity_threshold && best.is_none_or(|(_, top)| similarity > top) {
                best = Some((index, similarity));
            }
        }
        match best {
            Some((index, _)) => {
                let joined = &mut open[index];
                for (sum, x) in joined.sum.iter_mut().zip(vector) {
                    *sum += f64::from(*x) / lengths[position];
                }
                joined.norm = joined.sum.iter().map(|x| x * x).sum::<f64>().sqrt();
                joined.members.push(position);
                joined.unfindable |= found.is_none();
                home.push(index);
            }
            None => {
                // Each member counts with unit length, so that a long vector does not pull the centroid.
                let sum: Vec<f64> =
                    vector.iter().map(|x| if lengths[position] == 0.0 { 0.0 } else { f64::from(*x) / lengths[position] }).collect();
                let norm = sum.iter().map(|x| x * x).sum::<f64>().sqrt();
                home.push(open.len());
                open.push(Open { sum, norm, members: vec![position], unfindable: found.is_none() });
            }
        }
        neighbours.push(found);
    }
    if !progress(total, total) {
        return None;
    }
    let open = merge_close_clusters(open, &neighbours, params.similarity_threshold);
    Some(
        open.into_iter()
            .filter(|candidate| candidate.members.len() >= params.min_cluster_size)
            .map(|candidate| {
                let mut ranked: Vec<(usize, f64)> = candidate
                    .members
                    .iter()
                    .map(|&member| (member, cosine_to(&vectors[member], lengths[member], &candidate.sum, candidate.norm)))
                    .collect();
                ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                Cluster { members: ranked.iter().map(|(member, _)| *member).collect(), centrality: ranked.iter().map(|(_, c)| *c).collect() }
            })
            .collect(),
    )
}

/// The clusters (indices into `clusters`, ascending, so that ties go to the one opened first)
/// an episode is compared with: those `home` places its neighbours in, and those holding an
/// episode that cannot be found among neighbours; every cluster for such an episode itself.
/// Neighbours not placed yet (later episodes) have no cluster.
fn candidate_clusters(found: Option<&[usize]>, home: &[usize], clusters: &[Open]) -> Vec<usize> {
    let Some(found) = found else { return (0..clusters.len()).collect() };
    let mut candidates: Vec<usize> = found.iter().filter_map(|neighbour| home.get(*neighbour).copied()).collect();
    candidates.extend(clusters.iter().enumerate().filter(|(_, cluster)| cluster.unfindable).map(|(index, _)| index));
    candidates.sort_unstable();
    candidates.dedup();
    candidates
}

/// The second sweep of [`cluster`]: each cluster, in the order they were opened, joins the
/// earlier one whose centroid is most similar to its own, if that similarity reaches the
/// threshold and the two fit in [`MAX_CLUSTER_SIZE`]. The first pass compares an episode with
/// a cluster of one by their two vectors alone; this lets an episode that came too early for
/// the cluster that grew later (or two halves of one topic) come together by their centroids.
/// A cluster is compared with the earlier ones holding a neighbour of one of its members, as
/// in the first pass.
fn merge_close_clusters(open: Vec<Open>, neighbours: &[Option<Vec<usize>>], threshold: f64) -> Vec<Open> {
    let mut kept: Vec<Open> = Vec::with_capacity(open.len());
    // The kept cluster of each episode whose cluster was swept so far.
    let mut home: Vec<Option<usize>> = vec![None; neighbours.len()];
    for candidate in open {
        let earlier: Vec<usize> = if candidate.unfindable {
            (0..kept.len()).collect()
        } else {
            let mut earlier: Vec<usize> = candidate
                .members
                .iter()
                .flat_map(|member| neighbours[*member].iter().flatten())
                .filter_map(|neighbour| home.get(*neighbour).copied().flatten())
                .collect();
            earlier.extend(kept.iter().enumerate().filter(|(_, cluster)| cluster.unfindable).map(|(index, _)| index));
            earlier.sort_unstable();
            earlier.dedup();
            earlier
        };
        let mut best: Option<(usize, f64)> = None;
        for index in earlier {
            let earlier = &kept[index];
            if earlier.members.len() + candidate.members.len() > MAX_CLUSTER_SIZE
                || earlier.sum.len() != candidate.sum.len()
                || earlier.norm == 0.0
                || candidate.norm == 0.0
            {
                continue;
            }
            let dot: f64 = earlier.sum.iter().zip(&candidate.sum).map(|(x, y)| x * y).sum();
            let similarity = dot / (earlier.norm * candidate.norm);
            if similarity >= threshold && best.is_none_or(|(_, top)| similarity > top) {
                best = Some((index, similarity));
            }
        }
        match best {
            Some((index, _)) => {
                let target = &mut kept[index];
                for (sum, x) in target.sum.iter_mut().zip(&candidate.sum) {
                    *sum += x;
                }
                target.norm = target.sum.iter().map(|x| x * x).sum::<f64>().sqrt();
                target.unfindable |= candidate.unfindable;
                for member in &candidate.members {
                    home[*member] = Some(index);
                }
                target.members.extend(candidate.members);
            }
            None => {
                for member in &candidate.members {
                    home[*member] = Some(kept.len());
                }
                kept.push(candidate);
            }
        }
    }
    kept
}

/// An episode's text, as a principle is written from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpisodeText<'a> {
    pub title: &'a str,
    pub content: &'a str,
}

/// A principle's text, before it becomes a memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principle {
    pub title: String,
    pub content: String,
}

/// Words of narration that say nothing of what an episode is about, beyond the stop words of
/// [`crate::decision::similarity::words`].
const NARRATION_WORDS: &[&str] = &[
    "was", "were", "has", "have", "had", "been", "again", "another", "today", "also", "but", "there", "they", "when",
    "which", "what", "after", "before", "did", "does",
];

/// The words that say what an episode is about: content words of three characters or more,
/// numbers and narration left out.
fn terms(text: &str) -> BTreeSet<String> {
    crate::decision::similarity::words(text)
        .into_iter()
        .filter(|word| word.chars().count() >= 3 && !word.chars().all(|c| c.is_ascii_digit()) && !NARRATION_WORDS.contains(&word.as_str()))
        .collect()
}

/// The sentences of a text: split after `.`, `!` or `?` followed by a space, and at line breaks;
/// list markers and headings' hashes are dropped.
fn sentences(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim().trim_start_matches(['-', '*', '#', '>']).trim();
        let mut start = 0;
        let bytes = line.as_bytes();
        for (at, byte) in bytes.iter().enumerate() {
            let ends = matches!(byte, b'.' | b'!' | b'?') && bytes.get(at + 1).is_none_or(|next| *next == b' ');
            if ends {
                found.push(line[start..=at].trim().to_owned());
                start = at + 1;
            }
        }
        if start < line.len() {
            found.push(line[start..].trim().to_owned());
        }
    }
    found.retain(|sentence| sentence.split_whitespace().count() >= 3);
    found
}

/// `text` cut to at most `max` characters at a word boundary, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max.saturating_sub(1)).collect();
    let head = match head.rfind(' ') {
        Some(space) if space > head.len() / 2 => head[..space].to_owned(),
        _ => head,
    };
    format!("{}…", head.trim_end())
}

/// The terms most of a cluster's episodes share: those in at least half of them (and at least
/// two), most widely shared first, then alphabetically.
fn shared_terms(episodes: &[EpisodeText<'_>]) -> (BTreeMap<String, usize>, Vec<String>) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for episode in episodes {
        for term in terms(&format!("{}\n{}", episode.title, episode.content)) {
            *counts.entry(term).or_default() += 1;
        }
    }
    let floor = episodes.len().div_ceil(2).max(2);
    let mut shared: Vec<(&String, &usize)> = counts.iter().filter(|(_, count)| **count >= floor).collect();
    shared.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let shared = shared.into_iter().take(SHARED_TERMS).map(|(term, _)| term.clone()).collect();
    (counts, shared)
}

/// The principle of a cluster without a language model. `episodes` are the cluster's members,
/// most central first. The title is the most central episode's, prefixed with how many episodes
/// it stands for. The content quotes up to three sentences, at most one per episode, chosen by
/// how many of the cluster's episodes share their words (a sentence's score is the mean share of
/// its terms; ties go to the more central episode, then to the earlier sentence), in that order,
/// and names the shared terms.
pub fn extractive_principle(episodes: &[EpisodeText<'_>]) -> Principle {
    let count = episodes.len();
    let (df, shared) = shared_terms(episodes);
    let mut scored: Vec<(f64, usize, usize, String)> = Vec::new();
    for (rank, episode) in episodes.iter().enumerate() {
        for (order, sentence) in sentences(episode.content).into_iter().enumerate() {
            let words = terms(&sentence);
            if words.is_empty() {
                continue;
            }
            let share: f64 = words.iter().map(|word| df.get(word).copied().unwrap_or(0) as f64 / count.max(1) as f64).sum::<f64>()
                / (words.len() as f64).sqrt();
            scored.push((share, rank, order, sentence));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut quoted: Vec<String> = Vec::new();
    let mut used_episodes = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (_, rank, _, sentence) in scored {
        if quoted.len() == EXTRACT_SENTENCES {
            break;
        }
        let key = sentence.to_lowercase();
        if used_episodes.contains(&rank) || !seen.insert(key) {
            continue;
        }
        used_episodes.insert(rank);
        quoted.push(cut(&sentence, MAX_SENTENCE_CHARS));
    }
    if quoted.is_empty() {
        if let Some(central) = episodes.first() {
            quoted.push(cut(central.content.trim(), MAX_SENTENCE_CHARS));
        }
    }
    let central_title = episodes.first().map_or("", |episode| episode.title.trim());
    let title = cut(&format!("Recurring in {count} episodes: {central_title}"), MAX_TITLE_CHARS);
    let mut content = format!("Extractive summary of {count} related episodes (their most representative sentences, quoted):\n");
    for sentence in &quoted {
        content.push_str(&format!("- {sentence}\n"));
    }
    if !shared.is_empty() {
        content.push_str(&format!("\nShared terms: {}.", shared.join(", ")));
    }
    Principle { title, content: content.trim_end().to_owned() }
}

/// The request that asks a language model for a cluster's principle. `episodes` are the
/// cluster's members, most central first; each is cut to a few hundred characters.
pub fn principle_request(episodes: &[EpisodeText<'_>]) -> CompletionRequest {
    let mut prompt = format!(
        "Here are {} related episodes from a software project's memory, most representative first.\n\n",
        episodes.len()
    );
    for (number, episode) in episodes.iter().enumerate() {
        prompt.push_str(&format!(
            "Episode {}: {}\n{}\n\n",
            number + 1,
            cut(episode.title.trim(), MAX_TITLE_CHARS),
            cut(episode.content.trim(), PROMPT_EPISODE_CHARS)
        ));
    }
    prompt.push_str(
        "State the one general principle they support, as a lasting lesson for future work on this project. \
Answer with a JSON object and nothing else: {\"title\": \"<at most 120 characters>\", \"principle\": \"<one to four sentences>\"}.",
    );
    CompletionRequest {
        system: Some(
            "You consolidate a coding agent's episodic memories into durable semantic principles. \
Use only what the episodes say; do not invent facts, names or numbers."
                .to_owned(),
        ),
        messages: vec![Message::user(prompt)],
        max_tokens: 400,
        temperature: Some(0.0),
        json: true,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelPrinciple {
    title: String,
    principle: String,
}

/// Reads a model's answer to [`principle_request`]: a JSON object with exactly a non-empty
/// `title` (at most 200 characters) and a non-empty `principle` (at most 4,000 bytes), and
/// nothing else, or that object inside one Markdown code fence. Anything else is refused with
/// the reason, for the engine to fall back on the extractive principle.
pub fn parse_principle(answer: &str) -> Result<Principle, String> {
    let text = answer.trim();
    let text = match text.strip_prefix("```") {
        Some(fenced) => {
            let body = fenced.strip_suffix("```").ok_or("the answer opens a code fence and does not close it")?;
            let body = body.strip_prefix("json").unwrap_or(body);
            body.trim()
        }
        None => text,
    };
    let parsed: ModelPrinciple =
        serde_json::from_str(text).map_err(|error| format!("the answer is not the JSON object asked for ({error})"))?;
    let title = parsed.title.split_whitespace().collect::<Vec<_>>().join(" ");
    let content = parsed.principle.trim().to_owned();
    if title.is_empty() || content.is_empty() {
        return Err("the answer's title or principle is empty".to_owned());
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(format!("the answer's title is longer than {MAX_TITLE_CHARS} characters"));
    }
    if content.len() > MAX_MODEL_PRINCIPLE_BYTES.min(MAX_CONTENT_BYTES) {
        return Err(format!("the answer's principle is longer than {MAX_MODEL_PRINCIPLE_BYTES} bytes"));
    }
    Ok(Principle { title, content })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(values: &[f32]) -> Vec<f32> {
        let length = norm(values) as f32;
        values.iter().map(|x| x / length).collect()
    }

    /// Each episode's `k` nearest by cosine, itself included, as the engine's vector index
    /// finds them.
    fn nearest(vectors: &[Vec<f32>], k: usize) -> impl FnMut(usize) -> Option<Vec<usize>> + '_ {
        move |position| {
            let mut others: Vec<(usize, f64)> = vectors
                .iter()
                .enumerate()
                .map(|(other, vector)| (other, vector.iter().zip(&vectors[position]).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()))
                .collect();
            others.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            Some(others.into_iter().take(k).map(|(other, _)| other).collect())
        }
    }

    /// The clusters' members, sorted, found through four neighbours an episode; the same as
    /// comparing every episode with every cluster.
    fn run(vectors: &[Vec<f32>], params: &ClusterParams) -> Vec<Vec<usize>> {
        let through_neighbours = sorted(cluster(vectors, params, &mut nearest(vectors, 4), &mut |_, _| true).unwrap());
        let every_pair = sorted(cluster(vectors, params, &mut |_| None, &mut |_, _| true).unwrap());
        assert_eq!(through_neighbours, every_pair);
        through_neighbours
    }

    fn sorted(clusters: Vec<Cluster>) -> Vec<Vec<usize>> {
        let mut members: Vec<Vec<usize>> = clusters
            .into_iter()
            .map(|cluster| {
                let mut members = cluster.members;
                members.sort();
                members
            })
            .collect();
        members.sort();
        members
    }

    #[test]
    fn alike_vectors_cluster_and_a_lone_one_is_left_out() {
        let vectors = vec![
            unit(&[1.0, 0.1, 0.0]),
            unit(&[0.0, 1.0, 0.1]),
            unit(&[0.95, 0.15, 0.05]),
            unit(&[0.1, 0.9, 0.0]),
            unit(&[1.0, 0.0, 0.1]),
            unit(&[0.05, 1.0, 0.05]),
            unit(&[0.0, 0.0, 1.0]),
        ];
        assert_eq!(run(&vectors, &ClusterParams::default()), [vec![0, 2, 4], vec![1, 3, 5]]);
        let four = ClusterParams { min_cluster_size: 4, ..ClusterParams::default() };
        assert!(run(&vectors, &four).is_empty(), "groups of three are below a minimum of four");
        let loose = ClusterParams { similarity_threshold: 0.01, min_cluster_size: 3 };
        assert_eq!(run(&vectors, &loose).concat().len(), 7, "a low threshold takes every vector in");
    }

    #[test]
    fn members_come_most_central_first_and_the_rule_is_deterministic() {
        let vectors = vec![unit(&[1.0, 0.3]), unit(&[1.0, 0.0]), unit(&[1.0, -0.3]), unit(&[1.0, 0.05])];
        let params = ClusterParams { similarity_threshold: 0.9, min_cluster_size: 2 };
        let first = cluster(&vectors, &params, &mut nearest(&vectors, 4), &mut |_, _| true).unwrap();
        assert_eq!(first, cluster(&vectors, &params, &mut nearest(&vectors, 4), &mut |_, _| true).unwrap());
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].members[0], 1, "the vector nearest the centroid comes first: {:?}", first[0]);
        assert!(first[0].centrality.windows(2).all(|pair| pair[0] >= pair[1]));
        assert!(first[0].cohesion() > 0.9);
    }

    #[test]
    fn an_episode_that_came_before_its_cluster_formed_joins_it_by_centroid() {
        // The first is below the threshold with each of the others alone, above it with their centroid.
        let vectors = vec![unit(&[1.0, 0.0, 0.0]), unit(&[0.81, 0.586, 0.2]), unit(&[0.81, 0.586, -0.2])];
        let single = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        assert!(single(&vectors[0], &vectors[1]) < 0.8 && single(&vectors[0], &vectors[2]) < 0.8);
        assert_eq!(run(&vectors, &ClusterParams::default()), [vec![0, 1, 2]]);
    }

    #[test]
    fn a_full_cluster_closes_and_alike_vectors_go_on_in_the_next() {
        let vectors: Vec<Vec<f32>> = (0..MAX_CLUSTER_SIZE + 5).map(|i| unit(&[1.0, i as f32 * 0.001])).collect();
        let clusters = run(&vectors, &ClusterParams::default());
        assert_eq!(clusters.iter().map(Vec::len).collect::<Vec<_>>(), [MAX_CLUSTER_SIZE, 5]);
    }

    #[test]
    fn zero_and_mismatched_vectors_never_join() {
        let vectors = vec![unit(&[1.0, 0.0]), vec![0.0, 0.0], unit(&[1.0, 0.01]), vec![1.0, 0.0, 0.0], unit(&[1.0, 0.02])];
        assert_eq!(run(&vectors, &ClusterParams::default()), [vec![0, 2, 4]]);
    }

    #[test]
    fn progress_is_reported_and_can_stop_the_work() {
        let vectors: Vec<Vec<f32>> = (0..250).map(|i| unit(&[1.0, (i % 7) as f32])).collect();
        let mut seen = Vec::new();
        cluster(&vectors, &ClusterParams::default(), &mut |_| None, &mut |done, total| {
            seen.push((done, total));
            true
        })
        .unwrap();
        assert_eq!(seen, [(100, 250), (200, 250), (250, 250)]);
        assert_eq!(cluster(&vectors, &ClusterParams::default(), &mut |_| None, &mut |done, _| done < 200), None);
    }

    #[test]
    fn an_episode_is_compared_only_with_the_clusters_of_its_neighbours_or_every_one_when_it_has_none() {
        let vectors = vec![unit(&[1.0, 0.0]), unit(&[1.0, 0.01]), unit(&[1.0, 0.02]), unit(&[1.0, 0.03])];
        let params = ClusterParams { similarity_threshold: 0.9, min_cluster_size: 2 };
        let alone = cluster(&vectors, &params, &mut |position| Some(vec![position]), &mut |_, _| true).unwrap();
        assert!(alone.is_empty(), "neighbours that are only themselves join nothing: {alone:?}");
        // The last episode has no neighbours to name: it is compared with every cluster, and
        // the first episode's cluster is found although nothing names it.
        let vectors = vec![unit(&[1.0, 0.0]), unit(&[0.0, 1.0]), unit(&[0.7, 0.7]), unit(&[1.0, 0.05])];
        let mut near = |position: usize| (position < 3).then(|| vec![position]);
        let found = sorted(cluster(&vectors, &params, &mut near, &mut |_, _| true).unwrap());
        assert_eq!(found, [vec![0, 3]]);
    }

    #[test]
    fn parameters_are_checked_with_field_errors() {
        assert_eq!(ClusterParams::new(None, None).unwrap(), ClusterParams::default());
        for threshold in [0.0, -0.5, 1.5, f64::NAN] {
            assert_eq!(ClusterParams::new(Some(threshold), None).unwrap_err().field, "similarity_threshold");
        }
        for size in [0, 1, MAX_CLUSTER_SIZE + 1] {
            assert_eq!(ClusterParams::new(None, Some(size)).unwrap_err().field, "min_cluster_size");
        }
        assert_eq!(ClusterParams::new(Some(1.0), Some(2)).unwrap(), ClusterParams { similarity_threshold: 1.0, min_cluster_size: 2 });
    }

    const EPISODES: [(&str, &str); 3] = [
        (
            "Flaky login test fixed by waiting for the session cookie",
            "The login test failed again on CI. Waiting for the session cookie before the redirect fixed the flaky login test. Lunch was late.",
        ),
        ("Login test flaked on CI", "Another flaky login test run on CI today. The session cookie was not set before the redirect was checked."),
        ("Session cookie race", "- The redirect races the session cookie in the login flow.\n- Added a wait for the cookie in the test."),
    ];

    fn episodes() -> Vec<EpisodeText<'static>> {
        EPISODES.iter().map(|(title, content)| EpisodeText { title, content }).collect()
    }

    #[test]
    fn an_extractive_principle_quotes_the_most_shared_sentences_and_says_it_is_extractive() {
        let principle = extractive_principle(&episodes());
        assert_eq!(principle.title, "Recurring in 3 episodes: Flaky login test fixed by waiting for the session cookie");
        assert!(principle.content.starts_with("Extractive summary of 3 related episodes"), "{}", principle.content);
        assert!(principle.content.contains("- Waiting for the session cookie before the redirect fixed the flaky login test."), "{}", principle.content);
        assert!(!principle.content.contains("Lunch"), "an off-topic sentence is not quoted: {}", principle.content);
        let bullets = principle.content.lines().filter(|line| line.starts_with("- ")).count();
        assert_eq!(bullets, 3, "one sentence per episode: {}", principle.content);
        assert!(principle.content.contains("Shared terms: cookie, login, redirect, session"), "{}", principle.content);
        assert_eq!(extractive_principle(&episodes()), principle, "the same cluster gives the same text");
    }

    #[test]
    fn an_extractive_principle_of_sentenceless_episodes_falls_back_to_the_central_content() {
        let principle = extractive_principle(&[EpisodeText { title: "t", content: "ok" }, EpisodeText { title: "u", content: "fine" }]);
        assert!(principle.content.contains("- ok"), "{}", principle.content);
        let long = "word ".repeat(400);
        let principle = extractive_principle(&[EpisodeText { title: &long, content: &long }]);
        assert!(principle.title.chars().count() <= MAX_TITLE_CHARS);
        assert!(principle.content.len() < 1000);
    }

    #[test]
    fn the_prompt_carries_every_episode_cut_and_asks_for_json() {
        let long = "x".repeat(5000);
        let mut episodes = episodes();
        episodes.push(EpisodeText { title: "Long one", content: &long });
        let request = principle_request(&episodes);
        assert!(request.json);
        assert_eq!(request.messages.len(), 1);
        let prompt = &request.messages[0].content;
        assert!(prompt.starts_with("Here are 4 related episodes"));
        assert!(prompt.contains("Episode 1: Flaky login test fixed by waiting for the session cookie"));
        assert!(prompt.contains("Episode 4: Long one"));
        assert!(prompt.len() < 4000, "each episode is cut: {} bytes", prompt.len());
        assert!(prompt.ends_with(r#"{"title": "<at most 120 characters>", "principle": "<one to four sentences>"}."#));
    }

    #[test]
    fn a_model_answer_is_read_strictly() {
        let good = r#"{"title": "Wait for the session cookie", "principle": "Login tests must wait for the session cookie before checking the redirect."}"#;
        let expected = Principle {
            title: "Wait for the session cookie".into(),
            content: "Login tests must wait for the session cookie before checking the redirect.".into(),
        };
        assert_eq!(parse_principle(good).unwrap(), expected);
        assert_eq!(parse_principle(&format!("\n```json\n{good}\n```\n")).unwrap(), expected);
        assert_eq!(parse_principle(&format!("```\n{good}\n```")).unwrap(), expected);
        for (answer, reason) in [
            ("Sure! Here is the principle: wait for cookies.", "not the JSON object"),
            (&format!("Here it is: {good}") as &str, "not the JSON object"),
            (r#"{"title": "t"}"#, "not the JSON object"),
            (r#"{"title": "t", "principle": "p", "confidence": 0.9}"#, "not the JSON object"),
            (r#"{"title": "  ", "principle": "p"}"#, "empty"),
            (r#"{"title": 3, "principle": "p"}"#, "not the JSON object"),
            (&format!("```json\n{good}"), "does not close"),
            ("", "not the JSON object"),
        ] {
            let error = parse_principle(answer).unwrap_err();
            assert!(error.contains(reason), "{answer:?}: {error}");
        }
        let long_title = format!(r#"{{"title": "{}", "principle": "p"}}"#, "t".repeat(201));
        assert!(parse_principle(&long_title).unwrap_err().contains("title is longer"));
        let long_principle = format!(r#"{{"title": "t", "principle": "{}"}}"#, "p".repeat(4001));
        assert!(parse_principle(&long_principle).unwrap_err().contains("principle is longer"));
    }
}
