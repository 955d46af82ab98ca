//! The core's behaviour: URNs, validation errors, version history and duplicate keys here; by
//! topic in `core/`: the calibration statistics against a SciPy reference and hand-worked
//! examples (`calibration.rs`), decisions (`decisions.rs`), score fusion (`fusion.rs`), time
//! expressions (`when.rs`), secret redaction (`secrets.rs`), the contradiction corpus
//! (`contradiction_corpus.rs`) and the claim rule (`claim.rs`).

#[path = "core/calibration.rs"]
mod calibration;
#[path = "core/claim.rs"]
mod claim;
#[path = "core/contradiction_corpus.rs"]
mod contradiction_corpus;
#[path = "core/decisions.rs"]
mod decisions;
#[path = "core/fusion.rs"]
mod fusion;
#[path = "core/secrets.rs"]
mod secrets;
#[path = "core/when.rs"]
mod when;

use chrono::{TimeZone, Utc};
use kenning_core::input::{apply_update, build_memory, change_status};
use kenning_core::{CaptureInput, Domain, MemoryId, MemoryUrn, Namespace, Status, UpdateInput, Urn};
use proptest::prelude::*;

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 8, 13, 56, 0).unwrap()
}

fn capture(content: &str) -> CaptureInput {
    CaptureInput { content: content.to_owned(), namespace: Some("learnings".into()), ..CaptureInput::default() }
}

fn memory(content: &str) -> kenning_core::Memory {
    build_memory(capture(content), Domain::User, MemoryId::parse("m1").unwrap(), now()).unwrap()
}

fn domain_strategy() -> impl Strategy<Value = Domain> {
    prop_oneof![
        Just(Domain::User),
        "[A-Za-z0-9._-]{1,40}".prop_map(Domain::Project),
        "[A-Za-z0-9._-]{1,40}".prop_map(Domain::Org),
    ]
}

proptest! {
    #[test]
    fn memory_urns_round_trip(
        domain in domain_strategy(),
        namespace in "[a-z0-9][a-z0-9-]{0,30}",
        id in "[A-Za-z0-9._:-]{1,60}",
    ) {
        let urn = MemoryUrn::new(domain, Namespace::parse(&namespace).unwrap(), MemoryId::parse(&id).unwrap());
        let text = urn.to_string();
        prop_assert_eq!(MemoryUrn::parse("urn", &text).unwrap(), urn.clone());
        prop_assert_eq!(Urn::parse("urn", &text).unwrap().to_string(), text.clone());
        let legacy = text.replacen("kenning://", "subcog://", 1);
        prop_assert_eq!(MemoryUrn::parse("urn", &legacy).unwrap(), urn);
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(text in ".{0,80}") {
        let _ = Urn::parse("urn", &text);
        let _ = Namespace::parse(&text);
    }
}

#[test]
fn urn_levels_parse_to_domain_namespace_and_memory() {
    assert_eq!(Urn::parse("uri", "kenning://user").unwrap(), Urn::Domain(Domain::User));
    assert_eq!(
        Urn::parse("uri", "kenning://org:acme-corp/standards").unwrap(),
        Urn::Namespace(Domain::Org("acme-corp".into()), Namespace::parse("standards").unwrap())
    );
    let Urn::Memory(urn) = Urn::parse("uri", "subcog://project:my-app/decisions/abc1234:0").unwrap() else {
        panic!("expected a memory URN");
    };
    assert_eq!(urn.to_string(), "kenning://project:my-app/decisions/abc1234:0");
}

#[test]
fn bad_urns_name_the_problem() {
    let cases = [
        ("http://user/learnings/x", "does not start with `kenning://` (or `subcog://`)", "http://user/learnings/x"),
        ("kenning://team/learnings/x", "is not a known domain", "team"),
        ("kenning://project:/learnings/x", "has an id that is empty or holds characters other than [A-Za-z0-9._-]", "project:"),
        ("kenning://user/Learnings/x", "must be lower-case letters, digits and hyphens (1-64 characters, not starting with a hyphen)", "Learnings"),
        ("kenning://user/learnings/x/y", "has too many path segments", "kenning://user/learnings/x/y"),
    ];
    for (text, problem, received) in cases {
        let error = Urn::parse("urn", text).unwrap_err();
        assert_eq!((error.field.as_str(), error.problem.as_str()), ("urn", problem), "{text}");
        assert_eq!(error.received, serde_json::json!(received), "{text}");
    }
    let error = MemoryUrn::parse("uri", "kenning://user/learnings").unwrap_err();
    assert_eq!(error.problem, "addresses a domain or namespace, not one memory");
}

#[test]
fn validation_errors_carry_field_problem_received_and_suggestion() {
    let cases: Vec<(CaptureInput, &str, &str, serde_json::Value, &str)> = vec![
        (capture(""), "content", "is empty", "".into(), "write the knowledge"),
        (CaptureInput { confidence: Some(1.5), ..capture("x") }, "confidence", "must be between 0 and 1", 1.5.into(), "use confidence: 1.0"),
        (CaptureInput { salience: Some(-0.1), ..capture("x") }, "salience", "must be between 0 and 1", (-0.1).into(), "use salience: 0.0"),
        (CaptureInput { kind: Some("semantc".into()), ..capture("x") }, "kind", "is not an allowed value", "semantc".into(), "did you mean `semantic`?"),
        (CaptureInput { source: Some("user".into()), ..capture("x") }, "source", "is not an allowed value", "user".into(), "use one of: direct-observation"),
        (CaptureInput { namespace: Some("Tech Debt".into()), ..capture("x") }, "namespace", "must be lower-case", "Tech Debt".into(), "`tech-debt`"),
        (CaptureInput { namespace: Some("Learnigs".into()), ..capture("x") }, "namespace", "must be lower-case", "Learnigs".into(), "did you mean `learnings`?"),
        (CaptureInput { tags: vec!["two words".into()], ..capture("x") }, "tags", "holds a tag", "two words".into(), "`two-words`"),
        (CaptureInput { event_time: Some("last May".into()), ..capture("x") }, "event_time", "is not an RFC 3339", "last May".into(), "2026-05-08"),
        (
            CaptureInput { links: vec![kenning_core::LinkInput { target: "nope".into(), relation: None }], ..capture("x") },
            "links.target", "does not start with", "nope".into(), "kenning://",
        ),
    ];
    for (input, field, problem, received, suggestion) in cases {
        let error = build_memory(input, Domain::User, MemoryId::parse("m1").unwrap(), now()).unwrap_err();
        assert_eq!(error.field, field);
        assert!(error.problem.starts_with(problem), "{field}: {}", error.problem);
        assert_eq!(error.received, received, "{field}");
        assert!(error.suggestion.contains(suggestion), "{field}: {}", error.suggestion);
    }
}

#[test]
fn user_defined_namespaces_are_valid_but_near_misses_are_spotted() {
    assert_eq!(Namespace::parse("learnigs").unwrap().near_built_in(), Some("learnings"));
    assert_eq!(Namespace::parse("release-notes").unwrap().near_built_in(), None);
    assert_eq!(Namespace::parse("learnings").unwrap().near_built_in(), None);
}

#[test]
fn capture_defaults_follow_namespace_and_source() {
    let memory = build_memory(
        CaptureInput { content: "# Pool size\nUse 20 connections".into(), source: Some("told-by-user".into()), namespace: Some("patterns".into()), tags: vec![" DB ".into(), "db".into()], ..CaptureInput::default() },
        Domain::User,
        MemoryId::parse("m1").unwrap(),
        now(),
    )
    .unwrap();
    assert_eq!(memory.title, "Pool size");
    assert_eq!(memory.kind, kenning_core::MemoryKind::Procedural);
    assert_eq!(memory.confidence, 0.9);
    assert_eq!(memory.tags, ["db"]);
    assert_eq!((memory.version, memory.status), (1, Status::Active));
}

#[test]
fn every_update_keeps_the_previous_version_with_its_reason() {
    let first = memory("Use 10 connections");
    let later = now() + chrono::Duration::hours(1);
    let (second, v1) = apply_update(
        &first,
        UpdateInput { content: Some("Use 20 connections".into()), reason: "load test showed 10 is too few".into(), ..UpdateInput::default() },
        later,
    )
    .unwrap();
    assert_eq!((second.version, second.content.as_str(), second.updated_at), (2, "Use 20 connections", later));
    assert_eq!((v1.version, v1.reason.as_str(), v1.superseded_at), (1, "load test showed 10 is too few", later));
    assert_eq!(v1.memory, first);

    let (third, v2) = change_status(&second, Status::Forgotten, "pool removed", later).unwrap().unwrap();
    assert_eq!((third.version, third.status, v2.version), (3, Status::Forgotten, 2));
    assert!(change_status(&third, Status::Forgotten, "again", later).unwrap().is_none());
}

#[test]
fn updates_need_a_reason_and_a_change() {
    let first = memory("Use 10 connections");
    let error = apply_update(&first, UpdateInput { content: Some("x".into()), ..UpdateInput::default() }, now()).unwrap_err();
    assert_eq!(error.field, "reason");
    let error = apply_update(&first, UpdateInput { content: Some(first.content.clone()), reason: "no-op".into(), ..UpdateInput::default() }, now()).unwrap_err();
    assert_eq!(error.field, "update");
}

#[test]
fn duplicate_key_depends_on_namespace_and_trimmed_content_only() {
    let a = memory("Use 10 connections");
    let mut b = memory("  Use 10 connections\n");
    b.title = "different title".into();
    b.tags = vec!["other".into()];
    assert_eq!(a.content_hash(), b.content_hash());
    b.namespace = Namespace::parse("patterns").unwrap();
    assert_ne!(a.content_hash(), b.content_hash());
}

#[test]
fn memories_serialise_with_urn_friendly_fields() {
    let memory = memory("Use 10 connections");
    let json = serde_json::to_value(&memory).unwrap();
    assert_eq!(json["domain"], "user");
    assert_eq!(json["namespace"], "learnings");
    assert_eq!(json["kind"], "semantic");
    assert_eq!(json["source"], "model-generated");
    let back: kenning_core::Memory = serde_json::from_value(json).unwrap();
    assert_eq!(back, memory);
}
