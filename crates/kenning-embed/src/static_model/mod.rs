//! A static embedding model: one vector per vocabulary token, a sentence being the normalised
//! weighted mean of its tokens' vectors.
//!
//! The built-in model is all-MiniLM-L6-v2 distilled in the model2vec manner (`cargo xtask
//! distil`; `assets/README.md` records how, from what, and under which licence). Each token's
//! row already carries its weight, so embedding is tokenizing, adding rows and normalising:
//! microseconds per sentence, no network, no file to fetch.

mod asset;
mod tokenizer;

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

pub use asset::{StaticModelParts, encode};

use kenning_core::hex;

use crate::Error;
use asset::Layout;
use tokenizer::Vocabulary;

/// The distilled model compiled into the binary.
static BUILTIN: &[u8] = include_bytes!("../../assets/all-MiniLM-L6-v2-static.kns");

/// How many bytes of the body's sha256 the model id carries: enough that two different models
/// never share an id in practice, short enough to read.
const MODEL_ID_HASH_BYTES: usize = 4;
/// The fewest texts a thread of a batch embeds: about a millisecond's work, worth the cost of
/// starting the thread (tens of microseconds).
const PARALLEL_BATCH_SHARE: usize = 128;

/// A static embedding model read in place from its bytes (see the `asset` module for the
/// format): opening one checks its layout and decodes nothing, so the built-in model costs
/// the binary no start-up time.
///
/// The model id is the model's name followed by a prefix of its vectors' hash
/// (`all-MiniLM-L6-v2-static-256d@1a2b3c4d`), so any change to the vectors changes the id, and
/// the engine never compares vectors of two versions.
pub struct StaticEmbedder {
    bytes: Cow<'static, [u8]>,
    layout: Layout,
    model_id: String,
}

impl StaticEmbedder {
    /// The model built into kenning.
    pub fn builtin() -> Result<Self, Error> {
        Self::from_bytes(Cow::Borrowed(BUILTIN), "the built-in static model")
    }

    /// A model written by `cargo xtask distil`, read from a file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = std::fs::read(path)
            .map_err(|error| Error::InvalidFile { path: path.to_owned(), reason: error.to_string() })?;
        Self::from_bytes(Cow::Owned(bytes), &path.display().to_string())
    }

    /// A model from its bytes; `origin` names them in errors.
    pub fn from_bytes(bytes: Cow<'static, [u8]>, origin: &str) -> Result<Self, Error> {
        let layout = Layout::parse(&bytes)
            .map_err(|reason| Error::InvalidStaticModel { origin: origin.to_owned(), reason })?;
        let name = std::str::from_utf8(&bytes[layout.name.clone()]).expect("the layout checked the name is UTF-8");
        let model_id = format!("{name}@{}", hex(&layout.body_sha256[..MODEL_ID_HASH_BYTES]));
        Ok(StaticEmbedder { bytes, layout, model_id })
    }

    /// The token ids `text` becomes, `[UNK]` included and no `[CLS]` or `[SEP]` added: the
    /// ids BERT's uncased WordPiece tokenizer gives.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        tokenizer::tokenize(self, text, &mut ids);
        ids
    }

    /// The sha256 of the weights this model was distilled from, in hex.
    pub fn source_sha256(&self) -> String {
        hex(&self.layout.source_sha256)
    }

    fn embed_all(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        let mut ids = Vec::new();
        texts.iter().map(|text| self.embed_text(text, &mut ids)).collect()
    }

    fn embed_text(&self, text: &str, ids: &mut Vec<u32>) -> Vec<f32> {
        ids.clear();
        tokenizer::tokenize(self, text, ids);
        let mut sum = vec![0.0f32; self.layout.dimensions];
        for &id in ids.iter() {
            // `[UNK]` stands for every word the vocabulary cannot spell, so it says nothing
            // about this one; model2vec leaves it out too.
            if id == self.layout.unk_id {
                continue;
            }
            let scale = self.layout.scale(&self.bytes, id);
            for (total, &component) in sum.iter_mut().zip(self.layout.row(&self.bytes, id)) {
                *total += scale * f32::from(component as i8);
            }
        }
        // The mean's direction is the sum's, so the division by the token count is skipped.
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            sum.iter_mut().for_each(|x| *x /= norm);
        }
        sum
    }
}

impl Vocabulary for StaticEmbedder {
    fn lookup(&self, prefix: &[u8], rest: &[u8]) -> Option<u32> {
        self.layout.lookup(&self.bytes, prefix, rest)
    }

    fn unk_id(&self) -> u32 {
        self.layout.unk_id
    }

    fn longest_token(&self) -> usize {
        self.layout.longest_token
    }
}

impl kenning_core::Embedder for StaticEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.layout.dimensions
    }

    /// One unit vector per text; a text with no token the vocabulary knows (empty, or only
    /// unknown symbols) has no direction and gets the zero vector, which is similar to nothing.
    /// A large batch (an import, a bulk capture, a reindex) is split across the machine's
    /// cores; a small one is embedded on the caller's thread, where starting threads would cost
    /// more than it saves.
    fn embed(&self, texts: &[&str]) -> kenning_core::Result<Vec<Vec<f32>>> {
        // Asking for the core count reads cgroup files on Linux, so a small batch (a query is
        // one text) does not ask.
        let threads = if texts.len() < 2 * PARALLEL_BATCH_SHARE {
            1
        } else {
            std::thread::available_parallelism().map_or(1, usize::from).min(texts.len() / PARALLEL_BATCH_SHARE)
        };
        if threads <= 1 {
            return Ok(self.embed_all(texts));
        }
        let share = texts.len().div_ceil(threads);
        Ok(std::thread::scope(|scope| {
            let workers: Vec<_> = texts.chunks(share).map(|chunk| scope.spawn(move || self.embed_all(chunk))).collect();
            workers.into_iter().flat_map(|worker| worker.join().expect("embedding does not panic")).collect()
        }))
    }

    /// Averaged word vectors rank worse than the transformer they come from and, alone, worse
    /// than full text: on the LoCoMo dev split, hybrid recall_all@10 is 0.651 at 0.5, 0.661 at
    /// 0.4, 0.663 at 0.3 and 0.665 at 0.2, and 0.3 has the best recall@5 and @20 (the
    /// transformer does best at 0.5).
    fn recall_weight(&self) -> f64 {
        0.3
    }
}

impl fmt::Debug for StaticEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticEmbedder")
            .field("model_id", &self.model_id)
            .field("dimensions", &self.layout.dimensions)
            .field("vocab_size", &self.layout.vocab_size)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    /// Opening a model does not rehash it, so this is where the built-in model's header is
    /// checked against its body.
    #[test]
    fn the_builtin_header_hash_matches_its_body() {
        let embedder = StaticEmbedder::builtin().expect("the built-in model is valid");
        let digest = Sha256::digest(embedder.layout.body(&embedder.bytes));
        assert_eq!(digest.as_slice(), embedder.layout.body_sha256);
        assert!(embedder.model_id.ends_with(&hex(&digest[..MODEL_ID_HASH_BYTES])), "{}", embedder.model_id);
    }

    #[test]
    fn every_token_is_found_under_its_own_id() {
        let embedder = StaticEmbedder::builtin().expect("the built-in model is valid");
        for id in 0..embedder.layout.vocab_size as u32 {
            let token = embedder.layout.token(&embedder.bytes, id);
            assert_eq!(embedder.lookup(b"", token), Some(id), "token {id} {:?}", String::from_utf8_lossy(token));
        }
    }
}
