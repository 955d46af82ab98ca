//! The step machine: a [`Session`] moves through a protocol's steps, stopping at each ask step
//! for an answer. Query steps read memories through the [`World`] the caller hands in; create
//! and update steps only add to the session's [`Plan`], which the caller writes when the
//! session completes, so an aborted or abandoned session leaves nothing behind.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer;
use crate::load::{END, Library, Loaded, following, successors};
use crate::model::{Condition, StepDef};
use crate::template::{Context, lookup, render, render_value, text_of};

/// How deep protocols may call protocols. Recursion is refused at load; this bounds a chain.
pub const MAX_DEPTH: usize = 8;
/// Steps one answer may move through before the machine gives up (a safeguard: loops are
/// refused at load, so a protocol of at most 100 steps per level never reaches it).
const MAX_STEPS_PER_TURN: usize = 2000;

/// The lists an enum's `options_from` may name.
pub const OPTION_SOURCES: &[&str] = &["modules"];

/// What the machine reads from the world: recall results and facts about memories.
pub trait World {
    /// The options of a list named by `options_from` (see [`OPTION_SOURCES`]).
    fn options(&self, source: &str) -> Vec<String>;
    /// Up to `limit` memories matching `query`, as `{count, items: [{urn, title, snippet}],
    /// urns: [...], titles: [...]}`.
    fn recall(&self, query: &str, namespace: Option<&str>, limit: usize) -> Result<Value, String>;
    /// The memories around the one at `urn`, up to `depth` edges away, in the shape of
    /// [`World::recall`], each item with its `relation`.
    fn graph(&self, urn: &str, depth: u32, limit: usize) -> Result<Value, String>;
    /// The namespace and kind of the memory at `urn`, or `None` if there is none.
    fn memory(&self, urn: &str) -> Result<Option<(String, String)>, String>;
}

/// One protocol in progress: the current step and everything gathered so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    pub protocol: String,
    pub step: String,
    pub context: Context,
    /// Where the caller keeps this protocol's returns, and the caller's step after the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_as: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
}

/// A memory to write at completion, its texts rendered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedMemory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub title: String,
    pub content: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// `(target, relation)`: a URN, or `@name` of a memory planned before this one.
    #[serde(default)]
    pub links: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedDecision {
    pub statement: String,
    pub alternatives: Vec<String>,
    pub confidence: Option<f64>,
    pub module: Option<String>,
    pub rationale: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedUpdate {
    pub urn: String,
    pub title: Option<String>,
    pub content: Option<String>,
    pub tags: Option<Vec<String>>,
    pub reason: String,
}

/// Everything a session writes when it completes, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub memories: Vec<PlannedMemory>,
    pub decisions: Vec<PlannedDecision>,
    pub updates: Vec<PlannedUpdate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    pub protocol: String,
    /// The protocols in progress, the current one last.
    pub stack: Vec<Frame>,
    pub plan: Plan,
    pub started_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub complete: bool,
}

/// The question an ask step puts to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    pub protocol: String,
    pub step: String,
    pub question: String,
    /// The answer type and its rules, as the protocol file gives them.
    pub expects: Value,
    pub good_examples: Vec<String>,
    pub bad_examples: Vec<String>,
    pub optional: bool,
    /// How many protocols deep the session is (1 at the top).
    pub depth: usize,
}

/// Why the machine could not go on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MachineError {
    /// The caller named something that does not exist or left out an input.
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String, suggestion: String },
    /// The answer does not fit the step; the step stands and is asked again.
    #[error("the answer {problem}")]
    Rejected { problem: String },
    /// Reading the world failed.
    #[error("{0}")]
    World(String),
    /// The session no longer fits the protocols loaded (a protocol changed under it).
    #[error("{0}")]
    Stale(String),
}

/// The step's expectations with the options of `options_from` filled in.
fn expects_of(step: &StepDef, world: &dyn World) -> crate::model::Expect {
    let mut expects = step.expects.clone().unwrap_or_default();
    if let Some(source) = &expects.options_from {
        expects.options = Some(world.options(source));
    }
    expects
}

fn expects_view(expects: &crate::model::Expect) -> Value {
    let mut view = serde_json::Map::new();
    view.insert("type".into(), Value::from(expects.kind.clone()));
    let numbers = [("min_length", expects.min_length), ("max_length", expects.max_length), ("min_count", expects.min_count), ("max_count", expects.max_count)];
    for (key, value) in numbers {
        if let Some(value) = value {
            view.insert(key.into(), Value::from(value));
        }
    }
    for (key, value) in [("min", expects.min), ("max", expects.max)] {
        if let Some(value) = value {
            view.insert(key.into(), Value::from(value));
        }
    }
    for (key, value) in [("pattern", &expects.pattern), ("namespace", &expects.namespace), ("memory_kind", &expects.memory_kind)] {
        if let Some(value) = value {
            view.insert(key.into(), Value::from(value.clone()));
        }
    }
    if let Some(options) = &expects.options {
        view.insert("options".into(), Value::from(options.clone()));
    }
    Value::Object(view)
}

fn protocol<'a>(library: &'a Library, name: &str) -> Result<&'a Loaded, MachineError> {
    library.get(name).ok_or_else(|| MachineError::Stale(format!("the protocol `{name}` is no longer loaded")))
}

fn step_at<'a>(loaded: &'a Loaded, id: &str) -> Result<(usize, &'a StepDef), MachineError> {
    loaded
        .protocol
        .steps
        .iter()
        .enumerate()
        .find(|(_, step)| step.value.id == id)
        .map(|(index, step)| (index, &step.value))
        .ok_or_else(|| MachineError::Stale(format!("the step `{id}` is no longer in `{}`", loaded.protocol.name)))
}

fn rendered(template: &str, context: &Context, now: DateTime<Utc>) -> Result<String, MachineError> {
    render(template, context, now).map_err(MachineError::Stale)
}

/// Starts `name` with `inputs` and runs it to its first question (or to its end).
pub fn start(library: &Library, name: &str, inputs: Context, id: String, now: DateTime<Utc>, world: &dyn World) -> Result<(Session, Option<Prompt>), MachineError> {
    let Some(loaded) = library.get(name) else {
        let known: Vec<&str> = library.names().collect();
        return Err(MachineError::Invalid {
            field: "protocol".into(),
            problem: format!("`{name}` is not a loaded protocol"),
            suggestion: match kenning_core::closest(name, known.iter().copied()) {
                Some(near) => format!("did you mean `{near}`? protocol_list lists them"),
                None => format!("loaded protocols: {}", known.join(", ")),
            },
        });
    };
    if let Some(input) = loaded.protocol.inputs.iter().find(|input| inputs.get(*input).is_none_or(Value::is_null)) {
        return Err(MachineError::Invalid {
            field: format!("inputs.{input}"),
            problem: format!("is missing: `{name}` needs it"),
            suggestion: format!("pass inputs: {}", loaded.protocol.inputs.join(", ")),
        });
    }
    let first = loaded.protocol.steps[0].value.id.clone();
    let mut session = Session {
        id,
        protocol: name.to_owned(),
        stack: vec![Frame { protocol: name.to_owned(), step: first, context: inputs, store_as: None, resume_at: None }],
        plan: Plan::default(),
        started_at: now,
        updated_at: now,
        complete: false,
    };
    let prompt = run(library, &mut session, now, world)?;
    Ok((session, prompt))
}

/// The question the session waits on.
pub fn current(library: &Library, session: &Session, now: DateTime<Utc>, world: &dyn World) -> Result<Option<Prompt>, MachineError> {
    if session.complete {
        return Ok(None);
    }
    let frame = session.stack.last().ok_or_else(|| MachineError::Stale("the session has no protocol in progress".into()))?;
    let loaded = protocol(library, &frame.protocol)?;
    let (_, step) = step_at(loaded, &frame.step)?;
    if step.kind != "ask" {
        return Err(MachineError::Stale(format!("the session stands at `{}`, which asks nothing", step.id)));
    }
    let examples = step.examples.clone().unwrap_or_default();
    Ok(Some(Prompt {
        protocol: frame.protocol.clone(),
        step: step.id.clone(),
        question: rendered(step.question.as_deref().unwrap_or_default(), &frame.context, now)?,
        expects: expects_view(&expects_of(step, world)),
        good_examples: examples.good,
        bad_examples: examples.bad,
        optional: step.optional,
        depth: session.stack.len(),
    }))
}

/// Answers the question the session waits on and runs to the next one (or to the end). A
/// rejected answer leaves the session as it was.
pub fn answer(library: &Library, session: &mut Session, answer: Value, now: DateTime<Utc>, world: &dyn World) -> Result<Option<Prompt>, MachineError> {
    if session.complete {
        return Err(MachineError::Stale("the session is complete".into()));
    }
    let frame = session.stack.last().ok_or_else(|| MachineError::Stale("the session has no protocol in progress".into()))?;
    let loaded = protocol(library, &frame.protocol)?;
    let (index, step) = step_at(loaded, &frame.step)?;
    let expects = expects_of(step, world);
    let empty = match &answer {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    };
    let value = if empty && step.optional {
        Value::Null
    } else {
        let value = answer::check(&expects, &answer).map_err(|problem| MachineError::Rejected { problem })?;
        for urn in answer::ids(&expects, &value) {
            let facts = world.memory(&urn).map_err(MachineError::World)?;
            let Some((namespace, kind)) = facts else {
                return Err(MachineError::Rejected { problem: format!("names {urn}, which is not a memory this server holds") });
            };
            if let Some(wanted) = expects.namespace.as_deref().filter(|wanted| *wanted != namespace) {
                return Err(MachineError::Rejected { problem: format!("names {urn}, a memory in `{namespace}` rather than `{wanted}`") });
            }
            if let Some(wanted) = expects.memory_kind.as_deref().filter(|wanted| *wanted != kind) {
                return Err(MachineError::Rejected { problem: format!("names {urn}, a {kind} memory rather than {wanted}") });
            }
        }
        value
    };
    let key = step.store_as.clone().unwrap_or_else(|| step.id.clone());
    let next = step.next.clone().unwrap_or_else(|| following(&loaded.protocol, index));
    let frame = session.stack.last_mut().expect("checked above");
    frame.context.insert(key, value);
    frame.step = next;
    session.updated_at = now;
    run(library, session, now, world)
}

fn holds(condition: &Condition, context: &Context, now: DateTime<Utc>) -> bool {
    let value = lookup(context, &condition.var, now);
    let text = text_of(&value);
    let present = match &value {
        Value::Null => false,
        Value::String(text) => !text.trim().is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => true,
    };
    if let Some(expected) = &condition.equals {
        return text.eq_ignore_ascii_case(expected);
    }
    if let Some(expected) = &condition.not_equals {
        return !text.eq_ignore_ascii_case(expected);
    }
    if let Some(wanted) = condition.present {
        return present == wanted;
    }
    if let Some(least) = condition.count_at_least {
        let count = match &value {
            Value::Array(items) => items.len(),
            Value::Object(map) => map.get("count").and_then(Value::as_u64).map_or(map.len(), |count| count as usize),
            _ => usize::from(present),
        };
        return count >= least;
    }
    false
}

/// Runs from the current step through every step that needs no answer.
fn run(library: &Library, session: &mut Session, now: DateTime<Utc>, world: &dyn World) -> Result<Option<Prompt>, MachineError> {
    for _ in 0..MAX_STEPS_PER_TURN {
        let frame = session.stack.last().ok_or_else(|| MachineError::Stale("the session has no protocol in progress".into()))?;
        if frame.step == END {
            let finished = session.stack.pop().expect("a frame was just read");
            let loaded = protocol(library, &finished.protocol)?;
            let Some(caller) = session.stack.last_mut() else {
                session.stack.push(finished);
                session.complete = true;
                return Ok(None);
            };
            let returns: serde_json::Map<String, Value> =
                loaded.protocol.returns.iter().map(|name| (name.clone(), finished.context.get(name).cloned().unwrap_or(Value::Null))).collect();
            if let Some(key) = finished.store_as {
                caller.context.insert(key, Value::Object(returns));
            }
            caller.step = finished.resume_at.unwrap_or_else(|| END.to_owned());
            continue;
        }
        let loaded = protocol(library, &frame.protocol)?;
        let (index, step) = step_at(loaded, &frame.step)?;
        let after = step.next.clone().unwrap_or_else(|| following(&loaded.protocol, index));
        let key = step.store_as.clone().unwrap_or_else(|| step.id.clone());
        let context = frame.context.clone();
        let next = match step.kind.as_str() {
            "ask" => return current(library, session, now, world),
            "query" => {
                let query = step.query.as_ref().expect("checked at load");
                let limit = query.limit.unwrap_or(5).clamp(1, 20);
                let found = match (&query.recall, &query.graph) {
                    (Some(text), _) => world.recall(&rendered(text, &context, now)?, query.namespace.as_deref(), limit),
                    (None, Some(urn)) => world.graph(rendered(urn, &context, now)?.trim(), query.depth.unwrap_or(2).clamp(1, 3), limit),
                    (None, None) => return Err(MachineError::Stale(format!("the query step `{}` has nothing to ask", step.id))),
                }
                .map_err(MachineError::World)?;
                session.stack.last_mut().expect("read above").context.insert(key, found);
                after
            }
            "branch" => {
                let targets = successors(&loaded.protocol, index);
                match &step.condition {
                    Some(condition) => {
                        let taken = if holds(condition, &context, now) { "then" } else { "else" };
                        targets.into_iter().find(|(field, _)| field == taken).map(|(_, target)| target).unwrap_or(after)
                    }
                    None => {
                        let value = text_of(&lookup(&context, step.on.as_deref().unwrap_or_default(), now));
                        step.cases
                            .iter()
                            .flatten()
                            .find(|(case, _)| case.eq_ignore_ascii_case(value.trim()))
                            .map(|(_, target)| target.clone())
                            .unwrap_or_else(|| step.default.clone().unwrap_or(after))
                    }
                }
            }
            "call_protocol" => {
                if session.stack.len() >= MAX_DEPTH {
                    return Err(MachineError::Stale(format!("protocols call each other more than {MAX_DEPTH} deep")));
                }
                let callee = protocol(library, step.protocol.as_deref().unwrap_or_default())?;
                let mut inputs = Context::new();
                for (name, template) in step.with.iter().flatten() {
                    inputs.insert(name.clone(), render_value(template, &context, now).map_err(MachineError::Stale)?);
                }
                let frame = session.stack.last_mut().expect("read above");
                frame.step = after.clone();
                session.stack.push(Frame {
                    protocol: callee.protocol.name.clone(),
                    step: callee.protocol.steps[0].value.id.clone(),
                    context: inputs,
                    store_as: Some(key),
                    resume_at: Some(after),
                });
                continue;
            }
            "create" => {
                for memory in step.memories.iter().flatten() {
                    let mut links = Vec::new();
                    for link in &memory.links {
                        if link.to.starts_with('@') {
                            links.push((link.to.clone(), link.relation.clone()));
                            continue;
                        }
                        match render_value(&link.to, &context, now).map_err(MachineError::Stale)? {
                            Value::Array(items) => links.extend(items.iter().map(|item| (text_of(item), link.relation.clone()))),
                            value => links.push((text_of(&value), link.relation.clone())),
                        }
                    }
                    links.retain(|(target, _)| !target.trim().is_empty());
                    session.plan.memories.push(PlannedMemory {
                        name: memory.name.clone(),
                        namespace: rendered(&memory.namespace, &context, now)?,
                        kind: memory.kind.clone(),
                        title: rendered(&memory.title, &context, now)?,
                        content: rendered(&memory.content, &context, now)?,
                        tags: memory.tags.iter().map(|tag| rendered(tag, &context, now)).collect::<Result<_, _>>()?,
                        links,
                    });
                }
                if let Some(decision) = &step.decision {
                    let alternatives = match render_value(&decision.alternatives, &context, now).map_err(MachineError::Stale)? {
                        Value::Array(items) => items.iter().map(text_of).collect(),
                        value => vec![text_of(&value)].into_iter().filter(|text| !text.is_empty()).collect(),
                    };
                    let confidence = text_of(&render_value(&decision.confidence, &context, now).map_err(MachineError::Stale)?).trim().parse::<f64>().ok();
                    let optional = |text: &Option<String>| text.as_ref().map(|text| rendered(text, &context, now)).transpose().map(|text| text.filter(|text| !text.is_empty()));
                    session.plan.decisions.push(PlannedDecision {
                        statement: rendered(&decision.statement, &context, now)?,
                        alternatives,
                        confidence,
                        module: optional(&decision.module)?,
                        rationale: optional(&decision.rationale)?,
                    });
                }
                after
            }
            "update" => {
                let optional = |text: &Option<String>| text.as_ref().map(|text| rendered(text, &context, now)).transpose();
                session.plan.updates.push(PlannedUpdate {
                    urn: rendered(step.memory.as_deref().unwrap_or_default(), &context, now)?,
                    title: optional(&step.title)?,
                    content: optional(&step.content)?,
                    tags: step.tags.clone(),
                    reason: rendered(step.reason.as_deref().unwrap_or_default(), &context, now)?,
                });
                after
            }
            other => return Err(MachineError::Stale(format!("`{other}` is not a step type"))),
        };
        session.stack.last_mut().expect("read above").step = next;
    }
    Err(MachineError::Stale(format!("the protocol ran {MAX_STEPS_PER_TURN} steps without asking anything")))
}
