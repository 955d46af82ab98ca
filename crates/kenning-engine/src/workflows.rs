//! [`WorkflowService`]: workflows kept as working state in a domain's store, moved along one
//! step at a time, and written up as an episodic memory when they end.
//!
//! The rules (the DAG, the ready set, which transitions are allowed) are the core's
//! ([`kenning_core::workflow`]); this service stores the result with compare-and-swap on the
//! record's revision, so two agents moving steps of one workflow never overwrite each other.
//! When a workflow ends (every step done, or abandoned) its summary becomes a memory in the
//! `progress` namespace linked to the memories its steps produced; the workflow records that
//! memory's URN, and a workflow found ended without one (a crash between the two writes) gets
//! it on the next call that touches it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use kenning_core::input::{MAX_CONTENT_BYTES, MAX_LINKS, MAX_TITLE_CHARS};
use kenning_core::relation;
use kenning_core::secrets::Named;
use kenning_core::state::{StateKind, StateRecord, StateStore};
use kenning_core::workflow::{
    CreateWorkflow, Step, StepSets, StepUpdate, WORKFLOW_ID_PREFIX, Workflow, WorkflowStatus, abandon, apply_step_update, build_workflow,
    summary_markdown,
};
use kenning_core::{CaptureInput, Cursor, Domain, FieldError, LinkInput, MemoryUrn, PurgeMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ids::new_memory_id;
use crate::service::{CAS_ATTEMPTS, DomainStore, MemoryService, backoff};
use crate::redaction::redact;
use crate::views::{redaction_warning, timestamp};

pub const DEFAULT_LIST_LIMIT: usize = 20;
pub const MAX_LIST_LIMIT: usize = 100;
/// The most workflows of one domain a listing looks through.
const MAX_LISTED_PER_DOMAIN: usize = 1000;

/// One step as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepView {
    pub id: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<String>,
    /// pending, in_progress, completed, failed or skipped.
    pub status: String,
    /// Notes left with status changes, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// URNs of the memories the step produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub produced: Vec<String>,
}

impl From<&Step> for StepView {
    fn from(step: &Step) -> Self {
        StepView {
            id: step.id.clone(),
            description: step.description.clone(),
            dependencies: step.dependencies.clone(),
            verification: step.verification.clone(),
            status: step.status.to_string(),
            notes: step.notes.iter().map(|note| format!("{} ({}): {}", timestamp(note.at), note.status, note.text)).collect(),
            produced: step.produced.clone(),
        }
    }
}

/// A whole workflow: where every step stands and what to do next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowView {
    pub workflow_id: String,
    pub name: String,
    pub goal: String,
    /// active, completed or abandoned.
    pub status: String,
    pub domain: String,
    pub created_at: String,
    pub updated_at: String,
    /// Pending steps whose dependencies are done.
    pub ready: Vec<String>,
    /// Pending steps waiting on a dependency.
    pub blocked: Vec<String>,
    pub in_progress: Vec<String>,
    /// Completed or skipped steps.
    pub done: Vec<String>,
    pub failed: Vec<String>,
    /// The step to work on now: one in progress, else a failed one to retry, else the first ready one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step: Option<StepView>,
    pub steps: Vec<StepView>,
    /// Why it was abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// URN of the episodic memory written when the workflow ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One workflow in a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowSummary {
    pub workflow_id: String,
    pub name: String,
    pub goal: String,
    pub status: String,
    pub domain: String,
    pub updated_at: String,
    pub steps: usize,
    pub steps_done: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowPage {
    pub workflows: Vec<WorkflowSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A listing of workflows; every field is optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowQuery {
    /// active, completed or abandoned.
    pub status: Option<String>,
    pub domain: Option<String>,
    pub cursor: Option<String>,
    pub limit: Option<usize>,
}

/// The workflow service.
pub struct WorkflowService {
    memory: Arc<MemoryService>,
}

/// A domain's store and its working state.
struct Place<'a> {
    entry: &'a DomainStore,
    state: &'a dyn StateStore,
}

impl WorkflowService {
    pub fn new(memory: Arc<MemoryService>) -> Self {
        WorkflowService { memory }
    }

    fn place<'a>(&self, entry: &'a DomainStore) -> Result<Place<'a>> {
        match entry.store.state() {
            Some(state) => Ok(Place { entry, state }),
            None => Err(Error::Invalid(FieldError::new(
                "domain",
                "is kept in a store that cannot hold workflows",
                entry.domain.to_string(),
                "use a domain kept in SQLite, git notes or PostgreSQL (`kenning status` lists them)",
            ))),
        }
    }

    /// The domain a caller named, or the default one.
    fn target(&self, domain: Option<&str>) -> Result<Place<'_>> {
        let entry = match domain {
            Some(text) => self.memory.resolve_domain("domain", text)?,
            None => &self.memory.domain_stores()[0],
        };
        self.place(entry)
    }

    fn places(&self) -> impl Iterator<Item = Place<'_>> {
        self.memory.domain_stores().iter().filter_map(|entry| entry.store.state().map(|state| Place { entry, state }))
    }

    fn check_id(id: &str) -> Result<&str> {
        let id = id.trim();
        let valid = id.starts_with(WORKFLOW_ID_PREFIX)
            && id.len() <= 64
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            Ok(id)
        } else {
            Err(FieldError::new("workflow_id", "is not a workflow id", id, "pass the `wf_…` id workflow_create returned; workflow_list lists them").into())
        }
    }

    /// Finds a workflow by id in any domain.
    fn find(&self, id: &str) -> Result<(Place<'_>, StateRecord, Workflow)> {
        let id = Self::check_id(id)?;
        for place in self.places() {
            if let Some(record) = place.state.get_state(StateKind::Workflow, id)? {
                let workflow = decode(&record)?;
                return Ok((place, record, workflow));
            }
        }
        Err(FieldError::new("workflow_id", "names no workflow in any configured domain", id, "workflow_list lists the workflows").into())
    }

    /// Validates and stores a new workflow.
    pub fn create(&self, mut input: CreateWorkflow, domain: Option<&str>) -> Result<WorkflowView> {
        let warnings: Vec<String> = redaction_warning(&redact(&mut input)).into_iter().collect();
        if input.author.is_none() {
            input.author = self.memory.authored(CaptureInput::default()).author;
        }
        let place = self.target(domain)?;
        let now = self.memory.now();
        let id = format!("{WORKFLOW_ID_PREFIX}{}", new_memory_id(now));
        let workflow = build_workflow(input, id, now)?;
        place.state.put_state(&encode(&workflow, 1)?)?;
        let mut view = view(&place.entry.domain, &workflow, warnings);
        view.message = format!("Workflow created with {} steps. {}", workflow.steps.len(), view.message);
        Ok(view)
    }

    /// A workflow by id, or without one the active workflow updated last.
    pub fn status(&self, id: Option<&str>) -> Result<WorkflowView> {
        let id = match id.map(str::trim).filter(|id| !id.is_empty()) {
            Some(id) => id.to_owned(),
            None => self.latest_active()?.ok_or_else(|| {
                Error::Invalid(FieldError::new(
                    "workflow_id",
                    "is needed: there is no active workflow",
                    serde_json::Value::Null,
                    "create one with workflow_create, or pass the id of an ended one (workflow_list)",
                ))
            })?,
        };
        let (place, record, workflow) = self.find(&id)?;
        let (workflow, warnings) = self.close_if_ended(&place, record, workflow)?;
        Ok(view(&place.entry.domain, &workflow, warnings))
    }

    fn latest_active(&self) -> Result<Option<String>> {
        let mut best: Option<(DateTime<Utc>, String)> = None;
        for place in self.places() {
            // Newest first, so the first active one is this domain's latest.
            for record in place.state.list_state(StateKind::Workflow, 0, MAX_LISTED_PER_DOMAIN)? {
                if decode(&record)?.status == WorkflowStatus::Active {
                    if best.as_ref().is_none_or(|(at, _)| record.updated_at > *at) {
                        best = Some((record.updated_at, record.id));
                    }
                    break;
                }
            }
        }
        Ok(best.map(|(_, id)| id))
    }

    /// Moves one step, with compare-and-swap retries; a workflow whose last step is done is
    /// completed and written up as a memory.
    pub fn update_step(&self, id: &str, mut update: StepUpdate) -> Result<WorkflowView> {
        let warnings: Vec<String> = redaction_warning(&redact(&mut update)).into_iter().collect();
        for (position, urn) in update.produced.iter().enumerate() {
            self.check_memory(&format!("produced[{position}]"), urn)?;
        }
        self.change(id, warnings, |workflow, now| Ok(apply_step_update(workflow, update.clone(), now)?))
    }

    /// Gives up an active workflow and writes it up as a memory.
    pub fn abandon(&self, id: &str, reason: &str) -> Result<WorkflowView> {
        let mut reason = reason.to_owned();
        let warnings: Vec<String> = redaction_warning(&redact(&mut Named("reason", &mut reason))).into_iter().collect();
        self.change(id, warnings, |workflow, now| Ok(abandon(workflow, &reason, now)?))
    }

    fn change(&self, id: &str, mut warnings: Vec<String>, apply: impl Fn(&Workflow, DateTime<Utc>) -> Result<Workflow>) -> Result<WorkflowView> {
        for attempt in 0..CAS_ATTEMPTS {
            crate::error::check_interrupt()?;
            let (place, record, current) = self.find(id)?;
            let next = apply(&current, self.memory.now())?;
            match place.state.put_state(&encode(&next, record.revision + 1)?) {
                Ok(()) => {
                    let record = StateRecord { revision: record.revision + 1, ..record };
                    let (next, more) = self.close_if_ended(&place, record, next)?;
                    warnings.extend(more);
                    return Ok(view(&place.entry.domain, &next, warnings));
                }
                Err(kenning_core::Error::Conflict { .. }) => backoff(attempt),
                Err(error) => return Err(error.into()),
            }
        }
        Err(Error::Busy { target: id.to_owned() })
    }

    /// Writes the closing memory of an ended workflow that has none yet and records its URN.
    /// The memory is written first: a crash before the URN is recorded leaves a workflow that
    /// gets it on the next call, and the memory's content is the same, so the capture's
    /// duplicate rule returns the one already written.
    fn close_if_ended(&self, place: &Place<'_>, mut record: StateRecord, mut workflow: Workflow) -> Result<(Workflow, Vec<String>)> {
        if workflow.status == WorkflowStatus::Active || workflow.memory.is_some() {
            return Ok((workflow, Vec::new()));
        }
        let mut warnings = Vec::new();
        let produced = workflow.produced();
        if produced.len() > MAX_LINKS {
            warnings.push(format!("the closing memory links the first {MAX_LINKS} of the {} memories the steps produced", produced.len()));
        }
        let links = produced.into_iter().take(MAX_LINKS).map(|target| LinkInput { target, relation: Some(relation::PRODUCED.to_owned()) }).collect();
        let title = truncate_chars(&format!("Workflow {}: {}", workflow.status, workflow.name), MAX_TITLE_CHARS);
        let input = CaptureInput {
            content: truncate_bytes(&summary_markdown(&workflow), MAX_CONTENT_BYTES),
            title: Some(title),
            kind: Some("episodic".into()),
            namespace: Some("progress".into()),
            tags: vec!["workflow".into(), workflow.status.to_string()],
            source: Some("tool-result".into()),
            links,
            metadata: [("workflow_id".to_owned(), workflow.id.clone())].into_iter().collect(),
            author: workflow.author.clone(),
            ..CaptureInput::default()
        };
        let outcome = self.memory.capture(input, Some(&place.entry.domain.to_string()))?;
        warnings.extend(outcome.warnings);
        for attempt in 0..CAS_ATTEMPTS {
            workflow.memory = Some(outcome.urn.clone());
            match place.state.put_state(&encode(&workflow, record.revision + 1)?) {
                Ok(()) => return Ok((workflow, warnings)),
                Err(kenning_core::Error::Conflict { .. }) => {
                    backoff(attempt);
                    record = place.state.get_state(StateKind::Workflow, &workflow.id)?.ok_or_else(|| Error::Busy { target: workflow.id.clone() })?;
                    workflow = decode(&record)?;
                    if workflow.memory.is_some() {
                        return Ok((workflow, warnings));
                    }
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(Error::Busy { target: workflow.id.clone() })
    }

    /// Refuses a URN that names no memory a configured domain holds.
    fn check_memory(&self, field: &str, text: &str) -> Result<()> {
        let urn = MemoryUrn::parse(field, text)?;
        let held = match self.memory.domain_stores().iter().find(|entry| entry.domain == urn.domain) {
            Some(entry) => entry.store.get(&urn.id)?.is_some(),
            None => false,
        };
        if held {
            Ok(())
        } else {
            Err(FieldError::new(field, "names no memory this server holds", text, "pass the URN memory_capture returned").into())
        }
    }

    /// Workflows newest first, filtered by status and domain, paginated.
    pub fn list(&self, query: WorkflowQuery) -> Result<WorkflowPage> {
        let status = match query.status.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(
                [WorkflowStatus::Active, WorkflowStatus::Completed, WorkflowStatus::Abandoned]
                    .into_iter()
                    .find(|status| status.as_str() == text.to_lowercase())
                    .ok_or_else(|| FieldError::new("status", "is not a workflow status", text, "one of active, completed, abandoned"))?,
            ),
        };
        let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT);
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(FieldError::new("limit", format!("must be between 1 and {MAX_LIST_LIMIT}"), limit, "omit it for 20").into());
        }
        let offset = match query.cursor.as_deref() {
            Some(text) => Cursor::decode(text)?.offset,
            None => 0,
        };
        let places: Vec<Place<'_>> = match query.domain.as_deref() {
            Some(text) => vec![self.target(Some(text))?],
            None => self.places().collect(),
        };
        let mut all: Vec<(DateTime<Utc>, WorkflowSummary)> = Vec::new();
        for place in &places {
            for record in place.state.list_state(StateKind::Workflow, 0, MAX_LISTED_PER_DOMAIN)? {
                let workflow = decode(&record)?;
                if status.is_none_or(|status| status == workflow.status) {
                    all.push((record.updated_at, summary(&place.entry.domain, &workflow)));
                }
            }
        }
        all.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.workflow_id.cmp(&b.1.workflow_id)));
        let workflows: Vec<WorkflowSummary> = all.into_iter().skip(offset).take(limit + 1).map(|(_, summary)| summary).collect();
        let more = workflows.len() > limit;
        Ok(WorkflowPage {
            workflows: workflows.into_iter().take(limit).collect(),
            next_cursor: more.then(|| Cursor { offset: offset + limit }.encode()),
        })
    }
}

/// Removes (or in a [`PurgeMode::DryRun`] only counts) the workflows `author` created in one
/// store's working state: the data-rights purge covers them as it covers the author's memories.
pub(crate) fn purge_author(state: &dyn StateStore, author: &str, mode: PurgeMode) -> Result<u64> {
    let mut theirs = Vec::new();
    let mut offset = 0;
    loop {
        let page = state.list_state(StateKind::Workflow, offset, MAX_LISTED_PER_DOMAIN)?;
        for record in &page {
            if decode(record)?.author.as_deref() == Some(author) {
                theirs.push(record.id.clone());
            }
        }
        if page.len() < MAX_LISTED_PER_DOMAIN {
            break;
        }
        offset += page.len();
    }
    if mode == PurgeMode::Apply {
        for id in &theirs {
            state.delete_state(StateKind::Workflow, id)?;
        }
    }
    Ok(theirs.len() as u64)
}

fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max { text.to_owned() } else { format!("{}…", text.chars().take(max - 1).collect::<String>()) }
}

fn truncate_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max - "\n…".len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n…", &text[..end])
}

fn encode(workflow: &Workflow, revision: u64) -> Result<StateRecord> {
    Ok(StateRecord {
        kind: StateKind::Workflow,
        id: workflow.id.clone(),
        revision,
        updated_at: workflow.updated_at,
        body: serde_json::to_string(workflow).map_err(|error| Error::Storage(format!("workflow JSON: {error}")))?,
        subjects: Vec::new(),
    })
}

fn decode(record: &StateRecord) -> Result<Workflow> {
    serde_json::from_str(&record.body).map_err(|error| Error::Storage(format!("stored workflow {} does not read: {error}", record.id)))
}

fn message(workflow: &Workflow, sets: &StepSets) -> String {
    match workflow.status {
        WorkflowStatus::Completed => "Every step is done; the workflow is completed and written up as a memory.".to_owned(),
        WorkflowStatus::Abandoned => "The workflow was abandoned and written up as a memory.".to_owned(),
        WorkflowStatus::Active => match workflow.next_step() {
            Some(step) if step.status == kenning_core::workflow::StepStatus::InProgress => {
                format!("Continue `{}`, which is in progress, then mark it completed.", step.id)
            }
            Some(step) if step.status == kenning_core::workflow::StepStatus::Failed => {
                format!("`{}` failed: retry it (in_progress) or skip it.", step.id)
            }
            Some(step) => format!("Next: `{}` ({} ready).", step.id, sets.ready.len()),
            None => "No step can start: every remaining step waits on another.".to_owned(),
        },
    }
}

fn view(domain: &Domain, workflow: &Workflow, warnings: Vec<String>) -> WorkflowView {
    let sets = workflow.sets();
    WorkflowView {
        workflow_id: workflow.id.clone(),
        name: workflow.name.clone(),
        goal: workflow.goal.clone(),
        status: workflow.status.to_string(),
        domain: domain.to_string(),
        created_at: timestamp(workflow.created_at),
        updated_at: timestamp(workflow.updated_at),
        message: message(workflow, &sets),
        ready: sets.ready,
        blocked: sets.blocked,
        in_progress: sets.in_progress,
        done: sets.done,
        failed: sets.failed,
        next_step: workflow.next_step().map(StepView::from),
        steps: workflow.steps.iter().map(StepView::from).collect(),
        reason: workflow.reason.clone(),
        memory: workflow.memory.clone(),
        warnings,
    }
}

fn summary(domain: &Domain, workflow: &Workflow) -> WorkflowSummary {
    WorkflowSummary {
        workflow_id: workflow.id.clone(),
        name: workflow.name.clone(),
        goal: workflow.goal.clone(),
        status: workflow.status.to_string(),
        domain: domain.to_string(),
        updated_at: timestamp(workflow.updated_at),
        steps: workflow.steps.len(),
        steps_done: workflow.steps.iter().filter(|step| step.status.is_done()).count(),
        next_step: workflow.next_step().map(|step| step.id.clone()),
    }
}
