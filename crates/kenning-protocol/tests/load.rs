//! Loading protocols: the shipped library, folders that replace shipped protocols, and one
//! malformed protocol per kind of mistake, each refused with its file, line and field.

use kenning_protocol::{Library, LoadError, load};

fn refused(text: &str) -> LoadError {
    load::parse("bad.yaml", text).expect_err("the protocol was accepted")
}

const ASK: &str = "    type: ask\n    question: Why?\n    expects: {type: string}\n";

#[test]
fn the_shipped_protocols_load_without_problems() {
    let library = Library::shipped();
    assert!(library.problems.is_empty(), "{:?}", library.problems);
    let names: Vec<&str> = library.names().collect();
    assert_eq!(
        names,
        ["add_health_coverage", "add_implementation", "add_invariant", "add_objectives", "capture_decision", "explore_space", "investigate", "record_work", "resolve_blocker"]
    );
    for loaded in library.protocols() {
        assert!(loaded.skill.as_deref().is_some_and(|skill| skill.starts_with("# ")), "{} has no skill", loaded.protocol.name);
    }
}

#[test]
fn yaml_errors_name_the_line() {
    let error = refused("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n   question: [unclosed\n");
    assert_eq!((error.file.as_str(), error.field.as_str()), ("bad.yaml", "yaml"));
    assert!(error.line >= 5, "{error}");
}

#[test]
fn unknown_and_missing_fields_are_refused() {
    let error = refused(&format!("name: x\ndescription: d\nsteps:\n  - id: a\n{ASK}    colour: red\n"));
    assert!(error.problem.contains("colour"), "{error}");
    assert_eq!(error.line, 8, "{error}");
    let error = refused("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    expects: {type: string}\n");
    assert_eq!((error.field.as_str(), error.line), ("steps[0].question", 4), "{error}");
    let error = refused("name: x\nsteps: []\n");
    assert!(error.problem.contains("description"), "{error}");
}

#[test]
fn bad_values_are_refused_with_field_and_line() {
    let cases: &[(&str, &str, &str)] = &[
        ("name: Bad Name\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    question: q\n    expects: {type: string}\n", "name", "not a protocol name"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: asks\n", "steps[0].type", "did you mean `ask`"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    question: q\n    expects: {type: text}\n", "steps[0].expects.type", "not an answer type"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    question: q\n    expects: {type: enum}\n", "steps[0].expects.options", "needs its options"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    question: q\n    expects: {type: string, pattern: \"(\"}\n", "steps[0].expects.pattern", "regular expression"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    question: \"{q | shout}\"\n    expects: {type: string}\n", "steps[0].question", "not a filter"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    question: q\n    expects: {type: string}\n    next: b\n", "steps[0].next", "not a step"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: branch\n    if: {var: a, equals: x, present: true}\n    then: end\n", "steps[0].if", "exactly one test"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: branch\n    then: end\n", "steps[0].if", "either"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: create\n", "steps[0].memories", "is missing"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: query\n    query: {recall: r, graph: g}\n", "steps[0].query", "exactly one"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: query\n    query: {graph: g, depth: 9}\n", "steps[0].query.depth", "1 to 3"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: create\n    memories:\n      - {namespace: n, title: t, content: c, links: [{to: \"@later\"}]}\n", "steps[0].memories[0].links[0].to", "@later"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: update\n    memory: \"{m}\"\n", "steps[0].reason", "is missing"),
        ("name: x\ndescription: d\nsteps:\n  - id: a\n    type: ask\n    question: q\n    expects: {type: string}\n  - id: a\n    type: ask\n    question: q\n    expects: {type: string}\n", "steps[1].id", "repeats"),
    ];
    for (text, field, problem) in cases {
        let error = refused(text);
        assert_eq!(error.field, *field, "{error}");
        assert!(error.problem.contains(problem) || error.suggestion.contains(problem), "{field}: {error}");
        assert!(error.line >= 1, "{error}");
    }
}

#[test]
fn a_protocol_that_loops_is_refused() {
    let text = format!("name: x\ndescription: d\nsteps:\n  - id: a\n{ASK}  - id: b\n{ASK}    next: a\n");
    let error = refused(&text);
    assert!(error.problem.contains("a -> b -> a"), "{error}");
    assert_eq!(error.line, 4, "{error}");
    let branch = format!("name: x\ndescription: d\nsteps:\n  - id: a\n{ASK}  - id: b\n    type: branch\n    on: a\n    cases: {{again: a}}\n");
    assert!(refused(&branch).problem.contains("loop"));
}

#[test]
fn folders_replace_shipped_protocols_and_report_broken_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("record_work.yaml"),
        format!("name: record_work\ndescription: The team's own work log.\nskill: team\nsteps:\n  - id: what\n{ASK}"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("skills")).unwrap();
    std::fs::write(dir.path().join("skills/team.md"), "# Our way\n").unwrap();
    std::fs::write(dir.path().join("broken.yaml"), "name: broken\ndescription: d\nsteps:\n  - id: a\n    type: nope\n").unwrap();
    std::fs::write(
        dir.path().join("calls_missing.yaml"),
        "name: calls_missing\ndescription: d\nsteps:\n  - id: a\n    type: call_protocol\n    protocol: nowhere\n",
    )
    .unwrap();
    let mut library = Library::shipped();
    library.load_dir(dir.path());
    let replaced = library.get("record_work").unwrap();
    assert_eq!(replaced.protocol.description, "The team's own work log.");
    assert_eq!(replaced.skill.as_deref(), Some("# Our way\n"));
    assert!(library.get("broken").is_none() && library.get("calls_missing").is_none());
    let broken = library.problems.iter().find(|problem| problem.file.ends_with("broken.yaml")).unwrap();
    assert_eq!((broken.line, broken.field.as_str()), (4, "steps[0].type"));
    let missing = library.problems.iter().find(|problem| problem.file.ends_with("calls_missing.yaml")).unwrap();
    assert!(missing.problem.contains("`nowhere`"), "{missing}");

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("skilled.yaml"), format!("name: skilled\ndescription: d\nskill: absent\nsteps:\n  - id: a\n{ASK}")).unwrap();
    library.load_dir(other.path());
    assert!(library.get("skilled").is_none());
    let absent = library.problems.iter().find(|problem| problem.file.ends_with("skilled.yaml")).unwrap();
    assert_eq!(absent.field, "skill");
    assert!(absent.problem.contains("`absent`"), "{absent}");
}

#[test]
fn protocols_that_call_each_other_without_end_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let call = |name: &str, callee: &str| format!("name: {name}\ndescription: d\nsteps:\n  - id: a\n    type: call_protocol\n    protocol: {callee}\n");
    std::fs::write(dir.path().join("ping.yaml"), call("ping", "pong")).unwrap();
    std::fs::write(dir.path().join("pong.yaml"), call("pong", "ping")).unwrap();
    std::fs::write(dir.path().join("me.yaml"), call("me", "me")).unwrap();
    std::fs::write(
        dir.path().join("needs.yaml"),
        "name: needs\ndescription: d\nsteps:\n  - id: a\n    type: call_protocol\n    protocol: takes\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("takes.yaml"), format!("name: takes\ndescription: d\ninputs: [topic]\nsteps:\n  - id: a\n{ASK}")).unwrap();
    let mut library = Library::shipped();
    library.load_dir(dir.path());
    assert!(library.get("me").is_none());
    assert!(library.get("ping").is_none() || library.get("pong").is_none(), "one of a calling pair is refused");
    assert!(library.problems.iter().any(|problem| problem.problem.contains("without end")), "{:?}", library.problems);
    assert!(library.get("needs").is_none());
    assert!(library.problems.iter().any(|problem| problem.problem.contains("leaves out `topic`")), "{:?}", library.problems);
    assert!(library.get("takes").is_some());
}

/// A repository's protocol folder could hold links to any file of the machine: a skill linked to
/// a private key would be shown to the agent. Files that lead out of the folder are not read.
#[test]
fn files_that_lead_out_of_the_folder_are_not_read() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    std::fs::write(outside.path().join("theirs.yaml"), format!("name: theirs\ndescription: d\nskill: key\nsteps:\n  - id: a\n{ASK}")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("skills")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("id_rsa"), dir.path().join("skills/key.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("theirs.yaml"), dir.path().join("theirs.yaml")).unwrap();
    std::fs::write(dir.path().join("ours.yaml"), format!("name: ours\ndescription: d\nskill: key\nsteps:\n  - id: a\n{ASK}")).unwrap();
    let mut library = Library::shipped();
    library.load_dir(dir.path());
    assert!(library.get("theirs").is_none());
    let refused = library.problems.iter().find(|problem| problem.file.ends_with("theirs.yaml")).unwrap();
    assert!(refused.problem.contains("symbolic link"), "{refused}");
    assert!(library.get("ours").is_none(), "the skill linked out of the folder was loaded");
}
