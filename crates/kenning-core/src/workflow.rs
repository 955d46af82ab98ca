//! Workflows: a named goal broken into steps with dependencies (a directed acyclic graph),
//! moved along one step at a time and kept as working state (see [`crate::state`]) so that an
//! agent that crashed resumes where it was.
//!
//! The rule every transition keeps: a step leaves `pending` only once each of its dependencies
//! is done (completed or skipped), and a step goes back to `pending` only while no step that
//! depends on it has left `pending`. So at any time the steps that started have their
//! dependencies done, and the ready set is exactly the pending steps whose dependencies are done.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{FieldError, closest};
use crate::urn::MemoryUrn;

pub const MAX_NAME_CHARS: usize = 200;
pub const MAX_TEXT_CHARS: usize = 4000;
pub const MAX_STEPS: usize = 100;
const MAX_STEP_ID_CHARS: usize = 64;
/// Notes kept per step; the oldest go first once a step has more.
const MAX_NOTES_PER_STEP: usize = 20;
const MAX_PRODUCED_PER_STEP: usize = 50;
/// Workflow ids are `wf_` and a ULID.
pub const WORKFLOW_ID_PREFIX: &str = "wf_";

/// Where one step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
    Skipped,
}

impl StepStatus {
    pub const ALL: &'static [StepStatus] =
        &[StepStatus::Pending, StepStatus::InProgress, StepStatus::Completed, StepStatus::Failed, StepStatus::Skipped];

    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::InProgress => "in_progress",
            StepStatus::Completed => "completed",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
        }
    }

    pub fn parse(field: &str, text: &str) -> Result<StepStatus, FieldError> {
        let wanted = text.trim().to_lowercase().replace('-', "_");
        StepStatus::ALL.iter().copied().find(|status| status.as_str() == wanted).ok_or_else(|| {
            let names: Vec<&str> = StepStatus::ALL.iter().map(|status| status.as_str()).collect();
            FieldError::new(
                field,
                "is not a step status",
                text,
                match closest(&wanted, names.iter().copied()) {
                    Some(near) => format!("did you mean `{near}`? one of {}", names.join(", ")),
                    None => format!("one of {}", names.join(", ")),
                },
            )
        })
    }

    /// Completed and skipped steps no longer hold their dependents back.
    pub fn is_done(self) -> bool {
        matches!(self, StepStatus::Completed | StepStatus::Skipped)
    }
}

impl fmt::Display for StepStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the whole workflow stands: active until every step is done (completed) or it is given up
/// (abandoned); both ends are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowStatus {
    Active,
    Completed,
    Abandoned,
}

impl WorkflowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Active => "active",
            WorkflowStatus::Completed => "completed",
            WorkflowStatus::Abandoned => "abandoned",
        }
    }
}

impl fmt::Display for WorkflowStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step as a caller declares it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepInput {
    pub id: String,
    pub description: String,
    pub dependencies: Vec<String>,
    /// How to tell the step is done, e.g. "cargo test passes".
    pub verification: Option<String>,
}

/// A new workflow as a caller declares it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateWorkflow {
    pub name: String,
    pub goal: String,
    pub steps: Vec<StepInput>,
    pub author: Option<String>,
}

/// A note left on a step when its status was set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepNote {
    pub at: DateTime<Utc>,
    pub status: StepStatus,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub id: String,
    pub description: String,
    pub dependencies: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<String>,
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<StepNote>,
    /// URNs of the memories this step produced; the workflow's closing memory links to them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub produced: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    pub id: String,
    pub name: String,
    pub goal: String,
    pub status: WorkflowStatus,
    pub steps: Vec<Step>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Why the workflow was abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The URN of the episodic memory written when the workflow ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

/// The steps of a workflow sorted by where they stand, each list in declaration order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StepSets {
    /// Pending, with every dependency done: can start now.
    pub ready: Vec<String>,
    /// Pending, waiting on a dependency that is not done.
    pub blocked: Vec<String>,
    pub in_progress: Vec<String>,
    /// Completed or skipped.
    pub done: Vec<String>,
    pub failed: Vec<String>,
}

/// A change of one step's status as a caller asks it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepUpdate {
    pub step_id: String,
    pub status: String,
    pub notes: Option<String>,
    /// URNs of memories the step produced.
    pub produced: Vec<String>,
}

fn check_text(field: &str, text: &str, max: usize, required: bool) -> Result<String, FieldError> {
    let trimmed = text.trim();
    if required && trimmed.is_empty() {
        return Err(FieldError::new(field, "is empty", text, "say it in a few words"));
    }
    if trimmed.chars().count() > max {
        let start: String = trimmed.chars().take(60).collect();
        return Err(FieldError::new(field, format!("is longer than {max} characters"), format!("{start}…"), "shorten it"));
    }
    Ok(trimmed.to_owned())
}

fn check_step_id(field: &str, id: &str) -> Result<String, FieldError> {
    let trimmed = id.trim();
    let valid = !trimmed.is_empty()
        && trimmed.chars().count() <= MAX_STEP_ID_CHARS
        && trimmed.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(trimmed.to_owned())
    } else {
        Err(FieldError::new(
            field,
            format!("is not a step id (letters, digits, `_`, `-` and `.`, at most {MAX_STEP_ID_CHARS} characters)"),
            id,
            "use a short slug such as `write-tests`",
        ))
    }
}

/// Validates a new workflow: names and texts within their limits, step ids unique, every
/// dependency naming a step of the workflow, and no cycle.
pub fn build_workflow(input: CreateWorkflow, id: String, now: DateTime<Utc>) -> Result<Workflow, FieldError> {
    let name = check_text("name", &input.name, MAX_NAME_CHARS, true)?;
    let goal = check_text("goal", &input.goal, MAX_TEXT_CHARS, true)?;
    if input.steps.is_empty() {
        return Err(FieldError::new("steps", "is empty", serde_json::json!([]), "give at least one step with an id and a description"));
    }
    if input.steps.len() > MAX_STEPS {
        return Err(FieldError::new(
            "steps",
            format!("has more than {MAX_STEPS} steps"),
            input.steps.len(),
            "split the work into several workflows",
        ));
    }
    let mut steps: Vec<Step> = Vec::with_capacity(input.steps.len());
    let mut seen = BTreeSet::new();
    for (index, step) in input.steps.iter().enumerate() {
        let id = check_step_id(&format!("steps[{index}].id"), &step.id)?;
        if !seen.insert(id.clone()) {
            return Err(FieldError::new(format!("steps[{index}].id"), "repeats the id of an earlier step", id, "give every step its own id"));
        }
        let description = check_text(&format!("steps[{index}].description"), &step.description, MAX_TEXT_CHARS, true)?;
        let verification = match &step.verification {
            Some(text) => Some(check_text(&format!("steps[{index}].verification"), text, MAX_TEXT_CHARS, false)?).filter(|text| !text.is_empty()),
            None => None,
        };
        let mut dependencies: Vec<String> = Vec::new();
        for (position, dependency) in step.dependencies.iter().enumerate() {
            let dependency = check_step_id(&format!("steps[{index}].dependencies[{position}]"), dependency)?;
            if !dependencies.contains(&dependency) {
                dependencies.push(dependency);
            }
        }
        steps.push(Step {
            id,
            description,
            dependencies,
            verification,
            status: StepStatus::Pending,
            notes: Vec::new(),
            produced: Vec::new(),
            started_at: None,
            finished_at: None,
        });
    }
    for (index, step) in steps.iter().enumerate() {
        for (position, dependency) in step.dependencies.iter().enumerate() {
            if !seen.contains(dependency) {
                return Err(FieldError::new(
                    format!("steps[{index}].dependencies[{position}]"),
                    format!("names `{dependency}`, which is not a step of this workflow"),
                    dependency.as_str(),
                    match closest(dependency, seen.iter().map(String::as_str)) {
                        Some(near) => format!("did you mean `{near}`? dependencies name the ids of other steps"),
                        None => format!("dependencies name the ids of other steps: {}", seen.iter().cloned().collect::<Vec<_>>().join(", ")),
                    },
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(&steps) {
        let index = steps.iter().position(|step| step.id == cycle[0]).unwrap_or(0);
        return Err(FieldError::new(
            format!("steps[{index}].dependencies"),
            format!("form a cycle: {}", cycle.join(" -> ")),
            cycle.join(" -> "),
            "remove one dependency of the cycle so that the steps can be done in some order",
        ));
    }
    Ok(Workflow {
        id,
        name,
        goal,
        status: WorkflowStatus::Active,
        steps,
        created_at: now,
        updated_at: now,
        author: input.author,
        reason: None,
        memory: None,
    })
}

/// A cycle among the steps' dependencies as the path of ids that closes it (first id repeated
/// at the end), or `None` when the steps form a DAG. A dependency on an unknown step is no edge.
fn find_cycle(steps: &[Step]) -> Option<Vec<String>> {
    let index: BTreeMap<&str, usize> = steps.iter().enumerate().map(|(i, step)| (step.id.as_str(), i)).collect();
    let edges: Vec<Vec<usize>> =
        steps.iter().map(|step| step.dependencies.iter().filter_map(|dependency| index.get(dependency.as_str()).copied()).collect()).collect();
    let ids: Vec<String> = steps.iter().map(|step| step.id.clone()).collect();
    crate::graph::find_cycle(&edges, &ids)
}

impl Workflow {
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|step| step.id == id)
    }

    fn dependencies_done(&self, step: &Step) -> bool {
        step.dependencies.iter().all(|dependency| self.step(dependency).is_some_and(|d| d.status.is_done()))
    }

    /// The steps sorted by where they stand.
    pub fn sets(&self) -> StepSets {
        let mut sets = StepSets::default();
        for step in &self.steps {
            let list = match step.status {
                StepStatus::Pending if self.dependencies_done(step) => &mut sets.ready,
                StepStatus::Pending => &mut sets.blocked,
                StepStatus::InProgress => &mut sets.in_progress,
                StepStatus::Completed | StepStatus::Skipped => &mut sets.done,
                StepStatus::Failed => &mut sets.failed,
            };
            list.push(step.id.clone());
        }
        sets
    }

    /// The step to work on next: one already in progress first (finish what was started, which
    /// is what an agent resuming after a crash needs), then a failed one to retry, then the
    /// first ready step in declaration order. `None` once nothing is left to do.
    pub fn next_step(&self) -> Option<&Step> {
        if self.status != WorkflowStatus::Active {
            return None;
        }
        self.steps
            .iter()
            .find(|step| step.status == StepStatus::InProgress)
            .or_else(|| self.steps.iter().find(|step| step.status == StepStatus::Failed))
            .or_else(|| self.steps.iter().find(|step| step.status == StepStatus::Pending && self.dependencies_done(step)))
    }

    /// Every URN the steps produced, in step order, each once.
    pub fn produced(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        self.steps.iter().flat_map(|step| step.produced.iter()).filter(|urn| seen.insert(urn.as_str())).cloned().collect()
    }
}

fn ended(workflow: &Workflow) -> FieldError {
    FieldError::new(
        "workflow_id",
        format!("names a workflow that is {} and can no longer change", workflow.status),
        workflow.id.as_str(),
        "create a new workflow for further work",
    )
}

/// Applies one step's status change, or says why it cannot happen. Setting the status a step
/// already has only adds the note and the produced memories. Once every step is done the
/// workflow is completed.
pub fn apply_step_update(workflow: &Workflow, update: StepUpdate, now: DateTime<Utc>) -> Result<Workflow, FieldError> {
    if workflow.status != WorkflowStatus::Active {
        return Err(ended(workflow));
    }
    let status = StepStatus::parse("status", &update.status)?;
    let step_id = update.step_id.trim();
    let Some(index) = workflow.steps.iter().position(|step| step.id == step_id) else {
        let ids: Vec<&str> = workflow.steps.iter().map(|step| step.id.as_str()).collect();
        return Err(FieldError::new(
            "step_id",
            "is not a step of this workflow",
            update.step_id.as_str(),
            match closest(step_id, ids.iter().copied()) {
                Some(near) => format!("did you mean `{near}`? steps: {}", ids.join(", ")),
                None => format!("steps: {}", ids.join(", ")),
            },
        ));
    };
    let notes = match &update.notes {
        Some(text) => Some(check_text("notes", text, MAX_TEXT_CHARS, false)?).filter(|text| !text.is_empty()),
        None => None,
    };
    let mut produced = Vec::with_capacity(update.produced.len());
    for (position, text) in update.produced.iter().enumerate() {
        produced.push(MemoryUrn::parse(&format!("produced[{position}]"), text)?.to_string());
    }
    let mut next = workflow.clone();
    let current = workflow.steps[index].status;
    if status != current {
        let step = &workflow.steps[index];
        if status == StepStatus::Pending {
            let started: Vec<String> = workflow
                .steps
                .iter()
                .filter(|other| other.dependencies.iter().any(|d| d == step_id) && other.status != StepStatus::Pending)
                .map(|other| format!("`{}` ({})", other.id, other.status))
                .collect();
            if !started.is_empty() {
                return Err(FieldError::new(
                    "status",
                    format!("cannot put `{step_id}` back to pending while steps that depend on it have moved on: {}", started.join(", ")),
                    status.as_str(),
                    "put those steps back to pending first",
                ));
            }
        } else if !workflow.dependencies_done(step) {
            let waiting: Vec<String> = step
                .dependencies
                .iter()
                .filter_map(|d| workflow.step(d))
                .filter(|d| !d.status.is_done())
                .map(|d| format!("`{}` ({})", d.id, d.status))
                .collect();
            return Err(FieldError::new(
                "status",
                format!("step `{step_id}` cannot be {} before its dependencies are done: {}", status, waiting.join(", ")),
                status.as_str(),
                "finish those steps first; workflow_status lists the ready steps",
            ));
        }
        let step = &mut next.steps[index];
        step.status = status;
        match status {
            StepStatus::Pending => {
                step.started_at = None;
                step.finished_at = None;
            }
            StepStatus::InProgress => {
                step.started_at = Some(now);
                step.finished_at = None;
            }
            StepStatus::Completed | StepStatus::Failed | StepStatus::Skipped => {
                step.started_at.get_or_insert(now);
                step.finished_at = Some(now);
            }
        }
    }
    let step = &mut next.steps[index];
    if let Some(text) = notes {
        step.notes.push(StepNote { at: now, status, text });
        if step.notes.len() > MAX_NOTES_PER_STEP {
            let excess = step.notes.len() - MAX_NOTES_PER_STEP;
            step.notes.drain(..excess);
        }
    }
    for urn in produced {
        if !step.produced.contains(&urn) {
            step.produced.push(urn);
        }
    }
    if step.produced.len() > MAX_PRODUCED_PER_STEP {
        return Err(FieldError::new(
            "produced",
            format!("would give the step more than {MAX_PRODUCED_PER_STEP} produced memories"),
            step.produced.len(),
            "list the memories that matter most",
        ));
    }
    next.updated_at = now;
    if next.steps.iter().all(|step| step.status.is_done()) {
        next.status = WorkflowStatus::Completed;
    }
    Ok(next)
}

/// Gives up an active workflow, keeping where each step stood.
pub fn abandon(workflow: &Workflow, reason: &str, now: DateTime<Utc>) -> Result<Workflow, FieldError> {
    if workflow.status != WorkflowStatus::Active {
        return Err(ended(workflow));
    }
    let reason = check_text("reason", reason, MAX_TEXT_CHARS, true)?;
    Ok(Workflow { status: WorkflowStatus::Abandoned, reason: Some(reason), updated_at: now, ..workflow.clone() })
}

/// The markdown of the episodic memory a finished workflow becomes: its goal, how it ended,
/// and each step with its status, verification and notes.
pub fn summary_markdown(workflow: &Workflow) -> String {
    let mut text = format!("Workflow `{}` {}.\n\nGoal: {}\n", workflow.name, workflow.status, workflow.goal);
    if let Some(reason) = &workflow.reason {
        text.push_str(&format!("\nReason: {reason}\n"));
    }
    text.push_str("\nSteps:\n");
    for step in &workflow.steps {
        text.push_str(&format!("- [{}] `{}`: {}", step.status, step.id, step.description));
        if let Some(verification) = &step.verification {
            text.push_str(&format!(" (verified by: {verification})"));
        }
        text.push('\n');
        for note in &step.notes {
            text.push_str(&format!("  - {}: {}\n", note.status, note.text));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, dependencies: &[&str]) -> StepInput {
        StepInput {
            id: id.to_owned(),
            description: format!("do {id}"),
            dependencies: dependencies.iter().map(|d| (*d).to_owned()).collect(),
            verification: None,
        }
    }

    fn build(steps: Vec<StepInput>) -> Result<Workflow, FieldError> {
        let input = CreateWorkflow { name: "ship".into(), goal: "ship the feature".into(), steps, author: None };
        build_workflow(input, "wf_1".into(), DateTime::from_timestamp(1_700_000_000, 0).unwrap())
    }

    fn update(workflow: &Workflow, step: &str, status: &str) -> Result<Workflow, FieldError> {
        let change = StepUpdate { step_id: step.into(), status: status.into(), ..StepUpdate::default() };
        apply_step_update(workflow, change, DateTime::from_timestamp(1_700_000_100, 0).unwrap())
    }

    fn diamond() -> Workflow {
        build(vec![step("design", &[]), step("api", &["design"]), step("ui", &["design"]), step("release", &["api", "ui"])]).unwrap()
    }

    #[test]
    fn an_unknown_dependency_is_refused_by_name() {
        let error = build(vec![step("design", &[]), step("api", &["desing"])]).unwrap_err();
        assert_eq!(error.field, "steps[1].dependencies[0]");
        assert!(error.problem.contains("`desing`"), "{error}");
        assert!(error.suggestion.contains("`design`"), "{error}");
    }

    #[test]
    fn a_cycle_is_refused_with_its_path() {
        let error = build(vec![step("a", &["c"]), step("b", &["a"]), step("c", &["b"]), step("d", &[])]).unwrap_err();
        assert!(error.problem.contains("cycle"), "{error}");
        assert!(error.problem.contains("a -> c -> b -> a"), "{error}");
        let error = build(vec![step("self", &["self"])]).unwrap_err();
        assert!(error.problem.contains("self -> self"), "{error}");
    }

    #[test]
    fn a_long_chain_is_a_dag() {
        let ids: Vec<String> = (0..MAX_STEPS).map(|i| format!("s{i}")).collect();
        let steps = (0..MAX_STEPS).map(|i| if i == 0 { step(&ids[0], &[]) } else { step(&ids[i], &[&ids[i - 1]]) }).collect();
        let workflow = build(steps).unwrap();
        assert_eq!(workflow.sets().ready, vec!["s0"]);
    }

    #[test]
    fn malformed_input_names_the_field() {
        assert_eq!(build(vec![]).unwrap_err().field, "steps");
        assert_eq!(build(vec![step("a", &[]), step("a", &[])]).unwrap_err().field, "steps[1].id");
        assert_eq!(build(vec![step("has space", &[])]).unwrap_err().field, "steps[0].id");
        let mut blank = step("a", &[]);
        blank.description = "  ".into();
        assert_eq!(build(vec![blank]).unwrap_err().field, "steps[0].description");
        let input = CreateWorkflow { name: " ".into(), goal: "g".into(), steps: vec![step("a", &[])], author: None };
        assert_eq!(build_workflow(input, "wf".into(), Utc::now()).unwrap_err().field, "name");
    }

    #[test]
    fn the_ready_set_follows_completions() {
        let workflow = diamond();
        let sets = workflow.sets();
        assert_eq!(sets.ready, vec!["design"]);
        assert_eq!(sets.blocked, vec!["api", "ui", "release"]);
        assert_eq!(workflow.next_step().unwrap().id, "design");

        let workflow = update(&workflow, "design", "in_progress").unwrap();
        assert_eq!(workflow.sets().in_progress, vec!["design"]);
        assert!(workflow.sets().ready.is_empty());
        assert_eq!(workflow.next_step().unwrap().id, "design");

        let workflow = update(&workflow, "design", "completed").unwrap();
        assert_eq!(workflow.sets().ready, vec!["api", "ui"]);
        assert_eq!(workflow.sets().blocked, vec!["release"]);

        let workflow = update(&workflow, "api", "completed").unwrap();
        let workflow = update(&workflow, "ui", "failed").unwrap();
        assert_eq!(workflow.sets().failed, vec!["ui"]);
        assert_eq!(workflow.sets().blocked, vec!["release"]);
        assert_eq!(workflow.next_step().unwrap().id, "ui", "a failed step is retried before anything else");

        let workflow = update(&workflow, "ui", "skipped").unwrap();
        assert_eq!(workflow.sets().ready, vec!["release"]);
        assert_eq!(workflow.status, WorkflowStatus::Active);
        let workflow = update(&workflow, "release", "completed").unwrap();
        assert_eq!(workflow.status, WorkflowStatus::Completed);
        assert_eq!(workflow.sets().done, vec!["design", "api", "ui", "release"]);
        assert!(workflow.next_step().is_none());
        assert_eq!(update(&workflow, "release", "pending").unwrap_err().field, "workflow_id");
    }

    #[test]
    fn a_step_cannot_start_before_its_dependencies_are_done() {
        let workflow = diamond();
        for status in ["in_progress", "completed", "failed", "skipped"] {
            let error = update(&workflow, "api", status).unwrap_err();
            assert_eq!(error.field, "status");
            assert!(error.problem.contains("`design` (pending)"), "{error}");
        }
        let workflow = update(&workflow, "design", "in_progress").unwrap();
        assert!(update(&workflow, "api", "in_progress").unwrap_err().problem.contains("`design` (in_progress)"));
    }

    #[test]
    fn a_step_goes_back_to_pending_only_while_its_dependents_wait() {
        let workflow = update(&diamond(), "design", "completed").unwrap();
        let reopened = update(&workflow, "design", "pending").unwrap();
        assert_eq!(reopened.sets().ready, vec!["design"]);
        let workflow = update(&workflow, "api", "in_progress").unwrap();
        let error = update(&workflow, "design", "pending").unwrap_err();
        assert!(error.problem.contains("`api` (in_progress)"), "{error}");
    }

    #[test]
    fn unknown_steps_and_statuses_are_refused_with_suggestions() {
        let workflow = diamond();
        let error = update(&workflow, "desgin", "completed").unwrap_err();
        assert_eq!(error.field, "step_id");
        assert!(error.suggestion.contains("`design`"));
        let error = update(&workflow, "design", "done").unwrap_err();
        assert_eq!(error.field, "status");
        assert_eq!(update(&workflow, "design", "In-Progress").unwrap().steps[0].status, StepStatus::InProgress);
    }

    #[test]
    fn notes_and_produced_memories_are_kept() {
        let workflow = diamond();
        let change = StepUpdate {
            step_id: "design".into(),
            status: "completed".into(),
            notes: Some("chose REST".into()),
            produced: vec!["kenning://user/decisions/01jabcdefghjkmnpqrstvwxyz0".into()],
        };
        let workflow = apply_step_update(&workflow, change.clone(), Utc::now()).unwrap();
        let again = apply_step_update(&workflow, change, Utc::now()).unwrap();
        assert_eq!(again.steps[0].notes.len(), 2);
        assert_eq!(again.produced().len(), 1);
        let bad = StepUpdate { step_id: "api".into(), status: "in_progress".into(), produced: vec!["not a urn".into()], ..StepUpdate::default() };
        assert_eq!(apply_step_update(&again, bad, Utc::now()).unwrap_err().field, "produced[0]");
        assert!(summary_markdown(&again).contains("- [completed] `design`: do design"));
        assert!(summary_markdown(&again).contains("chose REST"));
    }

    #[test]
    fn an_abandoned_workflow_keeps_its_steps_and_is_final() {
        let workflow = update(&diamond(), "design", "completed").unwrap();
        assert_eq!(abandon(&workflow, "", Utc::now()).unwrap_err().field, "reason");
        let abandoned = abandon(&workflow, "priorities changed", Utc::now()).unwrap();
        assert_eq!(abandoned.status, WorkflowStatus::Abandoned);
        assert_eq!(abandoned.sets().done, vec!["design"]);
        assert!(abandon(&abandoned, "again", Utc::now()).is_err());
        assert!(summary_markdown(&abandoned).contains("Reason: priorities changed"));
    }

    #[test]
    fn workflows_round_trip_through_json() {
        let workflow = update(&diamond(), "design", "completed").unwrap();
        let text = serde_json::to_string(&workflow).unwrap();
        assert_eq!(serde_json::from_str::<Workflow>(&text).unwrap(), workflow);
    }
}
