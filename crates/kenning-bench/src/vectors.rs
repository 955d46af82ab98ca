//! The `vectors` benchmark: the vector index alone, at sizes the capture path would take hours
//! to load (a million memories), searched by scanning and by walking its graph.
//!
//! The synthetic corpus's memories ([`crate::corpus`]) are embedded and put in a `SearchIndex`
//! as a store puts them. That index, built in memory, has no graph, so it searches by scanning
//! every vector's code and ranking the nearest. It is then written as an image, which links its
//! vectors in a graph (from `--graph-rows` vectors on), and read back; the index read back walks
//! the graph. The corpus's queries are asked of both, each search timed alone, and each answer's
//! first ten are checked against an exact search: every vector scored in `f32`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use chrono::{TimeZone, Utc};
use clap::Args;
use kenning_core::{MemoryKind, SearchFilter, Status};
use kenning_index::{BodyCheck, DocInput, SearchIndex, image_in_memory};
use serde::Serialize;

use crate::corpus::Corpus;
use crate::embedder::EmbedderArgs;
use crate::report::Machine;
use crate::stats::{Summary, round};

#[derive(Debug, Args)]
pub struct VectorsArgs {
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// How many memories of the synthetic corpus to index.
    #[arg(long, default_value_t = 100_000)]
    rows: usize,
    /// How many of the corpus's queries to search for.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Results asked for per search; recall's vector leg asks for 100.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Link the vectors in a graph from this many on (a store's default:
    /// `kenning_index::GRAPH_ROWS`).
    #[arg(long, default_value_t = kenning_index::GRAPH_ROWS)]
    graph_rows: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Also write the JSON record to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct VectorsReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub model: Option<String>,
    pub rows: usize,
    pub queries: usize,
    pub limit: usize,
    pub graph_rows: usize,
    pub embed_seconds: f64,
    pub build_seconds: f64,
    /// Linking the vectors and writing the image, in one.
    pub link_and_write_seconds: f64,
    pub image_bytes: usize,
    pub linked_vectors: usize,
    pub scan: SearchFigures,
    pub graph: SearchFigures,
    pub machine: Machine,
}

#[derive(Debug, Serialize)]
pub struct SearchFigures {
    pub latency: Option<Summary>,
    /// Of each query's exact ten nearest, the share among the first ten returned.
    pub recall_at_10: f64,
}

const MODEL: &str = "vectors-benchmark";
const K: usize = 10;

pub fn run(args: &VectorsArgs) -> Result<VectorsReport> {
    ensure!(args.limit >= K, "--limit must be at least {K}, the depth recall@10 is measured at");
    let loaded = args.embedder.load()?;
    let embedder = loaded.embedder.context("the vectors benchmark needs an embedder: pass --embedder builtin or transformer")?;
    let corpus = Corpus::new(args.seed);

    let started = Instant::now();
    let mut vectors: Vec<Vec<f32>> = Vec::with_capacity(args.rows);
    for first in (0..args.rows).step_by(1000) {
        let texts: Vec<String> = (first..(first + 1000).min(args.rows))
            .map(|index| {
                let memory = corpus.memory(index);
                memory.title.map_or_else(|| memory.content.clone(), |title| format!("{title}\n{}", memory.content))
            })
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        vectors.extend(embedder.embed(&texts).context("embedding the memories")?);
    }
    let query_texts: Vec<String> = (0..args.queries).map(|index| corpus.query(index, args.rows)).collect();
    let query_refs: Vec<&str> = query_texts.iter().map(String::as_str).collect();
    // A query with no word the model knows embeds to zero and has no nearest neighbours.
    let queries: Vec<Vec<f32>> =
        embedder.embed(&query_refs).context("embedding the queries")?.into_iter().filter(|vector| vector.iter().any(|value| *value != 0.0)).collect();
    let embed_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let mut index = SearchIndex::new();
    index.add_model(MODEL);
    let occurred_at = Utc.timestamp_opt(1_700_000_000, 0).single().context("a fixed time")?;
    for (row, vector) in vectors.iter().enumerate() {
        let id = format!("m{row:08}");
        let text = format!("memory {row}");
        let doc = DocInput {
            id: &id,
            kind: MemoryKind::Semantic,
            status: Status::Active,
            namespace: "learnings",
            tags: &[],
            confidence: 0.9,
            occurred_at,
            text: &text,
            facets: &[],
        };
        index.upsert(row as i64, &doc, &[(MODEL, vector)]);
    }
    let build_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let graphs = index.graph_work(args.graph_rows).link(&std::sync::atomic::AtomicBool::new(false));
    let mut image = std::io::Cursor::new(Vec::new());
    index.write_image_with(b"vectors benchmark", &mut image, &graphs).context("writing the image")?;
    let link_and_write_seconds = started.elapsed().as_secs_f64();
    let image = image.into_inner();
    let image_bytes = image.len();
    let in_memory = image_in_memory(&image);
    drop(image);
    let (opened, _) = SearchIndex::read_image(in_memory, BodyCheck::Checksum).context("reading the image back")?;

    let exact = exact_nearest(&vectors, &queries);
    let scan = measure(&index, &queries, &exact, args.limit);
    let graph = measure(&opened, &queries, &exact, args.limit);
    Ok(VectorsReport {
        benchmark: "vectors",
        kenning_version: env!("CARGO_PKG_VERSION"),
        model: loaded.model,
        rows: args.rows,
        queries: queries.len(),
        limit: args.limit,
        graph_rows: args.graph_rows,
        embed_seconds: round(embed_seconds),
        build_seconds: round(build_seconds),
        link_and_write_seconds: round(link_and_write_seconds),
        image_bytes,
        linked_vectors: opened.linked_vectors(MODEL),
        scan,
        graph,
        machine: Machine::detect(),
    })
}

/// The rows of each query's exact ten nearest vectors, by their `f32` dot products.
fn exact_nearest(vectors: &[Vec<f32>], queries: &[Vec<f32>]) -> Vec<Vec<usize>> {
    queries
        .iter()
        .map(|query| {
            let mut best: Vec<(f32, usize)> = Vec::with_capacity(K + 1);
            for (row, vector) in vectors.iter().enumerate() {
                let score: f32 = vector.iter().zip(query).map(|(a, b)| a * b).sum();
                if best.len() < K || score > best[K - 1].0 {
                    let at = best.partition_point(|(other, _)| *other >= score);
                    best.insert(at, (score, row));
                    best.truncate(K);
                }
            }
            best.into_iter().map(|(_, row)| row).collect()
        })
        .collect()
}

/// Times each query's search of `index` alone, and how many of its exact ten nearest are among
/// the first ten found.
fn measure(index: &SearchIndex, queries: &[Vec<f32>], exact: &[Vec<usize>], limit: usize) -> SearchFigures {
    let filter = SearchFilter::active();
    let mut times: Vec<Duration> = Vec::with_capacity(queries.len());
    let (mut found, mut possible) = (0, 0);
    for (query, nearest) in queries.iter().zip(exact) {
        let started = Instant::now();
        let hits = index.search_vector(query, MODEL, &filter, limit);
        times.push(started.elapsed());
        let first: Vec<&str> = hits.iter().take(K).map(|hit| hit.id.as_str()).collect();
        possible += nearest.len();
        found += nearest.iter().filter(|row| first.contains(&format!("m{row:08}").as_str())).count();
    }
    SearchFigures {
        latency: Summary::of(&times),
        recall_at_10: if possible == 0 { 1.0 } else { round(found as f64 / possible as f64 * 10_000.0) / 10_000.0 },
    }
}

pub fn table(report: &VectorsReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "vectors: {} rows, {} queries, limit {}, graph from {} rows ({} linked)",
        report.rows, report.queries, report.limit, report.graph_rows, report.linked_vectors
    );
    let _ = writeln!(
        out,
        "  embed {:.1} s, build {:.1} s, link and write {:.1} s, image {:.1} MiB",
        report.embed_seconds,
        report.build_seconds,
        report.link_and_write_seconds,
        report.image_bytes as f64 / (1024.0 * 1024.0)
    );
    for (name, figures) in [("scan", &report.scan), ("graph walk", &report.graph)] {
        if let Some(latency) = &figures.latency {
            let _ = writeln!(
                out,
                "  {name:<12} p50 {:.3} ms, p95 {:.3} ms   recall@10 {:.4} against exact search",
                latency.p50_ms, latency.p95_ms, figures.recall_at_10
            );
        }
    }
    out
}
