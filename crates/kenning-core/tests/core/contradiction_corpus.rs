use kenning_core::contradiction::{ContradictionKind, detect};

#[derive(serde::Deserialize)]
struct Corpus {
    conflicts: Vec<Conflict>,
    near_misses: Vec<NearMiss>,
}

#[derive(serde::Deserialize)]
struct Conflict {
    older: String,
    newer: String,
    kind: String,
}

#[derive(serde::Deserialize)]
struct NearMiss {
    older: String,
    newer: String,
    why: String,
}

fn corpus() -> Corpus {
    serde_json::from_str(include_str!("../fixtures/contradictions.json")).unwrap()
}

#[test]
fn every_true_conflict_is_found_with_its_kind_and_evidence() {
    let corpus = corpus();
    assert!(corpus.conflicts.len() >= 20);
    let mut missed = Vec::new();
    for case in &corpus.conflicts {
        let expected = ContradictionKind::parse(&case.kind).unwrap();
        match detect(&case.older, &case.newer, None) {
            Some(found) if found.kind == expected => {
                assert!(!(found.older.is_empty() && found.newer.is_empty()), "no evidence for {:?}", case.newer);
            }
            other => missed.push(format!("{:?} / {:?}: expected {expected}, got {:?}", case.older, case.newer, other.map(|found| found.kind))),
        }
    }
    assert!(missed.is_empty(), "missed:\n{}", missed.join("\n"));
}

#[test]
fn no_near_miss_is_reported() {
    let corpus = corpus();
    assert!(corpus.near_misses.len() >= 25);
    let reported: Vec<String> = corpus
        .near_misses
        .iter()
        .filter_map(|case| {
            // Either order: a near-miss conflicts in neither direction.
            let found = detect(&case.older, &case.newer, None).or_else(|| detect(&case.newer, &case.older, None))?;
            Some(format!("{:?} / {:?} ({}): {found:?}", case.older, case.newer, case.why))
        })
        .collect();
    assert!(reported.is_empty(), "false conflicts:\n{}", reported.join("\n"));
}
