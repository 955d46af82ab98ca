//! The benchmark binary run as a user runs it, on small hand-made data sets.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const TURNS: &str = r#"{"id": "a:D1:1", "conv": "a", "session": 1, "date_time": "1:56 pm on 8 May, 2023", "speaker": "Alice", "text": "I adopted a greyhound named Biscuit last week."}
{"id": "a:D1:2", "conv": "a", "session": 1, "date_time": "1:56 pm on 8 May, 2023", "speaker": "Bob", "text": "That's lovely! I started learning the cello."}
{"id": "a:D1:3", "conv": "a", "session": 1, "date_time": "1:56 pm on 8 May, 2023", "speaker": "Alice", "text": "My sister lives in Lisbon and works as a nurse."}
{"id": "b:S1:1", "conv": "b", "session": 1, "date_time": "9:05 am on 2 January, 2024", "speaker": "Carol", "text": "I'm training for the Berlin marathon in September."}
{"id": "a:D2:1", "conv": "a", "session": 2, "date_time": "10:30 am on 20 June, 2023", "speaker": "Bob", "text": "My cello teacher says I should practise scales daily."}
{"id": "a:D2:2", "conv": "a", "session": 2, "date_time": "10:30 am on 20 June, 2023", "speaker": "Alice", "text": "Biscuit loves running on the beach at sunset."}

{"id": "b:S2:1", "conv": "b", "session": 2, "date_time": "4:40 pm on 15 March, 2024", "speaker": "Dan", "text": "I just bought a vintage typewriter at the flea market."}
"#;

const QUERIES: &str = r#"{"qid": "a:q1", "conv": "a", "category": 4, "question": "Which greyhound did Alice adopt?", "answer": "Biscuit", "evidence": ["a:D1:1"]}
{"qid": "a:q2", "conv": "a", "category": 2, "question": "When did Bob start learning the cello?", "answer": 2023, "evidence": ["a:D1:2"]}
{"qid": "b:q1", "conv": "b", "category": 4, "question": "Which marathon is Carol training for?", "answer": "Berlin", "evidence": ["b:S1:1"]}
{"qid": "a:q3", "conv": "a", "category": 1, "question": "Where does Alice's sister work, and what does Biscuit love?", "evidence": ["a:D1:3", "a:D2:2"]}
{"qid": "a:q4", "conv": "a", "category": 5, "question": "What did Bob say about the cello of Biscuit?", "adversarial": true, "evidence": ["a:D1:1"]}
{"qid": "b:q2", "conv": "b", "category": 3, "question": "Would Carol enjoy hiking?", "evidence": []}
{"qid": "b:q3", "conv": "b", "category": 2, "question": "What did Dan buy at the flea market?", "evidence": ["b:S2:1"]}
"#;

fn bench(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kenning-bench"))
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .output()
        .expect("kenning-bench runs")
}

#[test]
fn retrieval_ranks_each_conversation_in_its_own_store_and_scores_as_the_readme_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.jsonl"), TURNS).unwrap();
    std::fs::write(dir.path().join("queries.jsonl"), QUERIES).unwrap();
    let output = bench(
        &[
            "retrieval", "--turns", "turns.jsonl", "--queries", "queries.jsonl", "--embedder", "none",
            "--rankings-out", "rankings.jsonl", "--json-out", "metrics.json",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");

    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "the metrics are one JSON line: {stdout}");
    assert_eq!(std::fs::read_to_string(dir.path().join("metrics.json")).unwrap(), stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let counts = ["conversations", "turns", "questions", "scored", "skipped", "skipped_category", "skipped_no_evidence"]
        .map(|key| report[key].as_u64().unwrap());
    assert_eq!(counts, [2, 7, 7, 5, 2, 1, 1]);
    assert_eq!(report["duplicate_turns"], 0);
    // Four questions have one evidence turn each, found first; the multi-hop question needs two
    // turns, so it cannot be complete at rank 1. Every conversation is smaller than ten turns.
    let metrics = &report["metrics"];
    assert_eq!(metrics["recall_all@1"], 0.8);
    assert_eq!(metrics["recall_all@10"], 1.0);
    assert_eq!(metrics["frac@20"], 1.0);
    assert_eq!(metrics["session_recall_all@5"], 1.0);
    assert_eq!(
        report["by_category"],
        serde_json::json!({
            "1": {"questions": 1, "recall_all@10": 1.0},
            "2": {"questions": 2, "recall_all@10": 1.0},
            "4": {"questions": 2, "recall_all@10": 1.0},
        })
    );
    assert!(stderr.contains("recall_all") && stderr.contains("scored 5"), "{stderr}");

    let rankings: Vec<Value> = std::fs::read_to_string(dir.path().join("rankings.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let qids: Vec<&str> = rankings.iter().map(|ranking| ranking["qid"].as_str().unwrap()).collect();
    assert_eq!(qids, ["a:q1", "a:q2", "b:q1", "a:q3", "a:q4", "b:q2", "b:q3"], "every question, in file order");
    for ranking in &rankings {
        let conversation = &ranking["qid"].as_str().unwrap()[..2];
        let ranked: Vec<&str> = ranking["ranked"].as_array().unwrap().iter().map(|id| id.as_str().unwrap()).collect();
        assert!(ranked.iter().all(|id| id.starts_with(conversation)), "another conversation's turn in {ranking}");
    }
    let first = |qid: &str| rankings.iter().find(|ranking| ranking["qid"] == qid).unwrap()["ranked"][0].clone();
    assert_eq!([first("a:q1"), first("a:q2"), first("b:q1"), first("b:q3")], ["a:D1:1", "a:D1:2", "b:S1:1", "b:S2:1"]);
}

#[test]
fn retrieval_names_the_file_line_and_field_of_a_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.jsonl"), TURNS.replace("10:30 am on 20 June, 2023", "June 20th")).unwrap();
    std::fs::write(dir.path().join("queries.jsonl"), QUERIES).unwrap();
    let output = bench(
        &["retrieval", "--turns", "turns.jsonl", "--queries", "queries.jsonl", "--rankings-out", "rankings.jsonl"],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("turns.jsonl line 5, field `date_time`: cannot read `June 20th`"), "{stderr}");
    assert!(!dir.path().join("rankings.jsonl").exists(), "no rankings are written for bad input");
}

#[test]
fn latency_loads_single_and_bulk_then_recalls() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(
        &[
            "latency", "--memories", "60", "--single-captures", "10", "--bulk-batch", "25", "--queries", "5", "--skip-mcp",
            "--durability", "process-crash", "--idle-queries", "3", "--idle-ms", "1", "--json-out", "latency.json",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report, serde_json::from_str::<Value>(&std::fs::read_to_string(dir.path().join("latency.json")).unwrap()).unwrap());
    assert_eq!((report["memories"].as_u64(), report["corpus"]["duplicates"].as_u64()), (Some(60), Some(0)));
    assert_eq!(report["durability"], "process-crash");
    let single = &report["single_capture"];
    assert_eq!((single["method"].as_str(), single["memories"].as_u64()), (Some("capture"), Some(10)));
    let bulk = &report["bulk_capture"];
    assert_eq!((bulk["method"].as_str(), bulk["memories"].as_u64()), (Some("capture_many"), Some(50)));
    assert_eq!(bulk["call_latency"]["samples"], 2, "50 memories in batches of 25");
    assert_eq!(report["recall"]["latency"]["samples"], 5);
    assert_eq!((report["recall_after_idle"]["latency"]["samples"].as_u64(), report["idle_ms"].as_u64()), (Some(3), Some(1)));
    assert!(report["recall_after_idle"]["mean_results"].as_f64().unwrap() > 0.0, "{report}");
    let index = &report["index"];
    assert!(index["file_bytes"].as_u64().unwrap() > 0, "the index file was written: {index}");
    assert_eq!(index["recall"]["latency"]["samples"], 5);
    assert_eq!(index["recall"]["mean_results"], report["recall"]["mean_results"], "the index from the file finds as much");
    assert!(index["recall_p50_ratio"].as_f64().unwrap() > 0.0);
    assert_eq!(report["mcp"], Value::Null);
    assert_eq!(report["vector_search"], Value::Null, "no embedder, no vector leg");
    assert!(report["store_bytes"].as_u64().unwrap() > 0);
    assert!(stderr.contains("recall in process") && stderr.contains("after 1 ms idle"), "{stderr}");
}

#[test]
fn latency_with_an_embedder_checks_the_vector_leg_against_exact_search() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(
        &["latency", "--memories", "300", "--single-captures", "0", "--queries", "20", "--idle-queries", "0", "--skip-mcp", "--embedder", "builtin"],
        dir.path(),
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["recall_after_idle"], Value::Null, "--idle-queries 0 skips the idle recalls");
    let vector = &report["vector_search"];
    assert_eq!(vector["queries"], 20);
    // A small store is searched exactly, over 8-bit vectors: only near-ties may swap places.
    assert!(vector["recall_at_10"].as_f64().unwrap() >= 0.9, "{vector}");
    assert!(vector["worst_shortfall"].as_f64().unwrap() < 0.02, "{vector}");
}

#[test]
fn vectors_compares_the_scan_with_the_graph_walk_against_exact_search() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(&["vectors", "--rows", "6000", "--queries", "30", "--graph-rows", "4096", "--embedder", "builtin"], dir.path());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["linked_vectors"], 6000, "{report}");
    for search in ["scan", "graph"] {
        let figures = &report[search];
        assert_eq!(figures["latency"]["samples"], report["queries"], "{report}");
        assert!(figures["recall_at_10"].as_f64().unwrap() >= 0.9, "{search}: {figures}");
    }
}

#[test]
fn latency_refuses_a_missing_kenning_binary_before_loading() {
    let dir = tempfile::tempdir().unwrap();
    let output = bench(&["latency", "--memories", "10", "--kenning-bin", "no/such/kenning"], dir.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("no/such/kenning does not exist: build it with `cargo build --release -p kenning`"), "{stderr}");
}
