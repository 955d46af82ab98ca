//! Tests of the embedders: the transformer against the real all-MiniLM-L6-v2 model, and the
//! built-in static model (in `static_model`) against its teacher's tokenizer and distillation.
//!
//! The model is found through `KENNING_TEST_MODEL_DIR`, or beside the repository in
//! `shared/models/all-MiniLM-L6-v2` as CI lays it out. A test that needs it and cannot find it is
//! skipped with a notice in a plain `cargo test` and fails under `scripts/test`, so a broken setup
//! cannot pass as a green run (`kenning_conformance::services`).

use std::path::PathBuf;
use std::sync::OnceLock;

use kenning_core::Embedder;
use kenning_embed::{Error, TransformerEmbedder};

mod static_model;

fn model_dir() -> Option<PathBuf> {
    kenning_conformance::services::model_dir()
}

/// Loaded once and shared, since every test needs it and loading reads 90 MB of weights; `None`
/// when the model is missing, and the test returns (`kenning_conformance::services`).
fn embedder() -> Option<&'static TransformerEmbedder> {
    static EMBEDDER: OnceLock<TransformerEmbedder> = OnceLock::new();
    let dir = model_dir()?;
    Some(EMBEDDER.get_or_init(|| TransformerEmbedder::load(&dir).expect("the test model loads")))
}

fn embed(embedder: &TransformerEmbedder, texts: &[&str]) -> Vec<Vec<f32>> {
    let vectors = embedder.embed(texts).expect("embedding succeeds");
    assert_eq!(vectors.len(), texts.len());
    for vector in &vectors {
        assert_eq!(vector.len(), 384);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "vector is not unit length: norm {norm}");
    }
    vectors
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norms = a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / norms
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn describes_the_model() {
    let Some(embedder) = embedder() else { return };
    assert_eq!(embedder.model_id(), "all-MiniLM-L6-v2");
    assert_eq!(embedder.dimensions(), 384);
}

/// The fixture was computed by an independent float64 NumPy implementation of the model; see
/// `fixtures/make_minilm_reference.py` and the fixture's `produced_by` field.
#[test]
fn matches_reference_embeddings() {
    let Some(embedder) = embedder() else { return };
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/minilm_reference.json")).expect("the fixture is JSON");
    assert_eq!(fixture["model"], embedder.model_id(), "the fixture was made for another model");
    let cases = fixture["cases"].as_array().expect("the fixture has cases");
    let texts: Vec<&str> = cases.iter().map(|case| case["text"].as_str().unwrap()).collect();
    let expected: Vec<Vec<f32>> = cases
        .iter()
        .map(|case| case["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
        .collect();

    for (text, (actual, expected)) in texts.iter().zip(embed(embedder, &texts).iter().zip(&expected)) {
        let similarity = cosine(actual, expected);
        let diff = max_abs_diff(actual, expected);
        assert!(similarity > 0.9999, "cosine {similarity} to the reference for {text:?}");
        assert!(diff < 1e-4, "max abs difference {diff} from the reference for {text:?}");
    }
}

/// Batching sorts texts by length and pads each batch; neither may change a vector or its place.
#[test]
fn batching_gives_the_same_vectors_as_one_at_a_time() {
    let Some(embedder) = embedder() else { return };
    let texts: Vec<String> = (0..40)
        .map(|i| format!("Note {i}: {}", "the build cache was invalidated by a changed lockfile; ".repeat(i % 9)))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batched = embed(embedder, &texts);
    for (text, vector) in texts.iter().zip(&batched) {
        let alone = &embed(embedder, &[text])[0];
        let diff = max_abs_diff(vector, alone);
        assert!(diff < 1e-5, "batched and single vectors differ by {diff} for {text:?}");
    }
}

#[test]
fn long_text_is_truncated_to_the_model_limit() {
    let Some(embedder) = embedder() else { return };
    let long = "Retrieval works best when each memory states one fact plainly. ".repeat(200);
    let longer = format!("{long} This trailing sentence lies far past the 256-token limit.");
    let vectors = embed(embedder, &[&long, &longer]);
    assert!(max_abs_diff(&vectors[0], &vectors[1]) < 1e-6, "text past the token limit changed the vector");
}

#[test]
fn empty_input_and_empty_text_work() {
    let Some(embedder) = embedder() else { return };
    assert!(embedder.embed(&[]).expect("an empty batch is fine").is_empty());
    embed(embedder, &[""]);
}

#[test]
fn similar_sentences_are_closer_than_unrelated_ones() {
    let Some(embedder) = embedder() else { return };
    let vectors = embed(embedder, &["The cat sat on the mat", "A cat is sitting on a rug", "Quarterly revenue grew 5%"]);
    let related = cosine(&vectors[0], &vectors[1]);
    let unrelated = cosine(&vectors[0], &vectors[2]);
    assert!(related > unrelated + 0.3, "related {related}, unrelated {unrelated}");
}

#[test]
fn missing_weights_are_named_in_the_error() {
    let Some(model) = model_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "tokenizer.json"] {
        std::fs::copy(model.join(file), dir.path().join(file)).unwrap();
    }
    let error = TransformerEmbedder::load(dir.path()).expect_err("loading without weights fails");
    assert!(matches!(&error, Error::MissingFile { file: "model.safetensors", .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("model.safetensors"), "{message}");
    assert!(message.contains(&dir.path().display().to_string()), "{message}");

    let core: kenning_core::Error = error.into();
    assert!(matches!(&core, kenning_core::Error::Embedding(m) if m.contains("model.safetensors")), "{core:?}");
}

#[test]
fn missing_folder_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap().path().join("no-such-model");
    let error = TransformerEmbedder::load(&dir).expect_err("loading a missing folder fails");
    assert!(error.to_string().contains("no-such-model"), "{error}");
}
