use std::collections::BTreeMap;

use kenning_core::secrets::{Named, Redactor, SecretKind, redact, redact_record};
use serde::Deserialize;

use super::capture;

#[derive(Deserialize)]
struct Corpus {
    positives: Vec<Positive>,
    benign: Vec<Benign>,
}

#[derive(Deserialize)]
struct Positive {
    format: String,
    class: String,
    text: String,
    kinds: Vec<SecretKind>,
    /// Parts of the text that must be gone after redaction.
    secrets: Vec<String>,
}

#[derive(Deserialize)]
struct Benign {
    class: String,
    text: String,
    why: String,
}

/// The corpus, with each positive's text and secrets decoded: the file holds them in base64
/// so that no secret scanner stops a push of the repository on them.
fn corpus() -> Corpus {
    use base64::Engine as _;
    let decoded = |text: &str| String::from_utf8(base64::engine::general_purpose::STANDARD.decode(text).unwrap()).unwrap();
    let mut corpus: Corpus = serde_json::from_str(include_str!("../fixtures/secrets.json")).unwrap();
    for case in &mut corpus.positives {
        case.text = decoded(&case.text);
        for secret in &mut case.secrets {
            *secret = decoded(secret);
        }
    }
    corpus
}

#[test]
fn the_corpus_covers_sixty_formats_and_a_hundred_look_alikes() {
    let corpus = corpus();
    let formats: std::collections::BTreeSet<&str> = corpus.positives.iter().map(|case| case.format.as_str()).collect();
    assert!(corpus.positives.len() >= 150, "the corpus holds {} secrets", corpus.positives.len());
    assert!(formats.len() >= 60, "the corpus holds {} formats", formats.len());
    assert!(corpus.benign.len() >= 100, "the corpus holds {} benign look-alikes", corpus.benign.len());
}

#[test]
fn every_secret_of_the_corpus_is_redacted_under_its_kind() {
    let corpus = corpus();
    let mut failures = Vec::new();
    for case in &corpus.positives {
        let redacted = redact(&case.text);
        let mut kinds = redacted.kinds.clone();
        kinds.sort();
        kinds.dedup();
        let mut expected = case.kinds.clone();
        expected.sort();
        let leaked: Vec<&String> = case.secrets.iter().filter(|secret| redacted.text.contains(secret.as_str())).collect();
        let markers_missing = case.kinds.iter().any(|kind| !redacted.text.contains(&kind.marker()));
        if kinds != expected || !leaked.is_empty() || markers_missing {
            failures.push(format!(
                "{} ({}): {:?}\n  -> {:?}\n  kinds {kinds:?}, expected {expected:?}",
                case.format, case.class, case.text, redacted.text
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} positives failed:\n{}", failures.len(), corpus.positives.len(), failures.join("\n"));
}

#[test]
fn benign_look_alikes_survive_unchanged() {
    let failures: Vec<String> = corpus()
        .benign
        .iter()
        .filter_map(|case| {
            let redacted = redact(&case.text);
            (redacted.text != case.text || !redacted.kinds.is_empty())
                .then(|| format!("{} ({}): {:?}\n  -> {:?}", case.why, case.class, case.text, redacted.text))
        })
        .collect();
    assert!(failures.is_empty(), "{} benign strings were changed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn redaction_is_idempotent() {
    for case in corpus().positives {
        let once = redact(&case.text).text.into_owned();
        let twice = redact(&once);
        assert_eq!(twice.text, once, "a second pass changed {once:?}");
        assert!(twice.kinds.is_empty(), "a second pass found {:?} in {once:?}", twice.kinds);
    }
}

#[test]
fn every_kind_is_named_as_it_serialises() {
    for kind in SecretKind::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str(), "{kind:?}");
    }
}

#[test]
fn a_capture_reports_each_field_and_kind_it_redacted() {
    let mut input = capture(concat!("Deploy with GITHUB_TOKEN=ghp", "_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5 and password=Sup3r-s3cret!"));
    input.title = Some(concat!("token ghp", "_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5").into());
    input.tags = vec!["deploy".into(), concat!("AKI", "A29326ML64LG2TJF8").into()];
    input.category = Some(concat!("glr", "t-aB3dE5gH7jK9mN1pQ3sT").into());
    input.metadata.insert("auth".into(), "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXNpZw".into());
    input.metadata.insert(concat!("xox", "b-82263596777-34119653240-In3OIOnHn2INL2io6VOZw5lu").into(), "slack".into());
    let found = redact_record(&mut input);
    let summary: Vec<(String, &str, usize)> = found.iter().map(|r| (r.field.clone(), r.kind.as_str(), r.count)).collect();
    assert_eq!(
        summary,
        [
            ("content".to_owned(), "github-token", 1),
            ("content".to_owned(), "password", 1),
            ("title".to_owned(), "github-token", 1),
            ("tags[1]".to_owned(), "aws-access-key-id", 1),
            ("category".to_owned(), "gitlab-token", 1),
            ("metadata.auth".to_owned(), "jwt", 1),
            ("metadata".to_owned(), "slack-token", 1),
        ]
    );
    assert_eq!(input.content, "Deploy with GITHUB_TOKEN=[REDACTED:github-token] and password=[REDACTED:password]");
    assert_eq!(input.metadata["auth"], "Bearer [REDACTED:jwt]");
    assert_eq!(input.metadata["[REDACTED:slack-token]"], "slack");
}

#[test]
fn a_redacted_key_that_collides_keeps_both_values() {
    let mut metadata: BTreeMap<String, String> = BTreeMap::new();
    metadata.insert(concat!("ghp", "_XNQ6Fq5axtjRNmHkW5vQ7CF5puzQqmOBZZW6").into(), "first".into());
    metadata.insert(concat!("ghp", "_m4nyoL6uniiFw152cTe8r0khCEr7n1AyOHFR").into(), "second".into());
    let mut redactor = Redactor::new();
    redactor.map("metadata", &mut metadata);
    let values: Vec<&str> = metadata.values().map(String::as_str).collect();
    assert_eq!(metadata.len(), 2);
    assert!(values.contains(&"first") && values.contains(&"second"), "{metadata:?}");
    assert!(metadata.keys().all(|key| key.starts_with("[REDACTED:github-token]")), "{metadata:?}");
}

#[test]
fn json_keys_and_nested_values_are_redacted() {
    let mut value = serde_json::json!({"steps": [{"note": "DB_PASS=Winter2024"}], concat!("sk_", "live_u9MymrCQ23bqlxGSMmI2qmyJ"): 1});
    let found = redact_record(&mut Named("value", &mut value));
    assert_eq!(value, serde_json::json!({"steps": [{"note": "DB_PASS=[REDACTED:password]"}], "[REDACTED:stripe-key]": 1}));
    let fields: Vec<&str> = found.iter().map(|r| r.field.as_str()).collect();
    assert_eq!(fields, ["value", "value.steps[0].note"]);
}

/// Each secret the trust review found stored verbatim, or a benign string it found
/// redacted, by name: the corpus holds them among others, and these keep them in sight.
#[test]
fn the_misses_and_false_positives_of_the_trust_review_stay_fixed() {
    let stored_verbatim = [
        concat!("glr", "t-aB3dE5gH7jK9mN1pQ3sT"),
        concat!("xap", "p-1-A0123ABCDEF-1234567890123-0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"),
        "whsec_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE",
        "DB_PASS=Winter2024",
        "AZURE_CLIENT_SECRET=Vx_3rd.party~secret",
        "//registry.npmjs.org/:_authToken=7f3d9a2e-1b4c-4e8f-9a6d-2c5b8e1f4a7d",
        "VAULT_TOKEN=hvs.CAESIJ2x9Ql0wB7aLmN3pQ7rS9tU2vW4",
        "data:\n  password: cGFzc3dvcmQxMjM=\n",
        "DB_PASSWORD=CorrectHorseBatteryStaple",
        "password: TrustNoOne",
        "SENDGRID_API_KEY=SG.x1Yz2.w3Vu4",
        "AccountKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY3ODkwQUJDREVGR0g=;",
        "SharedAccessKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=",
        "?sv=2022-11-02&sig=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY%3D",
        "curl -u admin:Hunter2Hunter2 https://ci.acme.io",
        "https://0123456789abcdef0123456789abcdef@o4505123.ingest.sentry.io/4505123456",
        concat!("pyp", "i-AgEIcHlwaS5vcmcCJDAxMjM0NTY3LTg5YWItY2RlZi0wMTIzLTQ1Njc4OWFiY2RlZgACKlszLCI5YjM2ZDQ3Ny0xYjA0LTRkMWMtOTI"),
        concat!("hf_", "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"),
        concat!("SG.", "aB3dE5gH7jK9mN1pQ3sT5v.W7yZ9bC1dE3fG5hJ7kL9mN1pQ3sT5vW7yZ9bC1dE3fG"),
        concat!("shp", "at_0123456789abcdef0123456789abcdef"),
        concat!("dop", "_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
        "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQP",
        "MTA4NzY1NDMyMTA5ODc2NTQzMjE.GaBcDe.aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG",
        "1234567890:AAaB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3",
        "key-0123456789abcdef0123456789abcdef",
        "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",
    ];
    for text in stored_verbatim {
        let redacted = redact(text);
        assert!(!redacted.kinds.is_empty(), "stored verbatim: {text:?} -> {:?}", redacted.text);
    }
    let putty = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ada\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIOGlM0JzWvXh\nAAAA\nPrivate-Lines: 1\nAAAAIGVkMjU1MTk5c2VjcmV0a2V5bWF0ZXJpYWw=\nPrivate-MAC: 5f4dcc3b5aa765d61d8327deb882cf99\n";
    assert!(!redact(putty).text.contains("AAAAIGVkMjU1MTk5c2VjcmV0a2V5bWF0ZXJpYWw="));
    for text in ["PWD=/home/ada/src/app", "pwd: /srv/app", "next_page_token: CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA3EAE", "csrf_token=formfield"] {
        assert_eq!(redact(text).text, text, "a false positive");
    }
}
