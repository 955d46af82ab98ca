//! Each hook fed the JSON Claude Code sends (fixtures of every event, as the client wrote them)
//! against real SQLite stores: valid output, the token budget, the relevance floor, failures
//! told by the client and not by words, and the transcript captures.

use std::sync::Arc;

use kenning_core::decision::{DecisionStore, ModuleList};
use kenning_core::search::estimate_tokens;
use kenning_core::{CaptureInput, Domain, MemoryStore, SearchFilter};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_hooks::transcript::{Speaker, classify, findings, texts};
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
    assert!(context.contains("<text>Use PostgreSQL 16 for the orders service, behind pgbouncer.</text>"), "the memory's text: {context}");
    assert!(context.contains("<resource_template uri=\"kenning://{domain}/{namespace}/{id}\" />"));
}

#[test]
fn after_a_compaction_session_start_brings_back_what_this_session_captured_first() {
    let setup = setup();
    let urns = seed(&setup.hooks);
    let transcript = format!("{}/tests/fixtures/transcript.jsonl", env!("CARGO_MANIFEST_DIR"));
    let mut pre_compact = fixture("pre-compact.json");
    pre_compact.transcript_path = Some(transcript);
    setup.hooks.run(HookEvent::PreCompact, &pre_compact).unwrap();
    let answer = setup.hooks.run(HookEvent::SessionStart, &fixture("session-start-compact.json")).unwrap().unwrap();
    let context = context_of(&answer, HookEvent::SessionStart);
    assert!(context.contains("captured earlier in this session"), "{context}");
    let captured = context.find("The fix was to verify the HMAC").unwrap_or_else(|| panic!("the session's learning is missing: {context}"));
    assert!(captured < context.find(urns[1].as_str()).unwrap(), "this session's captures come first: {context}");
    let fresh = setup.hooks.run(HookEvent::SessionStart, &fixture("session-start.json")).unwrap().unwrap();
    assert!(!context_of(&fresh, HookEvent::SessionStart).contains("captured earlier in this session"));
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
    assert!(context.contains("verify the HMAC over the raw body"), "the memory's text, not only its title: {context}");
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
    let answer = setup.hooks.run(HookEvent::PostToolFailure, &fixture("post-tool-failure.json")).unwrap().unwrap();
    let context = context_of(&answer, HookEvent::PostToolFailure);
    assert!(context.contains(urns[0].as_str()), "{context}");
    assert!(context.contains("`cargo test -p billing webhook` failed (exit code 101)"), "{context}");
    assert_eq!(setup.hooks.run(HookEvent::PostTool, &fixture("post-tool-passed.json")).unwrap(), None, "a green run got context");
}

#[test]
fn a_failure_is_what_the_client_says_never_what_the_output_says() {
    use kenning_hooks::failure::{from_failure_event, from_tool_response};
    let succeeded = |stdout: &str| HookInput {
        hook_event_name: Some("PostToolUse".into()),
        tool_input: Some(serde_json::json!({"command": "git log --oneline"})),
        tool_response: Some(serde_json::json!({"stdout": stdout, "stderr": "", "interrupted": false, "isImage": false})),
        ..HookInput::default()
    };
    // Commands that exited 0, whatever their output says.
    for stdout in ["a1b2c3 Fix: Error: handling in the parser
d4e5f6 FAILED builds are retried", "src/main.rs:12: Error: bad input", "5 passed, 2 failed in 1.2s"] {
        assert_eq!(from_tool_response(&succeeded(stdout)), None, "{stdout}");
    }
    let flagged = |response: Value| HookInput { tool_response: Some(response), ..HookInput::default() };
    assert_eq!(from_tool_response(&flagged(serde_json::json!({"stdout": "", "exit_code": 2}))).unwrap().exit_code, Some(2));
    assert!(from_tool_response(&flagged(serde_json::json!({"isError": true, "content": "Permission denied"}))).is_some());
    assert!(from_tool_response(&flagged(serde_json::json!({"stdout": "ok", "exit_code": 0}))).is_none());

    let failure = from_failure_event(&fixture("post-tool-failure.json")).unwrap();
    assert_eq!(failure.exit_code, Some(101));
    assert_eq!(failure.command.as_deref(), Some("cargo test -p billing webhook"));
    assert!(failure.lines.iter().any(|line| line.contains("panicked at")), "{failure:?}");
    let quiet = HookInput { error: Some("Exit code 1".into()), ..HookInput::default() };
    assert_eq!(from_failure_event(&quiet).unwrap().exit_code, Some(1));
    let interrupted = HookInput { error: Some("Exit code 130\n^C".into()), is_interrupt: Some(true), ..HookInput::default() };
    assert_eq!(from_failure_event(&interrupted), None, "an interrupt is the user's doing, not a failure");
}

#[test]
fn a_command_that_succeeded_gets_no_failure_context() {
    let setup = setup();
    seed(&setup.hooks);
    let input = HookInput {
        hook_event_name: Some("PostToolUse".into()),
        tool_name: Some("Bash".into()),
        tool_input: Some(serde_json::json!({"command": "grep -rn \"Error:\" src/billing"})),
        tool_response: Some(serde_json::json!({"stdout": "src/billing/webhook.rs:88: Error: signature check failed", "stderr": ""})),
        ..HookInput::default()
    };
    assert_eq!(setup.hooks.run(HookEvent::PostTool, &input).unwrap(), None);
}

#[test]
fn stop_captures_decisions_fixes_blockers_and_preferences_once() {
    let setup = setup();
    let transcript = format!("{}/tests/fixtures/transcript.jsonl", env!("CARGO_MANIFEST_DIR"));
    for (event, name) in [(HookEvent::Stop, "stop.json"), (HookEvent::PreCompact, "pre-compact.json"), (HookEvent::SessionEnd, "session-end.json")] {
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
fn stop_takes_the_final_answer_from_the_client_not_the_transcript() {
    let setup = setup();
    // The transcript the client has written so far: the turn's prompt, no answer yet.
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(
        &transcript,
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"Why do the invoice exports time out?\"}}\n",
    )
    .unwrap();
    let mut input = fixture("stop.json");
    input.transcript_path = Some(transcript.display().to_string());
    input.last_assistant_message = Some("The root cause was an N+1 query in the export job; the fix was to batch the line items.".into());
    setup.hooks.run(HookEvent::Stop, &input).unwrap();
    let listed = setup.hooks.memory.list(&Domain::Project("shop".into()), &SearchFilter::active(), None, 10).unwrap();
    assert_eq!(listed.memories.len(), 1, "{listed:?}");
    assert!(listed.memories[0].title.starts_with("The root cause was an N+1 query"), "{listed:?}");
}

#[test]
fn findings_already_stored_do_not_count_against_the_cap() {
    let setup = setup();
    // Fifteen findings in one turn, and the user's preference said first.
    let mut answer = String::new();
    for n in 0..15 {
        answer.push_str(&format!("The root cause of failure number {n} was a missing index on table t{n}.\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("session.jsonl");
    let prompt = serde_json::json!({"type": "user", "message": {"role": "user", "content": "Always run the integration suite before merging."}});
    std::fs::write(&transcript, format!("{prompt}\n")).unwrap();
    let mut input = fixture("stop.json");
    input.transcript_path = Some(transcript.display().to_string());
    input.last_assistant_message = Some(answer);
    let count = |hooks: &Hooks| hooks.memory.list(&Domain::Project("shop".into()), &SearchFilter::active(), None, 100).unwrap().memories.len();
    setup.hooks.run(HookEvent::Stop, &input).unwrap();
    assert_eq!(count(&setup.hooks), 12, "one stop stores at most twelve new memories");
    let preference = setup.hooks.memory.list(&Domain::Project("shop".into()), &SearchFilter::active(), None, 100).unwrap();
    assert!(preference.memories.iter().any(|memory| memory.namespace == "preferences"), "the user's preference goes first");
    setup.hooks.run(HookEvent::Stop, &input).unwrap();
    assert_eq!(count(&setup.hooks), 16, "the next stop stores the rest, not nothing");
}

#[test]
fn only_what_a_person_typed_is_told_by_the_user() {
    let transcript = std::fs::read_to_string(format!("{}/tests/fixtures/transcript.jsonl", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let read = texts(&transcript);
    let user: Vec<&str> = read.iter().filter(|(speaker, _)| *speaker == Speaker::User).map(|(_, text)| text.as_str()).collect();
    assert_eq!(user, ["The billing webhook tests fail on CI again. Always run the full billing suite before pushing.", "yes please"]);
    let found = findings(&read);
    for sentence in ["Never deploy on Fridays", "Always use the staging cluster", "never log the raw body"] {
        assert!(!found.iter().any(|finding| finding.sentence.contains(sentence)), "{sentence} is not a finding: {found:?}");
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
