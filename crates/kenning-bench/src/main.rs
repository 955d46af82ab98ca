//! `kenning-bench`: benchmarks of kenning, run on demand rather than as tests.
//!
//! Each subcommand prints one JSON object on stdout, the record to keep and compare, and a short
//! table on stderr. The workload is synthetic and seeded ([`corpus`]), so a run is repeatable on
//! any machine. Subcommands:
//!
//! - `latency`: capture and recall speed, store size and memory use, calling the engine in process.
//!
//! Modules: [`corpus`] generates memories and queries, [`latency`] runs that benchmark,
//! [`stats`] summarises samples, [`report`] describes the machine and prints results. Other
//! benchmarks (through the MCP transport, cold start, retrieval quality) belong beside
//! `latency`, reusing the corpus, the statistics and the machine description.

mod corpus;
mod latency;
mod report;
mod stats;

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
    /// Capture throughput, recall latency, store size and peak memory on a synthetic corpus.
    Latency(latency::LatencyArgs),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Latency(args) => {
            let report = latency::run(&args)?;
            report::emit(&report, args.json_out.as_deref())
        }
    }
}
