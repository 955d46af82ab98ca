//! `kenning-bench`: benchmarks of kenning, run on demand rather than as tests.
//!
//! Each subcommand prints one JSON object on stdout, the record to keep and compare, and a short
//! table on stderr. The workload is synthetic and seeded ([`corpus`]), so a run is repeatable on
//! any machine. Subcommands:
//!
//! - `retrieval`: how often recall ranks the turns that answer a question near the top, on a
//!   conversational data set in the LoCoMo format (one store per conversation).
//! - `latency`: capture and recall speed, store size and memory use, calling the engine in
//!   process and the real binary over MCP stdio (recall and cold start).
//! - `embed`: how many texts per second an embedder turns into vectors on one thread.
//! - `hooks`: how long `kenning hook EVENT` takes from spawn to its answer, in a git repository
//!   with a project and a user domain, for every event ([`hooks`]).
//! - `hook-context`: on a LoCoMo-format data set replayed as prompts, the share of questions
//!   whose evidence is in the context the user-prompt hook injects ([`hook_context`]).
//! - `notes`: the project domain's git-notes store beside the SQLite user domain (capture,
//!   recall), sync through a bare remote, index catch-up and rebuild from notes.
//! - `http`: recall throughput of `kenning serve --http` under concurrent clients, each with
//!   its own connection, session and (by default) the same API key.
//! - `org`: the organisation domain on a real PostgreSQL server beside the SQLite user domain:
//!   capture throughput, recall latency and concurrent clients ([`org`]).
//! - `judgment`: whether capture merges paraphrases and keeps distinct claims apart, and whether
//!   a changed fact's newer statement ranks first, on a labelled set of statement pairs
//!   ([`judgment`]).
//! - `redaction`: how many secrets of the committed corpus redaction finds, per class of format,
//!   how many benign look-alikes it changes, and its cost per capture ([`redaction`]).
//! - `consolidation`: how long a consolidation run takes to list, embed and cluster episodes
//!   ([`consolidation`]).
//! - `compare`: two records of one benchmark side by side, every figure with its ratio new over
//!   old ([`compare`]).
//!
//! Modules: [`retrieval`] runs the quality benchmark over data read by [`locomo`] and scored by
//! [`metrics`]; [`latency`] runs the speed benchmark over the synthetic [`corpus`], driving
//! `kenning serve` through [`mcp_client`]; [`http`] loads `kenning serve --http` through
//! [`http_client`]; [`embedder`]
//! is the `--embedder` choice both share; [`stats`] summarises samples, [`report`] describes
//! the machine and prints results.

mod code;
mod compare;
mod consolidation;
mod corpus;
mod embed;
mod embedder;
mod hook_context;
mod hooks;
mod http;
mod http_client;
mod judgment;
mod latency;
mod locomo;
mod mcp_client;
mod metrics;
mod org;
mod redaction;
mod notes;
mod report;
mod retrieval;
mod stats;
mod vectors;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "kenning-bench", version, about = "Benchmarks of the kenning memory system")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The code index of a repository: full index, incremental refresh after one edit, and
    /// repo_search_patterns latency.
    Code(code::CodeArgs),
    /// Retrieval quality on a LoCoMo-format conversation data set: recall@k and session recall.
    Retrieval(retrieval::RetrievalArgs),
    /// Capture throughput, recall latency, store size and peak memory on a synthetic corpus.
    Latency(latency::LatencyArgs),
    /// Embedding throughput, one text per call on one thread, on the synthetic corpus.
    Embed(embed::EmbedArgs),
    /// Hook speed: spawn to answer of `kenning hook EVENT` for every event, in a git repository
    /// with synthetic project and user domains.
    Hooks(hooks::HooksArgs),
    /// Context worth its tokens: the share of LoCoMo questions, replayed as prompts, whose
    /// evidence is in the context the user-prompt hook injects.
    HookContext(hook_context::HookContextArgs),
    /// The project domain in git notes beside the SQLite user domain: capture and recall,
    /// sync through a bare remote, index catch-up and rebuild.
    Notes(notes::NotesArgs),
    /// Recall throughput of `kenning serve --http` under concurrent clients with an API key.
    Http(http::HttpArgs),
    /// The organisation domain on PostgreSQL beside the SQLite user domain: capture throughput,
    /// recall latency and concurrent clients.
    Org(org::OrgArgs),
    /// Claim judgment on labelled statement pairs: distinct claims wrongly merged, paraphrases
    /// merged, changed facts whose newer statement ranks first.
    Judgment(judgment::JudgmentArgs),
    /// Secret redaction: recall per class of format and benign strings changed, on the committed
    /// corpus, and its cost per capture.
    Redaction(redaction::RedactionArgs),
    /// How long consolidation takes to group episodes, stage by stage, with its progress reports.
    Consolidation(consolidation::ConsolidationArgs),
    /// The vector index alone at up to a million rows: scanning against walking its graph,
    /// with recall@10 against exact search.
    Vectors(vectors::VectorsArgs),
    /// Two JSON records of one benchmark side by side: every figure's old and new value and
    /// their ratio.
    Compare(compare::CompareArgs),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Code(args) => {
            let report = code::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &code::table(&report), args.json_out.as_deref())
        }
        Command::Retrieval(args) => {
            let report = retrieval::run(&args)?;
            report::emit(&serde_json::to_string(&report)?, &retrieval::table(&report), args.json_out.as_deref())
        }
        Command::Latency(args) => {
            let report = latency::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &report::latency_table(&report), args.json_out.as_deref())
        }
        Command::Notes(args) => {
            let report = notes::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &notes::table(&report), args.json_out.as_deref())
        }
        Command::Embed(args) => {
            let report = embed::run(&args)?;
            report::emit(&serde_json::to_string(&report)?, &embed::table(&report), args.json_out.as_deref())
        }
        Command::Hooks(args) => {
            let report = hooks::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &hooks::table(&report), args.json_out.as_deref())
        }
        Command::HookContext(args) => {
            let report = hook_context::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &hook_context::table(&report), args.json_out.as_deref())
        }
        Command::Http(args) => {
            let report = http::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &http::table(&report), args.json_out.as_deref())
        }
        Command::Redaction(args) => {
            let report = redaction::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &redaction::table(&report), args.json_out.as_deref())
        }
        Command::Org(args) => {
            let report = org::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &org::table(&report), args.json_out.as_deref())
        }
        Command::Consolidation(args) => {
            let report = consolidation::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &consolidation::table(&report), args.json_out.as_deref())
        }
        Command::Vectors(args) => {
            let report = vectors::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&report)?, &vectors::table(&report), args.json_out.as_deref())
        }
        Command::Compare(args) => {
            let comparison = compare::run(&args)?;
            report::emit(&serde_json::to_string_pretty(&comparison)?, &compare::table(&comparison), args.json_out.as_deref())
        }
        Command::Judgment(args) => {
            let report = judgment::run(&args)?;
            report::emit(&serde_json::to_string(&report)?, &judgment::table(&report), args.json_out.as_deref())
        }
    }
}
