//! What a benchmark run reports, and how.
//!
//! The JSON object on stdout is the record: it carries the machine and the settings next to the
//! figures, so that results from different machines and commits can be compared without knowing
//! how they were run. The table on stderr is for the person watching the run.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::stats::Summary;

/// The machine the figures were taken on. Fields the platform does not expose are `null`.
#[derive(Debug, Serialize)]
pub struct Machine {
    pub os: &'static str,
    pub arch: &'static str,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    /// What `std::thread::available_parallelism` reports: cores this process may use.
    pub cpus: usize,
    pub memory_total_bytes: Option<u64>,
    /// The 1-minute load average when the run began: other work on the machine (builds,
    /// other benchmarks) slows every figure, and this says how busy it was.
    pub load_average: Option<f64>,
    /// Where the store was created. Its filesystem decides what an fsync costs, and every
    /// capture ends in one; set `TMPDIR` to measure another disk.
    pub temp_dir: String,
    /// The file system under `temp_dir` (type and device, and for ext4 whether it keeps a
    /// journal): without a journal, ext4 skips every inode deleted in the last minute each time
    /// it makes a file, so a benchmark that makes files (a git notes capture makes five) runs
    /// slower just after another removed its temporary directory.
    pub temp_file_system: Option<String>,
}

impl Machine {
    pub fn detect() -> Machine {
        let proc_file = |path: &str| std::fs::read_to_string(path).ok();
        Machine {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            kernel: proc_file("/proc/sys/kernel/osrelease").map(|text| text.trim().to_owned()),
            cpu_model: proc_file("/proc/cpuinfo").and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("model name"))
                    .and_then(|line| line.split_once(':'))
                    .map(|(_, model)| model.trim().to_owned())
            }),
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            memory_total_bytes: proc_file("/proc/meminfo").and_then(|text| status_kib(&text, "MemTotal:")),
            load_average: proc_file("/proc/loadavg")
                .and_then(|text| text.split_whitespace().next().and_then(|load| load.parse().ok())),
            temp_dir: std::env::temp_dir().display().to_string(),
            temp_file_system: file_system_of(&std::env::temp_dir()),
        }
    }
}

/// The file system holding `path`, from the mount table: the longest mount point above it.
fn file_system_of(path: &std::path::Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    let path = std::fs::canonicalize(path).ok()?;
    let (device, kind) = mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some((fields.next()?, fields.next()?, fields.next()?))
        })
        .filter(|(_, mount_point, _)| path.starts_with(mount_point))
        .max_by_key(|(_, mount_point, _)| mount_point.len())
        .map(|(device, _, kind)| (device, kind))?;
    // ext4 names the thread that commits its journal here, and `<none>` when it has none.
    let journal = std::path::Path::new(device)
        .file_name()
        .filter(|_| kind == "ext4")
        .and_then(|name| std::fs::read_to_string(std::path::Path::new("/sys/fs/ext4").join(name).join("journal_task")).ok())
        .map(|task| if task.trim() == "<none>" { ", without a journal" } else { ", with a journal" })
        .unwrap_or_default();
    Some(format!("{kind} on {device}{journal}"))
}

/// A `Key:   1234 kB` line of a /proc status file, in bytes.
pub fn status_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(key))?;
    let kib: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// The `latency` benchmark's result.
#[derive(Debug, Serialize)]
pub struct LatencyReport {
    pub benchmark: &'static str,
    pub kenning_version: &'static str,
    pub started_at: String,
    pub machine: Machine,
    pub memories: usize,
    pub seed: u64,
    /// The vector leg's recall@10 against exact search; `null` without an embedder.
    pub vector_search: Option<VectorSearchFigures>,
    /// `power-loss` or `process-crash`, for the benchmark's store and the server's.
    pub durability: &'static str,
    pub queries: usize,
    /// `none` or `transformer`.
    pub embedder: &'static str,
    /// The embedding model's id, when there is one.
    pub model: Option<String>,
    pub model_load_ms: Option<f64>,
    pub corpus: CorpusFigures,
    /// One `capture` call per memory.
    pub single_capture: Option<Throughput>,
    /// `capture_many` calls of `batch_size` memories; `null` when the single phase covered them all.
    pub bulk_capture: Option<Throughput>,
    /// Recall calling `MemoryService` directly: no serialisation, no transport.
    pub recall: RecallFigures,
    /// The same, each recall after the caller was idle for `idle_ms` (`--idle-ms`); `null` with
    /// `--idle-queries 0`.
    pub recall_after_idle: Option<RecallFigures>,
    /// How long the caller waited before each of those recalls, in process and over MCP.
    pub idle_ms: u64,
    /// The search index and its file beside the store.
    pub index: IndexFigures,
    /// The real binary over MCP stdio; `null` with `--skip-mcp`.
    pub mcp: Option<McpFigures>,
    /// The database, its write-ahead log and shared-memory index after loading, before recall.
    pub store_bytes: u64,
    /// The benchmark process's peak resident set (VmHWM) after the in-process phases: the heap,
    /// the model if any, and the pages of the store that SQLite's readers memory-map, which
    /// count as resident once touched although the kernel can drop them at will. At large
    /// stores the mapped pages dominate.
    pub peak_rss_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct CorpusFigures {
    pub mean_content_bytes: f64,
    /// Generated memories the store recognised as exact duplicates and did not store again.
    pub duplicates: usize,
}

/// A write phase: how many memories, how long all the calls took, and each call's latency.
#[derive(Debug, Serialize)]
pub struct Throughput {
    /// The `MemoryService` method called.
    pub method: &'static str,
    pub memories: usize,
    pub batch_size: usize,
    pub seconds: f64,
    pub memories_per_second: f64,
    pub call_latency: Summary,
}

#[derive(Debug, Serialize)]
pub struct RecallFigures {
    pub limit: usize,
    pub mean_results: f64,
    /// Queries that found nothing; a high share means the queries do not exercise ranking.
    pub empty_results: usize,
    pub latency: Summary,
}

/// The store's vector search against exact search, over the benchmark's queries.
#[derive(Debug, Serialize)]
pub struct VectorSearchFigures {
    /// Queries with a vector (a query with no word the model knows has none).
    pub queries: usize,
    /// The share of each query's exact ten nearest neighbours the store returned, on average.
    pub recall_at_10: f64,
    /// The largest amount by which a returned top-ten neighbour's exact cosine falls short of
    /// the exact tenth's: how near to a tie the misses are.
    pub worst_shortfall: f64,
    /// How long the exact scan took.
    pub seconds: f64,
}

/// The search index: built from the database, written to its file, and opened from it.
#[derive(Debug, Serialize)]
pub struct IndexFigures {
    /// Building the index from every row of the database (text and vectors), in memory.
    pub build_ms: f64,
    /// Writing the index file after the build (waiting for the background write it started).
    pub write_ms: f64,
    pub file_bytes: Option<u64>,
    /// A second store on the same database opening the index file and catching up.
    pub open_ms: f64,
    /// Recall in process through that second store, whose index is read from the file in place.
    pub recall: RecallFigures,
    /// Its recall p50 over the p50 of recall on the index built in memory, in the same run.
    pub recall_p50_ratio: f64,
}

/// `kenning serve` measured from outside, as an MCP client sees it.
#[derive(Debug, Serialize)]
pub struct McpFigures {
    pub kenning_bin: String,
    pub transport: &'static str,
    /// `tools/call memory_recall` from writing the request to reading the response.
    pub recall: RecallFigures,
    /// The same, each call after the client was idle for the report's `idle_ms`.
    pub recall_after_idle: Option<RecallFigures>,
    /// From spawning the process to reading the `initialize` result, on the loaded store.
    pub cold_start: Summary,
    /// From spawning the process to the result of its first `memory_recall`, handshake
    /// included: what an agent's first question of a session waits for.
    pub first_recall: Summary,
    /// From closing a server's stdin to its exit, for every server started.
    pub exit: Summary,
    /// The server's peak resident set (VmHWM) after the recalls, before it shut down.
    pub server_peak_rss_bytes: Option<u64>,
    /// Of its resident set then, its own memory (RssAnon: the heap, what the index copied or
    /// added since its file) ...
    pub server_private_rss_bytes: Option<u64>,
    /// ... and the pages of mapped files it has read (RssFile: mostly the index file, shared
    /// with every process on the store and dropped first when memory is short).
    pub server_mapped_rss_bytes: Option<u64>,
}

/// Prints the JSON record on stdout (and to `json_out`, if given) and the table on stderr.
pub fn emit(json: &str, table: &str, json_out: Option<&Path>) -> Result<()> {
    println!("{json}");
    if let Some(path) = json_out {
        std::fs::write(path, format!("{json}\n")).with_context(|| format!("writing {}", path.display()))?;
    }
    eprint!("{table}");
    Ok(())
}

pub fn latency_table(report: &LatencyReport) -> String {
    let mut out = String::new();
    let model = report.model.as_deref().map_or(String::new(), |model| format!(" ({model})"));
    let _ = writeln!(
        out,
        "latency: {} memories, seed {}, embedder {}{model}, durability {}, {} CPUs, load average {}",
        report.memories,
        report.seed,
        report.embedder,
        report.durability,
        report.machine.cpus,
        report.machine.load_average.map_or("unknown".to_owned(), |load| format!("{load:.1}"))
    );
    for (name, phase) in [("single capture", &report.single_capture), ("bulk capture", &report.bulk_capture)] {
        if let Some(phase) = phase {
            let _ = writeln!(
                out,
                "  {name:<17} {:>7} memories {:>9.1}/s   per {} call ({}): {}",
                phase.memories,
                phase.memories_per_second,
                phase.method,
                phase.batch_size,
                percentiles(&phase.call_latency)
            );
        }
    }
    let mut recall_row = |name: &str, recall: &RecallFigures| {
        let _ = writeln!(
            out,
            "  {name:<17} {:>7} queries  {:>9.1} hits  {}",
            recall.latency.samples,
            recall.mean_results,
            percentiles(&recall.latency)
        );
    };
    let after_idle = format!("after {} ms idle", report.idle_ms);
    recall_row("recall in process", &report.recall);
    if let Some(recall) = &report.recall_after_idle {
        recall_row(&after_idle, recall);
    }
    recall_row("recall from file", &report.index.recall);
    if let Some(mcp) = &report.mcp {
        recall_row("recall MCP stdio", &mcp.recall);
        if let Some(recall) = &mcp.recall_after_idle {
            recall_row(&after_idle, recall);
        }
        for (name, summary) in [("cold start", &mcp.cold_start), ("first recall", &mcp.first_recall)] {
            let _ = writeln!(out, "  {name:<17} {:>7} spawns                     {}", summary.samples, percentiles(summary));
        }
        let _ = writeln!(out, "  {:<17} {:>7} servers                    {}", "exit", mcp.exit.samples, percentiles(&mcp.exit));
    }
    let index = &report.index;
    let _ = writeln!(
        out,
        "  {:<17} build {:.0} ms, write {:.0} ms, {:.1} MiB, open {:.1} ms; recall p50 from file / in memory {:.2}",
        "index file",
        index.build_ms,
        index.write_ms,
        mib(index.file_bytes.unwrap_or_default()),
        index.open_ms,
        index.recall_p50_ratio
    );
    if let Some(vector) = &report.vector_search {
        let _ = writeln!(
            out,
            "  {:<17} {:>7} queries    recall@10 {:.4} against exact search, worst cosine shortfall {:.4} ({:.1} s to scan)",
            "vector search", vector.queries, vector.recall_at_10, vector.worst_shortfall, vector.seconds
        );
    }
    let per_memory = report.store_bytes as f64 / report.memories.max(1) as f64;
    let _ = writeln!(out, "  {:<17} {:>10.1} MiB ({per_memory:.0} bytes a memory)", "store on disk", mib(report.store_bytes));
    let server = report.mcp.as_ref().and_then(|mcp| mcp.server_peak_rss_bytes);
    for (name, peak) in [("peak RSS bench", report.peak_rss_bytes), ("peak RSS server", server)] {
        if let Some(peak) = peak {
            let _ = writeln!(out, "  {name:<17} {:>10.1} MiB", mib(peak));
        }
    }
    if let Some(mcp) = &report.mcp
        && let (Some(private), Some(mapped)) = (mcp.server_private_rss_bytes, mcp.server_mapped_rss_bytes)
    {
        let _ = writeln!(out, "  {:<17} {:>10.1} MiB its own, {:.1} MiB of mapped files", "RSS server now", mib(private), mib(mapped));
    }
    out
}

fn percentiles(summary: &Summary) -> String {
    format!("p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms", summary.p50_ms, summary.p95_ms, summary.p99_ms)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_in_bytes() {
        let status = "Name:\tkenning-bench\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(51200 * 1024));
        assert_eq!(status_kib(status, "VmSwap:"), None);
    }
}
