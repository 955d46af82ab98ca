//! A sentence-transformers BERT model run with candle on the CPU.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use crate::Error;
use crate::bert::{BertModel, Config};

/// How many texts go through the network together. Texts are sorted by length before batching,
/// so a batch pads little. 32 keeps the attention scores of a batch of 256-token texts near
/// 100 MB (32 texts × 12 heads × 256² floats) while giving the matrix multiplications hundreds
/// of rows even for short texts, which is what lets them use more than one core.
const BATCH_SIZE: usize = 32;

/// A sentence-transformers BERT model (all-MiniLM-L6-v2, say) loaded from a local folder.
///
/// It reproduces what sentence-transformers computes for such a model: the text is tokenized
/// with the folder's `tokenizer.json`, truncated to the model's `max_seq_length`, run through
/// BERT in f32, mean-pooled over the real tokens and L2-normalised. Nothing is downloaded.
///
/// The matrix multiplications run on candle's CPU thread pool, which has one thread per
/// physical core (two on the project's machines); `RAYON_NUM_THREADS` caps it where the
/// embedder must leave cores to other work.
pub struct TransformerEmbedder {
    model_id: String,
    dimensions: usize,
    max_seq_length: usize,
    /// Set by `do_lower_case` in `sentence_bert_config.json`: sentence-transformers then
    /// lowercases the text itself, whatever the tokenizer does.
    lowercase: bool,
    pad_token_id: u32,
    tokenizer: Tokenizer,
    model: BertModel,
    device: Device,
}

impl TransformerEmbedder {
    /// Loads the model in `dir`, which must hold `config.json`, `tokenizer.json` and
    /// `model.safetensors`; `sentence_bert_config.json` and `1_Pooling/config.json` are read
    /// when present. The model id comes from the weights themselves (see [`model_id`]), so the
    /// same model has the same id wherever its folder sits and whatever it is called.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let started = Instant::now();
        if !dir.is_dir() {
            return Err(Error::MissingFolder { dir: dir.to_path_buf() });
        }
        let config_path = require(dir, "config.json")?;
        let tokenizer_path = require(dir, "tokenizer.json")?;
        let weights_path = require(dir, "model.safetensors")?;

        let config: Config = serde_json::from_str(&read(&config_path)?).map_err(|e| invalid(&config_path, e))?;
        config.check().map_err(|reason| invalid(&config_path, reason))?;
        check_pooling(dir)?;
        let (max_seq_length, lowercase) = sentence_settings(dir, &config)?;

        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| invalid(&tokenizer_path, e))?;
        // tokenizer.json files carry whatever truncation and padding were last set on them
        // (all-MiniLM-L6-v2's pads everything to 128), and sentence-transformers overrides both
        // on every call; so do we. Padding is done per batch in `forward`.
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max_seq_length, ..Default::default() }))
            .map_err(|e| invalid(&tokenizer_path, e))?;
        tokenizer.with_padding(None);

        let device = Device::Cpu;
        // Reading the file rather than memory-mapping it needs no unsafe code, and costs
        // nothing extra: candle copies mapped CPU tensors into owned buffers anyway. The bytes
        // read once serve both the id's hash and the tensors.
        let (model_id, tensors) = {
            let weights = std::fs::read(&weights_path).map_err(|e| invalid(&weights_path, e))?;
            let tensors = candle_core::safetensors::load_buffer(&weights, &device).map_err(|e| invalid(&weights_path, e))?;
            (model_id(&config, &Sha256::digest(&weights)), tensors)
        };
        let model = BertModel::load(VarBuilder::from_tensors(tensors, DType::F32, &device), &config)
            .map_err(|e| invalid(&weights_path, e))?;

        let embedder = TransformerEmbedder {
            model_id,
            dimensions: config.hidden_size,
            max_seq_length,
            lowercase,
            pad_token_id: config.pad_token_id as u32,
            tokenizer,
            model,
            device,
        };
        tracing::info!(
            model = %embedder.model_id,
            dimensions = embedder.dimensions,
            max_seq_length,
            threads = candle_core::utils::get_num_threads(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded embedding model from {}",
            dir.display()
        );
        Ok(embedder)
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        let inputs: Vec<Cow<str>> = texts
            .iter()
            .map(|&text| if self.lowercase { Cow::Owned(text.to_lowercase()) } else { Cow::Borrowed(text) })
            .collect();
        let encodings = self.tokenizer.encode_batch_fast(inputs, true).map_err(|e| Error::Tokenize(e.to_string()))?;

        // Batching texts of similar length together keeps padding, which is pure waste, small.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); encodings.len()];
        for batch in order.chunks(BATCH_SIZE) {
            let encoded: Vec<&Encoding> = batch.iter().map(|&i| &encodings[i]).collect();
            for (&i, vector) in batch.iter().zip(self.forward(&encoded)?) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// Embeds one batch, padding it to its longest text.
    fn forward(&self, batch: &[&Encoding]) -> Result<Vec<Vec<f32>>, Error> {
        let sequences: Vec<&[u32]> = batch.iter().map(|encoding| encoding.get_ids()).collect();
        let mean = self.mean_pool(&sequences)?;
        // L2 normalisation with the same guard against division by zero as sentence-transformers.
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2()?)
    }

    /// The model's mean-pooled output for sequences of token ids taken as they are: nothing
    /// is added, truncated or normalised.
    ///
    /// This is what a static embedding model is distilled from: each vocabulary token run
    /// through the network between the tokenizer's `[CLS]` and `[SEP]` ids. The caller picks
    /// the batch; sequences of unequal length are padded to the longest and the padding is
    /// left out of the mean.
    pub fn mean_pool_token_ids(&self, sequences: &[&[u32]]) -> Result<Vec<Vec<f32>>, Error> {
        if sequences.is_empty() {
            return Ok(Vec::new());
        }
        self.device.with_context(|| Ok(self.mean_pool(sequences)?.to_vec2()?))
    }

    /// Runs one padded batch through BERT and averages each sequence's hidden states over its
    /// real tokens, guarding the division as sentence-transformers does (1e-9).
    fn mean_pool(&self, sequences: &[&[u32]]) -> Result<Tensor, Error> {
        let width = sequences.iter().map(|ids| ids.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(sequences.len() * width);
        let mut mask = Vec::with_capacity(sequences.len() * width);
        for sequence in sequences {
            let padding = width - sequence.len();
            ids.extend(sequence.iter().copied().chain(std::iter::repeat_n(self.pad_token_id, padding)));
            mask.extend(std::iter::repeat_n(1u32, sequence.len()).chain(std::iter::repeat_n(0, padding)));
        }
        let shape = (sequences.len(), width);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        // Every text is a single segment, so every token type id is 0.
        let type_ids = ids.zeros_like()?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;

        let hidden = self.model.forward(&ids, &type_ids, &mask)?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f32::MAX)?;
        Ok(summed.broadcast_div(&counts)?)
    }
}

impl kenning_core::Embedder for TransformerEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn embed(&self, texts: &[&str]) -> kenning_core::Result<Vec<Vec<f32>>> {
        // Running the whole job inside candle's thread pool keeps its workers warm across the
        // many short parallel sections of a forward pass, and has the tokenizer's parallel
        // work share those threads instead of starting rayon's global pool as well.
        Ok(self.device.with_context(|| self.embed_texts(texts))?)
    }
}

impl fmt::Debug for TransformerEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransformerEmbedder")
            .field("model_id", &self.model_id)
            .field("dimensions", &self.dimensions)
            .field("max_seq_length", &self.max_seq_length)
            .finish_non_exhaustive()
    }
}

fn require(dir: &Path, file: &'static str) -> Result<PathBuf, Error> {
    let path = dir.join(file);
    if path.is_file() { Ok(path) } else { Err(Error::MissingFile { dir: dir.to_path_buf(), file }) }
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| invalid(path, e))
}

fn invalid(path: &Path, reason: impl fmt::Display) -> Error {
    Error::InvalidFile { path: path.to_path_buf(), reason: reason.to_string() }
}

/// Reads an optional JSON file, `None` if it is absent.
fn read_optional_json(path: &Path) -> Result<Option<Value>, Error> {
    if !path.is_file() {
        return Ok(None);
    }
    serde_json::from_str(&read(path)?).map(Some).map_err(|e| invalid(path, e))
}

/// The token limit and lowercasing that sentence-transformers applies before the tokenizer.
///
/// Without `sentence_bert_config.json` the limit is the model's position count, the most it
/// can take; with it, the configured limit, which for all-MiniLM-L6-v2 (256) is what the model
/// was trained on and lower than its 512 positions.
fn sentence_settings(dir: &Path, config: &Config) -> Result<(usize, bool), Error> {
    let path = dir.join("sentence_bert_config.json");
    let Some(settings) = read_optional_json(&path)? else {
        return Ok((config.max_position_embeddings, false));
    };
    let max_seq_length = match settings.get("max_seq_length") {
        None | Some(Value::Null) => config.max_position_embeddings,
        Some(value) => match value.as_u64() {
            Some(n) if n >= 2 && n as usize <= config.max_position_embeddings => n as usize,
            _ => {
                return Err(invalid(
                    &path,
                    format!(
                        "max_seq_length {value} is not a whole number between 2 and the model's {} positions",
                        config.max_position_embeddings
                    ),
                ));
            }
        },
    };
    let lowercase = settings.get("do_lower_case").and_then(Value::as_bool).unwrap_or(false);
    Ok((max_seq_length, lowercase))
}

/// Refuses models whose pooling is not mean pooling, which is the only one implemented: CLS or
/// max pooling would silently give vectors unlike the ones the model was trained to produce.
fn check_pooling(dir: &Path) -> Result<(), Error> {
    let path = dir.join("1_Pooling").join("config.json");
    let Some(pooling) = read_optional_json(&path)? else {
        return Ok(());
    };
    let enabled: Vec<&str> = pooling
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, value)| key.starts_with("pooling_mode_") && value.as_bool() == Some(true))
        .map(|(key, _)| key.as_str())
        .collect();
    if enabled == ["pooling_mode_mean_tokens"] {
        Ok(())
    } else {
        Err(invalid(&path, format!("only mean pooling is supported, and this model enables {enabled:?}")))
    }
}

/// Well-known weights by the SHA-256 of their `model.safetensors`, with the name their authors
/// gave them. Vectors are stored under the model id, so a known model keeps the id it always had.
const KNOWN_WEIGHTS: &[(&str, &str)] =
    &[("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", "all-MiniLM-L6-v2")];

/// The model's id, from the model alone: the name of well-known weights, else its architecture,
/// width and the start of its weights' hash (`bert-384d-1f2e3d4c5b6a`). A folder's name says
/// nothing reliable (a package keeps its model in a folder called `model`, a cache in one named
/// after a commit), and two folders holding the same weights must share their vectors.
fn model_id(config: &Config, weights_sha256: &[u8]) -> String {
    let hex = kenning_core::hex(weights_sha256);
    match KNOWN_WEIGHTS.iter().find(|(hash, _)| *hash == hex) {
        Some((_, name)) => (*name).to_string(),
        None => format!("bert-{}d-{}", config.hidden_size, &hex[..12]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(hidden_size: usize) -> Config {
        serde_json::from_value(serde_json::json!({
            "vocab_size": 30522, "hidden_size": hidden_size, "num_hidden_layers": 6, "num_attention_heads": 12,
            "intermediate_size": 1536, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
            "layer_norm_eps": 1e-12, "pad_token_id": 0
        }))
        .expect("a BERT config")
    }

    fn bytes_of(hex: &str) -> Vec<u8> {
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn known_weights_keep_their_published_name() {
        assert_eq!(model_id(&config(384), &bytes_of(KNOWN_WEIGHTS[0].0)), "all-MiniLM-L6-v2");
    }

    #[test]
    fn other_weights_are_named_by_architecture_and_hash() {
        let first = model_id(&config(384), &Sha256::digest(b"one model"));
        let second = model_id(&config(384), &Sha256::digest(b"another model"));
        assert!(first.starts_with("bert-384d-") && first.len() == "bert-384d-".len() + 12, "{first}");
        assert_ne!(first, second, "different weights must not share an id");
        assert_eq!(first, model_id(&config(384), &Sha256::digest(b"one model")), "the id is deterministic");
    }
}
