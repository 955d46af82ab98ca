//! The memory service over real SQLite stores: capture, recall across domains, filters,
//! paging, token budgets, concurrent updates, export and import, and hybrid search. The
//! decision service's tests are in `engine/decisions.rs`, the code service's in `engine/code.rs`,
//! consolidation's in `engine/consolidation.rs`, guided protocol sessions' in
//! `engine/protocols.rs`, that no write path stores a secret in `engine/redaction.rs`.

#[path = "engine/code.rs"]
mod code;
#[path = "engine/consolidation.rs"]
mod consolidation;
#[path = "engine/contradictions.rs"]
mod contradictions;
#[path = "engine/decisions.rs"]
mod decisions;
#[path = "engine/dynamics.rs"]
mod dynamics;
#[path = "engine/judgment.rs"]
mod judgment;
#[path = "engine/protocols.rs"]
mod protocols;
#[path = "engine/redaction.rs"]
mod redaction;

use std::sync::Arc;

use kenning_core::{CaptureInput, Domain, Embedder, MemoryStore, UpdateInput};
use kenning_engine::{DomainStore, Error, MemoryService, RecallRequest};
use kenning_sqlite::SqliteStore;

fn store(dir: &tempfile::TempDir, name: &str) -> Arc<dyn MemoryStore> {
    Arc::new(SqliteStore::open(&dir.path().join(name)).unwrap())
}

fn two_domains(dir: &tempfile::TempDir, embedder: Option<Arc<dyn Embedder>>) -> MemoryService {
    MemoryService::new(
        vec![
            DomainStore { domain: Domain::Project("my-app".into()), store: store(dir, "project.db") },
            DomainStore { domain: Domain::User, store: store(dir, "user.db") },
        ],
        embedder,
    )
}

fn note(content: &str, namespace: &str) -> CaptureInput {
    CaptureInput { content: content.into(), namespace: Some(namespace.into()), ..CaptureInput::default() }
}

fn recall(query: &str) -> RecallRequest {
    RecallRequest { query: query.into(), ..RecallRequest::default() }
}

fn urns(page: &kenning_engine::views::RecallPage) -> Vec<String> {
    page.results.iter().map(|hit| hit.urn.clone()).collect()
}

#[test]
fn recall_searches_project_and_user_together_unless_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let project = memory.capture(note("The billing service retries webhooks three times", "learnings"), None).unwrap();
    let user = memory.capture(note("I prefer webhooks signed with HMAC", "preferences"), Some("user")).unwrap();
    assert!(project.urn.starts_with("kenning://project:my-app/learnings/"));
    assert!(user.urn.starts_with("kenning://user/preferences/"));

    let both = memory.recall(recall("webhooks")).unwrap();
    assert_eq!(both.results.len(), 2);
    assert_eq!(both.mode, "text");
    let only_user = memory.recall(RecallRequest { domains: vec!["user".into()], ..recall("webhooks") }).unwrap();
    assert_eq!(urns(&only_user), [user.urn.clone()]);
    let full_name = memory.recall(RecallRequest { domains: vec!["project:my-app".into()], ..recall("webhooks") }).unwrap();
    assert_eq!(urns(&full_name), [project.urn]);

    let Err(Error::Invalid(error)) = memory.recall(RecallRequest { domains: vec!["org".into()], ..recall("webhooks") }) else {
        panic!("an unconfigured domain was accepted");
    };
    assert_eq!(error.field, "domains");
    assert!(error.suggestion.contains("project:my-app, user"), "{}", error.suggestion);
}

#[test]
fn recall_filters_by_branch_and_by_file_relative_to_the_repository_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let memory = two_domains(&dir, None).with_repository_root(Some(root.clone()));
    let capture = |input: CaptureInput, domain: Option<&str>| memory.capture(input, domain).unwrap().urn;
    let on = |branch: &str| [("git_branch".to_owned(), branch.to_owned())].into_iter().collect();
    let pool = capture(CaptureInput { metadata: on("main"), ..note("The pool in src/db/pool.rs caps connections at 20.", "learnings") }, None);
    let schema = capture(CaptureInput { metadata: on("feature"), ..note("The schema for connections lives in `src/db/schema.sql`.", "learnings") }, None);
    let personal = capture(CaptureInput { metadata: [("files".to_owned(), "src/db/pool.rs".to_owned())].into_iter().collect(), ..note("I tune connections by hand.", "preferences") }, Some("user"));

    let only = |request: RecallRequest| {
        let mut found = urns(&memory.recall(request).unwrap());
        found.sort();
        found
    };
    let sorted = |mut urns: Vec<String>| {
        urns.sort();
        urns
    };
    assert_eq!(only(RecallRequest { branch: Some("main".into()), ..recall("connections") }), [pool.clone()]);
    assert_eq!(only(RecallRequest { file: Some("src/db/pool.rs".into()), ..recall("connections") }), sorted(vec![pool.clone(), personal.clone()]));
    assert_eq!(only(RecallRequest { file: Some("./src/db/../db/pool.rs".into()), ..recall("connections") }), sorted(vec![pool.clone(), personal.clone()]));
    let absolute = root.join("src/db").to_string_lossy().into_owned();
    assert_eq!(only(RecallRequest { file: Some(absolute), ..recall("connections") }), sorted(vec![pool.clone(), schema.clone(), personal]));
    assert_eq!(only(RecallRequest { file: Some("src/db/schema.sql".into()), branch: Some("main".into()), ..recall("connections") }), Vec::<String>::new());

    for (request, field) in [
        (RecallRequest { file: Some(dir.path().join("elsewhere.rs").to_string_lossy().into_owned()), ..recall("x") }, "file"),
        (RecallRequest { file: Some("../outside.rs".into()), ..recall("x") }, "file"),
        (RecallRequest { file: Some(root.to_string_lossy().into_owned()), ..recall("x") }, "file"),
        (RecallRequest { branch: Some(" ".into()), ..recall("x") }, "branch"),
    ] {
        match memory.recall(request) {
            Err(Error::Invalid(error)) => assert_eq!(error.field, field, "{error:?}"),
            other => panic!("{field}: expected a field error, got {other:?}"),
        }
    }
}

#[test]
fn recall_filters_by_kind_namespace_tags_time_and_confidence() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let capture = |input: CaptureInput| memory.capture(input, None).unwrap().urn;
    let old = capture(CaptureInput { event_time: Some("2024-01-10".into()), tags: vec!["db".into()], confidence: Some(0.9), ..note("cache invalidation on deploy", "learnings") });
    let new = capture(CaptureInput { event_time: Some("2026-03-01".into()), tags: vec!["db".into(), "ops".into()], confidence: Some(0.4), ..note("cache warmup after deploy", "progress") });
    let procedure = capture(CaptureInput { kind: Some("procedural".into()), ..note("how to deploy the cache", "patterns") });

    let only = |request: RecallRequest| urns(&memory.recall(request).unwrap());
    assert_eq!(only(RecallRequest { kinds: vec!["procedural".into()], ..recall("cache deploy") }), [procedure.clone()]);
    assert_eq!(only(RecallRequest { namespaces: vec!["progress".into()], ..recall("cache deploy") }), [new.clone()]);
    assert_eq!(only(RecallRequest { tags: vec!["db".into(), "ops".into()], ..recall("cache deploy") }), [new.clone()]);
    assert_eq!(only(RecallRequest { until: Some("2025-01-01".into()), ..recall("cache deploy") }), [old.clone()]);
    assert_eq!(only(RecallRequest { since: Some("2026-01-01T00:00:00Z".into()), tags: vec!["db".into()], ..recall("cache deploy") }), [new]);
    assert_eq!(only(RecallRequest { min_confidence: Some(0.8), tags: vec!["db".into()], ..recall("cache deploy") }), [old]);

    for (request, field) in [
        (RecallRequest { kinds: vec!["semantik".into()], ..recall("x") }, "kinds"),
        (RecallRequest { namespaces: vec!["Bad NS".into()], ..recall("x") }, "namespaces"),
        (RecallRequest { since: Some("last May".into()), ..recall("x") }, "since"),
        (RecallRequest { since: Some("2026-02-01".into()), until: Some("2026-01-01".into()), ..recall("x") }, "since"),
        (RecallRequest { min_confidence: Some(2.0), ..recall("x") }, "min_confidence"),
        (RecallRequest { limit: Some(0), ..recall("x") }, "limit"),
        (RecallRequest { cursor: Some("bogus".into()), ..recall("x") }, "cursor"),
        (RecallRequest { detail: Some("medium".into()), ..recall("x") }, "detail"),
        (recall("   "), "query"),
    ] {
        match memory.recall(request) {
            Err(Error::Invalid(error)) => assert_eq!(error.field, field),
            other => panic!("{field}: expected a field error, got {other:?}"),
        }
    }
}

#[test]
fn recall_pages_with_cursors_and_respects_the_token_budget() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let inputs = (0..25).map(|i| note(&format!("deployment checklist item {i}: {}", "verify the rollout carefully ".repeat(20)), "patterns")).collect();
    memory.capture_many(inputs, None).unwrap();

    let first = memory.recall(RecallRequest { limit: Some(10), ..recall("deployment checklist") }).unwrap();
    let second = memory.recall(RecallRequest { limit: Some(10), cursor: first.next_cursor.clone(), ..recall("deployment checklist") }).unwrap();
    let third = memory.recall(RecallRequest { limit: Some(10), cursor: second.next_cursor.clone(), ..recall("deployment checklist") }).unwrap();
    let mut all: Vec<String> = [urns(&first), urns(&second), urns(&third)].concat();
    assert_eq!((first.results.len(), second.results.len(), third.results.len()), (10, 10, 5));
    assert!(third.next_cursor.is_none());
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 25, "pages overlap");

    let budget = memory.recall(RecallRequest { limit: Some(25), max_tokens: Some(400), detail: Some("full".into()), ..recall("deployment checklist") }).unwrap();
    assert!(budget.truncated);
    assert!(budget.estimated_tokens <= 400, "{} tokens", budget.estimated_tokens);
    assert!(!budget.results.is_empty() && budget.results.len() < 25);
    let rest = memory.recall(RecallRequest { limit: Some(25), cursor: budget.next_cursor.clone(), ..recall("deployment checklist") }).unwrap();
    assert_eq!(budget.results.len() + rest.results.len(), 25, "the cursor resumes after the last returned result");

    let tiny = memory.recall(RecallRequest { limit: Some(5), max_tokens: Some(60), detail: Some("full".into()), ..recall("deployment checklist") }).unwrap();
    assert_eq!(tiny.results.len(), 1, "a tiny budget still returns the best hit, cut down");
    assert!(tiny.results[0].content.as_deref().unwrap().ends_with('…'));
}

#[test]
fn light_detail_gives_snippets_and_full_detail_gives_content() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let long = format!("{} the flaky test was caused by a shared temp dir {}", "context ".repeat(60), "more ".repeat(60));
    memory.capture(CaptureInput { metadata: [("turn_id".to_owned(), "D1:3".to_owned())].into(), ..note(&long, "learnings") }, None).unwrap();
    let light = memory.recall(recall("flaky shared temp dir")).unwrap();
    let hit = &light.results[0];
    assert!(hit.content.is_none() && hit.metadata.is_none());
    assert!(hit.snippet.as_deref().unwrap().contains("flaky test"), "{:?}", hit.snippet);
    let full = memory.recall(RecallRequest { detail: Some("full".into()), ..recall("flaky shared temp dir") }).unwrap();
    assert_eq!(full.results[0].content.as_deref(), Some(long.as_str()));
    assert_eq!(full.results[0].metadata.as_ref().unwrap()["turn_id"], "D1:3");
}

/// Kenning's default embedder, so that ranking tests run hybrid recall as agents get it.
fn builtin_embedder() -> Option<Arc<dyn Embedder>> {
    Some(Arc::new(kenning_embed::StaticEmbedder::builtin().unwrap()))
}

/// Captures `(content, namespace, event time, session)` notes in one batch and returns their URNs.
fn capture_in_sessions(memory: &MemoryService, notes: &[(&str, &str, &str, Option<&str>)]) -> Vec<String> {
    let notes: Vec<_> = notes.iter().map(|(content, namespace, time, session)| (*content, *namespace, *time, *session, None)).collect();
    capture_authored(memory, &notes)
}

/// Captures `(content, namespace, event time, session, author)` notes in one batch and returns
/// their URNs.
fn capture_authored(memory: &MemoryService, notes: &[(&str, &str, &str, Option<&str>, Option<&str>)]) -> Vec<String> {
    let inputs = notes
        .iter()
        .map(|(content, namespace, time, session, author)| CaptureInput {
            event_time: Some((*time).into()),
            metadata: session.map(|session| [("session_id".to_owned(), session.to_owned())].into()).unwrap_or_default(),
            author: author.map(str::to_owned),
            ..note(content, namespace)
        })
        .collect();
    memory.capture_many(inputs, None).unwrap().into_iter().map(|outcome| outcome.urn).collect()
}

fn score_of(page: &kenning_engine::views::RecallPage, urn: &str) -> f64 {
    page.results.iter().find(|hit| hit.urn == urn).map_or(0.0, |hit| hit.score)
}

#[test]
fn recall_brings_along_the_reply_captured_next_to_a_strong_hit_in_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, builtin_embedder());
    let captured = capture_authored(
        &memory,
        &[
            ("Asked which port the staging database listens on", "context", "2026-03-02T10:00:00Z", Some("agent-a"), Some("ana")),
            // Another agent's note, captured between the question and its answer.
            ("Bumped the session cache lifetime to ten minutes", "context", "2026-03-02T10:00:30Z", Some("agent-b"), Some("ben")),
            ("It is 5433 since the upgrade; 5432 is the old cluster", "context", "2026-03-02T10:01:00Z", Some("agent-a"), Some("ben")),
            ("Renamed the billing queue", "progress", "2026-03-02T10:02:00Z", Some("agent-a"), Some("ana")),
            ("Unrelated: the linter config moved to the workspace root", "context", "2026-03-02T18:00:00Z", Some("agent-a"), Some("ana")),
        ],
    );
    let page = memory.recall(RecallRequest { limit: Some(5), ..recall("staging database port") }).unwrap();
    assert_eq!(urns(&page)[..2], [captured[0].clone(), captured[2].clone()], "the answer in the question's session comes along");
    let (answer, other_agent) = (score_of(&page, &captured[2]), score_of(&page, &captured[1]));
    assert!(answer >= 0.5 * page.results[0].score, "a neighbour gets half of its hit's score on top of its own: {answer}");
    assert!(other_agent < answer / 2.0, "another session's note captured next to the hit gets nothing: {other_agent} vs {answer}");
}

/// The neighbours of the hits of one session are looked up together (one call for the session):
/// each hit still lends to its own neighbour, the stronger hit more.
#[test]
fn two_hits_of_one_session_each_lend_to_their_own_neighbour() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, builtin_embedder());
    let captured = capture_authored(
        &memory,
        &[
            ("Asked which port the staging database listens on", "context", "2026-03-02T10:00:00Z", Some("agent-a"), Some("ana")),
            ("It is 5433 since the upgrade", "context", "2026-03-02T10:00:30Z", Some("agent-a"), Some("ben")),
            ("Renamed the billing queue", "progress", "2026-03-02T10:01:00Z", Some("agent-a"), Some("ana")),
            ("Which database do the staging reports read", "context", "2026-03-02T10:01:30Z", Some("agent-a"), Some("ana")),
            ("The reporting replica, read only", "context", "2026-03-02T10:02:00Z", Some("agent-a"), Some("ben")),
        ],
    );
    let page = memory.recall(RecallRequest { limit: Some(5), ..recall("staging database port") }).unwrap();
    let [strong, strong_reply, _, weak, weak_reply] = [0, 1, 2, 3, 4].map(|at| score_of(&page, &captured[at]));
    assert!(strong > weak, "the first question matches more of the query: {strong} vs {weak}");
    assert!(weak_reply >= 0.4 * weak, "the weaker hit lends to its reply: {weak_reply} vs {weak}");
    assert!(strong_reply > weak_reply, "each reply gets its own hit's share: {strong_reply} vs {weak_reply}");
}

/// Regression: any memory captured within the hour next to a hit was its neighbour, so two
/// agents' unrelated notes lent each other score. Without a session nothing is lent; the same
/// two notes in one session, by two authors, are neighbours.
#[test]
fn memories_of_no_session_lend_nothing() {
    let query = RecallRequest { limit: Some(5), ..recall("staging database port") };
    let cache_note_score = |session: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let memory = two_domains(&dir, builtin_embedder());
        let captured = capture_authored(
            &memory,
            &[
                ("Asked which port the staging database listens on", "context", "2026-03-02T10:00:00Z", session, Some("ana")),
                ("Bumped the session cache lifetime to ten minutes", "context", "2026-03-02T10:00:30Z", session, Some("ben")),
            ],
        );
        let page = memory.recall(query.clone()).unwrap();
        assert_eq!(page.results[0].urn, captured[0]);
        (score_of(&page, &captured[1]), page.results[0].score)
    };
    let (lent, hit) = cache_note_score(Some("one-agent"));
    assert!(lent >= 0.5 * hit, "in one session the note is the hit's neighbour: {lent} vs {hit}");
    let (alone, _) = cache_note_score(None);
    assert!(alone < lent - 0.25, "without a session it is not: {alone} vs {lent}");
}

/// Regression, from commit histories kept as memories: a maintainer's or an agent's next note
/// in its session is a statement of its own, yet it took half the score of the strong hit
/// before it and ranked above the evidence ("when did CI move to GitHub Actions" put the next
/// two unrelated commits of that week above the second commit that answers it). The same note
/// by another author, a reply in a conversation, is still lifted.
#[test]
fn a_self_contained_note_beside_a_strong_hit_is_not_lifted_above_the_evidence() {
    let query = RecallRequest { limit: Some(3), ..recall("when did the CI builds move to GitHub Actions") };
    let ranks = |next_author: &str| {
        let dir = tempfile::tempdir().unwrap();
        let memory = two_domains(&dir, builtin_embedder());
        let captured = capture_authored(
            &memory,
            &[
                ("ci: move the CI builds from Travis to GitHub Actions", "progress", "2026-03-02T10:00:00Z", Some("week-10"), Some("ana")),
                ("ignore: fix a typo in a doc comment", "progress", "2026-03-02T10:05:00Z", Some("week-10"), Some(next_author)),
                ("Renamed the release workflow", "progress", "2026-03-05T09:00:00Z", Some("week-10"), Some("ana")),
                ("The linter runs before every commit", "progress", "2026-03-05T11:00:00Z", Some("week-10"), Some("ana")),
                ("ci: drop the last Travis configuration now that Actions builds every platform", "progress", "2026-03-20T09:00:00Z", Some("week-12"), Some("ana")),
                ("Docs moved into the workspace root", "progress", "2026-03-21T10:00:00Z", Some("week-12"), Some("ana")),
                ("Upgraded the runners to larger disks", "progress", "2026-03-22T11:00:00Z", Some("week-12"), Some("ana")),
            ],
        );
        let page = memory.recall(query.clone()).unwrap();
        let found = urns(&page);
        assert_eq!(found[0], captured[0], "the move itself matches best");
        (found.iter().position(|urn| *urn == captured[1]), found.iter().position(|urn| *urn == captured[4]))
    };
    let (note, evidence) = ranks("ana");
    assert!(evidence.is_some() && (note.is_none() || note > evidence), "the author's next note stays below the evidence: {note:?} {evidence:?}");
    let (reply, _) = ranks("ben");
    assert_eq!(reply, Some(1), "another author's reply right after the hit comes along with it");
}

/// A question in two parts ("what did we decide and why did the first attempt fail") whose
/// parts were noted in one session, an hour and a half apart: the part that matches less well
/// rides on the session's strong match past lone matches of other sessions, so both parts reach
/// the first page.
#[test]
fn both_parts_of_a_compound_question_noted_in_one_session_reach_the_first_page() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, builtin_embedder());
    let captured = capture_in_sessions(
        &memory,
        &[
            ("Decided: the auth flow of the CLI uses OAuth device codes", "decisions", "2026-03-02T10:00:00Z", Some("auth")),
            ("Renamed the billing queue", "progress", "2026-03-02T10:20:00Z", Some("auth")),
            ("Why the first attempt failed: the token refresh raced the logout in another browser tab", "learnings", "2026-03-02T11:30:00Z", Some("auth")),
            ("First attempt at the cache warmup failed", "learnings", "2026-03-03T09:00:00Z", Some("cache")),
            ("The first migration attempt failed", "learnings", "2026-03-04T09:00:00Z", Some("migrations")),
            ("First attempt to pin the toolchain failed", "learnings", "2026-03-05T09:00:00Z", Some("toolchain")),
            ("The linter runs before every commit", "progress", "2026-03-06T09:00:00Z", Some("ci")),
            ("Docs moved into the workspace root", "progress", "2026-03-06T10:00:00Z", Some("docs")),
            ("Upgraded the CI runners to larger disks", "progress", "2026-03-06T11:00:00Z", Some("ci")),
        ],
    );
    let page = memory.recall(RecallRequest { limit: Some(3), ..recall("what did we decide about the auth flow and why did the first attempt fail") }).unwrap();
    let found = urns(&page);
    assert_eq!(found[0], captured[0], "the decision matches best");
    assert!(found.contains(&captured[2]), "the failure noted in the decision's session is on the first page: {found:?}");
}

/// A question in two parts whose answers were noted in sessions days apart (each note in its
/// own): neither the session lift nor the neighbour spread joins them, and the whole question's words favour the
/// first part's many matches. The second part, searched on its own, brings its answer to the
/// first page; the same words asked as one question (", and so why" opens no new question)
/// leave it fourth.
#[test]
fn both_parts_of_a_compound_question_noted_in_different_sessions_reach_the_first_page() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, builtin_embedder());
    let captured = capture_in_sessions(
        &memory,
        &[
            ("Decided: the CLI auth flow uses OAuth device codes", "context", "2026-03-02T10:00:00Z", Some("auth-decision")),
            ("The OAuth device code flow of the CLI polls every five seconds", "context", "2026-03-03T10:00:00Z", Some("polling")),
            ("The CLI auth flow stores the OAuth device code in the keyring", "context", "2026-03-04T10:00:00Z", Some("keyring")),
            ("The web app auth flow uses OAuth with session cookies", "context", "2026-03-05T10:00:00Z", Some("web")),
            ("The token refresh failed: it raced the logout in another tab", "context", "2026-03-06T10:00:00Z", Some("rollout")),
            ("Rotated the deploy token", "context", "2026-03-07T10:00:00Z", Some("deploy")),
            ("Refresh the docs index nightly", "context", "2026-03-08T10:00:00Z", Some("docs")),
            ("The first build failed on the new runner", "context", "2026-03-09T10:00:00Z", Some("ci")),
        ],
    );
    let first_page = |question: &str| urns(&memory.recall(RecallRequest { limit: Some(3), ..recall(question) }).unwrap());
    let found = first_page("what did we decide about the OAuth device code auth flow of the CLI, and why did the token refresh fail");
    assert_eq!(found[0], captured[0], "the decision matches best");
    assert!(found.contains(&captured[4]), "the failure, noted in another session, is on the first page: {found:?}");
    let as_one = first_page("what did we decide about the OAuth device code auth flow of the CLI, and so why did the token refresh fail");
    assert!(!as_one.contains(&captured[4]), "asked as one question, the failure is not on the first page: {as_one:?}");
}

#[test]
fn a_memory_between_two_hits_does_not_outrank_the_best_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, builtin_embedder());
    let session = Some("planning");
    let captured = capture_in_sessions(
        &memory,
        &[
            ("PostgreSQL pool size for the orders service", "decisions", "2026-03-02T10:00:00Z", session),
            ("PostgreSQL pool size for the billing service", "decisions", "2026-03-02T10:01:00Z", session),
            ("PostgreSQL pool size for the inventory service", "decisions", "2026-03-02T10:02:00Z", session),
            // Unrelated notes make the words the three share rarer, so the other two match well.
            ("Renamed the release branch", "progress", "2026-03-05T09:00:00Z", session),
            ("The linter runs before every commit", "progress", "2026-03-05T11:00:00Z", session),
            ("Flaky snapshot test quarantined", "progress", "2026-03-05T13:00:00Z", session),
            ("Docs moved into the workspace root", "progress", "2026-03-05T15:00:00Z", session),
            ("Upgraded the CI runners to larger disks", "progress", "2026-03-05T17:00:00Z", session),
        ],
    );
    let page = memory.recall(recall("PostgreSQL pool size orders service")).unwrap();
    assert_eq!(page.results[0].urn, captured[0], "the billing note lies between two hits; it takes the larger share, not both");
}

#[test]
fn recall_puts_memories_from_the_time_a_query_names_first() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, builtin_embedder());
    let captured = capture_in_sessions(
        &memory,
        &[
            ("Deploy failed: the deploy script lost its deploy key", "blockers", "2024-03-04T09:00:00Z", None),
            ("Deploy was slow because of a cold cache", "blockers", "2024-05-20T09:00:00Z", None),
            ("Release checklist reviewed", "progress", "2024-05-21T09:00:00Z", None),
            ("Renamed the billing queue", "progress", "2024-06-10T09:00:00Z", None),
        ],
    );
    let (march, may) = (&captured[0], &captured[1]);
    let first = |query: &str, as_of: Option<&str>| {
        memory.recall(RecallRequest { as_of: as_of.map(str::to_owned), ..recall(query) }).unwrap().results[0].urn.clone()
    };
    assert_eq!(&first("deploy problems", None), march, "by words alone the March memory matches best");
    let cases = [
        ("deploy problems on 20 May 2024", None, may),
        ("deploy problems on 2024-05-20", None, may),
        ("deploy problems in May 2024", None, may),
        // Relative times count from the reference time the caller gives, else from the clock.
        ("deploy problems last May", Some("2024-06-15"), may),
        ("deploy problems in March", Some("2024-06-15"), march),
        ("deploy problems since May", Some("2024-06-15"), may),
        ("deploy problems since March", Some("2024-06-15"), march),
        ("deploy problems in the past month", Some("2024-06-15"), may),
        // From the clock, "past month" is long after all of them: nothing is preferred.
        ("deploy problems in the past month", None, march),
        ("deploy problems in 2023", None, march),
        // A time alone does not make a memory relevant: the checklist shares no word with the query.
        ("deploy problems on 2024-05-21", None, march),
    ];
    for (query, as_of, expected) in cases {
        assert_eq!(&first(query, as_of), expected, "{query} as of {as_of:?}");
    }
    let error = memory.recall(RecallRequest { as_of: Some("last tuesday".into()), ..recall("deploy") }).unwrap_err();
    assert!(error.to_string().contains("as_of"), "{error}");
}

#[test]
fn forgotten_memories_leave_recall_and_come_back_on_restore() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let urn = memory.capture(note("Staging database lives in eu-west-1", "config"), None).unwrap().urn;
    let forgotten = memory.forget(&urn, "staging moved to us-east-1").unwrap();
    assert_eq!((forgotten.status.as_str(), forgotten.version, forgotten.changed), ("forgotten", 2, true));
    assert!(memory.recall(recall("staging database")).unwrap().results.is_empty());
    assert!(!memory.forget(&urn, "again").unwrap().changed);
    // Capturing the same text again is a new memory: the forgotten one does not count as a duplicate.
    let again = memory.capture(note("Staging database lives in eu-west-1", "config"), None).unwrap();
    assert!(again.created && again.urn != urn);
    memory.forget(&again.urn, "still wrong").unwrap();
    memory.restore(&urn, "the move was rolled back").unwrap();
    assert_eq!(urns(&memory.recall(recall("staging database")).unwrap()), [urn.clone()]);
    let history = memory.history(&urn).unwrap();
    let reasons: Vec<&str> = history.versions.iter().map(|version| version.reason.as_str()).collect();
    assert_eq!(reasons, ["the move was rolled back", "staging moved to us-east-1"]);
}

#[test]
fn get_counts_accesses_and_unknown_urns_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let urn = memory.capture(note("Use UTC everywhere", "standards"), None).unwrap().urn;
    memory.get(&urn).unwrap();
    let view = memory.get(&urn).unwrap();
    assert_eq!(view.access_count, 2);
    assert!(view.last_accessed_at.is_some());
    let missing = urn.rsplit_once('/').unwrap().0.to_owned() + "/01nothere";
    assert!(matches!(memory.get(&missing), Err(Error::NotFound { target }) if target == missing));
    assert!(matches!(memory.get("kenning://org:acme/standards/x"), Err(Error::NotFound { .. })));
    assert!(matches!(memory.get("not-a-urn"), Err(Error::Invalid(error)) if error.field == "urn"));
}

#[test]
fn concurrent_updates_all_land_in_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Arc::new(two_domains(&dir, None));
    let urn = memory.capture(note("counter", "progress"), None).unwrap().urn;
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let memory = memory.clone();
            let urn = urn.clone();
            std::thread::spawn(move || {
                for step in 0..10 {
                    let input = UpdateInput { content: Some(format!("counter {thread}-{step}")), reason: format!("step {thread}-{step}"), ..UpdateInput::default() };
                    memory.update(&urn, input).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let history = memory.history(&urn).unwrap();
    assert_eq!(history.current.version, 41);
    assert_eq!(history.versions.len(), 40);
    let mut reasons: Vec<String> = history.versions.iter().map(|version| version.reason.clone()).collect();
    reasons.sort();
    reasons.dedup();
    assert_eq!(reasons.len(), 40, "every update's reason is kept exactly once");
}

#[test]
fn export_then_import_is_lossless() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let urn = memory.capture(CaptureInput { tags: vec!["a".into()], metadata: [("k".to_owned(), "v".to_owned())].into(), ..note("first", "learnings") }, None).unwrap().urn;
    memory.update(&urn, UpdateInput { content: Some("second".into()), reason: "fix".into(), ..UpdateInput::default() }).unwrap();
    memory.capture(note("user note", "preferences"), Some("user")).unwrap();
    let mut exported = Vec::new();
    memory.export(None, |line| {
        exported.push(line);
        Ok(())
    }).unwrap();
    assert_eq!(exported.len(), 2);

    let other = tempfile::tempdir().unwrap();
    let copy = two_domains(&other, None);
    let report = copy.import(exported.clone(), None).unwrap();
    assert_eq!((report.written, report.skipped), (2, 0));
    let mut reexported = Vec::new();
    copy.export(None, |line| {
        reexported.push(line);
        Ok(())
    }).unwrap();
    assert_eq!(reexported, exported);
    assert_eq!(copy.import(exported, None).unwrap().skipped, 2, "a second import changes nothing");
    assert_eq!(urns(&copy.recall(recall("second")).unwrap()), [urn]);
}

#[test]
fn hybrid_recall_finds_meaning_without_shared_words_and_reindex_fills_vectors() {
    let Some(dir_path) = kenning_conformance::services::model_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let plain = two_domains(&dir, None);
    plain.capture(note("The login page times out after thirty seconds", "blockers"), None).unwrap();
    plain.capture(note("Invoices are rendered as PDF by a nightly job", "context"), None).unwrap();
    plain.capture(note("We pin Rust to the stable toolchain", "standards"), None).unwrap();
    assert!(plain.recall(recall("authentication screen slow")).unwrap().results.is_empty(), "BM25 alone shares no word with the query");

    let embedder: Arc<dyn Embedder> = Arc::new(
        kenning_embed::TransformerEmbedder::load(&dir_path)
            .unwrap_or_else(|error| panic!("the MiniLM model must be at {} (or set KENNING_TEST_MODEL_DIR): {error}", dir_path.display())),
    );
    let hybrid = two_domains(&dir, Some(embedder));
    let status = hybrid.status().unwrap();
    assert_eq!(status.search_mode, "hybrid");
    assert_eq!(status.domains[0].index.missing_vectors, 3);
    let report = hybrid.reindex(2).unwrap();
    assert_eq!(report.embedded, 3);
    assert_eq!(hybrid.status().unwrap().domains[0].index.missing_vectors, 0);

    let page = hybrid.recall(recall("authentication screen slow")).unwrap();
    assert_eq!(page.mode, "hybrid");
    assert_eq!(page.results[0].title, "The login page times out after thirty seconds");
    assert!(page.results.iter().all(|hit| (0.0..=1.0).contains(&hit.score)), "fused scores are relevance from 0 to 1");
}

/// Regression: a query with no word the built-in model knows embedded to the zero vector,
/// whose vector leg then ranked every memory alike and recall returned arbitrary ones.
#[test]
fn a_query_the_model_has_no_word_for_is_answered_by_text_alone() {
    let dir = tempfile::tempdir().unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(kenning_embed::StaticEmbedder::builtin().unwrap());
    let memory = two_domains(&dir, Some(embedder));
    memory.capture(note("The login page times out after thirty seconds", "blockers"), None).unwrap();
    memory.capture(note("Invoices are rendered as PDF by a nightly job", "context"), None).unwrap();
    let page = memory.recall(recall("🎉🎉")).unwrap();
    assert_eq!(page.mode, "text");
    assert!(page.results.is_empty(), "{:?}", urns(&page));
    assert_eq!(memory.recall(recall("login timeout")).unwrap().mode, "hybrid");
}

#[test]
fn secrets_are_redacted_before_a_capture_or_an_update_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    let key = concat!("AKI", "A7QX3MZ2LP9WTR4KD");
    let outcome = memory
        .capture(note(&format!("The deploy user's key is {key}; DB_PASSWORD=Kx9-pl4ne-42 in staging"), "config"), None)
        .unwrap();
    let kinds: Vec<(&str, &str, usize)> = outcome.redacted.iter().map(|r| (r.field.as_str(), r.kind.as_str(), r.count)).collect();
    assert_eq!(kinds, [("content", "aws-access-key-id", 1), ("content", "password", 1)]);
    assert!(outcome.warnings.iter().any(|warning| warning.contains("2 secrets were replaced")), "{:?}", outcome.warnings);
    let stored = memory.get(&outcome.urn).unwrap();
    assert_eq!(stored.content, "The deploy user's key is [REDACTED:aws-access-key-id]; DB_PASSWORD=[REDACTED:password] in staging");
    assert!(memory.recall(recall(key)).unwrap().results.is_empty(), "the key reached the search index");

    let update = UpdateInput {
        content: Some(concat!("Rotated: the new token is ghp", "_Zr8kLm2Qp9Xv4Tn6Bw1Yc3Hd5Fj7Gs0Ka2Ue").into()),
        reason: "rotation".into(),
        ..UpdateInput::default()
    };
    let changed = memory.update(&outcome.urn, update).unwrap();
    assert_eq!(changed.redacted.len(), 1);
    assert_eq!(changed.redacted[0].kind, "github-token");
    let history = memory.history(&outcome.urn).unwrap();
    assert_eq!(history.current.content, "Rotated: the new token is [REDACTED:github-token]");
    assert!(history.versions.iter().all(|version| !version.memory.content.contains(key)), "history kept a secret");
}

#[test]
fn captures_record_the_default_author_unless_the_front_end_names_one() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None).with_author(Some("ada".into()));
    let own = memory.capture(note("Use rustls everywhere", "decisions"), None).unwrap();
    let keyed = memory.capture(CaptureInput { author: Some("ci-bot".into()), ..note("Nightly build flakes on ARM", "blockers") }, None).unwrap();
    assert_eq!(memory.get(&own.urn).unwrap().author.as_deref(), Some("ada"));
    assert_eq!(memory.get(&keyed.urn).unwrap().author.as_deref(), Some("ci-bot"));
    let Err(Error::Invalid(error)) = memory.capture(CaptureInput { author: Some("two words".into()), ..note("x", "blockers") }, None) else {
        panic!("an author with a space was accepted");
    };
    assert_eq!(error.field, "author");
}

/// Regression: recall time grew faster than linearly with the number of distinct query words
/// and a query had no size limit (a 5 MB query did not answer within a minute).
#[test]
fn recall_refuses_an_oversized_query_and_answers_a_long_one() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    memory.capture(note("The connection pool ran dry under load", "learnings"), None).unwrap();

    let huge = "word ".repeat(1 << 18);
    let error = match memory.recall(recall(&huge)) {
        Err(kenning_engine::Error::Invalid(error)) => error,
        other => panic!("expected a field error, got {other:?}"),
    };
    assert_eq!(error.field, "query");
    assert!(error.problem.contains("1310720 bytes"), "{}", error.problem);

    // Just under the cap, with thousands of distinct words and the relevant ones first.
    let mut long = String::from("connection pool ");
    let mut n = 0;
    while long.len() < kenning_core::search::MAX_QUERY_BYTES - 16 {
        long.push_str(&format!("w{n} "));
        n += 1;
    }
    let page = memory.recall(recall(&long)).unwrap();
    assert_eq!(page.results.len(), 1, "the first distinct words find the memory");
}

/// Regression: a crafted cursor (`offffffffffffffff`) overflowed the page arithmetic of recall
/// (a panic in debug builds, an empty page in release).
#[test]
fn recall_refuses_a_crafted_cursor_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    memory.capture(note("Pool size is 20 per service", "config"), None).unwrap();
    for cursor in ["offffffffffffffff", "o3e8", "o+1", "o01", "oA", "o", "page-2"] {
        let request = RecallRequest { cursor: Some(cursor.into()), ..recall("pool") };
        match memory.recall(request) {
            Err(kenning_engine::Error::Invalid(error)) => assert_eq!(error.field, "cursor", "{cursor}"),
            other => panic!("{cursor}: expected a field error, got {other:?}"),
        }
    }
    let page = memory.recall(RecallRequest { cursor: Some("o0".into()), ..recall("pool") }).unwrap();
    assert_eq!(page.results.len(), 1);
}

/// Regression: a cancelled request kept a core busy until it ended. A recall whose interrupt
/// has fired stops and says so.
#[test]
fn an_interrupted_recall_stops_with_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, None);
    memory.capture(note("Pool size is 20 per service", "config"), None).unwrap();
    let interrupt = kenning_core::interrupt::Interrupt::new();
    assert!(interrupt.run(|| memory.recall(recall("pool"))).is_ok());
    interrupt.trigger();
    assert!(matches!(interrupt.run(|| memory.recall(recall("pool"))), Err(kenning_engine::Error::Interrupted)));
    assert!(memory.recall(recall("pool")).is_ok(), "the interrupt belongs to its own work only");
}

/// A real store that notes, for each search leg it runs, the thread it ran on and whether the
/// request's interrupt reached that thread.
struct NotingLegs {
    store: SqliteStore,
    legs: std::sync::Mutex<Vec<(&'static str, std::thread::ThreadId, bool)>>,
}

impl NotingLegs {
    fn note(&self, leg: &'static str) {
        let under_interrupt = kenning_core::interrupt::current().is_some();
        self.legs.lock().unwrap().push((leg, std::thread::current().id(), under_interrupt));
    }
}

impl MemoryStore for NotingLegs {
    fn insert(&self, batch: &[(kenning_core::Memory, Option<kenning_core::Embedding>)]) -> kenning_core::Result<Vec<kenning_core::Inserted>> {
        self.store.insert(batch)
    }
    fn active_holders(&self, memories: &[&kenning_core::Memory]) -> kenning_core::Result<Vec<Option<kenning_core::MemoryId>>> {
        self.store.active_holders(memories)
    }
    fn get(&self, id: &kenning_core::MemoryId) -> kenning_core::Result<Option<kenning_core::Memory>> {
        self.store.get(id)
    }
    fn get_many(&self, ids: &[kenning_core::MemoryId]) -> kenning_core::Result<Vec<kenning_core::Memory>> {
        self.store.get_many(ids)
    }
    fn replace(&self, next: &kenning_core::Memory, previous: &kenning_core::MemoryVersion, embedding: Option<&kenning_core::Embedding>) -> kenning_core::Result<()> {
        self.store.replace(next, previous, embedding)
    }
    fn replace_many(&self, changes: &[kenning_core::Replacement<'_>]) -> kenning_core::Result<()> {
        self.store.replace_many(changes)
    }
    fn history(&self, id: &kenning_core::MemoryId) -> kenning_core::Result<Vec<kenning_core::MemoryVersion>> {
        self.store.history(id)
    }
    fn record_access(&self, ids: &[kenning_core::MemoryId], at: chrono::DateTime<chrono::Utc>) -> kenning_core::Result<()> {
        self.store.record_access(ids, at)
    }
    fn list(&self, filter: &kenning_core::SearchFilter, offset: usize, limit: usize) -> kenning_core::Result<Vec<kenning_core::Memory>> {
        self.store.list(filter, offset, limit)
    }
    fn count(&self, filter: &kenning_core::SearchFilter) -> kenning_core::Result<u64> {
        self.store.count(filter)
    }
    fn search_text(&self, query: &str, filter: &kenning_core::SearchFilter, limit: usize) -> kenning_core::Result<Vec<kenning_core::ScoredId>> {
        self.note("text");
        self.store.search_text(query, filter, limit)
    }
    fn search_vector(&self, vector: &[f32], model: &str, filter: &kenning_core::SearchFilter, limit: usize) -> kenning_core::Result<Vec<kenning_core::ScoredId>> {
        self.note("vector");
        self.store.search_vector(vector, model, filter, limit)
    }
    fn neighbours(&self, ids: &[kenning_core::MemoryId], filter: &kenning_core::SearchFilter, window: chrono::TimeDelta) -> kenning_core::Result<Vec<Vec<kenning_core::MemoryId>>> {
        self.store.neighbours(ids, filter, window)
    }
    fn missing_embeddings(&self, model: &str, limit: usize) -> kenning_core::Result<Vec<kenning_core::Memory>> {
        self.store.missing_embeddings(model, limit)
    }
    fn set_embeddings(&self, items: &[(kenning_core::MemoryId, kenning_core::Embedding)]) -> kenning_core::Result<()> {
        self.store.set_embeddings(items)
    }
    fn export(&self, offset: usize, limit: usize) -> kenning_core::Result<Vec<kenning_core::MemoryRecord>> {
        self.store.export(offset, limit)
    }
    fn import(&self, records: &[kenning_core::MemoryRecord]) -> kenning_core::Result<usize> {
        self.store.import(records)
    }
    fn stats(&self) -> kenning_core::Result<kenning_core::StoreStats> {
        self.store.stats()
    }
    fn purge_author(&self, author: &str, mode: kenning_core::PurgeMode) -> kenning_core::Result<kenning_core::PurgeCounts> {
        self.store.purge_author(author, mode)
    }
    fn authored_by(&self, author: &str) -> kenning_core::Result<Vec<kenning_core::MemoryId>> {
        self.store.authored_by(author)
    }
    fn rebuild_index(&self) -> kenning_core::Result<u64> {
        self.store.rebuild_index()
    }
}

/// A lone recall runs its vector legs on a second thread while its own runs the full-text
/// legs, and that thread works under the request's interrupt, so that a cancelled request stops
/// both. The page is the one the legs give run one after the other.
#[test]
fn a_lone_recall_searches_vectors_beside_text_under_the_same_interrupt() {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let noting = |name: &str| Arc::new(NotingLegs { store: SqliteStore::open(&dir.path().join(name)).unwrap(), legs: Default::default() });
    let (project, user) = (noting("project.db"), noting("user.db"));
    let embedder: Arc<dyn Embedder> = Arc::new(kenning_embed::StaticEmbedder::builtin().unwrap());
    let memory = MemoryService::new(
        vec![
            DomainStore { domain: Domain::Project("my-app".into()), store: project.clone() },
            DomainStore { domain: Domain::User, store: user.clone() },
        ],
        Some(embedder),
    );
    let login = memory.capture(note("The login page times out after thirty seconds", "blockers"), None).unwrap().urn;
    memory.capture(note("Invoices are rendered as PDF by a nightly job", "context"), Some("user")).unwrap();
    project.legs.lock().unwrap().clear();
    user.legs.lock().unwrap().clear();

    let interrupt = kenning_core::interrupt::Interrupt::new();
    let page = interrupt.run(|| memory.recall(recall("login timeout"))).unwrap();
    assert_eq!(page.mode, "hybrid");
    assert_eq!(urns(&page)[0], login);
    let legs: Vec<_> = project.legs.lock().unwrap().iter().chain(user.legs.lock().unwrap().iter()).copied().collect();
    let threads = |kind: &str| legs.iter().filter(|(leg, _, _)| *leg == kind).map(|(_, thread, _)| *thread).collect::<Vec<_>>();
    let (text, vector) = (threads("text"), threads("vector"));
    assert_eq!((text.len(), vector.len()), (2, 2), "{legs:?}");
    assert!(text.iter().all(|thread| *thread == std::thread::current().id()), "{legs:?}");
    assert!(vector.iter().all(|thread| *thread != std::thread::current().id()), "{legs:?}");
    assert!(legs.iter().all(|(_, _, under_interrupt)| *under_interrupt), "every leg runs under the request's interrupt: {legs:?}");
}

/// Regression: "no" and "not" were dropped from queries as stop words, so a question about what
/// is not done ranked the opposite claim as high as the one it asked for.
#[test]
fn a_negation_in_the_query_prefers_the_memory_that_says_it() {
    let dir = tempfile::tempdir().unwrap();
    let memory = two_domains(&dir, builtin_embedder());
    let captured = capture_in_sessions(
        &memory,
        &[
            ("The build cache is shared between release branches", "config", "2026-03-02T10:00:00Z", None),
            ("The build cache is not shared between feature branches", "config", "2026-03-02T11:00:00Z", None),
            ("Forks get no access to the deploy keys", "config", "2026-03-02T12:00:00Z", None),
            ("Forks get read access to the deploy keys", "config", "2026-03-02T13:00:00Z", None),
        ],
    );
    let first = |query: &str| memory.recall(recall(query)).unwrap().results[0].urn.clone();
    assert_eq!(first("which branches do not share the build cache"), captured[1]);
    assert_eq!(first("do forks have no access to deploy keys"), captured[2]);
}
