//! What can go wrong while loading a model or embedding with it.

use std::path::PathBuf;

/// A failure to load an embedding model or to run it.
///
/// Loading errors name the folder and the file involved, because the usual cause is a model
/// folder that is incomplete or in a format this crate does not read, and the person fixing it
/// needs to know where to look.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("embedding model folder {} does not exist or is not a folder", dir.display())]
    MissingFolder { dir: PathBuf },

    #[error(
        "embedding model folder {} has no {file}; a sentence-transformers BERT folder needs \
         config.json, tokenizer.json and model.safetensors",
        dir.display()
    )]
    MissingFile { dir: PathBuf, file: &'static str },

    /// A file is present but cannot be read or parsed, or asks for something this crate does
    /// not implement (another pooling mode, say).
    #[error("cannot use {}: {reason}", path.display())]
    InvalidFile { path: PathBuf, reason: String },

    /// A static model's bytes are not a model this build can read: the file is damaged or was
    /// written by another version of `cargo xtask distil`.
    #[error("cannot use {origin} as a static embedding model: {reason}")]
    InvalidStaticModel { origin: String, reason: String },

    #[error("tokenizing the input failed: {0}")]
    Tokenize(String),

    #[error("running the embedding model failed: {0}")]
    Inference(#[from] candle_core::Error),
}

/// Callers behind the [`kenning_core::Embedder`] trait see one embedding error kind carrying
/// the message, which is all they can act on.
impl From<Error> for kenning_core::Error {
    fn from(error: Error) -> Self {
        kenning_core::Error::Embedding(error.to_string())
    }
}
