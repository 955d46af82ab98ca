//! Tests of the built-in static model: its tokenizer against the `tokenizers` crate, its
//! vectors against the distillation's un-quantised ones, and whether it finds meaning.

use std::path::PathBuf;
use std::sync::OnceLock;

use kenning_core::Embedder;
use kenning_embed::{Error, StaticEmbedder};
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use super::{cosine, model_dir};

fn builtin() -> &'static StaticEmbedder {
    static EMBEDDER: OnceLock<StaticEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| StaticEmbedder::builtin().expect("the built-in model is valid"))
}

fn embed(texts: &[&str]) -> Vec<Vec<f32>> {
    let vectors = builtin().embed(texts).expect("embedding succeeds");
    assert_eq!(vectors.len(), texts.len());
    vectors
}

/// Strings meant to reach every branch of BERT's basic tokenizer and of WordPiece.
const TOKENIZER_CASES: &[&str] = &[
    "",
    "   \t\n ",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "We use PostgreSQL 16 behind pgbouncer; pool size 20 per service.",
    "Café déjà vu: naïve coöperation, résumé, Ångström, Øresund, straße, ŒUVRE, façade",
    "İstanbul ΣΊΣΥΦΟΣ Ελληνικά κείμενα και Русский текст",
    "東京都は日本の首都です; 한국어 텍스트; カタカナとひらがな; \u{F900}\u{2F800}",
    "مرحبا بالعالم שלום עולם हिन्दी पाठ ภาษาไทย",
    "e\u{301}\u{323} a\u{308}\u{304} combining sequences, Z\u{335}a\u{336}l\u{337}g\u{338}o",
    "Emoji 🎉🚀 and symbols ©®™ ± ∞ ≠ → ½ ² µ °C",
    "Version 3.14.159 released on 2023-05-08 at 13:56; costs $1,299.99 (−15%) or €5",
    "fn parse_config(&mut self) -> Result<Config, Error> { self.user_db_path()?; }",
    "HTTPServerError getUserByID snake_case_name kebab-case-name SCREAMING_CASE x86_64 utf8mb4",
    "## Heading\n- item **bold** `code` [link](https://example.com/path?q=1&r=2#frag) <tag attr=\"v\">",
    "e.g. i.e. U.S.A. a.b.c ... !!! ??? ‘quotes’ “double” «guillemets» — dash – en-dash",
    "tabs\tand\nnewlines\r\nand\u{0}nul\u{b}vertical\u{200b}zero-width\u{a0}nbsp\u{feff}bom\u{85}nel",
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism supercalifragilisticexpialidocious",
    "aVeryLongIdentifierThatKeepsGoingAndGoingBeyondAnyReasonableLengthForAWordInNaturalLanguageTextAtAll plus",
    "aVeryLongIdentifierThatKeepsGoingAndGoingBeyondAnyReasonableLengthForAWordInNaturalLanguageTextAtAllX plus",
    "unbelievably unaffable re-examination co-operate doesn't can't won't y'all",
    "0x1F600 1e-9 3.0e+8 255.255.255.0 192.168.1.1:8080 /usr/local/bin ~/.config/kenning/kenning.toml",
    "\u{fffd}replacement \u{1}control\u{7f}delete \u{e000}private use \u{10ffff}",
];

#[test]
fn tokenizer_agrees_with_the_tokenizers_crate() {
    let Some(teacher) = model_dir() else { return };
    let mut reference = Tokenizer::from_file(teacher.join("tokenizer.json")).expect("the teacher's tokenizer loads");
    reference.with_padding(None);
    reference.with_truncation(None).expect("truncation can be turned off");
    for text in TOKENIZER_CASES {
        let expected = reference.encode(*text, false).expect("the reference tokenizes").get_ids().to_vec();
        let actual = builtin().token_ids(text);
        assert_eq!(actual, expected, "token ids differ for {text:?}");
    }
}

/// The one deliberate difference: the text `[CLS]` is three words to us, not a control token.
#[test]
fn special_token_names_in_text_are_plain_words() {
    let ids = builtin().token_ids("[CLS] hi [SEP]");
    assert_eq!(ids.first(), builtin().token_ids("[").first(), "{ids:?}");
    assert!(!ids.contains(&101) && !ids.contains(&102), "{ids:?}");
}

#[test]
fn describes_the_model() {
    let model_id = builtin().model_id();
    let (name, hash) = model_id.split_once('@').expect("the model id carries a hash");
    assert!(name.starts_with("all-MiniLM-L6-v2-static-"), "{model_id}");
    assert_eq!(hash.len(), 8, "{model_id}");
    assert_eq!(name, format!("all-MiniLM-L6-v2-static-{}d", builtin().dimensions()));
    assert_eq!(builtin().source_sha256(), "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db");
}

#[test]
fn vectors_are_unit_length_and_empty_text_is_zero() {
    let vectors = embed(&["A memory about the build cache", "?", "", "🎉🎉"]);
    for vector in &vectors[..2] {
        assert_eq!(vector.len(), builtin().dimensions());
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    assert!(vectors[2].iter().all(|&x| x == 0.0), "no token, no direction");
    assert!(vectors[3].iter().all(|&x| x == 0.0), "only [UNK], no direction");
}

/// The quantised rows point where the distillation's exact vectors do. The fixture is written
/// by the same `cargo xtask distil` run as the asset (see assets/README.md).
#[test]
fn a_large_batch_split_across_threads_gives_each_text_its_own_vector_in_order() {
    let texts: Vec<String> = (0..1000).map(|index| format!("note {index}: the cache for service {} was rebuilt", index % 7)).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batch = embed(&refs);
    for (index, text) in refs.iter().enumerate().step_by(97) {
        assert_eq!(batch[index], embed(&[text])[0], "text {index}");
    }
}

#[test]
fn single_tokens_match_the_distillation() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/static_reference.json")).expect("the fixture is JSON");
    let asset = std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/all-MiniLM-L6-v2-static.kns")).unwrap();
    let asset_sha256 = kenning_core::hex(&Sha256::digest(&asset));
    assert_eq!(fixture["asset_sha256"], asset_sha256, "the fixture was written with another asset; rerun the distillation");

    let tokens = fixture["tokens"].as_array().expect("tokens");
    let mut checked = 0;
    for entry in tokens {
        let token = entry["token"].as_str().unwrap();
        let id = entry["id"].as_u64().unwrap() as u32;
        assert_eq!(builtin().token_ids(token), [id], "{token:?} is one token");
        let expected: Vec<f32> = entry["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let similarity = cosine(&embed(&[token])[0], &expected);
        assert!(similarity > 0.999, "cosine {similarity} to the distilled vector of {token:?}");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} reference tokens");
}

/// Related pairs, most sharing few or no words, which the teacher scores at least 0.3 above
/// the unrelated sentence, must stay clearly apart in the static model too.
#[test]
fn similar_sentences_are_closer_than_unrelated_ones() {
    let cases = [
        ("The cat sat on the mat", "A cat is sitting on a rug", "Quarterly revenue grew 5%"),
        ("Deployments go out every Tuesday afternoon", "When do we release to production?", "The cat sleeps on the sofa"),
        ("The integration tests are flaky on CI", "Some test runs fail at random in continuous integration", "She adopted a puppy last spring"),
        ("I went hiking in the mountains last weekend", "She took a trip to go trekking on a mountain trail", "Rust's borrow checker rejected the code"),
    ];
    for (text, related, unrelated) in cases {
        let vectors = embed(&[text, related, unrelated]);
        let (near, far) = (cosine(&vectors[0], &vectors[1]), cosine(&vectors[0], &vectors[2]));
        assert!(near > far + 0.2, "{text:?}: related {near}, unrelated {far}");
    }
}

#[test]
fn a_damaged_model_file_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.kns");
    std::fs::write(&path, b"KNSTATIC but nothing after it").unwrap();
    let error = StaticEmbedder::load(&path).expect_err("a damaged model is refused");
    assert!(matches!(&error, Error::InvalidStaticModel { .. }), "{error:?}");
    assert!(error.to_string().contains("broken.kns"), "{error}");
}
