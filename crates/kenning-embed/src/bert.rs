//! The BERT encoder a sentence-transformers model runs: embeddings, then self-attention layers.
//!
//! This is the forward pass of Hugging Face's `BertModel` (absolute positions, no cross-
//! attention, no pooler) over candle's CPU tensors, the only part of a model zoo the
//! transformer embedder needs. It is kept here rather than taken from `candle-transformers`,
//! whose hundred other models cost every build of the workspace about a minute of compiling
//! for these two hundred lines; the reference-embedding tests hold it to sentence-transformers'
//! own vectors.

use candle_core::{D, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, Module, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

/// The feed-forward activation a BERT config names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HiddenAct {
    /// GELU computed with the error function, which is what `"gelu"` means in transformers.
    Gelu,
    /// The tanh approximation of GELU (`"gelu_new"`, also spelled `"gelu_approximate"`).
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh")]
    GeluApproximate,
    Relu,
}

/// How token positions are embedded. Only BERT's learned absolute positions are implemented;
/// a config asking for relative ones is refused when it is read, rather than giving vectors
/// unlike the ones the model was trained to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PositionEmbeddingType {
    #[default]
    Absolute,
}

/// The fields of a BERT `config.json` the forward pass uses; the rest of the file is ignored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: HiddenAct,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
    #[serde(default)]
    pub position_embedding_type: PositionEmbeddingType,
    /// The prefix some checkpoints put before `embeddings` and `encoder` (`bert`, `roberta`).
    pub model_type: Option<String>,
}

impl Config {
    /// Refuses a config whose hidden width the attention heads do not divide evenly, which
    /// would otherwise fail as a shape error in the middle of the first forward pass.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.num_attention_heads == 0 || self.hidden_size % self.num_attention_heads != 0 {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        Ok(())
    }
}

/// A BERT encoder with its weights loaded.
pub struct BertModel {
    embeddings: Embeddings,
    layers: Vec<Layer>,
}

impl BertModel {
    /// Loads the weights, which a checkpoint keeps either at the top level or under a prefix
    /// (`bert.` for models saved with a head, or the config's `model_type`).
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let mut prefixes = vec![String::new(), "bert".to_string()];
        prefixes.extend(config.model_type.clone());
        let mut first_error = None;
        for prefix in prefixes {
            let vb = if prefix.is_empty() { vb.clone() } else { vb.pp(prefix) };
            match Self::load_at(&vb, config) {
                Ok(model) => return Ok(model),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.expect("at least one prefix is tried"))
    }

    fn load_at(vb: &VarBuilder, config: &Config) -> Result<Self> {
        let embeddings = Embeddings::load(vb.pp("embeddings"), config)?;
        let layers = (0..config.num_hidden_layers)
            .map(|index| Layer::load(vb.pp(format!("encoder.layer.{index}")), config))
            .collect::<Result<Vec<_>>>()?;
        Ok(BertModel { embeddings, layers })
    }

    /// The last layer's hidden states, `(batch, tokens, hidden)`, for token ids and token type
    /// ids of shape `(batch, tokens)`; `attention_mask` is 1 for real tokens and 0 for padding.
    pub fn forward(&self, input_ids: &Tensor, token_type_ids: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        let mut hidden = self.embeddings.forward(input_ids, token_type_ids)?;
        // Padding gets the most negative score a float holds before the softmax, as
        // transformers does, so that it receives no attention.
        let mask = attention_mask.unsqueeze(1)?.unsqueeze(1)?.to_dtype(hidden.dtype())?;
        let mask = (mask.ones_like()? - &mask)?.affine(f32::MIN as f64, 0.0)?;
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &mask)?;
        }
        Ok(hidden)
    }
}

struct Embeddings {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    layer_norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        Ok(Embeddings {
            words: embedding(config.vocab_size, config.hidden_size, vb.pp("word_embeddings"))?,
            positions: embedding(config.max_position_embeddings, config.hidden_size, vb.pp("position_embeddings"))?,
            token_types: embedding(config.type_vocab_size, config.hidden_size, vb.pp("token_type_embeddings"))?,
            layer_norm: layer_norm(config.hidden_size, config.layer_norm_eps, vb.pp("LayerNorm"))?,
        })
    }

    fn forward(&self, input_ids: &Tensor, token_type_ids: &Tensor) -> Result<Tensor> {
        let (_, tokens) = input_ids.dims2()?;
        let position_ids = Tensor::arange(0u32, tokens as u32, input_ids.device())?;
        let summed = (self.words.forward(input_ids)? + self.token_types.forward(token_type_ids)?)?
            .broadcast_add(&self.positions.forward(&position_ids)?)?;
        self.layer_norm.forward(&summed)
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    heads: usize,
    attention_output: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    activation: HiddenAct,
    output: Linear,
    output_norm: LayerNorm,
}

impl Layer {
    fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let hidden = config.hidden_size;
        let attention = vb.pp("attention");
        Ok(Layer {
            query: linear(hidden, hidden, attention.pp("self.query"))?,
            key: linear(hidden, hidden, attention.pp("self.key"))?,
            value: linear(hidden, hidden, attention.pp("self.value"))?,
            heads: config.num_attention_heads,
            attention_output: linear(hidden, hidden, attention.pp("output.dense"))?,
            attention_norm: layer_norm(hidden, config.layer_norm_eps, attention.pp("output.LayerNorm"))?,
            intermediate: linear(hidden, config.intermediate_size, vb.pp("intermediate.dense"))?,
            activation: config.hidden_act,
            output: linear(config.intermediate_size, hidden, vb.pp("output.dense"))?,
            output_norm: layer_norm(hidden, config.layer_norm_eps, vb.pp("output.LayerNorm"))?,
        })
    }

    fn forward(&self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let attended = self.attend(hidden, mask)?;
        let attended = self.attention_norm.forward(&(self.attention_output.forward(&attended)? + hidden)?)?;
        let expanded = self.intermediate.forward(&attended)?;
        let expanded = match self.activation {
            HiddenAct::Gelu => expanded.gelu_erf()?,
            HiddenAct::GeluApproximate => expanded.gelu()?,
            HiddenAct::Relu => expanded.relu()?,
        };
        self.output_norm.forward(&(self.output.forward(&expanded)? + attended)?)
    }

    /// Multi-head scaled dot-product self-attention, heads concatenated back to `hidden` wide.
    fn attend(&self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, tokens, width) = hidden.dims3()?;
        let head_width = width / self.heads;
        let split = |projection: &Linear| -> Result<Tensor> {
            projection.forward(hidden)?.reshape((batch, tokens, self.heads, head_width))?.transpose(1, 2)?.contiguous()
        };
        let (query, key, value) = (split(&self.query)?, split(&self.key)?, split(&self.value)?);
        let scores = (query.matmul(&key.t()?)? / (head_width as f64).sqrt())?.broadcast_add(mask)?;
        let weights = candle_nn::ops::softmax(&scores, D::Minus1)?;
        weights.matmul(&value)?.transpose(1, 2)?.contiguous()?.reshape((batch, tokens, width))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(changes: serde_json::Value) -> serde_json::Result<Config> {
        let mut fields = serde_json::json!({
            "vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
            "intermediate_size": 1536, "hidden_act": "gelu", "max_position_embeddings": 512,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0, "model_type": "bert"
        });
        fields.as_object_mut().unwrap().extend(changes.as_object().unwrap().clone());
        serde_json::from_value(fields)
    }

    #[test]
    fn a_config_naming_relative_positions_is_refused() {
        let error = config(serde_json::json!({"position_embedding_type": "relative_key"})).unwrap_err();
        assert!(error.to_string().contains("relative_key"), "{error}");
    }

    #[test]
    fn heads_that_do_not_divide_the_width_are_refused() {
        let uneven = config(serde_json::json!({"num_attention_heads": 5})).unwrap();
        assert_eq!(uneven.check().unwrap_err(), "hidden_size 384 is not a multiple of num_attention_heads 5");
        assert_eq!(config(serde_json::json!({})).unwrap().check(), Ok(()));
    }

    #[test]
    fn the_activation_names_transformers_writes_are_read() {
        for (name, act) in [("gelu", HiddenAct::Gelu), ("gelu_new", HiddenAct::GeluApproximate), ("relu", HiddenAct::Relu)] {
            assert_eq!(config(serde_json::json!({"hidden_act": name})).unwrap().hidden_act, act, "{name}");
        }
    }
}
