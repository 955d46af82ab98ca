//! The `--embedder` and `--model-dir` options every benchmark shares, and loading the embedder
//! they name.
//!
//! The choices carry the names the binary's configuration uses, so that a figure measured with
//! `--embedder X` is the figure a user gets with `embedder = "X"`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use kenning_core::Embedder;
use kenning_embed::{StaticEmbedder, TransformerEmbedder};

use crate::stats::round;

#[derive(Debug, Clone, Args)]
pub struct EmbedderArgs {
    #[arg(long, value_enum, default_value_t = EmbedderChoice::None)]
    pub embedder: EmbedderChoice,
    /// The sentence-transformers model folder for `--embedder transformer`; the default is
    /// relative to the repository root, where the benchmarks are meant to be run.
    #[arg(long, env = "KENNING_MODEL_DIR", default_value = "../shared/models/all-MiniLM-L6-v2")]
    pub model_dir: PathBuf,
    /// For `--embedder builtin`: a static model written by `cargo xtask distil` to use instead
    /// of the one compiled in, to compare distillation settings.
    #[arg(long)]
    pub static_model: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmbedderChoice {
    /// Full-text (BM25) recall only.
    None,
    /// Hybrid recall with the static model compiled into kenning (the default of the binary).
    Builtin,
    /// Hybrid recall with a local sentence-transformers model; every capture is embedded.
    Transformer,
}

impl EmbedderChoice {
    pub fn name(self) -> &'static str {
        match self {
            EmbedderChoice::None => "none",
            EmbedderChoice::Builtin => "builtin",
            EmbedderChoice::Transformer => "transformer",
        }
    }
}

/// The embedder a benchmark runs with, and what loading it cost.
pub struct LoadedEmbedder {
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The embedding model's id, when there is one.
    pub model: Option<String>,
    pub load_ms: Option<f64>,
}

impl EmbedderArgs {
    pub fn load(&self) -> Result<LoadedEmbedder> {
        if self.static_model.is_some() && self.embedder != EmbedderChoice::Builtin {
            bail!("--static-model replaces the built-in model, so it needs --embedder builtin");
        }
        let started = Instant::now();
        let embedder: Option<Arc<dyn Embedder>> = match self.embedder {
            EmbedderChoice::None => None,
            EmbedderChoice::Builtin => {
                let embedder = match &self.static_model {
                    Some(path) => StaticEmbedder::load(path)?,
                    None => StaticEmbedder::builtin()?,
                };
                Some(Arc::new(embedder))
            }
            EmbedderChoice::Transformer => {
                let embedder = TransformerEmbedder::load(&self.model_dir).with_context(|| {
                    format!("loading the model in {} (pass --model-dir)", self.model_dir.display())
                })?;
                Some(Arc::new(embedder))
            }
        };
        let load_ms = embedder.is_some().then(|| round(started.elapsed().as_secs_f64() * 1000.0));
        let model = embedder.as_ref().map(|embedder| embedder.model_id().to_owned());
        Ok(LoadedEmbedder { embedder, model, load_ms })
    }
}
