//! The `code` benchmark: the code index of a repository (this one by default). A copy of the
//! repository's files that git would track (`.gitignore` respected) is made in a temporary
//! directory, so the repository itself is never touched; then:
//! - full index: the first refresh of an empty index (walk, parse, chunk, embed, store);
//! - open: a new index over the stored file, as a new process opens it;
//! - unchanged refresh: a refresh with nothing changed (the walk and the modification-time checks);
//! - incremental refresh: after one source file is edited (one re-parse);
//! - `repo_search_patterns`: hybrid search latency over a fixed set of queries.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use kenning_code::{CodeIndex, SearchScope};
use kenning_embed::StaticEmbedder;
use serde::Serialize;

use crate::report::Machine;
use crate::stats::{Summary, round};

/// What an agent asks `repo_search_patterns` about a Rust code base like this one.
const QUERIES: &[&str] = &[
    "error handling when a file cannot be opened",
    "open a SQLite connection with retries when busy",
    "parse the configuration file",
    "validate user input and return a field error",
    "retry on compare and swap conflict",
    "spawn a background thread",
    "serialize to JSON",
    "walk the files of a directory",
    "hash the content of a file",
    "percentile of latency samples",
    "read environment variables",
    "HTTP request handler",
    "git notes merge",
    "cosine similarity of vectors",
    "tokenize text into words",
    "timeout and kill a process",
    "cursor pagination",
    "rate limit per API key",
    "token budget",
    "how are tests run",
];

#[derive(Debug, Args)]
pub struct CodeArgs {
    /// The repository to index (a copy of it, in fact).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Edits of one file, each followed by a timed refresh.
    #[arg(long, default_value_t = 10)]
    edits: usize,
    /// Passes over the query set.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Also write the JSON record to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct CodeReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub repository: String,
    pub files: usize,
    pub chunks: usize,
    pub full_index_ms: f64,
    pub index_file_bytes: u64,
    pub open_ms: f64,
    pub unchanged_refresh: Option<Summary>,
    pub incremental_refresh: Option<Summary>,
    pub search: Option<Summary>,
    pub machine: Machine,
}

pub fn run(args: &CodeArgs) -> Result<CodeReport> {
    let source = args.repo.canonicalize().with_context(|| format!("{} does not exist", args.repo.display()))?;
    let work = tempfile::tempdir()?;
    let copy = work.path().join("repository");
    copy_tracked(&source, &copy)?;
    let index_path = work.path().join("code.db");
    let embedder = || -> Result<Option<Arc<dyn kenning_core::Embedder>>> { Ok(Some(Arc::new(StaticEmbedder::builtin()?))) };

    let index = CodeIndex::open(&copy, &index_path, embedder()?)?;
    let started = Instant::now();
    let full = index.refresh()?;
    let full_index_ms = round(started.elapsed().as_secs_f64() * 1000.0);
    if full.chunks == 0 {
        bail!("{} has no source files the index parses", source.display());
    }
    drop(index);
    let started = Instant::now();
    let index = CodeIndex::open(&copy, &index_path, embedder()?)?;
    let open_ms = round(started.elapsed().as_secs_f64() * 1000.0);

    let mut unchanged = Vec::new();
    for _ in 0..args.edits.max(1) {
        let started = Instant::now();
        let stats = index.refresh()?;
        unchanged.push(started.elapsed());
        if stats.parsed != 0 {
            bail!("a refresh with nothing changed parsed {} files", stats.parsed);
        }
    }

    // The edited file: the largest Rust (else any) source file, the worst case for a re-parse.
    let edited = largest_source(&copy)?;
    let original = std::fs::read_to_string(&edited)?;
    let mut incremental = Vec::new();
    for edit in 0..args.edits.max(1) {
        std::fs::write(&edited, format!("{original}\n/// Added by the benchmark, edit {edit}.\npub fn benchmark_edit_{edit}() {{}}\n"))?;
        let started = Instant::now();
        let stats = index.refresh()?;
        incremental.push(started.elapsed());
        if stats.parsed != 1 {
            bail!("an edit of one file parsed {} files", stats.parsed);
        }
    }

    let mut search = Vec::new();
    for _ in 0..args.rounds.max(1) {
        for query in QUERIES {
            let started = Instant::now();
            index.search(query, &SearchScope::default(), 10)?;
            search.push(started.elapsed());
        }
    }
    Ok(CodeReport {
        benchmark: "code",
        kenning_version: env!("CARGO_PKG_VERSION"),
        repository: source.display().to_string(),
        files: full.files,
        chunks: full.chunks,
        full_index_ms,
        index_file_bytes: std::fs::metadata(&index_path).map(|metadata| metadata.len()).unwrap_or(0),
        open_ms,
        unchanged_refresh: Summary::of(&unchanged),
        incremental_refresh: Summary::of(&incremental),
        search: Summary::of(&search),
        machine: Machine::detect(),
    })
}

/// Copies the files a walk that respects `.gitignore` finds (what git would track).
fn copy_tracked(from: &Path, to: &Path) -> Result<()> {
    let walker = ignore::WalkBuilder::new(from).require_git(false).filter_entry(|entry| entry.file_name() != ".git").build();
    for entry in walker {
        let entry = entry?;
        let Ok(relative) = entry.path().strip_prefix(from) else { continue };
        let target = to.join(relative);
        if entry.file_type().is_some_and(|kind| kind.is_dir()) {
            std::fs::create_dir_all(&target)?;
        } else if entry.file_type().is_some_and(|kind| kind.is_file()) {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn largest_source(root: &Path) -> Result<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in ignore::WalkBuilder::new(root).build().flatten() {
        let path = entry.path();
        if kenning_code::Language::of(&path.to_string_lossy()) != Some(kenning_code::Language::Rust) {
            continue;
        }
        let size = entry.metadata().map(|metadata| metadata.len()).unwrap_or(0);
        if best.as_ref().is_none_or(|(known, _)| size > *known) {
            best = Some((size, path.to_owned()));
        }
    }
    best.map(|(_, path)| path).context("no Rust source file to edit")
}

pub fn table(report: &CodeReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "code: {} ({} files, {} chunks, index file {} KiB)", report.repository, report.files, report.chunks, report.index_file_bytes / 1024);
    let _ = writeln!(out, "  full index {:.0} ms; open {:.1} ms", report.full_index_ms, report.open_ms);
    let line = |name: &str, summary: &Option<Summary>| match summary {
        Some(summary) => format!("  {name}: p50 {:.2} ms, p95 {:.2} ms over {} runs\n", summary.p50_ms, summary.p95_ms, summary.samples),
        None => String::new(),
    };
    out.push_str(&line("unchanged refresh", &report.unchanged_refresh));
    out.push_str(&line("refresh after one edit", &report.incremental_refresh));
    out.push_str(&line("repo_search_patterns", &report.search));
    out
}
