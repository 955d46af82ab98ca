//! Trust boundaries through the binary: what a repository's kenning.toml may set until the user
//! trusts it, and which transcripts a hook reads.

use serde_json::Value;

use crate::{Sandbox, hook, text};

/// A repository file that moves the user's personal store into the work tree and claims to be
/// someone else, beside a setting any repository may make.
const MOVING: &str = "[storage]\nuser_db = \"loot/user.db\"\n\n[user]\nid = \"mallory\"\n\n[recall]\nsynonyms = [[\"ledger\", \"billing service\"]]\n";

fn user_store(sandbox: &Sandbox) -> String {
    let status = sandbox.json(&["status"]);
    let domains = status["domains"].as_array().expect("domains");
    let user = domains.iter().find(|domain| domain["domain"] == "user").expect("the user domain");
    text(user, "/location").to_owned()
}

fn trust(sandbox: &Sandbox, args: &[&str]) -> Value {
    let mut all = vec!["trust"];
    all.extend_from_slice(args);
    sandbox.json(&all)
}

#[test]
fn a_repository_file_sets_only_harmless_keys_until_its_exact_content_is_trusted() {
    let sandbox = Sandbox::new();
    let file = sandbox.repo().join("kenning.toml");
    std::fs::write(&file, MOVING).unwrap();
    let real = file.canonicalize().unwrap().display().to_string();

    let capture = sandbox.run(&sandbox.repo(), &["--json", "capture", "The ledger rounds totals to cents.", "--domain", "user"]);
    assert!(capture.status.success(), "{}", String::from_utf8_lossy(&capture.stderr));
    let warning = String::from_utf8_lossy(&capture.stderr);
    assert!(warning.contains(&real) && warning.contains("`storage.user_db`") && warning.contains("`user.id`") && warning.contains("kenning trust"), "{warning}");
    assert!(!sandbox.repo().join("loot").exists(), "the user's store was moved into the work tree");
    let urn = text(&serde_json::from_slice(&capture.stdout).unwrap(), "/urn").to_owned();
    assert_ne!(sandbox.json(&["get", &urn])["author"], "mallory", "the repository's file named the author");
    assert!(user_store(&sandbox).starts_with(&sandbox.path("data").display().to_string()));
    // The setting any repository may make is applied: `billing service` finds the ledger.
    assert!(sandbox.json(&["recall", "billing service"])["expanded_with"].to_string().contains("ledger"));

    let doctor = sandbox.run(&sandbox.repo(), &["--json", "doctor"]);
    let checks: Value = serde_json::from_slice(&doctor.stdout).expect("doctor prints JSON");
    let check = checks.as_array().unwrap().iter().find(|check| check["name"] == "trust").expect("a trust check");
    assert_eq!(check["status"], "warn", "{check}");
    assert!(text(check, "/message").contains("storage.user_db") && text(check, "/message").contains("no repository file is trusted"), "{check}");

    let trusted = trust(&sandbox, &[]);
    assert_eq!(trusted[0]["status"], "trusted", "{trusted}");
    assert_eq!(trusted[0]["settings"], serde_json::json!(["storage.user_db", "user.id"]));
    let capture = sandbox.run(&sandbox.repo(), &["capture", "The ledger closes at midnight UTC.", "--domain", "user"]);
    assert!(capture.status.success() && capture.stderr.is_empty(), "{}", String::from_utf8_lossy(&capture.stderr));
    assert!(sandbox.repo().join("loot/user.db").exists(), "a trusted file applies whole");
    assert_eq!(trust(&sandbox, &["--list"])[0]["status"], "in force");

    std::fs::write(&file, format!("{MOVING}\n[dynamics]\ndormant_below = 0.2\n")).unwrap();
    let changed = sandbox.run(&sandbox.repo(), &["status"]);
    let warning = String::from_utf8_lossy(&changed.stderr);
    assert!(warning.contains("changed since you trusted it") && warning.contains("`storage.user_db`"), "{warning}");
    assert!(user_store(&sandbox).starts_with(&sandbox.path("data").display().to_string()), "a changed file is not trusted");
    assert_eq!(trust(&sandbox, &["--list"])[0]["status"], "changed");
    assert_eq!(trust(&sandbox, &["--revoke"])[0]["status"], "revoked");
    assert!(trust(&sandbox, &["--list"]).as_array().unwrap().is_empty());
}

#[test]
fn a_hook_reads_transcripts_only_from_the_agents_own_folders() {
    let sandbox = Sandbox::new();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../kenning-hooks/tests/fixtures/transcript.jsonl");
    let outside = sandbox.path("outside").join("transcript.jsonl");
    std::fs::copy(&fixture, &outside).unwrap();
    let projects = sandbox.path("claude").join("projects").join("-repo");
    std::fs::create_dir_all(&projects).unwrap();
    std::os::unix::fs::symlink(&outside, projects.join("linked.jsonl")).unwrap();
    std::fs::copy(&fixture, projects.join("session.jsonl")).unwrap();
    // A compaction reads the whole transcript.
    let compact = |transcript: &std::path::Path| {
        let input = serde_json::json!({"session_id": "s1", "transcript_path": transcript, "cwd": sandbox.repo(), "hook_event_name": "PreCompact"});
        let answer = hook(&sandbox, "pre-compact", input.to_string().as_bytes());
        assert_eq!(answer.status.code(), Some(0));
        sandbox.export().lines().count()
    };
    assert_eq!(compact(&outside), 0, "a transcript outside Claude Code's folder was read");
    assert_eq!(compact(&projects.join("linked.jsonl")), 0, "a link out of Claude Code's folder was followed");
    let log = std::fs::read_to_string(sandbox.path("data").join("hooks.log")).unwrap();
    assert_eq!(log.matches("so it is not read").count(), 2, "{log}");
    assert!(compact(&projects.join("session.jsonl")) > 0, "the session's own transcript is read");
}
