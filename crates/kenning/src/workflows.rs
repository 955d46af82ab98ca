//! `kenning workflow list | show`: the workflows kept in the stores, for people (tables) and
//! programs (`--json`).

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::Result;
use clap::Subcommand;
use kenning_engine::workflows::{WorkflowPage, WorkflowView};
use kenning_engine::{MemoryService, WorkflowQuery, WorkflowService};

use crate::print;

#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// List workflows, newest first.
    List {
        /// Only workflows that are active, completed or abandoned.
        #[arg(long)]
        status: Option<String>,
        /// Only this domain's workflows (`project`, `user` or a full domain).
        #[arg(long)]
        domain: Option<String>,
        /// At most this many, 1 to 100.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Show one workflow's steps, what is ready and the next step (default: the active one updated last).
    Show { workflow_id: Option<String> },
}

pub fn run(memory: &Arc<MemoryService>, json: bool, command: WorkflowCommand) -> Result<()> {
    let workflows = WorkflowService::new(memory.clone());
    match command {
        WorkflowCommand::List { status, domain, limit } => {
            let page = workflows.list(WorkflowQuery { status, domain, limit: Some(limit), cursor: None })?;
            print(json, &page, table)
        }
        WorkflowCommand::Show { workflow_id } => print(json, &workflows.status(workflow_id.as_deref())?, detail),
    }
}

fn table(page: &WorkflowPage) -> String {
    if page.workflows.is_empty() {
        return "no workflows\n".to_owned();
    }
    let mut out = String::new();
    for workflow in &page.workflows {
        let _ = writeln!(
            out,
            "{}  {:<9}  {}/{} done  {}{}",
            workflow.workflow_id,
            workflow.status,
            workflow.steps_done,
            workflow.steps,
            workflow.name,
            workflow.next_step.as_deref().map(|step| format!("  (next: {step})")).unwrap_or_default()
        );
    }
    out
}

fn detail(view: &WorkflowView) -> String {
    let mut out = format!("{}  {}  [{}]\ngoal: {}\n", view.workflow_id, view.name, view.status, view.goal);
    for step in &view.steps {
        let after = if step.dependencies.is_empty() { String::new() } else { format!("  (after {})", step.dependencies.join(", ")) };
        let _ = writeln!(out, "  [{:<11}] {}: {}{after}", step.status, step.id, step.description);
        for note in &step.notes {
            let _ = writeln!(out, "      {note}");
        }
    }
    if let Some(memory) = &view.memory {
        let _ = writeln!(out, "written up as {memory}");
    }
    let _ = writeln!(out, "{}", view.message);
    out
}
