//! No write path stores a secret, in any field: each test writes a different secret into each
//! field a path takes, most beside a canary word, then reads the bytes of every file of the
//! stores. Every canary must be there (the search sees what was stored) and no secret may be.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use chrono::Utc;
use kenning_core::decision::{CaptureDecision, DecisionStore, ModuleList, OutcomeInput, SignalInput, UpdateDecision};
use kenning_core::input::build_memory;
use kenning_core::workflow::{CreateWorkflow, StepInput, StepUpdate};
use kenning_core::{CaptureInput, Domain, LinkInput, MemoryId, MemoryStore, UpdateInput};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, ExportLine, MemoryService, WorkflowService};
use kenning_sqlite::SqliteStore;

/// The secrets planted so far, each with the field it went into.
#[derive(Default)]
struct Plants {
    planted: Vec<Plant>,
}

struct Plant {
    field: String,
    secret: String,
    /// A word written beside the secret, which must be stored.
    canary: Option<String>,
}

impl Plants {
    /// A sentence for `field`: a canary word and a fresh secret in one of seven shapes.
    fn sentence(&mut self, field: &str) -> String {
        let n = self.planted.len();
        let (secret, text) = secret_shape(n, 7);
        let canary = format!("canary{n}x");
        let sentence = format!("{canary} deploys with {text}");
        self.planted.push(Plant { field: field.to_owned(), secret, canary: Some(canary) });
        sentence
    }

    /// A bare secret, with no space, for tags, keys, ids and paths.
    fn bare(&mut self, field: &str) -> String {
        let n = self.planted.len();
        let (secret, text) = secret_shape(n, 5);
        self.planted.push(Plant { field: field.to_owned(), secret, canary: None });
        text
    }

    /// Reads every file under `dir`: no secret may be there, whatever the case (tags are
    /// stored in lower case), and every canary must.
    fn assert_none_stored(&self, dir: &Path) {
        let bytes = all_bytes(dir).to_ascii_lowercase();
        let found = |needle: &str| {
            let needle = needle.to_ascii_lowercase();
            bytes.windows(needle.len()).any(|window| window == needle.as_bytes())
        };
        let leaked: Vec<String> =
            self.planted.iter().filter(|plant| found(&plant.secret)).map(|plant| format!("{}: {}", plant.field, plant.secret)).collect();
        assert!(leaked.is_empty(), "secrets stored: {leaked:#?}");
        let unseen: Vec<&str> = self
            .planted
            .iter()
            .filter(|plant| plant.canary.as_deref().is_some_and(|canary| !found(canary)))
            .map(|plant| plant.field.as_str())
            .collect();
        assert!(unseen.is_empty(), "the search did not see these fields: {unseen:?}");
    }
}

/// Secret number `n` in one of the first `shapes` shapes: what must not be stored, and the
/// text that holds it.
fn secret_shape(n: usize, shapes: usize) -> (String, String) {
    let mut rng = fastrand::Rng::with_seed(n as u64 + 1);
    let random: String = (0..36).map(|_| rng.alphanumeric()).collect();
    let hex: String = (0..32).map(|_| char::from_digit(rng.u32(0..16), 16).unwrap()).collect();
    let whole = |secret: String| (secret.clone(), secret);
    match n % shapes {
        0 => whole(format!("ghp_{random}")),
        1 => whole(format!("glrt-{}", &random[..20])),
        2 => whole(format!("AKIA{}", random[..16].to_ascii_uppercase())),
        3 => whole(format!("whsec_{}", &random[..32])),
        4 => whole(format!("shpat_{hex}")),
        5 => (format!("Pw{}", &random[..14]), format!("DB_PASSWORD=Pw{}", &random[..14])),
        _ => (format!("Pw{}", &random[..12]), format!("https://deploy:Pw{}@git.example.org/app.git", &random[..12])),
    }
}

fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            bytes.extend(all_bytes(&path));
        } else {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    bytes
}

fn sqlite(dir: &Path, name: &str) -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open(&dir.join(name)).unwrap())
}

fn memory_service(dir: &Path) -> MemoryService {
    MemoryService::new(
        vec![
            DomainStore { domain: Domain::Project("my-app".into()), store: sqlite(dir, "project.db") },
            DomainStore { domain: Domain::User, store: sqlite(dir, "user.db") },
        ],
        None,
    )
}

#[test]
fn captures_updates_forgets_and_restores_store_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let memory = memory_service(dir.path());
    let mut plants = Plants::default();
    let target = memory.capture(CaptureInput { content: "The link target".into(), ..CaptureInput::default() }, None).unwrap().urn;
    let file = format!("src/{}.rs", plants.bare("metadata.file"));
    let metadata: BTreeMap<String, String> = [
        (plants.bare("metadata key"), "canarykeyx".to_owned()),
        ("session_id".to_owned(), plants.bare("metadata.session_id")),
        ("file".to_owned(), file),
        ("note".to_owned(), plants.sentence("metadata.note")),
    ]
    .into();
    let input = CaptureInput {
        title: Some(plants.sentence("title")),
        content: plants.sentence("content"),
        tags: vec![plants.bare("tags[0]"), "canarytagx".into()],
        category: Some(plants.bare("category")),
        links: vec![LinkInput { target, relation: Some(plants.bare("links[0].relation")) }],
        metadata,
        ..CaptureInput::default()
    };
    let captured = memory.capture(input, None).unwrap();
    assert!(captured.redacted.len() >= 9, "{:?}", captured.redacted);

    let update = UpdateInput {
        reason: plants.sentence("update reason"),
        title: Some(plants.sentence("updated title")),
        content: Some(plants.sentence("updated content")),
        tags: Some(vec![plants.bare("updated tags[0]")]),
        category: Some(plants.bare("updated category")),
        metadata: Some([(plants.bare("updated metadata key"), plants.sentence("updated metadata value"))].into()),
        ..UpdateInput::default()
    };
    let updated = memory.update(&captured.urn, update).unwrap();
    assert!(updated.warnings.iter().any(|warning| warning.contains("[REDACTED:kind]")), "{:?}", updated.warnings);
    let forgotten = memory.forget(&captured.urn, &plants.sentence("forget reason")).unwrap();
    assert_eq!(forgotten.redacted.iter().map(|found| found.field.as_str()).collect::<Vec<_>>(), ["reason"]);
    memory.restore(&captured.urn, &plants.sentence("restore reason")).unwrap();
    drop(memory);
    plants.assert_none_stored(dir.path());
}

#[test]
fn decisions_their_links_signals_and_outcomes_store_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path(), "user.db");
    let memory = Arc::new(MemoryService::new(vec![DomainStore { domain: Domain::User, store: store.clone() as Arc<dyn MemoryStore> }], None));
    let decisions = DecisionService::new(
        memory,
        vec![DecisionDomain { domain: Domain::User, store: store as Arc<dyn DecisionStore> }],
        ModuleList::default(),
    );
    let mut plants = Plants::default();
    let input = CaptureDecision {
        statement: plants.sentence("statement"),
        rationale: Some(plants.sentence("rationale")),
        assumptions: vec![plants.sentence("assumptions[0]")],
        alternatives: Some(vec![plants.sentence("alternatives[0]")]),
        confidence: Some(0.7),
        module: Some("infra".into()),
        session_id: Some(plants.bare("session_id")),
        file_path: Some(format!("deploy/{}.yml", plants.bare("file_path"))),
        related_files: vec![format!("ci/{}.sh", plants.bare("related_files[0]"))],
        ..CaptureDecision::default()
    };
    let captured = decisions.capture(input, None).unwrap();
    let token = plants.bare("linked_pr");
    let update = UpdateDecision {
        notes: Some(plants.sentence("notes")),
        linked_pr: Some(format!("https://x-access-token:{token}@github.com/acme/app/pull/42")),
        ..UpdateDecision::default()
    };
    let updated = decisions.update(&captured.decision_id, update).unwrap();
    assert!(updated.redacted.iter().any(|found| found.field == "linked_pr"), "{:?}", updated.redacted);
    let signal = SignalInput {
        signal_type: "ci_failed".into(),
        valence: "negative".into(),
        description: Some(plants.sentence("signal description")),
        metrics: [(plants.bare("metrics key"), serde_json::json!({"log": [plants.sentence("metrics value")]}))].into(),
    };
    decisions.record_signal(&captured.decision_id, signal).unwrap();
    let outcome = OutcomeInput {
        final_status: "failure".into(),
        lessons_learned: vec![plants.sentence("lessons_learned[0]")],
        signals: [("incident".to_owned(), serde_json::json!(plants.sentence("outcome signal")))].into(),
        ..OutcomeInput::default()
    };
    decisions.record_outcome(&captured.decision_id, outcome).unwrap();
    drop(decisions);
    plants.assert_none_stored(dir.path());
}

#[test]
fn workflows_store_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let workflows = WorkflowService::new(Arc::new(memory_service(dir.path())));
    let mut plants = Plants::default();
    let step = |id: &str, plants: &mut Plants| StepInput {
        id: id.into(),
        description: plants.sentence(&format!("step {id} description")),
        dependencies: Vec::new(),
        verification: Some(plants.sentence(&format!("step {id} verification"))),
    };
    let create = CreateWorkflow {
        name: plants.sentence("name"),
        goal: plants.sentence("goal"),
        steps: vec![step("build", &mut plants), step("ship", &mut plants)],
        author: None,
    };
    let created = workflows.create(create, Some("user")).unwrap();
    let moved = StepUpdate { step_id: "build".into(), status: "completed".into(), notes: Some(plants.sentence("step notes")), produced: Vec::new() };
    workflows.update_step(&created.workflow_id, moved).unwrap();
    workflows.abandon(&created.workflow_id, &plants.sentence("abandon reason")).unwrap();
    drop(workflows);
    plants.assert_none_stored(dir.path());
}

#[test]
fn promotions_and_imports_store_no_secret() {
    // A memory stored before a rule existed holds what the rule now finds; promoting it must
    // not carry the secret into the other domain.
    let legacy = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut plants = Plants::default();
    let old_store = sqlite(legacy.path(), "user.db");
    let old = CaptureInput { content: plants.sentence("promoted content"), tags: vec![plants.bare("promoted tags[0]")], ..CaptureInput::default() };
    let old = build_memory(old, Domain::User, MemoryId::parse("old-memory").unwrap(), Utc::now()).unwrap();
    old_store.insert(&[(old.clone(), None)]).unwrap();
    let memory = MemoryService::new(
        vec![
            DomainStore { domain: Domain::Project("my-app".into()), store: sqlite(dir.path(), "project.db") },
            DomainStore { domain: Domain::User, store: old_store },
        ],
        None,
    );
    let promoted = memory.promote(&old.urn().to_string(), "project").unwrap();
    assert!(promoted.created && !promoted.redacted.is_empty(), "{promoted:?}");

    // An export written elsewhere, with secrets in the record and in its history.
    let elsewhere = tempfile::tempdir().unwrap();
    let source = memory_service(elsewhere.path());
    let urn = source.capture(CaptureInput { content: "The record to export".into(), ..CaptureInput::default() }, Some("user")).unwrap().urn;
    source.update(&urn, UpdateInput { content: Some("The record, changed".into()), reason: "edit".into(), ..UpdateInput::default() }).unwrap();
    let mut lines: Vec<ExportLine> = Vec::new();
    source.export(Some("user"), |line| {
        lines.push(line);
        Ok(())
    })
    .unwrap();
    let line = &mut lines[0];
    line.memory.title = plants.sentence("imported title");
    line.memory.content = plants.sentence("imported content");
    line.memory.tags = vec![plants.bare("imported tags[0]")];
    line.memory.category = Some(plants.bare("imported category"));
    line.memory.metadata.insert(plants.bare("imported metadata key"), plants.sentence("imported metadata value"));
    line.history[0].reason = plants.sentence("imported version reason");
    line.history[0].memory.content = plants.sentence("imported version content");
    let report = memory.import(lines, Some("project")).unwrap();
    assert_eq!(report.written, 1);
    assert!(report.redacted >= 8, "{report:?}");
    drop(memory);
    plants.assert_none_stored(dir.path());
}
