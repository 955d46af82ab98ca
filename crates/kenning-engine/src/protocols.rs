//! [`ProtocolService`]: guided protocol sessions kept as working state in a domain's store.
//!
//! A session is written after every accepted answer (compare-and-swap on its revision), so it
//! survives a restart of the server; it expires after an idle period. Nothing the protocol
//! creates is written before the last step: the plan gathered by create and update steps is
//! checked as a whole, then written (memories, then decisions through the decision service so
//! that calibration counts them, then updates), and the session is deleted. An abort deletes
//! the session and writes nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use chrono::{DateTime, TimeDelta, Utc};
use kenning_core::decision::{CaptureDecision, Node, NodeKind};
use kenning_core::secrets::Named;
use kenning_core::state::{StateKind, StateRecord, StateStore};
use kenning_core::{CaptureInput, FieldError, LinkInput, MemoryUrn, UpdateInput};
use kenning_protocol::machine::{self, MachineError, Plan, Prompt, Session, World};
use kenning_protocol::Library;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decisions::DecisionService;
use crate::error::{Error, Result};
use crate::ids::new_memory_id;
use crate::recall::RecallRequest;
use crate::redaction::redact;
use crate::views::redaction_warning;
use crate::service::{DomainStore, MemoryService};

/// Session ids are `ps_` and a ULID.
pub const SESSION_PREFIX: &str = "ps_";
/// How long a session may wait for its next answer by default.
pub const DEFAULT_IDLE_TIMEOUT: TimeDelta = TimeDelta::hours(1);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProtocolSummary {
    pub name: String,
    pub description: String,
    /// Inputs protocol_start needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// `shipped:{file}` or the file it was loaded from.
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProtocolList {
    pub protocols: Vec<ProtocolSummary>,
    /// Protocol files that were refused, each with its file, line and field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// The question a session waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepView {
    pub protocol: String,
    pub step: String,
    pub question: String,
    /// The answer's type (string, number, enum, id, id_list, string_list) and rules.
    pub expects: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub good_examples: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bad_examples: Vec<String>,
    /// Whether the answer may be left empty.
    pub optional: bool,
    /// How many protocols deep (1 at the top).
    pub depth: usize,
}

impl From<Prompt> for StepView {
    fn from(prompt: Prompt) -> Self {
        StepView {
            protocol: prompt.protocol,
            step: prompt.step,
            question: prompt.question,
            expects: prompt.expects,
            good_examples: prompt.good_examples,
            bad_examples: prompt.bad_examples,
            optional: prompt.optional,
            depth: prompt.depth,
        }
    }
}

/// Something a completed session wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WrittenView {
    pub urn: String,
    /// memory, decision or update.
    pub kind: String,
    pub title: String,
}

/// Where a session stands after a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionView {
    pub session_id: String,
    pub protocol: String,
    /// active (waiting on `step`) or complete.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepView>,
    /// What was wrong with the answer just given; the same step is asked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The protocol's skill (markdown), with the first step only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written: Vec<WrittenView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AbortView {
    pub session_id: String,
    pub aborted: bool,
    pub message: String,
}

/// The protocol service.
pub struct ProtocolService {
    decisions: Arc<DecisionService>,
    library: Arc<LazyLock<Library, LoadLibrary>>,
    idle_timeout: TimeDelta,
}

/// How a service's protocols are read, on first use.
type LoadLibrary = Box<dyn FnOnce() -> Library + Send>;

/// Recall, memory facts and module names, as the step machine reads them.
struct EngineWorld<'a> {
    memory: &'a MemoryService,
    decisions: &'a DecisionService,
}

impl World for EngineWorld<'_> {
    fn options(&self, source: &str) -> Vec<String> {
        match source {
            "modules" => self.decisions.modules().names().to_vec(),
            _ => Vec::new(),
        }
    }

    fn recall(&self, query: &str, namespace: Option<&str>, limit: usize) -> Result<Value, String> {
        if query.trim().is_empty() {
            return Ok(serde_json::json!({"count": 0, "items": [], "urns": [], "titles": []}));
        }
        let request = RecallRequest {
            query: query.chars().take(1000).collect(),
            limit: Some(limit),
            namespaces: namespace.map(str::to_owned).into_iter().collect(),
            ..RecallRequest::default()
        };
        let page = self.memory.recall(request).map_err(|error| error.to_string())?;
        let items: Vec<Value> = page
            .results
            .iter()
            .map(|hit| serde_json::json!({"urn": hit.urn, "title": hit.title, "snippet": hit.snippet.clone().unwrap_or_default()}))
            .collect();
        Ok(serde_json::json!({
            "count": items.len(),
            "urns": page.results.iter().map(|hit| hit.urn.clone()).collect::<Vec<_>>(),
            "titles": page.results.iter().map(|hit| format!("{} ({})", hit.title, hit.urn)).collect::<Vec<_>>(),
            "items": items,
        }))
    }

    fn graph(&self, urn: &str, depth: u32, limit: usize) -> Result<Value, String> {
        let Ok(start) = MemoryUrn::parse("query.graph", urn) else {
            return Ok(serde_json::json!({"count": 0, "items": [], "urns": [], "titles": []}));
        };
        let Ok(entry) = self.decisions.entry(Some(&start.domain.to_string())) else {
            return Ok(serde_json::json!({"count": 0, "items": [], "urns": [], "titles": []}));
        };
        let store = &entry.store;
        let text = |error: kenning_core::Error| error.to_string();
        // (URN, relation, direction) of each memory reached, nearest first, each once.
        let mut reached: Vec<(String, String, &str)> = Vec::new();
        let mut seen = std::collections::BTreeSet::from([start.to_string()]);
        let node_urn = |node: &Node| -> Result<Option<String>, String> {
            match node.kind {
                NodeKind::Urn => Ok(Some(node.id.clone())),
                NodeKind::Memory => {
                    let Ok(id) = kenning_core::MemoryId::parse(&node.id) else { return Ok(None) };
                    Ok(store.get(&id).map_err(text)?.map(|memory| MemoryUrn::new(memory.domain.clone(), memory.namespace.clone(), memory.id.clone()).to_string()))
                }
                NodeKind::Signal | NodeKind::Outcome => Ok(None),
            }
        };
        for hop in store.causal_chain(&Node::memory(&start.id), depth).map_err(text)? {
            if let Some(urn) = node_urn(&hop.edge.to)? {
                if seen.insert(urn.clone()) {
                    reached.push((urn, hop.edge.relation.clone(), "out"));
                }
            }
        }
        let incoming = [Node { kind: NodeKind::Urn, id: start.to_string() }, Node::memory(&start.id)];
        for node in &incoming {
            for edge in store.edges_to(node).map_err(text)? {
                if let Some(urn) = node_urn(&edge.from)? {
                    if seen.insert(urn.clone()) {
                        reached.push((urn, edge.relation.clone(), "in"));
                    }
                }
            }
        }
        let mut items = Vec::new();
        for (urn, relation, direction) in reached {
            if items.len() == limit {
                break;
            }
            let Some((title, _)) = self.title(&urn)? else { continue };
            items.push(serde_json::json!({"urn": urn, "title": title, "relation": relation, "direction": direction}));
        }
        Ok(serde_json::json!({
            "count": items.len(),
            "urns": items.iter().map(|item| item["urn"].clone()).collect::<Vec<_>>(),
            "titles": items.iter().map(|item| Value::from(format!("{} ({} {})", item["title"].as_str().unwrap_or_default(), item["relation"].as_str().unwrap_or_default(), item["urn"].as_str().unwrap_or_default()))).collect::<Vec<_>>(),
            "items": items,
        }))
    }

    fn memory(&self, urn: &str) -> Result<Option<(String, String)>, String> {
        let Ok(urn) = MemoryUrn::parse("answer", urn) else { return Ok(None) };
        let Some(entry) = self.memory.domain_stores().iter().find(|entry| entry.domain == urn.domain) else { return Ok(None) };
        let memory = entry.store.get(&urn.id).map_err(|error| error.to_string())?;
        Ok(memory.map(|memory| (memory.namespace.to_string(), memory.kind.to_string())))
    }
}

impl EngineWorld<'_> {
    /// The title and namespace of the memory at `urn`, if a configured domain holds it.
    fn title(&self, urn: &str) -> Result<Option<(String, String)>, String> {
        let Ok(urn) = MemoryUrn::parse("urn", urn) else { return Ok(None) };
        let Some(entry) = self.memory.domain_stores().iter().find(|entry| entry.domain == urn.domain) else { return Ok(None) };
        Ok(entry.store.get(&urn.id).map_err(|error| error.to_string())?.map(|memory| (memory.title, memory.namespace.to_string())))
    }
}

fn machine_error(error: MachineError) -> Error {
    match error {
        MachineError::Invalid { field, problem, suggestion } => Error::Invalid(FieldError::new(field, problem, Value::Null, suggestion)),
        MachineError::Rejected { problem } => Error::Invalid(FieldError::new("answer", problem, Value::Null, "answer the step again")),
        MachineError::World(message) => Error::Storage(message),
        MachineError::Stale(message) => Error::Invalid(FieldError::new(
            "session_id",
            format!("names a session that cannot go on: {message}"),
            Value::Null,
            "abort it with protocol_abort and start the protocol again",
        )),
    }
}

impl ProtocolService {
    /// A service running the protocols of `library`.
    pub fn new(decisions: Arc<DecisionService>, library: Library) -> Self {
        ProtocolService::loading(decisions, move || library)
    }

    /// A service running the protocols `load` reads when one is first listed or run. Parsing
    /// the shipped protocols was a tenth of a server's start, and most sessions run none.
    pub fn loading(decisions: Arc<DecisionService>, load: impl FnOnce() -> Library + Send + 'static) -> Self {
        ProtocolService { decisions, library: Arc::new(LazyLock::new(Box::new(load))), idle_timeout: DEFAULT_IDLE_TIMEOUT }
    }

    /// The same protocols over other decision services (a view limited to some domains).
    pub fn with_decisions(&self, decisions: Arc<DecisionService>) -> ProtocolService {
        ProtocolService { decisions, library: self.library.clone(), idle_timeout: self.idle_timeout }
    }

    /// Sessions idle for longer than `timeout` expire.
    pub fn with_idle_timeout(mut self, timeout: TimeDelta) -> Self {
        self.idle_timeout = timeout;
        self
    }

    pub fn library(&self) -> &Library {
        &self.library
    }

    fn memory(&self) -> &MemoryService {
        self.decisions.memory()
    }

    fn world(&self) -> EngineWorld<'_> {
        EngineWorld { memory: self.memory(), decisions: &self.decisions }
    }

    fn places(&self) -> impl Iterator<Item = (&DomainStore, &dyn StateStore)> {
        self.memory().domain_stores().iter().filter_map(|entry| entry.store.state().map(|state| (entry, state)))
    }

    pub fn list(&self) -> ProtocolList {
        ProtocolList {
            protocols: self
                .library()
                .protocols()
                .map(|loaded| ProtocolSummary {
                    name: loaded.protocol.name.clone(),
                    description: loaded.protocol.description.clone(),
                    inputs: loaded.protocol.inputs.clone(),
                    source: loaded.file.clone(),
                })
                .collect(),
            problems: self.library().problems.iter().map(ToString::to_string).collect(),
        }
    }

    /// Starts a protocol and returns its first step with the protocol's skill.
    pub fn start(&self, name: &str, mut inputs: BTreeMap<String, Value>) -> Result<SessionView> {
        let redacted = redact(&mut Named("inputs", &mut inputs));
        let now = self.memory().now();
        let id = format!("{SESSION_PREFIX}{}", new_memory_id(now));
        let world = self.world();
        let (session, prompt) = machine::start(self.library(), name.trim(), inputs.into_iter().collect(), id, now, &world).map_err(machine_error)?;
        let skill = self.library().get(&session.protocol).and_then(|loaded| loaded.skill.clone());
        let mut view = match prompt {
            None => self.complete(&session)?,
            Some(prompt) => {
                let (_, state) = self.places().next().ok_or_else(|| {
                    Error::Invalid(FieldError::new("domain", "no configured store can hold protocol sessions", Value::Null, "configure a SQLite, git or PostgreSQL domain"))
                })?;
                state.put_state(&encode(&session, 1)?)?;
                active(&session, prompt, None, "Answer the step with protocol_continue.")
            }
        };
        view.skill = skill;
        view.warnings.extend(redaction_warning(&redacted));
        Ok(view)
    }

    fn find(&self, id: &str) -> Result<(&dyn StateStore, StateRecord, Session)> {
        let id = id.trim();
        if id.starts_with(SESSION_PREFIX) && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            for (_, state) in self.places() {
                if let Some(record) = state.get_state(StateKind::ProtocolSession, id)? {
                    let session: Session = serde_json::from_str(&record.body)
                        .map_err(|error| Error::Storage(format!("stored session {id} does not read: {error}")))?;
                    return Ok((state, record, session));
                }
            }
        }
        Err(Error::Invalid(FieldError::new(
            "session_id",
            "names no session in progress (it completed, was aborted or expired)",
            id,
            "start the protocol again with protocol_start",
        )))
    }

    /// Answers the step a session waits on. A wrong answer returns the same step with what was
    /// wrong; the last answer writes what the protocol created.
    pub fn answer(&self, id: &str, answer: Value) -> Result<SessionView> {
        let (state, record, mut session) = self.find(id)?;
        let now = self.memory().now();
        if now - record.updated_at > self.idle_timeout {
            state.delete_state(StateKind::ProtocolSession, &record.id)?;
            return Err(Error::Invalid(FieldError::new(
                "session_id",
                format!("names a session that expired after {} minutes without an answer", self.idle_timeout.num_minutes()),
                id,
                "start the protocol again with protocol_start",
            )));
        }
        let world = self.world();
        let mut answer = answer;
        let redacted = redact(&mut Named("answer", &mut answer));
        match machine::answer(self.library(), &mut session, answer, now, &world) {
            Ok(Some(prompt)) => {
                match state.put_state(&encode(&session, record.revision + 1)?) {
                    Ok(()) => {}
                    Err(kenning_core::Error::Conflict { .. }) => {
                        return Err(Error::Invalid(FieldError::new(
                            "session_id",
                            "was answered by another call at the same time",
                            id,
                            "read the current step again with protocol_continue and no answer",
                        )));
                    }
                    Err(error) => return Err(error.into()),
                }
                let mut view = active(&session, prompt, None, "Answer the step with protocol_continue.");
                view.warnings.extend(redaction_warning(&redacted));
                Ok(view)
            }
            Ok(None) => {
                let view = self.complete(&session)?;
                state.delete_state(StateKind::ProtocolSession, &record.id)?;
                Ok(view)
            }
            Err(MachineError::Rejected { problem }) => {
                let (_, _, stored) = self.find(id)?;
                let prompt = machine::current(self.library(), &stored, now, &world).map_err(machine_error)?.ok_or_else(|| {
                    Error::Storage("a session waiting for an answer has no question".into())
                })?;
                let message = format!("The answer {problem}. Answer the step again.");
                Ok(active(&stored, prompt, Some(format!("the answer {problem}")), &message))
            }
            Err(error) => Err(machine_error(error)),
        }
    }

    /// The step a session waits on, without answering it.
    pub fn current(&self, id: &str) -> Result<SessionView> {
        let (_, _, session) = self.find(id)?;
        let prompt = machine::current(self.library(), &session, self.memory().now(), &self.world()).map_err(machine_error)?;
        match prompt {
            Some(prompt) => Ok(active(&session, prompt, None, "Answer the step with protocol_continue.")),
            None => Err(Error::Storage("a stored session is complete".into())),
        }
    }

    /// Ends a session and writes nothing.
    pub fn abort(&self, id: &str) -> Result<AbortView> {
        let (state, record, _) = self.find(id)?;
        let aborted = state.delete_state(StateKind::ProtocolSession, &record.id)?;
        Ok(AbortView { session_id: record.id, aborted, message: "The session was aborted; nothing it gathered was written.".into() })
    }

    /// Checks the whole plan, then writes it.
    fn complete(&self, session: &Session) -> Result<SessionView> {
        let plan = &session.plan;
        self.check_plan(plan)?;
        let mut written = Vec::new();
        let mut warnings = Vec::new();
        let mut named: BTreeMap<String, String> = BTreeMap::new();
        for planned in &plan.memories {
            let mut links = Vec::new();
            for (target, relation) in &planned.links {
                match target.strip_prefix('@') {
                    Some(name) => match named.get(name) {
                        Some(urn) => links.push(LinkInput { target: urn.clone(), relation: relation.clone() }),
                        None => warnings.push(format!("the link to @{name} was left out: no memory of that name was written")),
                    },
                    None => links.push(LinkInput { target: target.clone(), relation: relation.clone() }),
                }
            }
            let input = CaptureInput {
                content: planned.content.clone(),
                title: Some(planned.title.clone()),
                kind: planned.kind.clone(),
                namespace: Some(planned.namespace.clone()),
                tags: planned.tags.clone(),
                source: Some("told-by-user".into()),
                links,
                metadata: [("protocol".to_owned(), session.protocol.clone())].into_iter().collect(),
                ..CaptureInput::default()
            };
            let outcome = self.memory().capture(input, None)?;
            warnings.extend(outcome.warnings.clone());
            if let Some(name) = &planned.name {
                named.insert(name.clone(), outcome.urn.clone());
            }
            written.push(WrittenView { urn: outcome.urn, kind: "memory".into(), title: outcome.title });
        }
        for planned in &plan.decisions {
            let result = self.decisions.capture(decision_input(planned), None)?;
            warnings.extend(result.warnings.clone());
            written.push(WrittenView { urn: result.urn, kind: "decision".into(), title: planned.statement.clone() });
        }
        for planned in &plan.updates {
            let input = UpdateInput {
                reason: planned.reason.clone(),
                title: planned.title.clone(),
                content: planned.content.clone(),
                tags: planned.tags.clone(),
                ..UpdateInput::default()
            };
            let outcome = self.memory().update(&planned.urn, input)?;
            written.push(WrittenView { urn: outcome.urn, kind: "update".into(), title: planned.reason.clone() });
        }
        Ok(SessionView {
            session_id: session.id.clone(),
            protocol: session.protocol.clone(),
            status: "complete".into(),
            step: None,
            problem: None,
            skill: None,
            message: format!("The protocol is complete; {} records were written.", written.len()),
            written,
            warnings,
        })
    }

    /// Refuses a plan any part of which would fail, before anything is written.
    fn check_plan(&self, plan: &Plan) -> Result<()> {
        let now = self.memory().now();
        let domain = self.memory().default_domain().clone();
        for planned in &plan.memories {
            let input = CaptureInput {
                content: planned.content.clone(),
                title: Some(planned.title.clone()),
                kind: planned.kind.clone(),
                namespace: Some(planned.namespace.clone()),
                tags: planned.tags.clone(),
                ..CaptureInput::default()
            };
            let id = kenning_core::MemoryId::parse("check").expect("a valid id");
            kenning_core::input::build_memory(input, domain.clone(), id, now)?;
        }
        for planned in &plan.decisions {
            let id = kenning_core::decision::DecisionId::parse("dec_check").expect("a valid id");
            kenning_core::decision::input::build_decision(decision_input(planned), self.decisions.modules(), id, now)?;
        }
        for planned in &plan.updates {
            let urn = MemoryUrn::parse("memory", &planned.urn)?;
            let held = self.memory().domain_stores().iter().find(|entry| entry.domain == urn.domain).map(|entry| entry.store.get(&urn.id)).transpose()?.flatten();
            if held.is_none() {
                return Err(Error::NotFound { target: planned.urn.clone() });
            }
        }
        Ok(())
    }
}

fn decision_input(planned: &machine::PlannedDecision) -> CaptureDecision {
    CaptureDecision {
        statement: planned.statement.clone(),
        alternatives: Some(planned.alternatives.clone()),
        confidence: planned.confidence,
        module: planned.module.clone(),
        rationale: planned.rationale.clone(),
        created_by: Some("agent".into()),
        ..CaptureDecision::default()
    }
}

fn active(session: &Session, prompt: Prompt, problem: Option<String>, message: &str) -> SessionView {
    SessionView {
        session_id: session.id.clone(),
        protocol: session.protocol.clone(),
        status: "active".into(),
        step: Some(StepView::from(prompt)),
        problem,
        skill: None,
        written: Vec::new(),
        warnings: Vec::new(),
        message: message.to_owned(),
    }
}

fn encode(session: &Session, revision: u64) -> Result<StateRecord> {
    let updated_at: DateTime<Utc> = session.updated_at;
    Ok(StateRecord {
        kind: StateKind::ProtocolSession,
        id: session.id.clone(),
        revision,
        updated_at,
        body: serde_json::to_string(session).map_err(|error| Error::Storage(format!("session JSON: {error}")))?,
        subjects: Vec::new(),
    })
}

