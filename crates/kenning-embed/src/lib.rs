//! Embedding models for kenning: turning memories and queries into vectors for similarity search.
//!
//! - [`TransformerEmbedder`] runs a sentence-transformers BERT model (all-MiniLM-L6-v2, say)
//!   from a local folder with candle on the CPU, giving the same vectors as sentence-transformers.
//!   It implements [`kenning_core::Embedder`].
//! - [`Error`] says what went wrong loading or running a model, naming the folder and file at
//!   fault; it converts into [`kenning_core::Error::Embedding`] at the trait boundary.
//!
//! Invariant: nothing here touches the network. Models are read from folders the caller names,
//! so an embedder works offline and the same way on every machine.

mod error;
mod transformer;

pub use error::Error;
pub use transformer::TransformerEmbedder;
