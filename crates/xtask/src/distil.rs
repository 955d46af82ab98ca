//! `cargo xtask distil`: a static embedding model from a sentence-transformers BERT model, in
//! the manner of model2vec (Tulkens and van Dongen, 2024).
//!
//! 1. Every vocabulary token is run through the transformer alone, as `[CLS] token [SEP]`, and
//!    the three output states are averaged: the token's vector in the model's own space.
//! 2. PCA, fitted on the tokens that text can produce (special and `[unused]` tokens get zero
//!    rows), centres the vectors, which removes the direction all tokens share, and keeps the
//!    strongest `dims` axes.
//! 3. Each token's vector is scaled by a weight, so that a sentence's plain sum of token vectors
//!    is a weighted one. The weights are SIF weights `a / (a + p)` (Arora et al., 2017), with
//!    the token's probability `p` estimated by Zipf's law from a frequency rank; [`Weighting`]
//!    says where the ranks come from.
//! 4. Rows are quantised to i8 with one f32 scale per row, which also carries the weight.
//!
//! The output is a pure function of the model files and the options: the transformer runs in
//! fixed batches, and PCA, weighting and quantisation are sequential f64 arithmetic, so two runs
//! write identical bytes (the command prints the sha256 to compare).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, ValueEnum};
use kenning_core::{Embedder, hex};
use kenning_embed::{StaticModelParts, TransformerEmbedder, encode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::pca::Pca;

/// Sequences per transformer call. All are three tokens long, so batches need no padding; the
/// size only trades call overhead against memory and does not change any vector.
const BATCH: usize = 256;

/// One reference token in this many, taken from the frequency-ordered words.
const REFERENCE_STRIDE: usize = 1000;

#[derive(Debug, Args)]
pub struct DistilArgs {
    /// The sentence-transformers BERT folder to distil (config.json, tokenizer.json and
    /// model.safetensors).
    #[arg(long)]
    model: PathBuf,
    /// Where to write the static model.
    #[arg(long)]
    out: PathBuf,
    /// How many principal components to keep; at most the model's width.
    #[arg(long, default_value_t = 384)]
    dims: usize,
    /// How tokens are weighted.
    #[arg(long, value_enum, default_value_t = Weighting::SifWordRank)]
    weighting: Weighting,
    /// The SIF constant `a`: a token whose estimated probability is `a` gets weight 1/2.
    #[arg(long, default_value_t = 1e-3)]
    sif_coefficient: f64,
    /// Also write the un-quantised vectors of sample tokens here (JSON), with the output's
    /// sha256, for kenning-embed's tests to check the quantised model against.
    #[arg(long)]
    reference_out: Option<PathBuf>,
}

/// Where a token's frequency rank comes from, for its SIF weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Weighting {
    /// No weighting: every token counts the same.
    None,
    /// model2vec's default: the rank is the token's position in the vocabulary (id + 2). For
    /// BERT's vocabulary that puts "the" at rank 1998 and barely lowers its weight.
    SifVocabOrder,
    /// Ranks from BERT's frequency-ordered words: its WordPiece vocabulary lists special and
    /// `[unused]` tokens, then single characters by code point, then words and pieces roughly
    /// by frequency ("the" first), then `##` single characters by code point. Words get their
    /// place in the frequency-ordered run as rank ("the" 1); single characters, whose order
    /// says nothing of frequency and most of which are punctuation, digits and letters, get
    /// rank 1, the weight of the most frequent words.
    SifWordRank,
}

impl Weighting {
    fn name(self) -> &'static str {
        match self {
            Weighting::None => "none",
            Weighting::SifVocabOrder => "sif-vocab-order",
            Weighting::SifWordRank => "sif-word-rank",
        }
    }
}

/// The regions of a BERT WordPiece vocabulary.
#[derive(Debug)]
struct Vocabulary {
    tokens: Vec<String>,
    unk_id: u32,
    cls_id: u32,
    sep_id: u32,
    /// The first token of the frequency-ordered run (after the single characters).
    first_word: usize,
    /// The first of the trailing `##` single characters (the vocabulary's end if none).
    trailing_characters: usize,
}

impl Vocabulary {
    /// Special tokens (`[PAD]`, `[CLS]`, `[unused12]`...) never come out of tokenizing text.
    fn is_special(&self, id: usize) -> bool {
        let token = &self.tokens[id];
        token.len() > 2 && token.starts_with('[') && token.ends_with(']')
    }
}

pub fn run(args: &DistilArgs) -> Result<()> {
    let started = Instant::now();
    let vocabulary = read_vocabulary(&args.model)?;
    let source_sha256 = sha256_file(&args.model.join("model.safetensors"))?;
    let teacher = TransformerEmbedder::load(&args.model).context("loading the teacher model")?;
    let width = teacher.dimensions();
    ensure!(args.dims >= 1 && args.dims <= width, "--dims must be between 1 and the model's {width} dimensions");
    let name = format!("{}-static-{}d", teacher.model_id(), args.dims);
    let vocab_size = vocabulary.tokens.len();
    eprintln!(
        "distilling {name} from {} ({vocab_size} tokens; words from id {} to {})",
        args.model.display(),
        vocabulary.first_word,
        vocabulary.trailing_characters - 1
    );

    let fitted: Vec<usize> = (0..vocab_size).filter(|&id| !vocabulary.is_special(id)).collect();
    let token_vectors = embed_tokens(&teacher, &vocabulary, &fitted, width)?;
    let transformer_seconds = started.elapsed().as_secs_f64();

    let pca_started = Instant::now();
    let pca = Pca::fit(token_vectors.chunks_exact(width), width);
    let pca_seconds = pca_started.elapsed().as_secs_f64();
    eprintln!("PCA: {} dimensions keep {:.1}% of the variance ({pca_seconds:.1} s)", args.dims, 100.0 * pca.explained(args.dims));

    let weights = token_weights(&vocabulary, args.weighting, args.sif_coefficient);
    let mut vectors = vec![vec![0.0f64; args.dims]; vocab_size];
    for (row, &id) in token_vectors.chunks_exact(width).zip(&fitted) {
        vectors[id] = pca.project(row, args.dims).into_iter().map(|x| x * weights[id]).collect();
    }

    let (scales, rows) = quantise(&vectors);
    let parts = StaticModelParts {
        name,
        source_sha256,
        dimensions: args.dims,
        tokens: vocabulary.tokens.clone(),
        unk_id: vocabulary.unk_id,
        scales,
        rows,
    };
    let bytes = encode(&parts);
    let sha256 = hex(&Sha256::digest(&bytes));
    write(&args.out, &bytes)?;
    if let Some(path) = &args.reference_out {
        let reference = reference_vectors(&vocabulary, &vectors, &sha256);
        write(path, format!("{}\n", serde_json::to_string_pretty(&reference)?).as_bytes())?;
    }

    let summary = json!({
        "out": args.out,
        "bytes": bytes.len(),
        "sha256": sha256,
        "name": parts.name,
        "source_sha256": hex(&source_sha256),
        "dims": args.dims,
        "weighting": args.weighting.name(),
        "sif_coefficient": args.sif_coefficient,
        "explained_variance": round(pca.explained(args.dims), 4),
        "vocab_size": vocab_size,
        "seconds": {
            "transformer": round(transformer_seconds, 1),
            "pca": round(pca_seconds, 1),
            "total": round(started.elapsed().as_secs_f64(), 1),
        },
    });
    println!("{summary}");
    Ok(())
}

/// Reads the vocabulary from `tokenizer.json` and checks that the tokenizer is the one the
/// static model reimplements (BERT uncased WordPiece); another tokenizer would make the
/// distilled rows meaningless at run time.
fn read_vocabulary(model: &Path) -> Result<Vocabulary> {
    let path = model.join("tokenizer.json");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let tokenizer: Value = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let normalizer = &tokenizer["normalizer"];
    let expected = [
        (normalizer["type"] == "BertNormalizer", "a BertNormalizer"),
        (normalizer["lowercase"] == true, "lowercasing"),
        (normalizer["clean_text"] == true, "text cleaning"),
        (normalizer["handle_chinese_chars"] == true, "CJK splitting"),
        (matches!(normalizer["strip_accents"], Value::Null | Value::Bool(true)), "accent stripping"),
        (tokenizer["pre_tokenizer"]["type"] == "BertPreTokenizer", "a BertPreTokenizer"),
        (tokenizer["model"]["type"] == "WordPiece", "a WordPiece model"),
        (tokenizer["model"]["continuing_subword_prefix"] == "##", "the ## continuation prefix"),
        (tokenizer["model"]["unk_token"] == "[UNK]", "[UNK] for unknown words"),
        (tokenizer["model"]["max_input_chars_per_word"] == 100, "a 100-character word limit"),
    ];
    for (ok, what) in expected {
        ensure!(ok, "{} does not describe BERT's uncased WordPiece tokenizer (it lacks {what}), which is the only tokenizer the static model implements", path.display());
    }

    let entries = tokenizer["model"]["vocab"].as_object().with_context(|| format!("{} has no model.vocab", path.display()))?;
    let mut tokens = vec![None; entries.len()];
    for (token, id) in entries {
        let slot = id.as_u64().and_then(|id| tokens.get_mut(id as usize));
        match slot {
            Some(slot @ None) => *slot = Some(token.clone()),
            _ => bail!("{}: the id of {token:?} ({id}) is repeated or out of range", path.display()),
        }
    }
    let tokens: Vec<String> = tokens.into_iter().map(|token| token.expect("every id was filled")).collect();
    let id_of = |wanted: &str| {
        tokens.iter().position(|token| token == wanted).map(|id| id as u32).with_context(|| format!("the vocabulary has no {wanted}"))
    };
    let (unk_id, cls_id, sep_id) = (id_of("[UNK]")?, id_of("[CLS]")?, id_of("[SEP]")?);
    let is_character = |token: &str| token.chars().count() == 1;
    let is_special = |token: &str| token.len() > 2 && token.starts_with('[') && token.ends_with(']');
    let first_word = tokens
        .iter()
        .position(|token| !is_special(token) && !is_character(token))
        .context("the vocabulary has no words")?;
    let trailing_characters = tokens.len()
        - tokens.iter().rev().take_while(|token| token.strip_prefix("##").is_some_and(is_character)).count();
    ensure!(first_word < trailing_characters, "the vocabulary has no frequency-ordered words");
    Ok(Vocabulary { tokens, unk_id, cls_id, sep_id, first_word, trailing_characters })
}

/// Each token of `ids` run through the teacher as `[CLS] token [SEP]`, mean-pooled over those
/// three states; rows of `width`, in the order of `ids`.
fn embed_tokens(teacher: &TransformerEmbedder, vocabulary: &Vocabulary, ids: &[usize], width: usize) -> Result<Vec<f32>> {
    let started = Instant::now();
    let mut vectors = Vec::with_capacity(ids.len() * width);
    for (batch_index, batch) in ids.chunks(BATCH).enumerate() {
        let sequences: Vec<[u32; 3]> = batch.iter().map(|&id| [vocabulary.cls_id, id as u32, vocabulary.sep_id]).collect();
        let sequences: Vec<&[u32]> = sequences.iter().map(|sequence| sequence.as_slice()).collect();
        for vector in teacher.mean_pool_token_ids(&sequences)? {
            vectors.extend(vector);
        }
        if batch_index % 20 == 19 {
            let done = (batch_index + 1) * BATCH;
            eprintln!("  embedded {done} of {} tokens ({:.0} s)", ids.len(), started.elapsed().as_secs_f64());
        }
    }
    Ok(vectors)
}

/// The weight of every token under `weighting` (special tokens included; their rows are zero).
fn token_weights(vocabulary: &Vocabulary, weighting: Weighting, a: f64) -> Vec<f64> {
    let vocab_size = vocabulary.tokens.len();
    let sif = |rank: f64, harmonic: f64| a / (a + 1.0 / (rank * harmonic));
    match weighting {
        Weighting::None => vec![1.0; vocab_size],
        Weighting::SifVocabOrder => {
            let harmonic: f64 = (0..vocab_size).map(|id| 1.0 / (id as f64 + 2.0)).sum();
            (0..vocab_size).map(|id| sif(id as f64 + 2.0, harmonic)).collect()
        }
        Weighting::SifWordRank => {
            let words = vocabulary.trailing_characters - vocabulary.first_word;
            let harmonic: f64 = (1..=words).map(|rank| 1.0 / rank as f64).sum();
            (0..vocab_size)
                .map(|id| {
                    let in_words = (vocabulary.first_word..vocabulary.trailing_characters).contains(&id);
                    let rank = if in_words { (id - vocabulary.first_word + 1) as f64 } else { 1.0 };
                    sif(rank, harmonic)
                })
                .collect()
        }
    }
}

/// Symmetric i8 quantisation with one scale per row: the row's largest magnitude maps to 127.
fn quantise(vectors: &[Vec<f64>]) -> (Vec<f32>, Vec<i8>) {
    let mut scales = Vec::with_capacity(vectors.len());
    let mut rows = Vec::with_capacity(vectors.iter().map(Vec::len).sum());
    for vector in vectors {
        let largest = vector.iter().fold(0.0f64, |largest, x| largest.max(x.abs()));
        let step = largest / 127.0;
        scales.push(step as f32);
        rows.extend(vector.iter().map(|&x| if step > 0.0 { (x / step).round().clamp(-127.0, 127.0) as i8 } else { 0 }));
    }
    (scales, rows)
}

/// Un-quantised vectors of whole-word tokens spread over the frequency ranks, for tests.
fn reference_vectors(vocabulary: &Vocabulary, vectors: &[Vec<f64>], asset_sha256: &str) -> Value {
    let tokens: Vec<Value> = (vocabulary.first_word..vocabulary.trailing_characters)
        .step_by(REFERENCE_STRIDE)
        .filter(|&id| !vocabulary.tokens[id].starts_with("##"))
        .map(|id| json!({"id": id, "token": vocabulary.tokens[id], "vector": vectors[id].iter().map(|&x| round(x, 6)).collect::<Vec<_>>()}))
        .collect();
    json!({
        "about": "un-quantised, weighted PCA vectors of sample tokens, written by `cargo xtask distil --reference-out` with the model whose sha256 is given",
        "asset_sha256": asset_sha256,
        "tokens": tokens,
    })
}

fn sha256_file(path: &Path) -> Result<[u8; 32]> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Sha256::digest(bytes).into())
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn round(x: f64, digits: i32) -> f64 {
    let factor = 10f64.powi(digits);
    (x * factor).round() / factor
}
