//! `cargo xtask`: project tasks written in Rust, kept out of the kenning binary.
//!
//! - `distil` ([`distil`]): distils a sentence-transformers model into the static embedding
//!   model that kenning compiles in (`crates/kenning-embed/assets`), with [`pca`] for the
//!   dimension reduction.
//! - `dist` ([`dist`]): the release archive, the Python wheel and the npm packages of the
//!   `kenning` binary for the host platform, with their SHA-256 sums.
//! - `architecture` ([`architecture`]): writes ARCHITECTURE.md's crate graph from `cargo
//!   metadata`; with `--check`, fails when the graph or a path the document names is out of date.

mod architecture;
mod dist;
mod distil;
mod pca;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "xtask", about = "Project tasks of the kenning repository")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Distil a sentence-transformers BERT model into a static embedding model.
    Distil(distil::DistilArgs),
    /// Package the kenning binary for the host platform: archive, wheel, npm packages, checksums.
    Dist(dist::DistArgs),
    /// Write ARCHITECTURE.md's crate graph from `cargo metadata`, or check the document (`--check`).
    Architecture(architecture::ArchitectureArgs),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Distil(args) => distil::run(&args),
        Command::Dist(args) => dist::run(&args),
        Command::Architecture(args) => architecture::run(&args),
    }
}
