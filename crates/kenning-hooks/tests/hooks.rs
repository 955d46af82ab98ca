//! Each hook fed the JSON Claude Code sends (fixtures of every event) against real SQLite
//! stores: valid output, the token budget, the relevance floor, and the transcript captures.

use std::sync::Arc;

use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::search::estimate_tokens;
use kenning_core::{CaptureInput, Domain, MemoryStore, SearchFilter};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_hooks::transcript::{Speaker, classify, findings};
use kenning_hooks::{Budgets, HookEvent, HookInput, Hooks};
use kenning_sqlite::SqliteStore;
use serde_json::Value;

struct Setup {
    hooks: Hooks,
    _dir: tempfile::TempDir,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let project = Arc::new(SqliteStore::open(&dir.path().join("project.db")).unwrap());
    let user = Arc::new(SqliteStore::open(&dir.path().join("user.db")).unwrap());
    let memory = Arc::new(MemoryService::new(
        vec![
            DomainStore { domain: Domain::Project("shop".into()), store: project.clone() as Arc<dyn MemoryStore> },
            DomainStore { domain: Domain::User, store: user.clone() as Arc<dyn MemoryStore> },
        ],
        None,
    ));
    let decisions = Arc::new(DecisionService::new(
        memory.clone(),
        vec![
            DecisionDomain { domain: Domain::Project("shop".into()), store: project as Arc<dyn DecisionStore> },
            DecisionDomain { domain: Domain::User, store: user as Arc<dyn DecisionStore> },
        ],
        ModuleList::default(),
    ));
    let hooks = Hooks { memory, decisions, project: Some("shop".into()), budgets: Budgets::default() };
    Setup { hooks, _dir: dir }
}

fn note(content: &str, namespace: &str) -> CaptureInput {
    CaptureInput { content: content.into(), namespace: Some(namespace.into()), ..CaptureInput::default() }
}

fn seed(hooks: &Hooks) -> Vec<String> {
    let captures = [
        ("The billing webhook retried the same invoice because the signature check failed after JSON re-serialisation; verify the HMAC over the raw body.", "learnings", None),
        ("Blocked: staging deploys need the new TLS certificate from ops.", "blockers", None),
        ("Use PostgreSQL 16 for the orders service, behind pgbouncer.", "decisions", None),
        ("Prefer small commits with imperative messages.", "preferences", Some("user")),
        ("The search page paginates with cursors, never offsets.", "patterns", None),
    ];
    captures
        .iter()
        .map(|(content, namespace, domain)| hooks.memory.capture(note(content, namespace), *domain).unwrap().urn)
        .collect()
}

fn fixture(name: &str) -> HookInput {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The additional context of an answer, after checking the answer has Claude Code's shape.
fn context_of(answer: &Value, event: HookEvent) -> String {
    let output = &answer["hookSpecificOutput"];
    assert_eq!(output["hookEventName"], event.claude_name(), "{answer}");
    let context = output["additionalContext"].as_str().unwrap_or_else(|| panic!("no additionalContext in {answer}"));
    assert!(context.starts_with("<memory_context>") && context.ends_with("</memory_context>"), "{context}");
    context.to_owned()
}

#[test]
fn session_start_gives_blockers_decisions_and_preferences_as_a_memory_context_block() {
    let setup = setup();
    let urns = seed(&setup.hooks);
    let answer = setup.hooks.run(HookEvent::SessionStart, &fixture("session-start.json")).unwrap().unwrap();
    let context = context_of(&answer, HookEvent::SessionStart);
    assert!(context.contains("<project>shop</project>"), "{context}");
    for urn in [&urns[1], &urns[2], &urns[3]] {
        assert!(context.contains(urn.as_str()), "{urn} missing from {context}");
    }
    assert!(!context.contains(urns[4].as_str()), "a pattern is not standing context: {context}");
    assert!(context.find(urns[1].as_str()) < context.find(urns[2].as_str()), "blockers come before decisions");
    assert!(context.contains("<resource_template uri=\"kenning://{domain}/{namespace}/{id}\" />"));
}

#[test]
fn session_start_stays_within_its_token_budget() {
    let mut setup = setup();
    for n in 0..40 {
        let text = format!("Blocker {n}: the integration environment for service {n} is down until the vendor ships a patch.");
        setup.hooks.memory.capture(note(&text, "blockers"), None).unwrap();
    }
    for budget in [200, 400, 1500] {
        setup.hooks.budgets = Budgets { session_start: budget, ..Budgets::default() };
        let answer = setup.hooks.run(HookEvent::SessionStart, &fixture("session-start.json")).unwrap().unwrap();
        let context = context_of(&answer, HookEvent::SessionStart);
        assert!(estimate_tokens(&context) <= budget, "{} tokens over a budget of {budget}", estimate_tokens(&context));
        assert!(context.contains("<resource "), "a budget of {budget} held no resource");
    }
}

#[test]
fn an_empty_store_gives_no_session_context() {
    let setup = setup();
    assert_eq!(setup.hooks.run(HookEvent::SessionStart, &fixture("session-start.json")).unwrap(), None);
}

#[test]
fn a_prompt_gets_the_memories_above_the_relevance_floor() {
    let setup = setup();
    let urns = seed(&setup.hooks);
    let answer = setup.hooks.run(HookEvent::UserPrompt, &fixture("user-prompt.json")).unwrap().unwrap();
    let context = context_of(&answer, HookEvent::UserPrompt);
    assert!(context.contains(urns[0].as_str()), "{context}");
    assert!(context.contains("relevance=\""), "{context}");
    assert!(!context.contains(urns[3].as_str()), "an unrelated preference passed the floor: {context}");
    assert!(estimate_tokens(&context) <= Budgets::default().user_prompt);
}

#[test]
fn thanks_and_unrelated_prompts_get_nothing() {
    let setup = setup();
    seed(&setup.hooks);
    for name in ["user-prompt-thanks.json", "user-prompt-unrelated.json"] {
        assert_eq!(setup.hooks.run(HookEvent::UserPrompt, &fixture(name)).unwrap(), None, "{name}");
    }
    for prompt in ["ok", "yes please", "go ahead", "thank you!", ""] {
        let input = HookInput { prompt: Some(prompt.into()), ..HookInput::default() };
        assert_eq!(setup.hooks.run(HookEvent::UserPrompt, &input).unwrap(), None, "{prompt:?}");
    }
}

#[test]
fn a_failed_test_run_brings_back_why_it_failed_before() {
    let setup = setup();
    let urns = seed(&setup.hooks);
    let answer = setup.hooks.run(HookEvent::PostTool, &fixture("post-tool-failed.json")).unwrap().unwrap();
    let context = context_of(&answer, HookEvent::PostTool);
    assert!(context.contains(urns[0].as_str()), "{context}");
    assert!(context.contains("failed before"), "{context}");
    assert_eq!(setup.hooks.run(HookEvent::PostTool, &fixture("post-tool-passed.json")).unwrap(), None, "a green run got context");
}

#[test]
fn failures_are_told_from_green_runs() {
    use kenning_hooks::failure::detect;
    let response = |value: Value| HookInput { tool_response: Some(value), ..HookInput::default() };
    assert!(detect(&response(serde_json::json!({"stdout": "5 passed, 2 failed in 1.2s"}))).is_some());
    assert!(detect(&response(serde_json::json!({"stdout": "test result: ok. 9 passed; 0 failed"}))).is_none());
    assert!(detect(&response(serde_json::json!({"stdout": "", "stderr": "", "exit_code": 2}))).is_some());
    assert!(detect(&response(serde_json::json!({"is_error": true, "content": "Permission denied"}))).is_some());
    assert!(detect(&response(serde_json::json!("Traceback (most recent call last):\n  File \"x.py\""))).is_some());
    assert!(detect(&response(serde_json::json!({"stdout": "Compiling app\nFinished"}))).is_none());
    assert!(detect(&HookInput::default()).is_none());
}

#[test]
fn stop_captures_decisions_fixes_blockers_and_preferences_once() {
    let setup = setup();
    let transcript = format!("{}/tests/fixtures/transcript.jsonl", env!("CARGO_MANIFEST_DIR"));
    for (event, name) in [(HookEvent::Stop, "stop.json"), (HookEvent::PreCompact, "pre-compact.json")] {
        let mut input = fixture(name);
        input.transcript_path = Some(transcript.clone());
        assert_eq!(setup.hooks.run(event, &input).unwrap(), None, "{event} prints nothing");
    }
    let store = &setup.hooks.memory;
    let domain = Domain::Project("shop".into());
    let listed = store.list(&domain, &SearchFilter::active(), None, 100).unwrap();
    let mut found: Vec<(String, String)> = listed.memories.iter().map(|m| (m.namespace.clone(), m.title.clone())).collect();
    found.sort();
    insta::assert_debug_snapshot!("transcript_captures", found);
    let user_listed = store.list(&Domain::User, &SearchFilter::active(), None, 100).unwrap();
    assert!(user_listed.memories.is_empty(), "hooks capture into the default domain");
    for reference in &listed.memories {
        let memory = store.get(&reference.urn).unwrap();
        assert_eq!(memory.metadata.get("source").map(String::as_str), Some("hook"), "{memory:?}");
        assert_eq!(memory.metadata.get("session_id").map(String::as_str), Some("4b1c2f8e-1d7a-4c1e-9a3b-5f0e2d6c7a81"));
        assert!(memory.tags.contains(&"hook".to_owned()));
        let expected_source = if memory.namespace == "preferences" { "told-by-user" } else { "model-generated" };
        assert_eq!(memory.source, expected_source);
    }
}

#[test]
fn a_missing_transcript_is_an_error_for_the_log_not_a_panic() {
    let setup = setup();
    let input = HookInput { transcript_path: Some("/nonexistent/transcript.jsonl".into()), ..HookInput::default() };
    let error = setup.hooks.run(HookEvent::Stop, &input).unwrap_err();
    assert!(error.to_string().contains("/nonexistent/transcript.jsonl"), "{error}");
    assert_eq!(setup.hooks.run(HookEvent::Stop, &HookInput::default()).unwrap(), None);
}

#[test]
fn the_rules_keep_statements_and_leave_questions_and_chatter() {
    let cases = [
        (Speaker::Assistant, "The root cause was a stale lockfile in the cache layer.", Some("learnings")),
        (Speaker::Assistant, "We decided to use rustls instead of OpenSSL for the client.", Some("decisions")),
        (Speaker::Assistant, "Releasing is blocked by the missing signing key on the runner.", Some("blockers")),
        (Speaker::User, "Never push directly to main without a review.", Some("preferences")),
        (Speaker::Assistant, "Never push directly to main without a review.", None),
        (Speaker::Assistant, "Should we switch to rustls instead of OpenSSL?", None),
        (Speaker::Assistant, "I'll run the tests again and look at the output.", None),
    ];
    for (speaker, sentence, expected) in cases {
        assert_eq!(classify(speaker, sentence), expected, "{sentence}");
    }
    let transcript = std::fs::read_to_string(format!("{}/tests/fixtures/transcript.jsonl", env!("CARGO_MANIFEST_DIR"))).unwrap();
    assert_eq!(findings(&transcript, 2).len(), 2, "the limit holds");
}

#[test]
fn every_event_parses_by_its_command_and_claude_code_name() {
    for event in HookEvent::ALL {
        assert_eq!(HookEvent::parse(event.command_name()), Some(event));
        assert_eq!(HookEvent::parse(event.claude_name()), Some(event));
    }
    assert_eq!(HookEvent::parse("teardown"), None);
}

/// Secrets said in a session, or carried in a hook's input, are redacted before the Stop hook
/// stores what it found: a byte search of the stores' files finds none of them.
#[test]
fn transcript_captures_store_no_secret() {
    let setup = setup();
    let (token, password) = (concat!("ghp", "_Zr8kLm2Qp9Xv4Tn6Bw1Yc3Hd5Fj7Gs0Ka2Ue"), "Pw9Zr8kLm2Qp9Xv4");
    let elsewhere = tempfile::tempdir().unwrap();
    let transcript = elsewhere.path().join("session.jsonl");
    let lines = [
        serde_json::json!({"type": "user", "message": {"role": "user", "content": format!("Always export GITHUB_TOKEN={token} before running the release script.")}}),
        serde_json::json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": format!("The root cause was that DB_PASSWORD={password} was missing from the runner environment.")}]}}),
    ];
    std::fs::write(&transcript, lines.iter().map(|line| format!("{line}\n")).collect::<String>()).unwrap();
    let input = HookInput {
        transcript_path: Some(transcript.display().to_string()),
        session_id: Some(format!("session-{token}")),
        ..HookInput::default()
    };
    setup.hooks.run(HookEvent::Stop, &input).unwrap();
    let listed = setup.hooks.memory.list(&Domain::Project("shop".into()), &SearchFilter::active(), None, 100).unwrap();
    assert_eq!(listed.memories.len(), 2, "{:?}", listed.memories);
    drop(setup.hooks);
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(setup._dir.path()).unwrap() {
        stored.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let contains = |needle: &str| stored.windows(needle.len()).any(|window| window == needle.as_bytes());
    assert!(contains("[REDACTED:github-token]") && contains("[REDACTED:password]"));
    assert!(!contains(token) && !contains(password), "a secret reached the stores' files");
}
