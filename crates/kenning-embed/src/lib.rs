//! Embedding models for kenning: turning memories and queries into vectors for similarity search.
//!
//! - [`StaticEmbedder`] is the built-in model: all-MiniLM-L6-v2 distilled into one vector per
//!   vocabulary token, compiled into the binary and read in place. It needs no download and
//!   embeds a sentence in microseconds. [`StaticModelParts`] and [`encode`] write the format it
//!   reads (the distillation, `cargo xtask distil`, uses them).
//! - [`TransformerEmbedder`] runs a sentence-transformers BERT model (all-MiniLM-L6-v2, say)
//!   from a local folder with candle on the CPU, giving the same vectors as sentence-transformers:
//!   better vectors, at milliseconds per sentence and a model folder to provide.
//! - [`Error`] says what went wrong loading or running a model, naming the folder and file at
//!   fault; it converts into [`kenning_core::Error::Embedding`] at the trait boundary.
//!
//! Both implement [`kenning_core::Embedder`].
//!
//! Invariant: nothing here touches the network. Models are compiled in or read from paths the
//! caller names, so an embedder works offline and the same way on every machine.

mod bert;
mod error;
mod static_model;
mod transformer;

pub use error::Error;
pub use static_model::{StaticEmbedder, StaticModelParts, encode};
pub use transformer::TransformerEmbedder;
