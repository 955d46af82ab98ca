//! The `retrieval` benchmark: how often recall puts the turns that answer a question in front
//! of the agent, on a conversational data set in the LoCoMo format ([`crate::locomo`]).
//!
//! Each conversation gets its own fresh SQLite store in a temporary directory, as the user
//! domain. Every turn is captured the way the `memory_capture` tool captures (content, event
//! time and caller metadata; everything else left to the tool's defaults), one call per turn:
//! the content is `Speaker: text`, the event time the session's date, the turn id rides along
//! as the `turn_id` metadata and the session (`conv-26:D1`) as `session_id`, as an agent's
//! session would, and the speaker is the author, as when each participant writes under their own
//! identity (an API key each over HTTP; characters an author may not hold become `-`). Every question of the conversation is then recalled through
//! `MemoryService::recall` with no filters, as of the conversation's last session (the
//! reference time relative expressions such as "last week" count from), and the top
//! [`RANKING_DEPTH`] hits are mapped back to turn ids through that metadata. The rankings go to a file, one `{"qid", "ranked"}` per
//! line, so that other scorers can read them; the figures ([`crate::metrics`]) go to stdout.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use kenning_core::provenance::SESSION_KEY;
use kenning_core::{CaptureInput, Domain, Embedder, Memory, MemoryId, MemoryStore, SearchFilter};
use kenning_core::llm::LanguageModel;
use kenning_engine::{DomainStore, MemoryService, RecallRequest};
use kenning_llm::ProviderSettings;
use kenning_sqlite::SqliteStore;
use serde::Serialize;

use crate::embedder::EmbedderArgs;
use crate::locomo::{self, Query, Turn};
use crate::metrics::{CUTOFFS, RANKING_DEPTH, Scorecard, Scores, skip_reason};
use crate::report::Machine;
use crate::stats::Summary;

/// The caller metadata key that carries a turn's id through capture and recall.
pub const TURN_ID_KEY: &str = "turn_id";

/// Recall cuts its results to a token budget, which would shorten rankings of long turns;
/// the benchmark scores the ranking, so the budget is set out of reach.
const UNLIMITED_TOKENS: usize = 1_000_000;

#[derive(Debug, Args)]
pub struct RetrievalArgs {
    /// Dialogue turns, one JSON object a line: {id, conv, date_time, speaker, text}.
    #[arg(long)]
    turns: PathBuf,
    /// Questions, one JSON object a line: {qid, conv, category, question, evidence}.
    #[arg(long)]
    queries: PathBuf,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// What ranks the turns: the engine's `recall` (hybrid when there is an embedder), or the
    /// `vector` search alone (the store's nearest neighbours of the question's embedding), which
    /// measures an embedding model without full-text search and fusion.
    #[arg(long, value_enum, default_value_t = Ranker::Recall)]
    ranker: Ranker,
    /// Where to write each question's ranked turn ids, one {"qid", "ranked"} a line.
    #[arg(long)]
    rankings_out: PathBuf,
    /// A language model that splits each question into the questions it is made of (recall's
    /// query decomposition, `[recall] decompose_with_llm`), as the fields of one
    /// `[[llm.providers]]` table in JSON, e.g. `{"provider": "anthropic", "model":
    /// "claude-sonnet-4-5"}` (the key from the environment, as configured).
    #[arg(long, value_name = "PROVIDER_JSON")]
    decompose_with: Option<String>,
    /// Also write the JSON metrics line to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

impl RetrievalArgs {
    /// The arguments of a run of the engine's recall on `turns` and `queries`.
    pub fn new(turns: PathBuf, queries: PathBuf, embedder: EmbedderArgs, rankings_out: PathBuf) -> RetrievalArgs {
        RetrievalArgs { turns, queries, embedder, ranker: Ranker::Recall, rankings_out, decompose_with: None, json_out: None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Ranker {
    Recall,
    Vector,
}

impl Ranker {
    fn name(self) -> &'static str {
        match self {
            Ranker::Recall => "recall",
            Ranker::Vector => "vector",
        }
    }
}

/// The `retrieval` benchmark's result: one JSON line.
#[derive(Debug, Serialize)]
pub struct RetrievalReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub started_at: String,
    pub turns_file: String,
    pub queries_file: String,
    /// `none`, `builtin` or `transformer`.
    pub embedder: &'static str,
    pub model: Option<String>,
    /// `recall` or `vector`.
    pub ranker: &'static str,
    /// The language model that split the questions (`--decompose-with`), if any.
    pub decomposed_with: Option<String>,
    pub conversations: usize,
    pub turns: usize,
    /// Turns whose content repeated an earlier turn of their conversation word for word; the
    /// store keeps one memory for both, so the later id never ranks.
    pub duplicate_turns: usize,
    pub questions: usize,
    /// Evidence ids of scored questions that name no turn of the turns file; such evidence can
    /// never be found, so a non-zero count usually means mismatched files.
    pub unknown_evidence: usize,
    #[serde(flatten)]
    pub scores: Scores,
    /// Time per `capture` call (one turn each) and per `recall` call.
    pub capture: Option<Summary>,
    pub recall: Option<Summary>,
    pub model_load_ms: Option<f64>,
    pub machine: Machine,
}

/// The model `--decompose-with` names: one provider, configured as in kenning.toml.
fn language_model(settings: &str) -> Result<Arc<dyn LanguageModel>> {
    let value: serde_json::Value = serde_json::from_str(settings).context("--decompose-with is not a JSON object")?;
    let settings = ProviderSettings::from_json("--decompose-with", &value).map_err(|error| anyhow::anyhow!("{error}"))?;
    let chain = kenning_llm::chain(&[settings], &|name| std::env::var(name).ok())?;
    Ok(Arc::new(chain))
}

/// One question's ranking, as written to `--rankings-out`.
#[derive(Debug, Serialize)]
struct Ranking<'a> {
    qid: &'a str,
    ranked: &'a [String],
}

pub fn run(args: &RetrievalArgs) -> Result<RetrievalReport> {
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = Machine::detect();
    let data = locomo::read_turns(&args.turns)?;
    let queries = locomo::read_queries(&args.queries, &data)?;
    let loaded = args.embedder.load()?;
    let vector_only = match (args.ranker, &loaded.embedder) {
        (Ranker::Recall, _) => None,
        (Ranker::Vector, Some(embedder)) => Some(embedder.as_ref()),
        (Ranker::Vector, None) => bail!("--ranker vector needs an embedder: pass --embedder builtin or transformer"),
    };
    let decomposer = args.decompose_with.as_deref().map(language_model).transpose()?;
    let dir = tempfile::tempdir().context("creating a temporary directory for the stores")?;

    let mut by_conversation: HashMap<&str, Vec<&Query>> = HashMap::new();
    for query in &queries {
        by_conversation.entry(query.conv.as_str()).or_default().push(query);
    }
    let mut rankings: HashMap<&str, Vec<String>> = HashMap::with_capacity(queries.len());
    let (mut capture_times, mut recall_times) = (Vec::new(), Vec::new());
    let mut duplicate_turns = 0;
    for (index, conversation) in data.conversations.iter().enumerate() {
        // One file per conversation, so no conversation's turns can answer another's questions.
        let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&dir.path().join(format!("conversation-{index}.db")))?);
        let service = MemoryService::new(vec![DomainStore { domain: Domain::User, store: store.clone() }], loaded.embedder.clone())
            .with_llm(decomposer.clone())
            .with_query_decomposition(decomposer.is_some());
        for turn in &conversation.turns {
            let started = Instant::now();
            let outcome = service
                .capture(turn_input(turn), None)
                .with_context(|| format!("{} line {}: capturing turn `{}`", args.turns.display(), turn.line, turn.id))?;
            capture_times.push(started.elapsed());
            duplicate_turns += usize::from(!outcome.created);
        }
        // The conversation's "now": its last session. RFC 3339 in UTC sorts as text.
        let as_of = conversation.turns.iter().map(|turn| turn.event_time.as_str()).max().map(str::to_owned);
        for query in by_conversation.get(conversation.id.as_str()).into_iter().flatten() {
            let started = Instant::now();
            let ranked = match vector_only {
                None => recall_turn_ids(&service, &query.question, as_of.clone()),
                Some(embedder) => nearest_turn_ids(store.as_ref(), embedder, &query.question),
            }
            .with_context(|| format!("{} line {}: recalling question `{}`", args.queries.display(), query.line, query.qid))?;
            recall_times.push(started.elapsed());
            rankings.insert(&query.qid, ranked);
        }
    }

    write_rankings(args, &queries, &rankings)?;
    let turn_ids: HashSet<&str> = data.conversations.iter().flat_map(|conv| &conv.turns).map(|turn| turn.id.as_str()).collect();
    let mut card = Scorecard::default();
    let mut unknown_evidence = 0;
    for query in &queries {
        card.add(query.category, &query.evidence, &rankings[query.qid.as_str()]);
        if skip_reason(query.category, &query.evidence).is_none() {
            unknown_evidence += query.evidence.iter().filter(|id| !turn_ids.contains(id.as_str())).count();
        }
    }

    Ok(RetrievalReport {
        benchmark: "retrieval",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        turns_file: args.turns.display().to_string(),
        queries_file: args.queries.display().to_string(),
        embedder: args.embedder.embedder.name(),
        model: loaded.model,
        ranker: args.ranker.name(),
        decomposed_with: decomposer.map(|model| model.name()),
        conversations: data.conversations.len(),
        turns: data.turns,
        duplicate_turns,
        questions: queries.len(),
        unknown_evidence,
        scores: card.summary(),
        capture: Summary::of(&capture_times),
        recall: Summary::of(&recall_times),
        model_load_ms: loaded.load_ms,
        machine,
    })
}

/// A turn as the `memory_capture` tool would receive it from an agent recording a conversation.
pub(crate) fn turn_input(turn: &Turn) -> CaptureInput {
    CaptureInput {
        content: format!("{}: {}", turn.speaker, turn.text),
        event_time: Some(turn.event_time.clone()),
        author: Some(author_of(&turn.speaker)),
        metadata: BTreeMap::from([
            (TURN_ID_KEY.to_owned(), turn.id.clone()),
            (SESSION_KEY.to_owned(), locomo::session_of(&turn.id).to_owned()),
        ]),
        ..CaptureInput::default()
    }
}

/// A speaker's name as an author: the characters an author may not hold (see
/// `kenning_core::memory::validate_author`) become `-`.
fn author_of(speaker: &str) -> String {
    let author: String = speaker.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '+' | ':' | '-') { c } else { '-' }).take(128).collect();
    if author.is_empty() { "-".to_owned() } else { author }
}

/// The turn ids of the top hits for `question` asked at `as_of`, best first.
fn recall_turn_ids(service: &MemoryService, question: &str, as_of: Option<String>) -> Result<Vec<String>> {
    let page = service.recall(RecallRequest {
        query: question.to_owned(),
        as_of,
        limit: Some(RANKING_DEPTH),
        max_tokens: Some(UNLIMITED_TOKENS),
        // Full detail carries the caller metadata, where the turn id is.
        detail: Some("full".to_owned()),
        ..RecallRequest::default()
    })?;
    if page.truncated {
        bail!("recall cut its results to the token budget, so the ranking is incomplete");
    }
    page.results
        .iter()
        .map(|hit| {
            hit.metadata
                .as_ref()
                .and_then(|metadata| metadata.get(TURN_ID_KEY))
                .cloned()
                .with_context(|| format!("recall returned {} without `{TURN_ID_KEY}` metadata", hit.urn))
        })
        .collect()
}

/// The turn ids of the stored vectors nearest to the embedding of `question`, best first.
fn nearest_turn_ids(store: &dyn MemoryStore, embedder: &dyn Embedder, question: &str) -> Result<Vec<String>> {
    let vector = embedder.embed(&[question])?.pop().context("the embedder returned no vector")?;
    let hits = store.search_vector(&vector, embedder.model_id(), &SearchFilter::active(), RANKING_DEPTH)?;
    let ids: Vec<MemoryId> = hits.iter().map(|hit| hit.id.clone()).collect();
    let memories: HashMap<MemoryId, Memory> = store.get_many(&ids)?.into_iter().map(|memory| (memory.id.clone(), memory)).collect();
    ids.iter()
        .map(|id| {
            memories
                .get(id)
                .and_then(|memory| memory.metadata.get(TURN_ID_KEY))
                .cloned()
                .with_context(|| format!("the vector search returned {id} without `{TURN_ID_KEY}` metadata"))
        })
        .collect()
}

fn write_rankings(args: &RetrievalArgs, queries: &[Query], rankings: &HashMap<&str, Vec<String>>) -> Result<()> {
    let path = &args.rankings_out;
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for query in queries {
        let ranking = Ranking { qid: &query.qid, ranked: &rankings[query.qid.as_str()] };
        serde_json::to_writer(&mut out, &ranking)?;
        out.write_all(b"\n")?;
    }
    out.flush().with_context(|| format!("writing {}", path.display()))
}

/// The figures for a person: one row per metric, one column per cutoff, then the categories.
pub fn table(report: &RetrievalReport) -> String {
    let scores = &report.scores;
    let mut out = String::new();
    let model = report.model.as_deref().map_or(String::new(), |model| format!(" ({model})"));
    let _ = writeln!(
        out,
        "retrieval: {} conversations, {} turns, {} questions; embedder {}{model}, ranked by {}",
        report.conversations, report.turns, report.questions, report.embedder, report.ranker
    );
    let _ = writeln!(
        out,
        "  scored {} (categories 1-4 with evidence); skipped {}: {} outside categories 1-4, {} without evidence",
        scores.scored, scores.skipped, scores.skipped_category, scores.skipped_no_evidence
    );
    let _ = write!(out, "  {:<20}", "");
    for k in CUTOFFS {
        let _ = write!(out, "{:>8}", format!("@{k}"));
    }
    let _ = writeln!(out);
    for name in ["recall_all", "recall_any", "frac", "session_recall_all"] {
        let _ = write!(out, "  {name:<20}");
        for k in CUTOFFS {
            let cell = scores.get(&format!("{name}@{k}")).map_or(String::new(), |value| format!("{value:.3}"));
            let _ = write!(out, "{cell:>8}");
        }
        let _ = writeln!(out);
    }
    let categories: Vec<String> = scores
        .by_category
        .iter()
        .map(|(category, score)| format!("{category}: {:.3} ({} q)", score.recall_all_at_10, score.questions))
        .collect();
    let _ = writeln!(out, "  recall_all@10 by category  {}", categories.join("   "));
    if report.duplicate_turns > 0 || report.unknown_evidence > 0 {
        let _ = writeln!(
            out,
            "  warning: {} duplicate turns stored once, {} evidence ids name no turn",
            report.duplicate_turns, report.unknown_evidence
        );
    }
    if let (Some(capture), Some(recall)) = (&report.capture, &report.recall) {
        let _ = writeln!(
            out,
            "  time per call: capture p50 {:.2} ms, recall p50 {:.2} ms, p95 {:.2} ms",
            capture.p50_ms, recall.p50_ms, recall.p95_ms
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_captured_as_speaker_and_text_at_its_session_time_with_its_id_session_and_author() {
        let turn = Turn {
            line: 3,
            id: "conv-26:D1:3".into(),
            conv: "conv-26".into(),
            date_time: "1:56 pm on 8 May, 2023".into(),
            speaker: "Caroline".into(),
            text: "I went to a LGBTQ support group yesterday.".into(),
            event_time: "2023-05-08T13:56:00Z".into(),
        };
        let expected = CaptureInput {
            content: "Caroline: I went to a LGBTQ support group yesterday.".into(),
            event_time: Some("2023-05-08T13:56:00Z".into()),
            author: Some("Caroline".into()),
            metadata: BTreeMap::from([
                ("turn_id".to_owned(), "conv-26:D1:3".to_owned()),
                ("session_id".to_owned(), "conv-26:D1".to_owned()),
            ]),
            ..CaptureInput::default()
        };
        assert_eq!(turn_input(&turn), expected);
        assert_eq!(turn_input(&Turn { speaker: "David Håsäther".into(), ..turn }).author.as_deref(), Some("David-H-s-ther"));
    }
}
