//! `cargo xtask`: project tasks written in Rust, kept out of the kenning binary.
//!
//! - `distil` ([`distil`]): distils a sentence-transformers model into the static embedding
//!   model that kenning compiles in (`crates/kenning-embed/assets`), with [`pca`] for the
//!   dimension reduction.

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
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Distil(args) => distil::run(&args),
    }
}
