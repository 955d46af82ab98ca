//! The `hook-context` benchmark: is the context the user-prompt hook injects worth its tokens?
//! A LoCoMo-format data set ([`crate::locomo`]) replayed as prompts: each conversation's turns
//! are captured into a fresh store the way the `retrieval` benchmark captures them, then each
//! question is submitted as the user's prompt to the hook ([`kenning_hooks::Hooks`], in process,
//! at the token budget given, the hook's default unless told), and the block it would add to
//! the agent's context is checked for the question's evidence turns.
//!
//! A turn counts as in the context when its whole text is there (what the agent can answer
//! from); the share of questions with any and with every evidence turn in the context is the
//! figure. For comparison it also counts the questions whose evidence is merely listed (its URN
//! is in the block, as a title-only block would show it), and the tokens injected.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::search::estimate_tokens;
use kenning_core::{Domain, MemoryStore};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_hooks::context::{MAX_TEXT_CHARS, bounded, escape};
use kenning_hooks::{Budgets, HookEvent, HookInput, Hooks};
use kenning_sqlite::SqliteStore;
use serde::Serialize;

use crate::embedder::EmbedderArgs;
use crate::locomo;
use crate::metrics::skip_reason;
use crate::report::Machine;
use crate::retrieval::turn_input;

#[derive(Debug, Args)]
pub struct HookContextArgs {
    /// Dialogue turns, one JSON object a line: {id, conv, date_time, speaker, text}.
    #[arg(long)]
    turns: PathBuf,
    /// Questions, one JSON object a line: {qid, conv, category, question, evidence}.
    #[arg(long)]
    queries: PathBuf,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// The user-prompt hook's token budget (default: the hook's own).
    #[arg(long)]
    max_tokens: Option<usize>,
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct HookContextReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub started_at: String,
    pub embedder: &'static str,
    pub max_tokens: usize,
    /// Questions scored: categories 1-4 with evidence.
    pub questions: usize,
    /// The share of questions that got any context at all.
    pub answered: f64,
    /// The share of questions with at least one evidence turn's whole text in the context.
    pub evidence_any: f64,
    /// The share with every evidence turn's whole text in the context.
    pub evidence_all: f64,
    /// The share with at least one evidence turn listed (its URN in the block).
    pub evidence_listed_any: f64,
    /// Tokens injected per answered question, on average.
    pub mean_tokens: f64,
    /// `evidence_any` per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop).
    pub evidence_any_by_category: Vec<(i64, f64)>,
    pub machine: Machine,
}

pub fn run(args: &HookContextArgs) -> Result<HookContextReport> {
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let data = locomo::read_turns(&args.turns)?;
    let queries = locomo::read_queries(&args.queries, &data)?;
    let loaded = args.embedder.load()?;
    let budget = args.max_tokens.unwrap_or(Budgets::default().user_prompt);
    let dir = tempfile::tempdir().context("creating a temporary directory for the stores")?;

    let (mut scored, mut answered, mut any, mut all, mut listed, mut tokens) = (0usize, 0usize, 0usize, 0usize, 0usize, 0usize);
    let mut by_category: HashMap<i64, (usize, usize)> = HashMap::new();
    for (index, conversation) in data.conversations.iter().enumerate() {
        let store = Arc::new(SqliteStore::open(&dir.path().join(format!("conversation-{index}.db")))?);
        let memory = Arc::new(MemoryService::new(
            vec![DomainStore { domain: Domain::User, store: store.clone() as Arc<dyn MemoryStore> }],
            loaded.embedder.clone(),
        ));
        let decisions = Arc::new(DecisionService::new(
            memory.clone(),
            vec![DecisionDomain { domain: Domain::User, store: store as Arc<dyn DecisionStore> }],
            ModuleList::default(),
        ));
        // What each turn looks like in a context block: its URN and its text as the block cuts it.
        let mut shown: HashMap<&str, (String, String)> = HashMap::new();
        for turn in &conversation.turns {
            let input = turn_input(turn);
            let text = escape(&bounded(&input.content, MAX_TEXT_CHARS));
            let outcome = memory.capture(input, None).with_context(|| format!("capturing turn `{}`", turn.id))?;
            shown.insert(turn.id.as_str(), (outcome.urn, text));
        }
        let hooks = Hooks {
            memory,
            decisions,
            project: None,
            budgets: Budgets { user_prompt: budget, ..Budgets::default() },
        };
        for query in queries.iter().filter(|query| query.conv == conversation.id && skip_reason(query.category, &query.evidence).is_none()) {
            scored += 1;
            let input = HookInput { prompt: Some(query.question.clone()), ..HookInput::default() };
            let context = hooks
                .run(HookEvent::UserPrompt, &input)
                .with_context(|| format!("the user-prompt hook on question `{}`", query.qid))?
                .and_then(|answer| answer.pointer("/hookSpecificOutput/additionalContext").and_then(|text| text.as_str()).map(str::to_owned));
            let entry = by_category.entry(query.category).or_default();
            entry.0 += 1;
            let Some(context) = context else { continue };
            answered += 1;
            tokens += estimate_tokens(&context);
            let evidence: Vec<&(String, String)> = query.evidence.iter().filter_map(|id| shown.get(id.as_str())).collect();
            let present: Vec<bool> = evidence.iter().map(|(_, text)| context.contains(text.as_str())).collect();
            if present.iter().any(|found| *found) {
                any += 1;
                entry.1 += 1;
            }
            if !present.is_empty() && present.iter().all(|found| *found) {
                all += 1;
            }
            if evidence.iter().any(|(urn, _)| context.contains(urn.as_str())) {
                listed += 1;
            }
        }
    }
    let share = |count: usize| if scored == 0 { 0.0 } else { count as f64 / scored as f64 };
    let mut evidence_any_by_category: Vec<(i64, f64)> =
        by_category.into_iter().map(|(category, (total, hits))| (category, hits as f64 / total.max(1) as f64)).collect();
    evidence_any_by_category.sort_by_key(|(category, _)| *category);
    Ok(HookContextReport {
        benchmark: "hook-context",
        kenning_version: env!("CARGO_PKG_VERSION"),
        started_at,
        embedder: args.embedder.embedder.name(),
        max_tokens: budget,
        questions: scored,
        answered: share(answered),
        evidence_any: share(any),
        evidence_all: share(all),
        evidence_listed_any: share(listed),
        mean_tokens: if answered == 0 { 0.0 } else { tokens as f64 / answered as f64 },
        evidence_any_by_category,
        machine: Machine::detect(),
    })
}

pub fn table(report: &HookContextReport) -> String {
    let mut text = format!(
        "user-prompt context at {} tokens, {} questions ({} embedder)\n",
        report.max_tokens, report.questions, report.embedder
    );
    text.push_str(&format!("  answered            {:.3}\n", report.answered));
    text.push_str(&format!("  evidence any (text) {:.3}\n", report.evidence_any));
    text.push_str(&format!("  evidence all (text) {:.3}\n", report.evidence_all));
    text.push_str(&format!("  evidence listed     {:.3}\n", report.evidence_listed_any));
    text.push_str(&format!("  tokens per answer   {:.0}\n", report.mean_tokens));
    for (category, share) in &report.evidence_any_by_category {
        text.push_str(&format!("  category {category}          {share:.3}\n"));
    }
    text
}
