//! The search index against plain reference computations: BM25 scored by brute force over the
//! documents as they stand, filters checked record by record, and exact cosine similarity.
//! Random histories of inserts, edits and status changes check that an index kept up to date
//! answers exactly as one built afresh from the final records, and so does one written as an
//! image part way through, read back and brought up to date with the rest of the history.
//! Damaged images are refused.

use std::collections::BTreeMap;
use std::io::Cursor;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use kenning_core::store::NEIGHBOUR_REACH;
use kenning_core::{MemoryKind, Namespace, ScoredId, SearchFilter, Status};
use kenning_index::analyzer::{Analyzer, for_each_word};
use kenning_index::{BodyCheck, DocInput, FORMAT_VERSION, ImageError, SearchIndex, image_in_memory};
use proptest::prelude::*;

/// A record as a store would hold it.
#[derive(Debug, Clone)]
struct Record {
    id: String,
    kind: MemoryKind,
    status: Status,
    namespace: String,
    tags: Vec<String>,
    confidence: f64,
    occurred_at: DateTime<Utc>,
    text: String,
    facets: Vec<String>,
    vector: Option<Vec<f32>>,
}

impl Record {
    fn doc(&self) -> DocInput<'_> {
        DocInput {
            id: &self.id,
            kind: self.kind,
            status: self.status,
            namespace: &self.namespace,
            tags: &self.tags,
            confidence: self.confidence,
            occurred_at: self.occurred_at,
            text: &self.text,
            facets: &self.facets,
        }
    }
}

const MODEL: &str = "test-model";

fn upsert(index: &mut SearchIndex, key: i64, record: &Record) {
    let vectors: Vec<(&str, &[f32])> = record.vector.iter().map(|vector| (MODEL, vector.as_slice())).collect();
    index.upsert(key, &record.doc(), &vectors);
}

fn fresh(records: &BTreeMap<i64, Record>) -> SearchIndex {
    let mut index = SearchIndex::new();
    index.add_model(MODEL);
    for (key, record) in records {
        upsert(&mut index, *key, record);
    }
    index
}

/// Applies `history` in order to an index that was kept up to date through it, and returns the
/// index with the records that history leaves.
fn replay(history: &[(i64, Record)]) -> (SearchIndex, BTreeMap<i64, Record>) {
    let mut index = SearchIndex::new();
    index.add_model(MODEL);
    let mut records = BTreeMap::new();
    for (key, record) in history {
        upsert(&mut index, *key, record);
        records.insert(*key, record.clone());
    }
    (index, records)
}

/// The image of `index`, with the vectors of any model with more than a few thousand linked
/// in a graph (far fewer than a store links), so that the graph is tested at sizes a test
/// builds in a second.
fn image_of(index: &SearchIndex, stamp: &[u8]) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    let graphs = index.graph_work(GRAPH_ROWS_IN_TESTS).link(&std::sync::atomic::AtomicBool::new(false));
    index.write_image_with(stamp, &mut out, &graphs).unwrap();
    out.into_inner()
}

const GRAPH_ROWS_IN_TESTS: usize = 4096;

fn read_image(bytes: &[u8]) -> Result<(SearchIndex, Vec<u8>), ImageError> {
    read_image_checking(bytes, BodyCheck::Checksum)
}

fn read_image_checking(bytes: &[u8], body_check: BodyCheck) -> Result<(SearchIndex, Vec<u8>), ImageError> {
    SearchIndex::read_image(image_in_memory(bytes), body_check)
}

/// Replays `history[..split]`, writes the index as an image and reads it back, then applies the
/// rest of the history to the index read back. Returns it with the records history leaves.
fn replay_through_image(history: &[(i64, Record)], split: usize) -> (SearchIndex, BTreeMap<i64, Record>) {
    let split = split.min(history.len());
    let (before, mut records) = replay(&history[..split]);
    let (mut index, stamp) = read_image(&image_of(&before, b"store 7")).unwrap();
    assert_eq!(stamp, b"store 7");
    assert_eq!(index.len(), before.len());
    for (key, record) in &history[split..] {
        upsert(&mut index, *key, record);
        records.insert(*key, record.clone());
    }
    (index, records)
}

fn passes(record: &Record, filter: &SearchFilter) -> bool {
    (filter.kinds.is_empty() || filter.kinds.contains(&record.kind))
        && (filter.namespaces.is_empty() || filter.namespaces.iter().any(|namespace| namespace.as_str() == record.namespace))
        && filter.tags.iter().all(|tag| record.tags.contains(tag))
        && filter.since.is_none_or(|since| record.occurred_at >= since)
        && filter.until.is_none_or(|until| record.occurred_at <= until)
        && filter.min_confidence.is_none_or(|min| record.confidence >= min)
        && filter.status.is_none_or(|status| record.status == status)
        && filter.facets().iter().all(|facet| record.facets.contains(facet))
}

/// BM25 (k1 = 1.2, b = 0.75, Lucene's IDF) computed from scratch for every record passing the filter.
fn reference_bm25(records: &BTreeMap<i64, Record>, query: &str, filter: &SearchFilter) -> Vec<(String, f64)> {
    let analyzer = Analyzer::default();
    let terms: Vec<String> = analyzer.query_terms(query);
    let analysed: Vec<(&Record, Vec<String>)> = records
        .values()
        .map(|record| {
            let mut words = Vec::new();
            for_each_word(&record.text, |word| words.push(analyzer.stem(word)));
            (record, words)
        })
        .collect();
    let documents = analysed.len() as f64;
    let mean_length = (analysed.iter().map(|(_, words)| words.len()).sum::<usize>() as f64 / documents).max(1.0);
    let mut scored = Vec::new();
    for (record, words) in &analysed {
        if !passes(record, filter) {
            continue;
        }
        let mut score = 0.0;
        for term in &terms {
            let frequency = analysed.iter().filter(|(_, words)| words.contains(term)).count() as f64;
            let count = words.iter().filter(|word| *word == term).count() as f64;
            if count == 0.0 {
                continue;
            }
            let idf = (1.0 + (documents - frequency + 0.5) / (frequency + 0.5)).ln();
            let norm = 1.2 * (1.0 - 0.75 + 0.75 * words.len() as f64 / mean_length);
            score += idf * count * 2.2 / (count + norm);
        }
        if score > 0.0 {
            scored.push((record.id.clone(), score));
        }
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

fn reference_cosine(records: &BTreeMap<i64, Record>, query: &[f32], filter: &SearchFilter) -> Vec<(String, f64)> {
    let mut scored: Vec<(String, f64)> = records
        .values()
        .filter(|record| passes(record, filter))
        .filter_map(|record| {
            let vector = record.vector.as_ref()?;
            Some((record.id.clone(), vector.iter().zip(query).map(|(a, b)| f64::from(a * b)).sum()))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

/// The neighbours of the record under `key`, by walking the records in key order.
fn reference_neighbours(records: &BTreeMap<i64, Record>, key: i64, filter: &SearchFilter, window: TimeDelta) -> Vec<String> {
    let Some(origin) = records.get(&key).filter(|record| passes(record, filter)) else { return Vec::new() };
    let mut found = Vec::new();
    for direction in [-1, 1] {
        let nearest = (1..=NEIGHBOUR_REACH as i64)
            .filter_map(|distance| records.get(&(key + direction * distance)))
            .find(|record| passes(record, filter) && record.namespace == origin.namespace);
        if let Some(record) = nearest.filter(|record| (record.occurred_at - origin.occurred_at).abs() <= window) {
            found.push(record.id.clone());
        }
    }
    found
}

/// Compares a ranking with the reference: the same scores in the same order, where ranks whose
/// reference scores are nearly tied may come in either order.
fn assert_ranks_like(found: &[ScoredId], expected: &[(String, f64)], tolerance: f64, context: &str) {
    assert_eq!(found.len(), expected.len(), "{context}: {found:?} vs {expected:?}");
    for (rank, (hit, (id, score))) in found.iter().zip(expected).enumerate() {
        assert!((hit.score - score).abs() <= tolerance, "{context}: rank {rank} scores {} where {id} scores {score}", hit.score);
        if hit.id.as_str() != id {
            let tied = expected.iter().any(|(other, other_score)| other == hit.id.as_str() && (other_score - score).abs() <= tolerance);
            assert!(tied, "{context}: rank {rank} is {} where the reference has {id}", hit.id);
        }
    }
}

const WORDS: &[&str] = &[
    "deploy", "deploying", "deployment", "database", "pool", "connection", "connections", "cache", "redis", "timeout",
    "retry", "the", "a", "of", "migration", "schema", "Café", "naïve", "index", "rust", "v2", "2023",
];
const NAMESPACES: &[&str] = &["decisions", "learnings", "config"];
const TAGS: &[&str] = &["infra", "db", "perf"];
const BRANCHES: &[&str] = &["main", "feature"];
const FILES: &[&str] = &["src", "src/db.rs", "README.md"];

fn arb_vector() -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(-1.0f32..1.0, 8).prop_map(|vector| {
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-6);
        vector.iter().map(|v| v / norm).collect()
    })
}

fn arb_record(id: String) -> impl Strategy<Value = Record> {
    (
        proptest::collection::vec(0..WORDS.len(), 1..12),
        0..3usize,
        any::<bool>(),
        0..NAMESPACES.len(),
        proptest::collection::vec(0..TAGS.len(), 0..3),
        0..=10u32,
        0..100i64,
        proptest::option::of(arb_vector()),
        (proptest::option::of(0..BRANCHES.len()), proptest::collection::vec(0..FILES.len(), 0..3)),
    )
        .prop_map(move |(words, kind, forgotten, namespace, tags, confidence, day, vector, (branch, files))| Record {
            id: id.clone(),
            kind: MemoryKind::ALL[kind],
            status: if forgotten { Status::Forgotten } else { Status::Active },
            namespace: NAMESPACES[namespace].to_owned(),
            tags: tags.iter().map(|tag| TAGS[*tag].to_owned()).collect(),
            confidence: f64::from(confidence) / 10.0,
            occurred_at: Utc.timestamp_opt(1_700_000_000 + day * 86_400, 0).unwrap(),
            text: words.iter().map(|word| WORDS[*word]).collect::<Vec<_>>().join(" "),
            facets: branch
                .map(|branch| kenning_core::provenance::branch_facet(BRANCHES[branch]))
                .into_iter()
                .chain(files.iter().map(|file| kenning_core::provenance::file_facet(FILES[*file])))
                .collect(),
            vector,
        })
}

/// A history: records written under keys 0..8, several times each.
fn arb_history() -> impl Strategy<Value = Vec<(i64, Record)>> {
    arb_history_over(8, 30)
}

/// A history of up to `writes` records written under keys 0..`keys`.
fn arb_history_over(keys: i64, writes: usize) -> impl Strategy<Value = Vec<(i64, Record)>> {
    proptest::collection::vec(0..keys, 1..writes).prop_flat_map(|keys| {
        keys.into_iter().map(|key| arb_record(format!("m{key}")).prop_map(move |record| (key, record))).collect::<Vec<_>>()
    })
}

/// A history of many records whose words are skewed, a few common and most rare, as in real
/// text: where a search for the best few can leave most of a common term's postings unread.
fn arb_skewed_history() -> impl Strategy<Value = Vec<(i64, Record)>> {
    let words = WORDS.len() as u32;
    let texts = proptest::collection::vec(proptest::collection::vec(0..words.pow(4), 1..12), 300);
    (arb_history_over(150, 300), texts).prop_map(|(mut history, texts)| {
        for ((_, record), picks) in history.iter_mut().zip(texts) {
            // The fourth root of a uniform pick favours the later words: the last is picked
            // about 40,000 times as often as the first.
            let word = |pick: &u32| WORDS[(f64::from(*pick).powf(0.25) as usize).min(WORDS.len() - 1)];
            record.text = picks.iter().map(word).collect::<Vec<_>>().join(" ");
        }
        history
    })
}

fn arb_filter() -> impl Strategy<Value = SearchFilter> {
    (
        proptest::collection::vec(0..3usize, 0..2),
        proptest::collection::vec(0..NAMESPACES.len() + 1, 0..2),
        proptest::collection::vec(0..TAGS.len() + 1, 0..2),
        proptest::option::of(0..100i64),
        proptest::option::of(0..100i64),
        proptest::option::of(0..=10u32),
        proptest::option::of(any::<bool>()),
        // One past the known names is a name no record has.
        (proptest::option::of(0..BRANCHES.len() + 1), proptest::option::of(0..FILES.len() + 1)),
    )
        .prop_map(|(kinds, namespaces, tags, since, until, confidence, active, (branch, file))| SearchFilter {
            kinds: kinds.iter().map(|kind| MemoryKind::ALL[*kind]).collect(),
            // One past the known names is a name no record has.
            namespaces: namespaces
                .iter()
                .map(|n| Namespace::parse(NAMESPACES.get(*n).copied().unwrap_or("unheard-of")).unwrap())
                .collect(),
            tags: tags.iter().map(|t| TAGS.get(*t).copied().unwrap_or("unheard-of").to_owned()).collect(),
            since: since.map(|day| Utc.timestamp_opt(1_700_000_000 + day * 86_400, 0).unwrap()),
            until: until.map(|day| Utc.timestamp_opt(1_700_000_000 + day * 86_400, 0).unwrap()),
            min_confidence: confidence.map(|c| f64::from(c) / 10.0),
            status: active.map(|active| if active { Status::Active } else { Status::Forgotten }),
            branch: branch.map(|n| BRANCHES.get(n).copied().unwrap_or("unheard-of").to_owned()),
            file: file.map(|n| FILES.get(n).copied().unwrap_or("unheard-of").to_owned()),
            // A session is one more facet, matched like the branch.
            session: None,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn text_search_matches_brute_force_bm25(history in arb_history(), filter in arb_filter(), query in proptest::collection::vec(0..WORDS.len(), 1..4)) {
        let (index, records) = replay(&history);
        let query: String = query.iter().map(|word| WORDS[*word]).collect::<Vec<_>>().join(" ");
        let expected = reference_bm25(&records, &query, &filter);
        let found = index.search_text(&query, &filter, 100);
        assert_ranks_like(&found, &expected, 1e-4, "kept up to date");
        let rebuilt = fresh(&records).search_text(&query, &filter, 100);
        assert_ranks_like(&rebuilt, &expected, 1e-4, "built afresh");
        let top = index.search_text(&query, &filter, 2);
        prop_assert_eq!(top.len(), expected.len().min(2));
    }

    #[test]
    fn a_text_search_for_the_best_few_ranks_as_brute_force_bm25(
        history in arb_skewed_history(),
        filter in prop_oneof![2 => Just(SearchFilter::default()), 1 => arb_filter()],
        query in proptest::collection::vec(0..WORDS.len(), 1..5),
        limit in 1..12usize,
        split in 0..300usize,
    ) {
        let (index, records) = replay_through_image(&history, split);
        let query: String = query.iter().map(|word| WORDS[*word]).collect::<Vec<_>>().join(" ");
        let expected = reference_bm25(&records, &query, &filter);
        let found = index.search_text(&query, &filter, limit);
        prop_assert_eq!(found.len(), expected.len().min(limit));
        for (rank, hit) in found.iter().enumerate() {
            prop_assert!((hit.score - expected[rank].1).abs() <= 1e-4, "rank {} scores {} where {} scores {}", rank, hit.score, expected[rank].0, expected[rank].1);
            let own = expected.iter().find(|(id, _)| id == hit.id.as_str()).map(|(_, score)| *score);
            prop_assert!(own.is_some_and(|own| (own - hit.score).abs() <= 1e-4), "rank {} is {} scored {}, which the reference scores {:?}", rank, hit.id, hit.score, own);
        }
    }

    #[test]
    fn neighbours_are_the_nearest_records_in_key_order(
        history in arb_history_over(3 * NEIGHBOUR_REACH as i64, 60),
        filter in arb_filter(),
        window_days in 0..60i64,
    ) {
        let (index, records) = replay(&history);
        let window = TimeDelta::days(window_days);
        for key in -1..=3 * NEIGHBOUR_REACH as i64 {
            let expected = reference_neighbours(&records, key, &filter, window);
            let found: Vec<String> = index.neighbours(key, &filter, window).iter().map(|id| id.to_string()).collect();
            prop_assert_eq!(&found, &expected, "kept up to date, key {}", key);
            let rebuilt: Vec<String> = fresh(&records).neighbours(key, &filter, window).iter().map(|id| id.to_string()).collect();
            prop_assert_eq!(&rebuilt, &expected, "built afresh, key {}", key);
        }
    }

    #[test]
    fn vector_search_matches_exact_cosine(history in arb_history(), filter in arb_filter(), query in arb_vector()) {
        let (index, records) = replay(&history);
        let expected = reference_cosine(&records, &query, &filter);
        // Eight-bit vectors move a cosine by well under a hundredth.
        assert_ranks_like(&index.search_vector(&query, MODEL, &filter, 100), &expected, 0.02, "kept up to date");
        assert_ranks_like(&fresh(&records).search_vector(&query, MODEL, &filter, 100), &expected, 0.02, "built afresh");
        prop_assert!(index.search_vector(&query, "other-model", &filter, 100).is_empty());
        prop_assert!(index.search_vector(&query[..4], MODEL, &filter, 100).is_empty());
    }

    /// Enough queries at once are answered on several threads; each answer is the one a search
    /// of its own gives, in the order of the queries.
    #[test]
    fn many_vector_queries_at_once_answer_as_one_at_a_time(
        history in arb_history(),
        filter in arb_filter(),
        queries in proptest::collection::vec(arb_vector(), 1..80),
    ) {
        let (index, _) = replay(&history);
        let queries: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
        let alone: Vec<Vec<ScoredId>> = queries.iter().map(|query| index.search_vector(query, MODEL, &filter, 10)).collect();
        prop_assert_eq!(index.search_vector_many(&queries, MODEL, &filter, 10), alone);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// An index opened from an image and caught up answers like one built from scratch, and so
    /// does the image of that index (rows from the first image and added ones) read back again.
    #[test]
    fn an_index_read_from_an_image_and_caught_up_answers_like_one_built_afresh(
        history in arb_history_over(3 * NEIGHBOUR_REACH as i64, 60),
        split in 0..60usize,
        filter in arb_filter(),
        query in proptest::collection::vec(0..WORDS.len(), 1..4),
        vector in arb_vector(),
        window_days in 0..60i64,
    ) {
        let (index, records) = replay_through_image(&history, split);
        let (again, _) = read_image(&image_of(&index, b"again")).unwrap();
        let fresh = fresh(&records);
        prop_assert_eq!(index.len(), fresh.len());
        prop_assert_eq!(again.len(), fresh.len());
        let query: String = query.iter().map(|word| WORDS[*word]).collect::<Vec<_>>().join(" ");
        let expected = reference_bm25(&records, &query, &filter);
        for (name, index) in [("caught up", &index), ("read again", &again), ("built afresh", &fresh)] {
            assert_ranks_like(&index.search_text(&query, &filter, 100), &expected, 1e-4, name);
        }
        let expected = reference_cosine(&records, &vector, &filter);
        for (name, index) in [("caught up", &index), ("read again", &again), ("built afresh", &fresh)] {
            assert_ranks_like(&index.search_vector(&vector, MODEL, &filter, 100), &expected, 0.02, name);
        }
        let window = TimeDelta::days(window_days);
        for key in -1..=3 * NEIGHBOUR_REACH as i64 {
            let expected = reference_neighbours(&records, key, &filter, window);
            for (name, index) in [("caught up", &index), ("read again", &again)] {
                let found: Vec<String> = index.neighbours(key, &filter, window).iter().map(|id| id.to_string()).collect();
                prop_assert_eq!(&found, &expected, "{}, key {}", name, key);
            }
        }
    }
}

/// Every byte of an image is covered by a checksum, and every cut is noticed: a damaged image
/// is refused, never read. Opened on its structure alone (as a store opens its index file), a
/// damaged image is refused or searched without going out of bounds.
#[test]
fn a_damaged_image_is_refused() {
    let history: Vec<(i64, Record)> = (0..40)
        .map(|key| {
            let record = Record {
                id: format!("m{key}"),
                kind: MemoryKind::ALL[key as usize % 3],
                status: if key % 5 == 0 { Status::Forgotten } else { Status::Active },
                namespace: NAMESPACES[key as usize % 3].to_owned(),
                tags: vec![TAGS[key as usize % 3].to_owned()],
                confidence: 0.5,
                occurred_at: Utc.timestamp_opt(1_700_000_000 + key * 3600, 0).unwrap(),
                text: format!("{} {} {}", WORDS[key as usize % WORDS.len()], WORDS[(key as usize * 7) % WORDS.len()], key),
                facets: Vec::new(),
                vector: Some((0..8).map(|n| ((key + n) % 5) as f32 - 2.0).collect()),
            };
            (key, record)
        })
        .collect();
    let (index, _) = replay(&history);
    let image = image_of(&index, b"store 1");
    assert!(read_image(&image).is_ok());
    let everything = SearchFilter::default();
    for position in 0..image.len() {
        let mut damaged = image.clone();
        damaged[position] ^= 0x20;
        assert!(read_image(&damaged).is_err(), "a flipped byte at {position} of {} went unnoticed", image.len());
        // Opened on its structure alone, a damaged image is refused or searched within bounds:
        // whatever a flipped byte does to the rankings, it must not make a search panic.
        if let Ok((mut opened, _)) = read_image_checking(&damaged, BodyCheck::Structure) {
            for word in WORDS {
                opened.search_text(word, &everything, 10);
            }
            opened.search_vector(&[1.0, -1.0, 0.5, 0.0, 2.0, -2.0, 1.0, 0.0], MODEL, &everything, 10);
            upsert(&mut opened, 1, &history[1].1);
            opened.search_text(WORDS[0], &everything, 10);
        }
    }
    for length in [0, 7, 8, 63, 64, 100, image.len() / 2, image.len() - 1] {
        assert!(read_image(&image[..length]).is_err(), "an image cut to {length} bytes was read");
    }
    let mut longer = image.clone();
    longer.extend_from_slice(&[0; 64]);
    assert!(matches!(read_image(&longer), Err(ImageError::Truncated { .. })));
    let mut older = image.clone();
    older[8..12].copy_from_slice(&(FORMAT_VERSION - 1).to_le_bytes());
    assert!(matches!(read_image(&older), Err(ImageError::Version { .. })));
    assert!(matches!(read_image(b"SQLite format 3\0 and then some more bytes to pass the header length ......"), Err(ImageError::Magic)));
}

/// Random unit vectors of `dims` components: the hardest case for an approximate search, since
/// they have no structure a graph or a code could follow.
fn random_unit_vectors(seed: u64, dims: usize) -> impl FnMut() -> Vec<f32> {
    let mut rng = seed;
    move || {
        let raw: Vec<f32> = (0..dims)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let norm = raw.iter().map(|v| v * v).sum::<f32>().sqrt();
        raw.iter().map(|v| v / norm).collect()
    }
}

/// 7,000 records with random vectors, a third forgotten, one in ten in the namespace
/// "decisions", and then new vectors (some with new text) for every seventh of the first 5,000.
fn history_of_random_vectors() -> Vec<(i64, Record)> {
    let mut unit_vector = random_unit_vectors(0x9e37_79b9_7f4a_7c15, 96);
    let mut history = Vec::new();
    for key in 0..7000i64 {
        history.push((key, Record {
            id: format!("m{key:05}"),
            kind: MemoryKind::Semantic,
            status: if key % 3 == 0 { Status::Forgotten } else { Status::Active },
            namespace: if key % 10 == 0 { "decisions".into() } else { "learnings".into() },
            tags: Vec::new(),
            confidence: 0.9,
            occurred_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
            text: format!("memory {key}"),
            facets: Vec::new(),
            vector: Some(unit_vector()),
        }));
    }
    for key in (0..5000i64).step_by(7) {
        let mut record = history[key as usize].1.clone();
        record.vector = Some(unit_vector());
        if key % 2 == 0 {
            record.text = format!("memory {key} revised");
        }
        history.push((key, record));
    }
    history
}

/// An image of more than a few thousand vectors links them in a graph, which a search walks;
/// rows marked dead there are skipped, and rows added since are searched beside it. Together
/// they find nearly all of the exact ten nearest, and never a record the filter leaves out.
#[test]
fn vector_search_over_an_image_graph_and_added_rows_finds_the_exact_nearest() {
    let (index, records) = replay_through_image(&history_of_random_vectors(), 5000);
    let filter = SearchFilter::active();
    let (mut found, mut possible) = (0, 0);
    for probe in (0..7000).step_by(29) {
        let query = records[&probe].vector.clone().unwrap();
        let hits = index.search_vector(&query, MODEL, &filter, 10);
        let expected = reference_cosine(&records, &query, &filter);
        assert_eq!(hits.len(), 10, "probe {probe}");
        for hit in &hits {
            let (_, score) = expected.iter().find(|(id, _)| id == hit.id.as_str()).expect("a hit the filter admits");
            assert!((hit.score - score).abs() < 0.01, "probe {probe}: {} scored {} where it scores {score}", hit.id, hit.score);
        }
        possible += 10;
        found += expected[..10].iter().filter(|(id, _)| hits.iter().any(|hit| hit.id.as_str() == id)).count();
    }
    let recall = found as f64 / possible as f64;
    assert!(recall >= 0.97, "recall@10 {recall} against exact search");
}

/// A store sets every vector of a changed record again, whatever changed. While a bulk load
/// links the index's rows for its next file, the load marks older records superseded (their
/// confidence and metadata change, not their text or vector): such a record keeps its row, so
/// the graph linked meanwhile is still the index's and is written, and a record changed the
/// way a store changes it keeps its vector. A new vector, or a new text, still takes effect.
#[test]
fn linking_under_way_survives_records_changed_without_their_vectors() {
    let mut unit_vector = random_unit_vectors(0x51f1_5eed_0bad_cafe, 48);
    let history = records_of_vectors(0..6000, |_| Status::Active, &mut unit_vector);
    let (mut index, mut records) = replay(&history);
    let work = index.graph_work(GRAPH_ROWS_IN_TESTS);
    for key in (0..6000i64).step_by(97) {
        let record = records.get_mut(&key).unwrap();
        record.confidence = 0.4;
        record.tags = vec!["superseded".into()];
        index.upsert_document(key, &record.doc());
        index.set_vector(key, MODEL, record.vector.as_ref().unwrap());
    }
    let graphs = work.link(&std::sync::atomic::AtomicBool::new(false));
    let mut out = Cursor::new(Vec::new());
    index.write_image_with(b"store 9", &mut out, &graphs).unwrap();
    let (mut read, _) = read_image(&out.into_inner()).unwrap();
    assert_eq!(read.linked_vectors(MODEL), 6000, "the graph linked while records changed was written");
    assert_eq!(read.unlinked_vectors(GRAPH_ROWS_IN_TESTS), 0);

    let all = SearchFilter::active();
    let probe = records[&97].vector.clone().unwrap();
    assert_eq!(read.search_vector(&probe, MODEL, &all, 1)[0].id.as_str(), records[&97].id);

    let replaced = unit_vector();
    read.upsert_document(194, &records[&194].doc());
    read.set_vector(194, MODEL, &replaced);
    assert_eq!(read.search_vector(&replaced, MODEL, &all, 1)[0].id.as_str(), records[&194].id, "a new vector replaces the old one");
    assert_eq!(read.unlinked_vectors(0), 1);
    let mut revised = records[&291].clone();
    revised.text = "memory 291 revised".into();
    read.upsert_document(291, &revised.doc());
    assert!(read.search_vector(&probe, MODEL, &all, 7000).iter().all(|hit| hit.id.as_str() != revised.id), "a new text drops the vector");
}

/// A filter that admits few of the rows would leave a walk of the graph meeting few it keeps,
/// so such a search scans instead: with this few rows admitted, exactly.
#[test]
fn a_vector_search_whose_filter_admits_few_rows_is_exact_despite_the_graph() {
    let (index, records) = replay_through_image(&history_of_random_vectors(), 5000);
    let filter = SearchFilter { namespaces: vec![Namespace::parse("decisions").unwrap()], ..SearchFilter::active() };
    for probe in (0..7000).step_by(53) {
        let query = records[&probe].vector.clone().unwrap();
        let hits = index.search_vector(&query, MODEL, &filter, 10);
        let expected = reference_cosine(&records, &query, &filter);
        assert_eq!(hits.len(), 10, "probe {probe}");
        // The index ranks by 8-bit vectors, so nearly tied records may trade places.
        for (hit, (_, expected_score)) in hits.iter().zip(&expected) {
            let (_, score) = expected.iter().find(|(id, _)| id == hit.id.as_str()).expect("a hit the filter admits");
            assert!((score - expected_score).abs() < 0.01, "probe {probe}: {} scores {score} where the exact search has {expected_score}", hit.id);
        }
    }
}

#[test]
fn a_vector_from_an_unloaded_model_is_ignored_until_loaded() {
    let mut index = SearchIndex::new();
    let record = Record {
        id: "m1".into(),
        kind: MemoryKind::Semantic,
        status: Status::Active,
        namespace: "learnings".into(),
        tags: Vec::new(),
        confidence: 0.9,
        occurred_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        text: "pool size".into(),
        facets: Vec::new(),
        vector: Some(vec![1.0, 0.0]),
    };
    upsert(&mut index, 1, &record);
    assert!(index.search_vector(&[1.0, 0.0], MODEL, &SearchFilter::default(), 5).is_empty());
    index.add_model(MODEL);
    index.set_vector(1, MODEL, &[1.0, 0.0]);
    assert_eq!(index.search_vector(&[1.0, 0.0], MODEL, &SearchFilter::default(), 5)[0].id.as_str(), "m1");
}

/// Above a few thousand vectors the search preselects by binary codes; a stored vector used as
/// the query has distance zero to its own code, so it must still come first.
#[test]
fn two_step_vector_search_finds_a_stored_vector_first() {
    let mut index = SearchIndex::new();
    index.add_model(MODEL);
    let records = records_of_vectors(0..6000, |key| if key % 3 == 0 { Status::Forgotten } else { Status::Active }, random_unit_vectors(0x2545_f491_4f6c_dd1d, 96));
    for (key, record) in &records {
        upsert(&mut index, *key, record);
    }
    for key in (1..6000).step_by(97) {
        let query = records[key].1.vector.as_deref().unwrap();
        let hits = index.search_vector(query, MODEL, &SearchFilter::active(), 10);
        assert_eq!(hits.len(), 10);
        if key % 3 == 0 {
            assert!(hits.iter().all(|hit| hit.id.as_str() != format!("m{key:05}")), "forgotten m{key:05} was found");
        } else {
            assert_eq!(hits[0].id.as_str(), format!("m{key:05}"));
            assert!(hits[0].score > 0.99);
        }
    }
}

/// Unit vectors of 384 components that share a large common part (a length of 0.74 along a
/// few components, as the built-in model's vectors do) and differ in the rest.
fn vectors_with_a_common_part(seed: u64) -> impl FnMut() -> Vec<f32> {
    let mut own_part = random_unit_vectors(seed, 384);
    let mut common = [0f32; 384];
    common[..4].copy_from_slice(&[1.0, -0.8, 0.6, 0.5]);
    let common_norm = common.iter().map(|v| v * v).sum::<f32>().sqrt();
    move || {
        let vector: Vec<f32> = own_part().iter().zip(common).map(|(own, common)| 0.74 * common / common_norm + 0.67 * own).collect();
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        vector.iter().map(|v| v / norm).collect()
    }
}

/// A record in "learnings" under each of `keys`, with the status `status_of` gives it and the
/// next of `vectors`.
fn records_of_vectors(keys: std::ops::Range<i64>, status_of: impl Fn(i64) -> Status, mut vectors: impl FnMut() -> Vec<f32>) -> Vec<(i64, Record)> {
    keys.map(|key| {
        (key, Record {
            id: format!("m{key:05}"),
            kind: MemoryKind::Semantic,
            status: status_of(key),
            namespace: "learnings".into(),
            tags: Vec::new(),
            confidence: 0.9,
            occurred_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
            text: format!("memory {key}"),
            facets: Vec::new(),
            vector: Some(vectors()),
        })
    })
    .collect()
}

/// Vectors that share a large common part were quantised with most of their 8-bit steps spent
/// on it: here scores strayed from the exact cosine by up to 0.003 and 7% of the exact ten
/// nearest were missed, though every row is scored. The index quantises each vector's
/// difference from the mean of its first rows, whether written to an image or added since
/// (then 0.0004 and 1.5%).
#[test]
fn vectors_sharing_a_large_common_part_keep_their_exact_scores_and_order() {
    let mut next = vectors_with_a_common_part(0x51f1_5eed_0dd5_a1e5);
    let history = records_of_vectors(0..3000, |_| Status::Active, &mut next);
    let (index, records) = replay_through_image(&history, 2000);
    let filter = SearchFilter::active();
    let (mut found, mut possible, mut worst) = (0, 0, 0f64);
    for _ in 0..60 {
        let query = next();
        let hits = index.search_vector(&query, MODEL, &filter, 10);
        let expected = reference_cosine(&records, &query, &filter);
        for hit in &hits {
            let (_, score) = expected.iter().find(|(id, _)| id == hit.id.as_str()).expect("a stored record");
            worst = worst.max((hit.score - score).abs());
        }
        possible += 10;
        found += expected[..10].iter().filter(|(id, _)| hits.iter().any(|hit| hit.id.as_str() == id)).count();
    }
    assert!(worst < 0.0015, "a score strays {worst} from the exact cosine");
    let recall = found as f64 / possible as f64;
    assert!(recall >= 0.97, "recall@10 {recall} against exact search");
}

/// An image written while its index had fewer rows than fix a centre holds none; the index read
/// from it fixes one when rows added since bring it to that size, moving the image's rows into
/// memory as differences from it. Every row is still there under its own record, written again
/// to an image and read back, and each stored vector still finds its own record first.
#[test]
fn an_index_read_from_an_image_without_a_centre_takes_one_as_it_grows() {
    let mut next = vectors_with_a_common_part(0x0dd5_eed5_1f15_a1e5);
    let history = records_of_vectors(0..2500, |key| if key % 5 == 0 { Status::Forgotten } else { Status::Active }, &mut next);
    let (grown, records) = replay_through_image(&history, 400);
    let (index, _) = read_image(&image_of(&grown, b"store 8")).unwrap();
    assert_eq!(index.len(), records.len());
    let filter = SearchFilter::active();
    for (key, record) in records.iter().filter(|(key, record)| *key % 23 == 1 && record.status == Status::Active) {
        let query = record.vector.clone().unwrap();
        let hits = index.search_vector(&query, MODEL, &filter, 10);
        assert_eq!(hits[0].id.as_str(), record.id, "record {key}");
        for hit in &hits {
            let (_, score) = reference_cosine(&records, &query, &filter).into_iter().find(|(id, _)| id == hit.id.as_str()).expect("a stored record");
            assert!((hit.score - score).abs() < 0.005, "record {key}: {} scored {} where it scores {score}", hit.id, hit.score);
        }
    }
}

/// Unit vectors of 384 components whose first 256 carry nearly all the variance, as the
/// built-in model's do (its vectors are rotated onto their principal axes).
fn vectors_with_leading_variance(seed: u64) -> impl FnMut() -> Vec<f32> {
    let mut raw = random_unit_vectors(seed, 384);
    move || {
        let vector: Vec<f32> = raw().iter().enumerate().map(|(component, value)| if component < 256 { *value } else { 0.15 * value }).collect();
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        vector.iter().map(|v| v / norm).collect()
    }
}

/// Such vectors are shortlisted by codes of their first 256 components alone. A bit for each of
/// the other 128, whose signs say little about the angle between two vectors, made the Hamming
/// distance noisier: with them the search below found 0.67 of the exact ten nearest among random
/// vectors (no structure for a code to follow), and 0.89 without. In memory and after a trip
/// through an image (whose rows keep the codes they were written with, and rows added since get
/// codes as short), each stored vector also finds its own record first.
#[test]
fn codes_of_the_leading_components_still_shortlist_the_exact_nearest() {
    let mut next = vectors_with_leading_variance(0x00c0_de5e_1ec7_ed00);
    let history = records_of_vectors(0..9000, |key| if key % 11 == 0 { Status::Forgotten } else { Status::Active }, &mut next);
    let filter = SearchFilter::active();
    for (index, records) in [replay(&history), replay_through_image(&history, 6000)] {
        let (mut found, mut possible) = (0, 0);
        for _ in 0..40 {
            let query = next();
            let hits = index.search_vector(&query, MODEL, &filter, 10);
            let expected = reference_cosine(&records, &query, &filter);
            possible += 10;
            found += expected[..10].iter().filter(|(id, _)| hits.iter().any(|hit| hit.id.as_str() == id)).count();
        }
        let recall = found as f64 / possible as f64;
        assert!(recall >= 0.85, "recall@10 {recall} against exact search");
        for (key, record) in records.iter().filter(|(key, record)| *key % 97 == 1 && record.status == Status::Active) {
            let hits = index.search_vector(record.vector.as_ref().unwrap(), MODEL, &filter, 1);
            assert_eq!(hits[0].id.as_str(), record.id, "record {key}");
        }
    }
}
