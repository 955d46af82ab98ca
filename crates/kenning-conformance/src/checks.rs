//! The checks. Each opens its own stores from the factory and panics on the first violation.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use kenning_core::store::NEIGHBOUR_REACH;
use kenning_core::{
    Domain, Embedding, Error, Inserted, Link, Memory, MemoryId, MemoryKind, MemoryRecord, MemoryStore, MemoryUrn,
    Namespace, PurgeMode, Replacement, SearchFilter, Source, Status,
};

use crate::MakeStore;
use crate::fixtures::{
    at, base_time, embedding, hit_ids, id, insert_all, memory, memory_ids, sorted, supersede, unit, update,
};

const MODEL: &str = "conformance-model";
const OTHER_MODEL: &str = "conformance-other-model";
const EVERYTHING: usize = 1000;

fn all_statuses() -> SearchFilter {
    SearchFilter::default()
}

pub fn insert_get_round_trip(make: MakeStore) {
    let store = make();
    let mut full = memory("round-trip.1", "decisions", "We chose SQLite for the local store.\n\n- WAL mode\n- FTS5");
    full.domain = Domain::Org("acme".to_owned());
    full.kind = MemoryKind::Episodic;
    full.title = "Use SQLite — “quoted” & ünïcödé".to_owned();
    full.tags = vec!["storage".to_owned(), "sqlite".to_owned()];
    full.category = Some("architecture".to_owned());
    full.source = Source::ToldByUser;
    full.confidence = 0.875;
    full.salience = 0.1 + 0.2;
    full.updated_at = at(5);
    full.event_time = Some(at(-60 * 24 * 400));
    full.last_accessed_at = Some(at(7));
    full.access_count = 3;
    full.links = vec![Link {
        target: MemoryUrn::parse("links.target", "kenning://user/learnings/other-1").unwrap(),
        relation: "relates-to".to_owned(),
    }];
    full.metadata =
        BTreeMap::from([("turn_id".to_owned(), "42".to_owned()), ("note".to_owned(), "✓ \"x\"".to_owned())]);
    full.version = 3;
    full.author = Some("ada@acme.example".to_owned());
    let mut forgotten = memory("round-trip:2", "learnings", "A forgotten memory keeps every field too.");
    forgotten.status = Status::Forgotten;
    forgotten.category = Some(String::new());

    insert_all(&*store, &[full.clone(), forgotten.clone()]);

    assert_eq!(store.get(&full.id).unwrap().as_ref(), Some(&full));
    assert_eq!(store.get(&forgotten.id).unwrap().as_ref(), Some(&forgotten));
    assert_eq!(store.get(&id("absent")).unwrap(), None);
    let mut many = store.get_many(&[id("absent"), forgotten.id.clone(), full.id.clone()]).unwrap();
    many.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(many, vec![full.clone(), forgotten]);
    assert!(store.history(&full.id).unwrap().is_empty());
}

pub fn duplicates_across_calls_are_not_written(make: MakeStore) {
    let store = make();
    let original = memory("dup-a", "learnings", "Run migrations before deploying.");
    assert_eq!(store.insert(&[(original.clone(), None)]).unwrap(), [Inserted::Created]);

    // Surrounding whitespace does not make content different.
    let copy = memory("dup-b", "learnings", "  Run migrations before deploying.\n");
    assert_eq!(store.insert(&[(copy.clone(), None)]).unwrap(), [Inserted::Duplicate(original.id.clone())]);
    assert_eq!(store.get(&copy.id).unwrap(), None);

    // Retrying a capture whose acknowledgement was lost finds the first write.
    assert_eq!(store.insert(&[(original.clone(), None)]).unwrap(), [Inserted::Duplicate(original.id.clone())]);

    // Duplicates are detected per namespace.
    let elsewhere = memory("dup-c", "decisions", "Run migrations before deploying.");
    assert_eq!(store.insert(&[(elsewhere, None)]).unwrap(), [Inserted::Created]);
    assert_eq!(store.count(&all_statuses()).unwrap(), 2);
    assert_eq!(store.get(&original.id).unwrap(), Some(original));
}

pub fn duplicates_within_a_batch_are_not_written(make: MakeStore) {
    let store = make();
    let first = memory("batch-1", "learnings", "Pin the toolchain in rust-toolchain.toml.");
    let copy = memory("batch-2", "learnings", "Pin the toolchain in rust-toolchain.toml.");
    let other = memory("batch-3", "learnings", "Cache the cargo registry in CI.");
    let vector = Some(embedding(MODEL, &[1.0, 0.0]));
    let outcomes = store.insert(&[(first.clone(), None), (copy.clone(), vector), (other.clone(), None)]).unwrap();
    assert_eq!(outcomes, [Inserted::Created, Inserted::Duplicate(first.id.clone()), Inserted::Created]);
    assert_eq!(store.get(&copy.id).unwrap(), None);
    assert_eq!(store.count(&all_statuses()).unwrap(), 2);
    // The duplicate's vector was not written either.
    assert_eq!(store.stats().unwrap().vectors_by_model.get(MODEL).copied().unwrap_or(0), 0);
}

/// What `active_holders` reports is what `insert` would skip: an active memory of the same
/// namespace with the same content, surrounding whitespace aside; never one of another
/// namespace, a forgotten one, or anything for a capture that is not active itself.
pub fn active_holders_are_the_duplicates_insert_would_skip(make: MakeStore) {
    let store = make();
    let original = memory("holder-a", "learnings", "Run migrations before deploying.");
    let mut forgotten = memory("holder-b", "learnings", "Deploy on Fridays.");
    forgotten.status = Status::Forgotten;
    store.insert(&[(original.clone(), None), (forgotten, None)]).unwrap();

    let copy = memory("holder-c", "learnings", "  Run migrations before deploying.\n");
    let elsewhere = memory("holder-d", "decisions", "Run migrations before deploying.");
    let new = memory("holder-e", "learnings", "Run the linter before deploying.");
    let like_forgotten = memory("holder-f", "learnings", "Deploy on Fridays.");
    let mut inactive_copy = memory("holder-g", "learnings", "Run migrations before deploying.");
    inactive_copy.status = Status::Forgotten;
    let asked = [&copy, &elsewhere, &new, &like_forgotten, &inactive_copy];
    assert_eq!(store.active_holders(&asked).unwrap(), [Some(original.id.clone()), None, None, None, None]);
    assert_eq!(store.active_holders(&[]).unwrap(), []);
    let inserted: Vec<Inserted> = asked.iter().map(|memory| store.insert(&[((*memory).clone(), None)]).unwrap().remove(0)).collect();
    assert_eq!(inserted[0], Inserted::Duplicate(original.id.clone()));
    assert!(inserted[1..].iter().all(|outcome| *outcome == Inserted::Created), "{inserted:?}");
}

/// Eight pseudo-random components (splitmix64) for memory `n`: far apart, as real vectors are.
fn scattered(n: u64) -> Vec<f32> {
    let mut state = n;
    (0..8)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// A batch as large as a bulk load (a backend may write one another way, e.g. PostgreSQL's
/// `COPY`) keeps every promise a small one does: outcomes in order, the first of a content
/// stored and the rest reported as its duplicates, an active memory's content refused again,
/// vectors searchable, and a retry of the batch reporting duplicates rather than failing.
pub fn a_large_batch_is_stored_as_a_small_one_is(make: MakeStore) {
    let store = make();
    let existing = memory("large-existing", "learnings", "Every service logs in JSON lines.");
    insert_all(&*store, std::slice::from_ref(&existing));
    let mut batch: Vec<(Memory, Option<Embedding>)> = (0..150u64)
        .map(|n| {
            let content = format!("Service number {n} keeps its own error budget of {n} minutes.");
            (memory(&format!("large-{n:03}"), "learnings", &content), Some(embedding(MODEL, &scattered(n))))
        })
        .collect();
    batch[10].0.content = batch[3].0.content.clone();
    batch[20].0.content = existing.content.clone();
    batch[30].0.status = Status::Forgotten;
    batch[30].0.content = batch[4].0.content.clone();
    let outcomes = store.insert(&batch).unwrap();
    for (index, outcome) in outcomes.iter().enumerate() {
        let expected = match index {
            10 => Inserted::Duplicate(batch[3].0.id.clone()),
            20 => Inserted::Duplicate(existing.id.clone()),
            _ => Inserted::Created,
        };
        assert_eq!(outcome, &expected, "memory {index}");
    }
    assert_eq!(store.count(&all_statuses()).unwrap(), 1 + 150 - 2);
    assert_eq!(store.get(&batch[7].0.id).unwrap(), Some(batch[7].0.clone()));
    let hits = store.search_vector(&embedding(MODEL, &scattered(42)).vector, MODEL, &SearchFilter::active(), 3).unwrap();
    assert_eq!(hits.first().map(|hit| hit.id.to_string()), Some("large-042".to_owned()));
    let hits = store.search_text("error budget", &SearchFilter::active(), 200).unwrap();
    assert_eq!(hits.len(), 150 - 3);

    // A retry, as after an acknowledgement that was lost: every active memory is a duplicate.
    let active: Vec<(Memory, Option<Embedding>)> = batch.iter().filter(|(memory, _)| memory.status == Status::Active).cloned().collect();
    let retried = store.insert(&active).unwrap();
    assert!(retried.iter().all(|outcome| matches!(outcome, Inserted::Duplicate(_))), "{retried:?}");
    assert_eq!(store.count(&all_statuses()).unwrap(), 1 + 150 - 2);
}

pub fn forgotten_memories_do_not_block_a_new_capture(make: MakeStore) {
    let store = make();
    let old = memory("forget-1", "context", "The staging database is on port 5433.");
    insert_all(&*store, std::slice::from_ref(&old));
    update(&*store, &old, |m| m.status = Status::Forgotten);

    let again = memory("forget-2", "context", "The staging database is on port 5433.");
    assert_eq!(store.insert(&[(again.clone(), None)]).unwrap(), [Inserted::Created]);
    assert_eq!(store.count(&SearchFilter::active()).unwrap(), 1);
    assert_eq!(store.count(&all_statuses()).unwrap(), 2);
}

pub fn replace_is_compare_and_swap_with_history(make: MakeStore) {
    let store = make();
    let v1 = memory("cas", "decisions", "Use PostgreSQL for the main database.");
    insert_all(&*store, std::slice::from_ref(&v1));

    let (v2, superseded_v1) =
        supersede(&v1, "moved to SQLite", |m| m.content = "Use SQLite for the main database.".into());
    store.replace(&v2, &superseded_v1, None).unwrap();
    let (v3, superseded_v2) = supersede(&v2, "tagged", |m| m.tags = vec!["database".to_owned()]);
    store.replace(&v3, &superseded_v2, None).unwrap();

    assert_eq!(store.get(&v1.id).unwrap(), Some(v3.clone()));
    assert_eq!(store.history(&v1.id).unwrap(), vec![superseded_v1.clone(), superseded_v2.clone()]);

    // A writer still holding version 1 loses the race and changes nothing.
    let (stale, stale_previous) = supersede(&v1, "late", |m| m.content = "Use MySQL.".into());
    match store.replace(&stale, &stale_previous, None) {
        Err(Error::Conflict { id: conflicted, expected }) => {
            assert_eq!(conflicted, "cas");
            assert_eq!(expected, 1);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(store.get(&v1.id).unwrap(), Some(v3));
    assert_eq!(store.history(&v1.id).unwrap().len(), 2);

    let ghost = memory("ghost", "decisions", "Never stored.");
    let (next, previous) = supersede(&ghost, "nothing to replace", |m| m.content = "Still not stored.".into());
    assert!(matches!(store.replace(&next, &previous, None), Err(Error::NotFound(_))), "replacing a missing memory");
    assert_eq!(store.get(&ghost.id).unwrap(), None);
}

pub fn replace_many_is_all_or_none(make: MakeStore) {
    let store = make();
    let port = memory("port", "context", "The billing service listens on port 8080.");
    let lang = memory("lang", "context", "The billing service is written in Go.");
    insert_all(&*store, &[port.clone(), lang.clone()]);

    let (port_2, port_1) = supersede(&port, "superseded", |m| m.tags = vec!["superseded".to_owned()]);
    let (lang_2, lang_1) = supersede(&lang, "superseded", |m| m.tags = vec!["superseded".to_owned()]);
    store
        .replace_many(&[
            Replacement { next: &port_2, previous: &port_1, embedding: None },
            Replacement { next: &lang_2, previous: &lang_1, embedding: None },
        ])
        .unwrap();
    assert_eq!(store.get(&port.id).unwrap(), Some(port_2.clone()));
    assert_eq!(store.get(&lang.id).unwrap(), Some(lang_2.clone()));
    assert_eq!(store.history(&port.id).unwrap(), vec![port_1]);
    assert_eq!(store.history(&lang.id).unwrap(), vec![lang_1.clone()]);

    // One change starting from a version that moved on refuses them all.
    let (port_3, port_2_previous) = supersede(&port_2, "retagged", |m| m.tags = vec!["billing".to_owned()]);
    let (stale, stale_previous) = supersede(&lang, "late", |m| m.content = "The billing service is written in Rust.".into());
    match store.replace_many(&[
        Replacement { next: &port_3, previous: &port_2_previous, embedding: None },
        Replacement { next: &stale, previous: &stale_previous, embedding: None },
    ]) {
        Err(Error::Conflict { id, expected }) => assert_eq!((id.as_str(), expected), ("lang", 1)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    // So does one whose memory does not exist.
    let ghost = memory("ghost", "context", "Never stored.");
    let (ghost_2, ghost_1) = supersede(&ghost, "nothing to replace", |m| m.content = "Still not stored.".into());
    assert!(matches!(
        store.replace_many(&[
            Replacement { next: &port_3, previous: &port_2_previous, embedding: None },
            Replacement { next: &ghost_2, previous: &ghost_1, embedding: None },
        ]),
        Err(Error::NotFound(_))
    ));
    assert_eq!(store.get(&port.id).unwrap(), Some(port_2));
    assert_eq!(store.get(&lang.id).unwrap(), Some(lang_2));
    assert_eq!(store.history(&lang.id).unwrap(), vec![lang_1]);
    assert_eq!(store.get(&ghost.id).unwrap(), None);
}

pub fn replace_many_applies_changes_in_order(make: MakeStore) {
    let store = make();
    let port = memory("port", "context", "The billing service listens on port 8080.");
    insert_all(&*store, std::slice::from_ref(&port));
    // Two captures of one batch marking the same older memory: the second change starts from
    // the version the first one writes.
    let (port_2, port_1) = supersede(&port, "superseded once", |m| m.tags = vec!["superseded".to_owned()]);
    let (port_3, port_2_previous) = supersede(&port_2, "superseded again", |m| m.tags.push("twice".to_owned()));
    store
        .replace_many(&[
            Replacement { next: &port_2, previous: &port_1, embedding: None },
            Replacement { next: &port_3, previous: &port_2_previous, embedding: None },
        ])
        .unwrap();
    assert_eq!(store.get(&port.id).unwrap(), Some(port_3));
    assert_eq!(store.history(&port.id).unwrap(), vec![port_1, port_2_previous], "each change keeps the version it replaced");
}

pub fn replace_keeps_text_search_in_step(make: MakeStore) {
    let store = make();
    let cache = memory("cache", "apis", "The session cache runs on Redis.");
    insert_all(&*store, std::slice::from_ref(&cache));
    assert_eq!(hit_ids(&store.search_text("redis", &SearchFilter::active(), 10).unwrap()), ["cache"]);

    update(&*store, &cache, |m| {
        m.content = "The session cache runs on Memcached.".into();
        m.title = "Session cache".into();
    });
    assert!(store.search_text("redis", &SearchFilter::active(), 10).unwrap().is_empty());
    assert_eq!(hit_ids(&store.search_text("memcached", &SearchFilter::active(), 10).unwrap()), ["cache"]);
    assert_eq!(store.stats().unwrap().text_index_entries, 1);
}

pub fn replace_keeps_or_drops_vectors(make: MakeStore) {
    let store = make();
    let query = unit(&[1.0, 0.0, 0.0]);
    let v1 = memory("vectors", "learnings", "Embeddings follow the content.");
    store.insert(&[(v1.clone(), Some(embedding(MODEL, &[1.0, 0.0, 0.0])))]).unwrap();

    // A change that leaves title, tags and content alone keeps the vector.
    let v2 = update(&*store, &v1, |m| {
        m.metadata.insert("reviewed".into(), "yes".into());
    });
    assert_eq!(hit_ids(&store.search_vector(&query, MODEL, &SearchFilter::active(), 10).unwrap()), ["vectors"]);

    // Changing the content without a new vector drops the stale one.
    let v3 = update(&*store, &v2, |m| m.content = "Embeddings are dropped when the content changes.".into());
    assert!(store.search_vector(&query, MODEL, &SearchFilter::active(), 10).unwrap().is_empty());
    assert_eq!(memory_ids(&store.missing_embeddings(MODEL, 10).unwrap()), ["vectors"]);

    // A vector given with the change is stored.
    let (v4, previous) = supersede(&v3, "re-embedded", |m| m.content = "New content with a new vector.".into());
    store.replace(&v4, &previous, Some(&embedding(MODEL, &[0.0, 1.0, 0.0]))).unwrap();
    let hits = store.search_vector(&unit(&[0.0, 1.0, 0.0]), MODEL, &SearchFilter::active(), 10).unwrap();
    assert_eq!(hit_ids(&hits), ["vectors"]);
    assert!((hits[0].score - 1.0).abs() < 1e-4, "score {}", hits[0].score);
    assert!(store.missing_embeddings(MODEL, 10).unwrap().is_empty());
}

pub fn status_filter(make: MakeStore) {
    let store = make();
    let kept = memory("kept", "learnings", "Kept: the lint runs in CI.");
    let dropped = memory("dropped", "learnings", "Dropped: the lint runs locally.");
    insert_all(&*store, &[kept.clone(), dropped.clone()]);
    update(&*store, &dropped, |m| m.status = Status::Forgotten);

    let forgotten = SearchFilter { status: Some(Status::Forgotten), ..SearchFilter::default() };
    assert_eq!(memory_ids(&store.list(&SearchFilter::active(), 0, 10).unwrap()), ["kept"]);
    assert_eq!(memory_ids(&store.list(&forgotten, 0, 10).unwrap()), ["dropped"]);
    assert_eq!(sorted(memory_ids(&store.list(&all_statuses(), 0, 10).unwrap())), ["dropped", "kept"]);
    assert_eq!(store.count(&SearchFilter::active()).unwrap(), 1);
    assert_eq!(store.count(&forgotten).unwrap(), 1);
    assert_eq!(store.count(&all_statuses()).unwrap(), 2);
    assert_eq!(hit_ids(&store.search_text("lint", &SearchFilter::active(), 10).unwrap()), ["kept"]);
    assert_eq!(hit_ids(&store.search_text("lint", &forgotten, 10).unwrap()), ["dropped"]);
    assert_eq!(sorted(hit_ids(&store.search_text("lint", &all_statuses(), 10).unwrap())), ["dropped", "kept"]);
}

/// Id, namespace, kind, tags, confidence, capture minute, event minute and vector of one memory.
type Spec = (&'static str, &'static str, MemoryKind, &'static [&'static str], f64, i64, Option<i64>, [f32; 3]);

/// Five memories that differ in every filterable field, all containing the word "zephyr" and
/// all with a vector, and each filter with the ids it must select. Their provenance: f1, f3
/// and f5 were captured on branch `main`, f2 on `feature`; f1 and f5 mention
/// `src/db/pool.rs` in their content, f2 lists `src/db/schema.sql` and `Makefile` in its
/// metadata `files`, f4 names `docs/guide.md` in its metadata `file`.
struct FilterCorpus {
    cases: Vec<(&'static str, SearchFilter, Vec<&'static str>)>,
}

impl FilterCorpus {
    fn load(store: &dyn MemoryStore) -> FilterCorpus {
        let spec: [Spec; 5] = [
            ("f1", "decisions", MemoryKind::Episodic, &["db", "perf"], 0.9, 0, None, [1.0, 0.1, 0.0]),
            ("f2", "decisions", MemoryKind::Semantic, &["db"], 0.5, 10, Some(-1000), [1.0, 0.2, 0.1]),
            ("f3", "learnings", MemoryKind::Procedural, &["perf", "db", "extra"], 0.7, 20, None, [0.9, 0.0, 0.3]),
            ("f4", "learnings", MemoryKind::Semantic, &[], 0.95, 30, Some(25), [0.5, 0.5, 0.5]),
            ("f5", "patterns", MemoryKind::Episodic, &["perf"], 0.6, 40, None, [0.0, 1.0, 0.0]),
        ];
        let provenance: [(&str, Option<&str>, &str, Option<(&str, &str)>); 5] = [
            ("f1", Some("main"), "The fix is in `src/db/pool.rs:42`.", None),
            ("f2", Some("feature"), "", Some(("files", "src/db/schema.sql, Makefile"))),
            ("f3", Some("main"), "No file here, only src-less prose.", None),
            ("f4", None, "", Some(("file", "./docs/guide.md"))),
            ("f5", Some("main"), "Also about src/db/pool.rs.", None),
        ];
        for ((name, namespace, kind, tags, confidence, created, event, vector), (_, branch, mention, file)) in spec.into_iter().zip(provenance) {
            let mut m = memory(name, namespace, &format!("Memory {name} mentions zephyr in its content. {mention}"));
            if let Some(branch) = branch {
                m.metadata.insert(kenning_core::provenance::BRANCH_KEY.to_owned(), branch.to_owned());
            }
            if let Some((key, value)) = file {
                m.metadata.insert(key.to_owned(), value.to_owned());
            }
            // Sessions: f1 and f3 share one (f3 names it as its conversation), f4 has another.
            match name {
                "f1" => m.metadata.insert(kenning_core::provenance::SESSION_KEY.to_owned(), "s-1".to_owned()),
                "f3" => m.metadata.insert(kenning_core::provenance::CONVERSATION_KEY.to_owned(), "s-1".to_owned()),
                "f4" => m.metadata.insert(kenning_core::provenance::SESSION_KEY.to_owned(), "s-2".to_owned()),
                _ => None,
            };
            m.kind = kind;
            m.tags = tags.iter().map(|tag| tag.to_string()).collect();
            m.confidence = confidence;
            m.created_at = at(created);
            m.updated_at = at(created);
            m.event_time = event.map(at);
            assert_eq!(store.insert(&[(m.clone(), Some(embedding(MODEL, &vector)))]).unwrap(), [Inserted::Created]);
            if name == "f5" {
                update(store, &m, |m| m.status = Status::Forgotten);
            }
        }
        let decisions = Namespace::parse("decisions").unwrap();
        let learnings = Namespace::parse("learnings").unwrap();
        let patterns = Namespace::parse("patterns").unwrap();
        let tags = |tags: &[&str]| tags.iter().map(|tag| tag.to_string()).collect::<Vec<_>>();
        let base = SearchFilter::default();
        let cases = vec![
            ("no filter", base.clone(), vec!["f1", "f2", "f3", "f4", "f5"]),
            ("active", SearchFilter::active(), vec!["f1", "f2", "f3", "f4"]),
            ("one kind", SearchFilter { kinds: vec![MemoryKind::Semantic], ..base.clone() }, vec!["f2", "f4"]),
            (
                "two kinds",
                SearchFilter { kinds: vec![MemoryKind::Episodic, MemoryKind::Procedural], ..base.clone() },
                vec!["f1", "f3", "f5"],
            ),
            ("one namespace", SearchFilter { namespaces: vec![decisions.clone()], ..base.clone() }, vec!["f1", "f2"]),
            (
                "two namespaces",
                SearchFilter { namespaces: vec![learnings.clone(), patterns], ..base.clone() },
                vec!["f3", "f4", "f5"],
            ),
            ("one tag", SearchFilter { tags: tags(&["db"]), ..base.clone() }, vec!["f1", "f2", "f3"]),
            ("every tag must match", SearchFilter { tags: tags(&["db", "perf"]), ..base.clone() }, vec!["f1", "f3"]),
            ("an unknown tag matches nothing", SearchFilter { tags: tags(&["perf", "nope"]), ..base.clone() }, vec![]),
            // f2 was captured at minute 10 but happened long before; f4 happened at minute 25.
            ("since is inclusive", SearchFilter { since: Some(at(20)), ..base.clone() }, vec!["f3", "f4", "f5"]),
            ("until is inclusive", SearchFilter { until: Some(at(20)), ..base.clone() }, vec!["f1", "f2", "f3"]),
            (
                "time range uses event time",
                SearchFilter { since: Some(at(0)), until: Some(at(25)), ..base.clone() },
                vec!["f1", "f3", "f4"],
            ),
            (
                "min confidence is inclusive",
                SearchFilter { min_confidence: Some(0.7), ..base.clone() },
                vec!["f1", "f3", "f4"],
            ),
            (
                "all fields together",
                SearchFilter {
                    kinds: vec![MemoryKind::Episodic, MemoryKind::Procedural, MemoryKind::Semantic],
                    namespaces: vec![decisions, learnings],
                    tags: tags(&["db"]),
                    since: Some(at(-2000)),
                    until: Some(at(100)),
                    min_confidence: Some(0.6),
                    status: Some(Status::Active),
                    branch: Some("main".to_owned()),
                    file: Some("src".to_owned()),
                    session: Some("s-1".to_owned()),
                },
                vec!["f1"],
            ),
            ("one branch", SearchFilter { branch: Some("main".to_owned()), ..base.clone() }, vec!["f1", "f3", "f5"]),
            ("a branch no memory was captured on", SearchFilter { branch: Some("nope".to_owned()), ..base.clone() }, vec![]),
            ("a file the content mentions", SearchFilter { file: Some("src/db/pool.rs".to_owned()), ..base.clone() }, vec!["f1", "f5"]),
            ("a file in metadata `files`", SearchFilter { file: Some("Makefile".to_owned()), ..base.clone() }, vec!["f2"]),
            ("a file in metadata `file`", SearchFilter { file: Some("docs/guide.md".to_owned()), ..base.clone() }, vec!["f4"]),
            ("a directory finds the files in it", SearchFilter { file: Some("src/db".to_owned()), ..base.clone() }, vec!["f1", "f2", "f5"]),
            ("part of a name is not a path", SearchFilter { file: Some("src/d".to_owned()), ..base.clone() }, vec![]),
            ("one session, named as session or conversation", SearchFilter { session: Some("s-1".to_owned()), ..base.clone() }, vec!["f1", "f3"]),
            ("a session no memory was captured in", SearchFilter { session: Some("s-9".to_owned()), ..base.clone() }, vec![]),
            (
                "branch and file together",
                SearchFilter { branch: Some("main".to_owned()), file: Some("src".to_owned()), ..SearchFilter::active() },
                vec!["f1"],
            ),
        ];
        FilterCorpus { cases }
    }
}

pub fn filters_in_list_and_count(make: MakeStore) {
    let store = make();
    let corpus = FilterCorpus::load(&*store);
    for (name, filter, expected) in &corpus.cases {
        let listed = store.list(filter, 0, EVERYTHING).unwrap();
        // Newest capture first: the fixture's ids are in capture order.
        let mut newest_first = expected.clone();
        newest_first.reverse();
        assert_eq!(memory_ids(&listed), newest_first, "list with filter `{name}`");
        assert_eq!(store.count(filter).unwrap(), expected.len() as u64, "count with filter `{name}`");
    }
}

pub fn filters_in_search_text(make: MakeStore) {
    let store = make();
    let corpus = FilterCorpus::load(&*store);
    for (name, filter, expected) in &corpus.cases {
        let hits = store.search_text("zephyr", filter, EVERYTHING).unwrap();
        assert_eq!(sorted(hit_ids(&hits)), *expected, "search_text with filter `{name}`");
    }
}

pub fn filters_in_search_vector(make: MakeStore) {
    let store = make();
    let corpus = FilterCorpus::load(&*store);
    let query = unit(&[1.0, 0.0, 0.0]);
    for (name, filter, expected) in &corpus.cases {
        let hits = store.search_vector(&query, MODEL, filter, EVERYTHING).unwrap();
        assert_eq!(sorted(hit_ids(&hits)), *expected, "search_vector with filter `{name}`");
    }
}

/// The branch and file filters see a memory as it is now: after an update that moves it to
/// another branch and file, and after an import, in listing and in both searches.
pub fn provenance_filters_follow_updates_and_imports(make: MakeStore) {
    let store = make();
    let mut m = memory("moved", "context", "Zephyr settings live in one file.");
    m.metadata.insert(kenning_core::provenance::BRANCH_KEY.to_owned(), "main".to_owned());
    m.metadata.insert(kenning_core::provenance::FILE_KEY.to_owned(), "config/app.toml".to_owned());
    store.insert(&[(m.clone(), Some(embedding(MODEL, &[1.0, 0.0, 0.0])))]).unwrap();
    let by = |branch: &str, file: &str| SearchFilter { branch: Some(branch.to_owned()), file: Some(file.to_owned()), ..SearchFilter::active() };
    let found = |filter: &SearchFilter| {
        let listed = memory_ids(&store.list(filter, 0, EVERYTHING).unwrap());
        let text = hit_ids(&store.search_text("zephyr", filter, EVERYTHING).unwrap());
        let vector = hit_ids(&store.search_vector(&unit(&[1.0, 0.0, 0.0]), MODEL, filter, EVERYTHING).unwrap());
        assert_eq!(listed, text, "list and text search agree on {filter:?}");
        assert_eq!(listed, vector, "list and vector search agree on {filter:?}");
        assert_eq!(store.count(filter).unwrap(), listed.len() as u64);
        listed
    };
    assert_eq!(found(&by("main", "config/app.toml")), ["moved"]);
    assert_eq!(found(&by("main", "config")), ["moved"]);
    // The text stays, so the vector stays too and every search can be compared.
    let m = update(&*store, &m, |m| {
        m.metadata.insert(kenning_core::provenance::FILE_KEY.to_owned(), "settings/app.toml".to_owned());
        m.metadata.insert(kenning_core::provenance::BRANCH_KEY.to_owned(), "release".to_owned());
    });
    assert!(found(&by("main", "config/app.toml")).is_empty());
    assert!(found(&by("release", "config/app.toml")).is_empty());
    assert_eq!(found(&by("release", "settings/app.toml")), ["moved"]);

    let copy = make();
    let records = store.export(0, EVERYTHING).unwrap();
    copy.import(&records).unwrap();
    let filter = by("release", "settings");
    assert_eq!(memory_ids(&copy.list(&filter, 0, EVERYTHING).unwrap()), ["moved"]);
    assert_eq!(hit_ids(&copy.search_text("zephyr", &filter, EVERYTHING).unwrap()), ["moved"]);
    assert_eq!(m.version, 2);
}

pub fn search_text_survives_hostile_queries(make: MakeStore) {
    let store = make();
    insert_all(
        &*store,
        &[
            memory("caroline", "context", "Caroline went to the LGBTQ support group in May."),
            memory("melanie", "context", "Melanie painted a sunrise over the lake."),
        ],
    );
    let filter = SearchFilter::active();
    let hits = store.search_text(r#"What did "Caroline" do in May?"#, &filter, 10).unwrap();
    assert_eq!(hit_ids(&hits).first().map(String::as_str), Some("caroline"));

    let hostile = [
        "\"",
        "\"\"",
        "'",
        "(",
        ")",
        "()",
        "*",
        "caroline*",
        "^caroline",
        "-caroline",
        "+",
        "AND",
        "OR NOT",
        "caroline AND",
        "NEAR(caroline melanie",
        "NEAR/2",
        "text:caroline",
        "col:umn",
        "a\"b",
        "\\",
        "{}",
        "[x]",
        "💥 caroline 💥",
        "caroline\0melanie",
        "what's up?",
        "C++ / C# & F#",
        "%_%",
        ";DROP TABLE memories;--",
    ];
    for query in hostile {
        if let Err(error) = store.search_text(query, &filter, 10) {
            panic!("search_text({query:?}) failed: {error}");
        }
    }
    for query in ["", "   ", "\n\t", "?!.", "\"*()\"", "—"] {
        assert!(store.search_text(query, &filter, 10).unwrap().is_empty(), "search_text({query:?}) found something");
    }
}

pub fn search_text_ranks_best_first(make: MakeStore) {
    let store = make();
    insert_all(
        &*store,
        &[
            memory("both", "learnings", "Connection pool exhaustion: raise the pool size."),
            memory("one", "learnings", "The pool in the office is closed on Mondays."),
            memory("none", "learnings", "Unrelated notes about lunch."),
        ],
    );
    let hits = store.search_text("connection pool exhaustion", &SearchFilter::active(), 10).unwrap();
    assert_eq!(hit_ids(&hits), ["both", "one"]);
    assert!(hits.windows(2).all(|pair| pair[0].score >= pair[1].score), "scores must not increase: {hits:?}");
    assert!(hits[0].score > hits[1].score);
    assert_eq!(
        hit_ids(&store.search_text("connection pool exhaustion", &SearchFilter::active(), 1).unwrap()),
        ["both"]
    );
    assert!(store.search_text("pool", &SearchFilter::active(), 0).unwrap().is_empty());
}

pub fn neighbours_are_the_memories_captured_next_to_one(make: MakeStore) {
    let store = make();
    let at_minute = |id_text: &str, namespace: &str, minutes: i64| Memory {
        event_time: Some(at(minutes)),
        ..memory(id_text, namespace, &format!("{id_text} happened"))
    };
    let day = 60 * 24;
    let mut captured = vec![
        at_minute("start", "progress", 0),
        at_minute("middle", "progress", 10),
        at_minute("aside", "decisions", 12),
        Memory { status: Status::Forgotten, ..at_minute("dropped", "progress", 15) },
        at_minute("after", "progress", 20),
        at_minute("next-day", "progress", day),
    ];
    captured.extend((0..NEIGHBOUR_REACH as i64).map(|n| at_minute(&format!("filler-{n}"), "config", day + n)));
    captured.push(at_minute("out-of-reach", "progress", day + 30));
    insert_all(&*store, &captured);

    let hour = TimeDelta::hours(1);
    let active = SearchFilter::active();
    let neighbours = |ids: &[&str], filter: &SearchFilter, window: TimeDelta| -> Vec<Vec<String>> {
        let ids: Vec<_> = ids.iter().map(|text| id(text)).collect();
        store.neighbours(&ids, filter, window).unwrap().iter().map(|found| memory_ids_of(found)).collect()
    };
    assert_eq!(
        neighbours(&["middle", "start", "after", "absent"], &active, hour),
        [vec!["start", "after"], vec!["middle"], vec!["middle"], vec![]],
        "the nearest of the same namespace that passes the filter, before then after, within the window"
    );
    assert_eq!(neighbours(&["after"], &active, TimeDelta::days(2)), [["middle", "next-day"]], "a wider window reaches the next day");
    assert_eq!(
        neighbours(&["next-day"], &active, TimeDelta::days(2)),
        [["after"]],
        "a memory more than NEIGHBOUR_REACH captures away is not a neighbour"
    );
    assert_eq!(neighbours(&["dropped"], &active, hour), [Vec::<String>::new()], "a memory the filter leaves out has none");
    assert_eq!(neighbours(&["middle"], &all_statuses(), hour), [["start", "dropped"]]);
    let decisions = SearchFilter { namespaces: vec![Namespace::parse("decisions").unwrap()], ..SearchFilter::active() };
    assert_eq!(neighbours(&["aside"], &decisions, TimeDelta::days(2)), [Vec::<String>::new()]);
}

fn memory_ids_of(ids: &[MemoryId]) -> Vec<String> {
    ids.iter().map(MemoryId::to_string).collect()
}

pub fn search_vector_ranks_by_cosine(make: MakeStore) {
    let store = make();
    let vectors: [(&str, [f32; 4]); 4] = [
        ("east", [1.0, 0.0, 0.0, 0.0]),
        ("north-east", [1.0, 1.0, 0.0, 0.0]),
        ("north", [0.0, 1.0, 0.0, 0.0]),
        ("west-ish", [-1.0, 0.0, 0.0, 1.0]),
    ];
    let batch: Vec<_> = vectors
        .iter()
        .map(|(name, v)| (memory(name, "learnings", &format!("Direction {name}.")), Some(embedding(MODEL, v))))
        .collect();
    assert_eq!(store.insert(&batch).unwrap(), vec![Inserted::Created; 4]);

    let hits = store.search_vector(&unit(&[1.0, 0.0, 0.0, 0.0]), MODEL, &SearchFilter::active(), 10).unwrap();
    assert_eq!(hit_ids(&hits), ["east", "north-east", "north", "west-ish"]);
    let expected = [1.0, std::f64::consts::FRAC_1_SQRT_2, 0.0, -std::f64::consts::FRAC_1_SQRT_2];
    for (hit, want) in hits.iter().zip(expected) {
        assert!((hit.score - want).abs() < 1e-4, "{} scored {}, expected {want}", hit.id, hit.score);
    }
    let top = store.search_vector(&unit(&[0.0, 1.0, 0.0, 0.0]), MODEL, &SearchFilter::active(), 2).unwrap();
    assert_eq!(hit_ids(&top), ["north", "north-east"]);
    assert!(store.search_vector(&unit(&[1.0, 0.0, 0.0, 0.0]), MODEL, &SearchFilter::active(), 0).unwrap().is_empty());
}

/// Once the store has indexed what it holds, the batched search of a capture batch's checks
/// finds for each vector what a search for it alone finds: loaded in a large batch and one by
/// one, under a filter, for stored vectors and new ones, and for an empty batch or no hits wanted.
pub fn search_vector_many_finds_what_search_vector_finds(make: MakeStore) {
    let store = make();
    let batch: Vec<(Memory, Option<Embedding>)> = (0..150u64)
        .map(|n| {
            let mut stored = memory(&format!("many-{n:03}"), "learnings", &format!("Service {n} answers within {n} ms."));
            if n % 7 == 0 {
                stored.status = Status::Forgotten;
            }
            (stored, Some(embedding(MODEL, &scattered(n))))
        })
        .collect();
    store.insert(&batch).unwrap();
    for n in 150..160u64 {
        let one = memory(&format!("many-{n:03}"), "learnings", &format!("Service {n} answers within {n} ms."));
        store.insert(&[(one, Some(embedding(MODEL, &scattered(n))))]).unwrap();
    }
    store.insert(&[(memory("many-other", "learnings", "Embedded by another model."), Some(embedding(OTHER_MODEL, &scattered(3))))]).unwrap();
    store.rebuild_index().unwrap();

    let queries: Vec<Vec<f32>> = [3, 42, 149, 155, 1_000, 1_001, 7].into_iter().map(|n| embedding(MODEL, &scattered(n)).vector).collect();
    let queries: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
    for (name, filter) in [("active", SearchFilter::active()), ("every status", all_statuses())] {
        for limit in [1, 5, 12] {
            let many = store.search_vector_many(&queries, MODEL, &filter, limit).unwrap();
            assert_eq!(many.len(), queries.len(), "one list per vector ({name}, limit {limit})");
            for (query, found) in queries.iter().zip(&many) {
                let alone = store.search_vector(query, MODEL, &filter, limit).unwrap();
                assert_eq!(hit_ids(found), hit_ids(&alone), "{name}, limit {limit}");
                for (hit, want) in found.iter().zip(&alone) {
                    assert!((hit.score - want.score).abs() < 1e-4, "{} scored {}, alone {}", hit.id, hit.score, want.score);
                }
            }
        }
    }
    assert!(store.search_vector_many(&[], MODEL, &SearchFilter::active(), 5).unwrap().is_empty());
    assert!(store.search_vector_many(&queries, MODEL, &SearchFilter::active(), 0).unwrap().iter().all(Vec::is_empty));
    assert!(store.search_vector_many(&queries, "never-used-model", &SearchFilter::active(), 5).unwrap().iter().all(Vec::is_empty));
}

pub fn vectors_of_other_models_are_never_compared(make: MakeStore) {
    let store = make();
    let a = memory("model-a", "learnings", "Embedded by model A.");
    let b = memory("model-b", "learnings", "Embedded by model B.");
    let direction = [0.6, 0.8];
    store
        .insert(&[
            (a.clone(), Some(embedding(MODEL, &direction))),
            (b.clone(), Some(embedding(OTHER_MODEL, &direction))),
        ])
        .unwrap();
    let query = unit(&direction);
    let filter = SearchFilter::active();
    assert_eq!(hit_ids(&store.search_vector(&query, MODEL, &filter, 10).unwrap()), ["model-a"]);
    assert_eq!(hit_ids(&store.search_vector(&query, OTHER_MODEL, &filter, 10).unwrap()), ["model-b"]);
    assert!(store.search_vector(&query, "never-used-model", &filter, 10).unwrap().is_empty());
    assert_eq!(memory_ids(&store.missing_embeddings(MODEL, 10).unwrap()), ["model-b"]);
    assert_eq!(memory_ids(&store.missing_embeddings(OTHER_MODEL, 10).unwrap()), ["model-a"]);

    // A second model's vector for the same memory sits beside the first, not in its place.
    store.set_embeddings(&[(b.id.clone(), embedding(MODEL, &[0.8, 0.6]))]).unwrap();
    assert_eq!(hit_ids(&store.search_vector(&query, MODEL, &filter, 10).unwrap()), ["model-a", "model-b"]);
    assert_eq!(hit_ids(&store.search_vector(&query, OTHER_MODEL, &filter, 10).unwrap()), ["model-b"]);
    assert!(store.missing_embeddings(MODEL, 10).unwrap().is_empty());
}

pub fn missing_and_set_embeddings(make: MakeStore) {
    let store = make();
    let memories: Vec<Memory> = (0..5)
        .map(|n| memory(&format!("embed-{n}"), "learnings", &format!("Memory number {n} needs a vector.")))
        .collect();
    insert_all(&*store, &memories);
    assert_eq!(store.missing_embeddings(MODEL, 3).unwrap().len(), 3);
    assert_eq!(store.missing_embeddings(MODEL, 10).unwrap().len(), 5);

    store
        .set_embeddings(&[
            (memories[1].id.clone(), embedding(MODEL, &[1.0, 0.0])),
            (memories[3].id.clone(), embedding(MODEL, &[0.0, 1.0])),
        ])
        .unwrap();
    assert_eq!(sorted(memory_ids(&store.missing_embeddings(MODEL, 10).unwrap())), ["embed-0", "embed-2", "embed-4"]);
    let hits = store.search_vector(&unit(&[0.0, 1.0]), MODEL, &SearchFilter::active(), 10).unwrap();
    assert_eq!(hit_ids(&hits), ["embed-3", "embed-1"]);

    // Setting a vector again replaces it.
    store.set_embeddings(&[(memories[1].id.clone(), embedding(MODEL, &[0.0, 1.0]))]).unwrap();
    let hits = store.search_vector(&unit(&[0.0, 1.0]), MODEL, &SearchFilter::active(), 10).unwrap();
    assert!((hits[1].score - 1.0).abs() < 1e-4, "{hits:?}");
    assert_eq!(store.stats().unwrap().vectors_by_model.get(MODEL).copied(), Some(2));
}

pub fn list_paginates_newest_first(make: MakeStore) {
    let store = make();
    let mut memories: Vec<Memory> = (0..25)
        .map(|n| {
            let mut m = memory(&format!("page-{n:02}"), "progress", &format!("Step {n} is done."));
            // Out of order on purpose, with two memories captured at the same instant.
            m.created_at = at((n * 7 % 25).min(23));
            m
        })
        .collect();
    insert_all(&*store, &memories);

    let filter = SearchFilter::default();
    let all = store.list(&filter, 0, EVERYTHING).unwrap();
    assert_eq!(all.len(), 25);
    assert!(all.windows(2).all(|pair| pair[0].created_at >= pair[1].created_at), "not newest first");

    let mut paged = Vec::new();
    for offset in [0, 10, 20] {
        paged.extend(store.list(&filter, offset, 10).unwrap());
    }
    assert_eq!(memory_ids(&paged), memory_ids(&all), "pages must partition the listing in its order");
    assert!(store.list(&filter, 25, 10).unwrap().is_empty());
    assert!(store.list(&filter, 0, 0).unwrap().is_empty());

    memories.sort_by_key(|m| std::cmp::Reverse(m.created_at));
    assert_eq!(all[0].created_at, memories[0].created_at);
}

pub fn export_import_is_lossless(make: MakeStore) {
    let source = make();
    let mut plain = memory("export-plain", "learnings", "Plain memory with no vector.");
    plain.created_at = at(1);
    let mut revised = memory("export-revised", "decisions", "First draft of the decision.");
    revised.created_at = at(2);
    let mut forgotten = memory("export-forgotten", "context", "Something no longer true.");
    forgotten.created_at = at(3);
    let mut embedded = memory("export-embedded", "apis", "The API paginates with cursors.");
    embedded.created_at = at(0);
    embedded.tags = vec!["api".into()];
    source
        .insert(&[
            (plain.clone(), None),
            (revised.clone(), None),
            (forgotten.clone(), Some(embedding(MODEL, &[0.0, 1.0]))),
            (embedded.clone(), Some(embedding(MODEL, &[1.0, 0.0]))),
        ])
        .unwrap();
    source.set_embeddings(&[(embedded.id.clone(), embedding(OTHER_MODEL, &[0.3, 0.4, 0.5]))]).unwrap();
    let revised = update(&*source, &revised, |m| m.content = "Second draft of the decision.".into());
    update(&*source, &revised, |m| m.confidence = 0.99);
    update(&*source, &forgotten, |m| m.status = Status::Forgotten);

    let mut records: Vec<MemoryRecord> = Vec::new();
    loop {
        let page = source.export(records.len(), 3).unwrap();
        if page.is_empty() {
            break;
        }
        records.extend(page);
    }
    assert_eq!(
        memory_ids(&records.iter().map(|r| r.memory.clone()).collect::<Vec<_>>()),
        ["export-embedded", "export-plain", "export-revised", "export-forgotten"],
        "export is in capture order"
    );
    let revised_record = &records[2];
    assert_eq!(revised_record.history, source.history(&revised.id).unwrap());
    assert_eq!(revised_record.history.len(), 2);
    assert!(records[0].embedding.is_some());
    assert!(records[1].embedding.is_none());
    assert_eq!(records[3].embedding, Some(embedding(MODEL, &[0.0, 1.0])));

    let target = make();
    assert_eq!(target.import(&records).unwrap(), 4);
    assert_eq!(target.export(0, EVERYTHING).unwrap(), records);
    for record in &records {
        assert_eq!(target.get(&record.memory.id).unwrap().as_ref(), Some(&record.memory));
        assert_eq!(target.history(&record.memory.id).unwrap(), record.history);
    }
    assert_eq!(hit_ids(&target.search_text("cursors", &SearchFilter::active(), 10).unwrap()), ["export-embedded"]);
    let vector = records[0].embedding.clone().unwrap();
    let hits = target.search_vector(&vector.vector, &vector.model, &SearchFilter::active(), 10).unwrap();
    assert_eq!(hit_ids(&hits), ["export-embedded"]);
    let stats = target.stats().unwrap();
    assert_eq!(stats.total, 4);
    assert_eq!(stats.text_index_entries, 4);
}

pub fn import_skips_existing_unless_newer(make: MakeStore) {
    let store = make();
    let v1 = memory("import-1", "learnings", "Original content.");
    insert_all(&*store, std::slice::from_ref(&v1));
    let record = |memory: &Memory, history| MemoryRecord { memory: memory.clone(), history, embedding: None };

    // Same version, even with other content: skipped.
    let mut same_version = v1.clone();
    same_version.content = "Conflicting content at the same version.".into();
    assert_eq!(store.import(&[record(&same_version, vec![])]).unwrap(), 0);
    assert_eq!(store.get(&v1.id).unwrap(), Some(v1.clone()));

    // Newer: written with its history, and found by its new content.
    let (v2, superseded) = supersede(&v1, "imported change", |m| {
        m.title = "Imported".into();
        m.content = "Imported newer content.".into();
    });
    assert_eq!(store.import(&[record(&v2, vec![superseded.clone()])]).unwrap(), 1);
    assert_eq!(store.get(&v1.id).unwrap(), Some(v2.clone()));
    assert_eq!(store.history(&v1.id).unwrap(), vec![superseded]);
    assert_eq!(hit_ids(&store.search_text("imported newer", &SearchFilter::active(), 10).unwrap()), ["import-1"]);
    assert!(store.search_text("original", &SearchFilter::active(), 10).unwrap().is_empty());

    // Older: skipped.
    assert_eq!(store.import(&[record(&v1, vec![])]).unwrap(), 0);
    assert_eq!(store.get(&v1.id).unwrap(), Some(v2));

    // New ids are written, and an import of nothing writes nothing.
    let fresh = memory("import-2", "learnings", "A memory only the import has.");
    assert_eq!(store.import(&[record(&fresh, vec![])]).unwrap(), 1);
    assert_eq!(store.get(&fresh.id).unwrap(), Some(fresh));
    assert_eq!(store.import(&[]).unwrap(), 0);
}

pub fn import_never_duplicates_active_content(make: MakeStore) {
    let store = make();
    let original = memory("active-1", "learnings", "Only one active copy of this content.");
    insert_all(&*store, std::slice::from_ref(&original));
    let record = |memory: Memory| MemoryRecord { memory, history: vec![], embedding: None };

    let copy = memory("active-2", "learnings", "Only one active copy of this content.");
    assert_eq!(store.import(&[record(copy.clone())]).unwrap(), 0);
    assert_eq!(store.get(&copy.id).unwrap(), None);

    // A forgotten copy is no duplicate, and neither is a copy in another namespace.
    let mut forgotten = memory("active-3", "learnings", "Only one active copy of this content.");
    forgotten.status = Status::Forgotten;
    let elsewhere = memory("active-4", "decisions", "Only one active copy of this content.");
    assert_eq!(store.import(&[record(forgotten), record(elsewhere)]).unwrap(), 2);
    assert_eq!(store.count(&SearchFilter::active()).unwrap(), 2);
    assert_eq!(store.count(&all_statuses()).unwrap(), 3);
}

pub fn stats_counts(make: MakeStore) {
    let store = make();
    let mut first = memory("stats-1", "decisions", "Decision one.");
    first.kind = MemoryKind::Episodic;
    let mut second = memory("stats-2", "decisions", "Decision two.");
    second.kind = MemoryKind::Episodic;
    let third = memory("stats-3", "learnings", "Learning three.");
    let fourth = memory("stats-4", "learnings", "Learning four, later forgotten.");
    store
        .insert(&[
            (first, Some(embedding(MODEL, &[1.0]))),
            (second, Some(embedding(OTHER_MODEL, &[1.0]))),
            (third.clone(), Some(embedding(MODEL, &[1.0]))),
            (fourth.clone(), None),
        ])
        .unwrap();
    update(&*store, &fourth, |m| m.status = Status::Forgotten);

    let stats = store.stats().unwrap();
    let get = |map: &BTreeMap<String, u64>, key: &str| map.get(key).copied().unwrap_or(0);
    assert!(!stats.backend.is_empty());
    assert!(!stats.location.is_empty());
    assert_eq!(stats.total, 4);
    assert_eq!(get(&stats.by_status, "active"), 3);
    assert_eq!(get(&stats.by_status, "forgotten"), 1);
    assert_eq!(get(&stats.by_namespace, "decisions"), 2);
    assert_eq!(get(&stats.by_namespace, "learnings"), 1, "by_namespace counts active memories only");
    assert_eq!(get(&stats.by_kind, "episodic"), 2);
    assert_eq!(get(&stats.by_kind, "semantic"), 1, "by_kind counts active memories only");
    assert_eq!(get(&stats.by_kind, "procedural"), 0);
    assert_eq!(stats.vectors_by_model, BTreeMap::from([(MODEL.to_owned(), 2), (OTHER_MODEL.to_owned(), 1)]));
    assert_eq!(stats.text_index_entries, 4);
}

pub fn rebuild_index_restores_text_search(make: MakeStore) {
    let store = make();
    let memories: Vec<Memory> = ["alpha", "bravo", "charlie"]
        .iter()
        .map(|word| {
            let mut m = memory(word, "learnings", &format!("The {word} runbook covers restarts."));
            m.tags = vec![format!("{word}-tag")];
            m
        })
        .collect();
    insert_all(&*store, &memories);
    let before = store.search_text("runbook bravo", &SearchFilter::active(), 10).unwrap();

    assert_eq!(store.rebuild_index().unwrap(), 3);
    let after = store.search_text("runbook bravo", &SearchFilter::active(), 10).unwrap();
    assert_eq!(hit_ids(&after), hit_ids(&before));
    assert_eq!(hit_ids(&after)[0], "bravo");
    let by_tag = SearchFilter { tags: vec!["charlie-tag".into()], ..SearchFilter::active() };
    assert_eq!(memory_ids(&store.list(&by_tag, 0, 10).unwrap()), ["charlie"]);
    assert_eq!(store.stats().unwrap().text_index_entries, 3);
}

pub fn record_access_bumps_counts(make: MakeStore) {
    let store = make();
    let read = memory("accessed", "learnings", "Read five times.");
    let unread = memory("unread", "learnings", "Never read.");
    insert_all(&*store, &[read.clone(), unread.clone()]);

    store.record_access(&[read.id.clone(), id("absent")], at(10)).unwrap();
    let once = store.get(&read.id).unwrap().unwrap();
    assert_eq!(once.access_count, 1);
    assert_eq!(once.last_accessed_at, Some(at(10)));

    store.record_access(std::slice::from_ref(&read.id), at(20)).unwrap();
    let twice = store.get(&read.id).unwrap().unwrap();
    assert_eq!(twice.access_count, 2);
    assert_eq!(twice.last_accessed_at, Some(at(20)));
    // A memory read by several recalls before the reads are written counts every read.
    store.record_access(&[read.id.clone(), id("absent"), read.id.clone(), read.id.clone()], at(15)).unwrap();
    let five = store.get(&read.id).unwrap().unwrap();
    assert_eq!(five.access_count, 5);
    assert_eq!(five.last_accessed_at, Some(at(20)), "an earlier read time does not wind the latest back");
    // Reading is not a change: no new version, no history entry.
    assert_eq!(twice.version, read.version);
    assert_eq!(five.version, read.version);
    assert_eq!(twice.updated_at, base_time());
    assert!(store.history(&read.id).unwrap().is_empty());
    assert_eq!(store.get(&unread.id).unwrap(), Some(unread));
}

/// Regression: a replace built from a copy read before other reads were recorded must not
/// wind the access count back, because reads are tracked outside the versioned record.
pub fn replace_keeps_reads_recorded_since_the_caller_read(make: MakeStore) {
    let store = make();
    let original = memory("busy", "learnings", "Read while being edited.");
    insert_all(&*store, std::slice::from_ref(&original));
    let stale_copy = store.get(&original.id).unwrap().unwrap();
    store.record_access(std::slice::from_ref(&original.id), at(30)).unwrap();
    store.record_access(std::slice::from_ref(&original.id), at(31)).unwrap();

    let (next, previous) = supersede(&stale_copy, "edited from a stale copy", |memory| memory.content = "Edited.".into());
    store.replace(&next, &previous, None).unwrap();
    let stored = store.get(&original.id).unwrap().unwrap();
    assert_eq!(stored.content, "Edited.");
    assert_eq!(stored.access_count, 2);
    assert_eq!(stored.last_accessed_at, Some(at(31)));
}

pub fn purge_removes_everything_an_author_wrote(make: MakeStore) {
    let store = make();
    let mut own = memory("purge-own", "learnings", "Ada's zanzibar note about retries.");
    own.author = Some("ada".to_owned());
    own.links = vec![Link {
        target: MemoryUrn::parse("links.target", "kenning://user/learnings/other-1").unwrap(),
        relation: "relates-to".to_owned(),
    }];
    // Captured by ada, then edited by bob: ada's words are in its history, so it goes too.
    let mut edited = memory("purge-edited", "context", "Ada's zanzibar draft of the deploy steps.");
    edited.author = Some("ada".to_owned());
    let mut other = memory("purge-other", "context", "Bob's zanzibar list of flaky tests.");
    other.author = Some("bob".to_owned());
    let anonymous = memory("purge-anonymous", "context", "An unattributed zanzibar remark.");
    let vector = embedding(MODEL, &[1.0, 0.0]);
    store
        .insert(&[
            (own.clone(), Some(vector.clone())),
            (edited.clone(), None),
            (other.clone(), Some(embedding(MODEL, &[0.6, 0.8]))),
            (anonymous.clone(), None),
        ])
        .unwrap();
    let own = update(&*store, &own, |m| m.content = "Ada's zanzibar note about retries, revised.".to_owned());
    update(&*store, &edited, |m| {
        m.author = Some("bob".to_owned());
        m.content = "Bob's zanzibar deploy steps.".to_owned();
    });
    assert_eq!(hit_ids(&store.search_text("zanzibar", &all_statuses(), 10).unwrap()).len(), 4, "the index is built before the purge");

    let expected = kenning_core::PurgeCounts { memories: 2, versions: 2, vectors: 0, edges: 1, ..Default::default() };
    let authored: Vec<String> = store.authored_by("ada").unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(sorted(authored), sorted(vec![own.id.to_string(), edited.id.to_string()]), "what the purge removes: ada's now or in an earlier version");
    let dry = store.purge_author("ada", PurgeMode::DryRun).unwrap();
    // The revised text dropped the vector of `own` (the content changed without a new one).
    assert_eq!(dry, expected, "a dry run counts");
    assert_eq!(store.count(&all_statuses()).unwrap(), 4, "a dry run removes nothing");
    assert_eq!(store.get(&own.id).unwrap().map(|m| m.version), Some(2));
    assert_eq!(store.history(&own.id).unwrap().len(), 1);

    store.set_embeddings(&[(own.id.clone(), vector.clone())]).unwrap();
    let purged = store.purge_author("ada", PurgeMode::Apply).unwrap();
    assert_eq!(purged, kenning_core::PurgeCounts { vectors: 1, ..expected });
    for gone in [&own.id, &edited.id] {
        assert_eq!(store.get(gone).unwrap(), None);
        assert!(store.history(gone).unwrap().is_empty(), "the history of {gone} is gone too");
    }
    assert_eq!(sorted(hit_ids(&store.search_text("zanzibar", &all_statuses(), 10).unwrap())), sorted(vec![anonymous.id.to_string(), other.id.to_string()]));
    let near = hit_ids(&store.search_vector(&unit(&[1.0, 0.0]), MODEL, &all_statuses(), 10).unwrap());
    assert_eq!(near, [other.id.to_string()], "the purged vector is out of the vector index");
    assert_eq!(store.count(&all_statuses()).unwrap(), 2);
    let stats = store.stats().unwrap();
    assert_eq!(stats.vectors_by_model.get(MODEL).copied(), Some(1));
    let exported = store.export(0, EVERYTHING).unwrap();
    assert!(
        exported.iter().all(|record| record.memory.author.as_deref() != Some("ada")
            && record.history.iter().all(|version| version.memory.author.as_deref() != Some("ada"))),
        "nothing ada wrote is left to export"
    );
    assert_eq!(exported.len(), 2);

    assert!(store.authored_by("ada").unwrap().is_empty());
    assert_eq!(store.purge_author("ada", PurgeMode::Apply).unwrap(), kenning_core::PurgeCounts::default(), "a second purge finds nothing");
    // The purged content no longer blocks a new capture of the same text.
    let again = memory("purge-again", "learnings", "Ada's zanzibar note about retries, revised.");
    assert_eq!(store.insert(&[(again, None)]).unwrap(), [Inserted::Created]);
}

/// A store that keeps a change mark moves it on every write (insert, replace, import, purge)
/// and never on a read, access counts included; a store without one answers `None` throughout.
pub fn change_mark_moves_on_writes_only(make: MakeStore) {
    let store = make();
    let mut first = memory("marked", "learnings", "A memory whose writes move the mark.");
    first.author = Some("ada".to_owned());
    let Some(empty) = store.change_mark().unwrap() else {
        insert_all(&*store, &[first]);
        assert_eq!(store.change_mark().unwrap(), None, "a store without a mark never starts keeping one");
        return;
    };
    let mark = || store.change_mark().unwrap().expect("a store with a mark keeps it");
    insert_all(&*store, std::slice::from_ref(&first));
    let inserted = mark();
    assert_ne!(inserted, empty, "an insert moves the mark");

    store.get(&first.id).unwrap();
    store.list(&all_statuses(), 0, EVERYTHING).unwrap();
    store.search_text("memory writes", &SearchFilter::active(), 10).unwrap();
    store.record_access(std::slice::from_ref(&first.id), at(5)).unwrap();
    store.stats().unwrap();
    assert_eq!(mark(), inserted, "reads leave the mark alone");

    let forgotten = update(&*store, &first, |memory| memory.status = Status::Forgotten);
    let replaced = mark();
    assert_ne!(replaced, inserted, "a replace moves the mark");

    let mut imported = store.export(0, EVERYTHING).unwrap();
    imported[0].memory = forgotten.clone();
    let mut other = memory("imported", "learnings", "Another memory, arriving by import.");
    other.author = Some("ada".to_owned());
    imported.push(MemoryRecord { memory: other, history: Vec::new(), embedding: None });
    assert_eq!(store.import(&imported).unwrap(), 1);
    let after_import = mark();
    assert_ne!(after_import, replaced, "an import that writes moves the mark");

    store.purge_author("ada", PurgeMode::Apply).unwrap();
    assert_ne!(mark(), after_import, "a purge moves the mark");
}
