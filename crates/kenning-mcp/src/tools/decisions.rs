//! The `decisions` toolset: capture decisions, follow them through signals to an outcome, and
//! read back calibration, skills, warnings and context. Each tool unpacks its arguments, calls
//! one decision-service method on the blocking pool and returns the view as structured content.

use std::collections::BTreeMap;

use rmcp::schemars::{self, JsonSchema};
use rmcp::{Json, tool, tool_router};
use serde::Deserialize;

use kenning_core::FieldError;
use kenning_core::decision::{CaptureDecision, OutcomeInput, SignalInput, UpdateDecision};
use kenning_engine::{ChainAnalysis, DecisionQuery};
use kenning_engine::decisions::views::{
    CalibrationReport, CaptureDecisionResult, ContextView, DecisionDetail, DecisionPage, OutcomeResult, SignalResult,
    SkillsView, UpdateDecisionResult, WarningsView,
};
use kenning_engine::decisions::{CalibrationQuery, ContextQuery, SkillsQuery};

use crate::KenningServer;
use crate::decision_resources::Change;
use crate::error::{ToolError, blocking};
use crate::params::{Author, Strict, input_schema};

#[tool_router(router = decision_tools, vis = "pub(crate)")]
impl KenningServer {
    #[tool(
        name = "decision_capture",
        title = "Capture a decision",
        description = "Record a technical decision with the alternatives considered and your confidence, so its outcome can calibrate you later.",
        input_schema = input_schema::<CaptureDecisionArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn decision_capture(
        &self,
        Author(author): Author,
        Strict(args): Strict<CaptureDecisionArgs>,
    ) -> Result<Json<CaptureDecisionResult>, ToolError> {
        let decisions = self.decisions.clone();
        let (mut input, domain) = args.into_input()?;
        input.author = author;
        let result = blocking(move || decisions.capture(input, domain.as_deref())).await?;
        self.notify(&result.domain, Change::Captured).await;
        Ok(Json(result))
    }

    #[tool(
        name = "decision_update",
        title = "Update a decision",
        description = "Move a decision along pending, executed, then completed, failed or reworked, revise its confidence, add notes or link a PR or commit.",
        input_schema = input_schema::<UpdateDecisionArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn decision_update(&self, Strict(args): Strict<UpdateDecisionArgs>) -> Result<Json<UpdateDecisionResult>, ToolError> {
        let decisions = self.decisions.clone();
        let (id, input) = args.into_input();
        let result = blocking(move || decisions.update(&id, input)).await?;
        self.notify(&result.domain, Change::Updated { decision_id: &result.decision_id }).await;
        Ok(Json(result))
    }

    #[tool(
        name = "decision_get",
        title = "Get a decision",
        description = "Read one decision with its signals, outcome, similar past decisions and matching antipatterns, and with analysis its causal chain, prevention effectiveness and antipatterns avoided.",
        input_schema = input_schema::<GetDecisionArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn decision_get(&self, Strict(args): Strict<GetDecisionArgs>) -> Result<Json<DecisionDetail>, ToolError> {
        let decisions = self.decisions.clone();
        let chain = if args.analysis.unwrap_or(false) { ChainAnalysis::Included } else { ChainAnalysis::Omitted };
        blocking(move || decisions.get(&args.decision_id, chain)).await.map(Json)
    }

    #[tool(
        name = "decision_query",
        title = "Query past decisions",
        description = "Search past decisions by text, module, status or related file, newest or best match first, paginated.",
        input_schema = input_schema::<QueryDecisionsArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn decision_query(&self, Strict(args): Strict<QueryDecisionsArgs>) -> Result<Json<DecisionPage>, ToolError> {
        let decisions = self.decisions.clone();
        let query = DecisionQuery::from(args);
        blocking(move || decisions.query(query)).await.map(Json)
    }

    #[tool(
        name = "decision_record_signal",
        title = "Record a signal",
        description = "Record an event seen before the outcome (PR, CI, incident, performance) and get the decision's updated estimated success.",
        input_schema = input_schema::<SignalArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn decision_record_signal(&self, Strict(args): Strict<SignalArgs>) -> Result<Json<SignalResult>, ToolError> {
        let decisions = self.decisions.clone();
        let (id, input) = args.into_input();
        let result = blocking(move || decisions.record_signal(&id, input)).await?;
        self.notify(&result.domain, Change::Updated { decision_id: &result.decision_id }).await;
        Ok(Json(result))
    }

    #[tool(
        name = "decision_record_outcome",
        title = "Record an outcome",
        description = "Record how a decision turned out, which updates calibration and skills at once and stores the lessons as learnings.",
        input_schema = input_schema::<OutcomeArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn decision_record_outcome(&self, Strict(args): Strict<OutcomeArgs>) -> Result<Json<OutcomeResult>, ToolError> {
        let decisions = self.decisions.clone();
        let (id, input) = args.into_input();
        let result = blocking(move || decisions.record_outcome(&id, input)).await?;
        let change = Change::Outcome { decision_id: &result.decision_id, module: &result.calibration_impact.module };
        self.notify(&result.domain, change).await;
        Ok(Json(result))
    }

    #[tool(
        name = "decision_calibration",
        title = "Calibration and guidance",
        description = "Report how well stated confidence matches outcomes for one module or all, or advise on a confidence you are about to state.",
        input_schema = input_schema::<CalibrationArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn decision_calibration(&self, Strict(args): Strict<CalibrationArgs>) -> Result<Json<CalibrationReport>, ToolError> {
        let decisions = self.decisions.clone();
        let query = CalibrationQuery::from(args);
        blocking(move || decisions.calibration(query)).await.map(Json)
    }

    #[tool(
        name = "decision_skills",
        title = "Skills and antipatterns",
        description = "List the skills and antipatterns mined from outcomes, for a module or all, ranked by how well they apply to a statement.",
        input_schema = input_schema::<SkillsArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn decision_skills(&self, Strict(args): Strict<SkillsArgs>) -> Result<Json<SkillsView>, ToolError> {
        let decisions = self.decisions.clone();
        let query = SkillsQuery::from(args);
        blocking(move || decisions.skills(query)).await.map(Json)
    }

    #[tool(
        name = "decision_context",
        title = "Decision context and warnings",
        description = "Before deciding, get calibration, similar decisions, applicable skills, warnings with a risk score and firewall verdict, and a markdown block.",
        input_schema = input_schema::<ContextArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn decision_context(&self, Strict(args): Strict<ContextArgs>) -> Result<Json<ContextView>, ToolError> {
        let decisions = self.decisions.clone();
        let query = ContextQuery::from(args);
        blocking(move || decisions.context(query)).await.map(Json)
    }

    #[tool(
        name = "decision_warnings",
        title = "Decision warnings",
        description = "Check a proposed decision for red flags and get its risk score and firewall verdict.",
        input_schema = input_schema::<WarningsArgs>(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn decision_warnings(&self, Strict(args): Strict<WarningsArgs>) -> Result<Json<WarningsView>, ToolError> {
        let decisions = self.decisions.clone();
        let query = args.into_query()?;
        blocking(move || decisions.warnings(query)).await.map(Json)
    }
}

// Seed call shapes. Seed 000 (Membria) and the coding-agent spec (seed 003) name some arguments
// differently; their names are read here as aliases of kenning's own, left out of the schemas
// (serde aliases and `#[schemars(skip)]` fields), so tools/list does not grow. The README's
// "Coming from another memory server" tables list them.

/// A decision's `context` as the seeds give it: the decision log's sentence on why the decision
/// was needed, or Membria's object with the module, session, file and reasoning.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ContextArg {
    Problem(String),
    Membria(MembriaContext),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MembriaContext {
    module: Option<String>,
    session_id: Option<String>,
    file_path: Option<String>,
    reasoning: Option<String>,
}

/// A value given at the top level, in Membria's nested `context`, or in both when they agree.
fn merged(field: &str, nested_field: &str, top: Option<String>, nested: Option<String>) -> Result<Option<String>, FieldError> {
    match (top, nested) {
        (Some(top), Some(nested)) if top.trim() != nested.trim() => Err(FieldError::new(
            format!("context.{nested_field}"),
            format!("differs from `{field}`, given beside it"),
            nested,
            format!("give `{field}` once, at the top level or in `context`"),
        )),
        (top, nested) => Ok(top.or(nested)),
    }
}

/// Membria's context object, or an empty one when `context` is the decision log's sentence
/// (returned beside it as the problem the decision answers).
fn split_context(context: Option<ContextArg>) -> (MembriaContext, Option<String>) {
    match context {
        None => (MembriaContext::default(), None),
        Some(ContextArg::Problem(problem)) => (MembriaContext::default(), Some(problem)),
        Some(ContextArg::Membria(context)) => (context, None),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WarningsArgs {
    /// The decision you are considering.
    pub statement: String,
    /// Its module; all modules' records when absent.
    pub module: Option<String>,
    /// The confidence you would state, 0 to 1.
    pub confidence: Option<f64>,
    /// The alternatives you considered.
    pub alternatives: Option<Vec<String>>,
    /// low, medium or high.
    pub risk_level: Option<String>,
    /// The domain; default the default domain.
    pub domain: Option<String>,
    /// Seed 000's `context` object, whose `module` counts when `module` is not given.
    #[schemars(skip)]
    pub context: Option<MembriaContext>,
}

impl WarningsArgs {
    fn into_query(self) -> Result<ContextQuery, FieldError> {
        let context = self.context.unwrap_or_default();
        Ok(ContextQuery {
            statement: self.statement,
            module: merged("module", "module", self.module, context.module)?,
            confidence: self.confidence,
            alternatives: self.alternatives,
            risk_level: self.risk_level,
            depth: None,
            domain: self.domain,
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalibrationArgs {
    /// `module` (one module, or all together without `module`), `all` (every module and overall) or `guidance` (advice on `confidence`); chosen from the other arguments when absent.
    pub mode: Option<String>,
    /// The module.
    pub module: Option<String>,
    /// For guidance: the confidence you are about to state, 0 to 1.
    #[serde(alias = "decision_confidence")]
    pub confidence: Option<f64>,
    /// For guidance: the decision, to find mined patterns like it.
    #[serde(alias = "context")]
    pub statement: Option<String>,
    /// For all: only modules with at least this many outcomes; default 1.
    pub min_sample_size: Option<usize>,
    /// For all: module (default), success_rate, trend or variance.
    pub sort_by: Option<String>,
    /// The domain; default the default domain.
    pub domain: Option<String>,
    /// Seed 000: leave the trend out when false; default true.
    #[schemars(skip)]
    pub include_trend: Option<bool>,
    /// Seed 000: leave the 95% credible interval out when false; default true.
    #[schemars(skip)]
    pub include_credible_interval: Option<bool>,
}

impl From<CalibrationArgs> for CalibrationQuery {
    fn from(args: CalibrationArgs) -> Self {
        CalibrationQuery {
            mode: args.mode,
            module: args.module,
            confidence: args.confidence,
            statement: args.statement,
            min_sample_size: args.min_sample_size,
            sort_by: args.sort_by,
            domain: args.domain,
            include_trend: args.include_trend,
            include_credible_interval: args.include_credible_interval,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillsArgs {
    /// The module; all modules when absent.
    pub module: Option<String>,
    /// A proposed decision, to rank by applicability.
    pub decision_statement: Option<String>,
    /// Only skills at least this confident, 0 to 1; default 0.
    pub min_confidence: Option<f64>,
    /// Skills and antipatterns each, 1 to 100; default 10.
    pub limit: Option<usize>,
    /// The domain; default the default domain.
    pub domain: Option<String>,
}

impl From<SkillsArgs> for SkillsQuery {
    fn from(args: SkillsArgs) -> Self {
        SkillsQuery {
            module: args.module,
            statement: args.decision_statement,
            min_confidence: args.min_confidence,
            limit: args.limit,
            domain: args.domain,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextArgs {
    /// The decision you are considering.
    pub statement: String,
    /// Its module; all modules' records when absent.
    pub module: Option<String>,
    /// The confidence you would state, 0 to 1.
    pub confidence: Option<f64>,
    /// The alternatives you considered.
    pub alternatives: Option<Vec<String>>,
    /// low, medium or high.
    pub risk_level: Option<String>,
    /// minimal (calibration and warnings), standard (default: also 3 similar decisions, 2 skills) or full (also lessons and failures).
    pub depth: Option<String>,
    /// The domain; default the default domain.
    pub domain: Option<String>,
}

impl From<ContextArgs> for ContextQuery {
    fn from(args: ContextArgs) -> Self {
        ContextQuery {
            statement: args.statement,
            module: args.module,
            confidence: args.confidence,
            alternatives: args.alternatives,
            risk_level: args.risk_level,
            depth: args.depth,
            domain: args.domain,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureDecisionArgs {
    /// What was decided, 10 to 500 characters, e.g. `Use PostgreSQL for the orders service`.
    #[serde(alias = "decision")]
    pub statement: String,
    /// The options considered and rejected; at least one.
    #[schemars(required)]
    pub alternatives: Option<Vec<String>>,
    /// How likely it is to work out, 0 to 1.
    #[schemars(required)]
    pub confidence: Option<f64>,
    /// The area it belongs to, one of the configured modules (default: database, auth, api, frontend, backend, infra).
    #[schemars(required)]
    pub module: Option<String>,
    /// What must hold for it to work.
    pub assumptions: Option<Vec<String>>,
    /// low, medium (default) or high.
    pub risk_level: Option<String>,
    /// Why this option over the alternatives.
    pub rationale: Option<String>,
    /// The agent session it was made in.
    pub session_id: Option<String>,
    /// The main file it concerns.
    pub file_path: Option<String>,
    /// Other files it concerns.
    pub related_files: Option<Vec<String>>,
    /// Who decided, e.g. `claude-code` or `human`; default `agent`.
    pub created_by: Option<String>,
    /// `project` (default inside a git repository), `user`, or a full domain such as `org:acme`.
    pub domain: Option<String>,
    /// Seed 000's nested `{module, session_id, file_path, reasoning}`, or the decision log's
    /// sentence on why the decision was needed.
    #[schemars(skip)]
    pub context: Option<ContextArg>,
    /// The decision log's known risks or downsides.
    #[schemars(skip)]
    pub risks: Option<Vec<String>>,
}

impl CaptureDecisionArgs {
    fn into_input(self) -> Result<(CaptureDecision, Option<String>), FieldError> {
        let (context, problem) = split_context(self.context);
        let input = CaptureDecision {
            statement: self.statement,
            alternatives: self.alternatives,
            confidence: self.confidence,
            module: merged("module", "module", self.module, context.module)?,
            assumptions: self.assumptions.unwrap_or_default(),
            risk_level: self.risk_level,
            rationale: merged("rationale", "reasoning", self.rationale, context.reasoning)?,
            problem,
            risks: self.risks.unwrap_or_default(),
            session_id: merged("session_id", "session_id", self.session_id, context.session_id)?,
            file_path: merged("file_path", "file_path", self.file_path, context.file_path)?,
            related_files: self.related_files.unwrap_or_default(),
            created_by: self.created_by,
            author: None,
        };
        Ok((input, self.domain))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateDecisionArgs {
    /// The decision's id (`dec_…`) or its URN.
    pub decision_id: String,
    /// The new status: pending -> executed -> completed | failed | reworked.
    pub status: Option<String>,
    /// A revised confidence, 0 to 1 (calibration keeps using the one stated at capture).
    #[serde(alias = "confidence_update")]
    pub confidence: Option<f64>,
    /// A note to append.
    pub notes: Option<String>,
    /// The pull request's URL.
    pub linked_pr: Option<String>,
    /// The commit's SHA.
    pub linked_commit: Option<String>,
}

impl UpdateDecisionArgs {
    fn into_input(self) -> (String, UpdateDecision) {
        let input = UpdateDecision {
            status: self.status,
            confidence: self.confidence,
            notes: self.notes,
            linked_pr: self.linked_pr,
            linked_commit: self.linked_commit,
        };
        (self.decision_id, input)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetDecisionArgs {
    /// The decision's id (`dec_…`) or its URN.
    pub decision_id: String,
    /// Also walk its causal chain (signals, outcome, lessons, skills) and measure how its outcome steered later decisions.
    pub analysis: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryDecisionsArgs {
    /// Words to search for in statements, alternatives, rationale and notes.
    pub query: Option<String>,
    /// Only this module.
    pub module: Option<String>,
    /// Only this status.
    pub status: Option<String>,
    /// Only decisions about this file or folder.
    pub related_to: Option<String>,
    /// The domain to search; default the default domain.
    pub domain: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Decisions per page, 1 to 100; default 20.
    pub limit: Option<usize>,
}

impl From<QueryDecisionsArgs> for DecisionQuery {
    fn from(args: QueryDecisionsArgs) -> Self {
        DecisionQuery {
            text: args.query,
            module: args.module,
            status: args.status,
            file: args.related_to,
            domain: args.domain,
            cursor: args.cursor,
            limit: args.limit,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalArgs {
    /// The decision's id (`dec_…`) or its URN.
    pub decision_id: String,
    /// pr_created, pr_merged, ci_passed, ci_failed, incident or performance.
    pub signal_type: String,
    /// positive, negative or neutral.
    pub valence: String,
    /// What happened.
    pub description: Option<String>,
    /// Figures that go with it.
    pub metrics: Option<BTreeMap<String, serde_json::Value>>,
}

impl SignalArgs {
    fn into_input(self) -> (String, SignalInput) {
        let input = SignalInput {
            signal_type: self.signal_type,
            valence: self.valence,
            description: self.description,
            metrics: self.metrics.unwrap_or_default(),
        };
        (self.decision_id, input)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutcomeArgs {
    /// The decision's id (`dec_…`) or its URN.
    pub decision_id: String,
    /// success, partial or failure.
    #[serde(alias = "outcome")]
    pub final_status: String,
    /// How well it went, 0 to 1; default 1 for success, 0.5 for partial, 0 for failure.
    pub final_score: Option<f64>,
    /// What was observed at the end, e.g. {"ci_passed": true, "incident_found": false}.
    pub signals: Option<BTreeMap<String, serde_json::Value>>,
    /// Lessons worth keeping; each becomes a `learnings` memory linked to the decision.
    #[serde(alias = "lessons")]
    pub lessons_learned: Option<Vec<String>>,
    /// The decision log's details of what happened.
    #[schemars(skip)]
    pub notes: Option<String>,
    /// Seed 000: the module the outcome counts toward, which must be the decision's.
    #[schemars(skip)]
    pub decision_domain: Option<String>,
}

impl OutcomeArgs {
    fn into_input(self) -> (String, OutcomeInput) {
        let input = OutcomeInput {
            final_status: self.final_status,
            final_score: self.final_score,
            signals: self.signals.unwrap_or_default(),
            lessons_learned: self.lessons_learned.unwrap_or_default(),
            notes: self.notes,
            module: self.decision_domain,
        };
        (self.decision_id, input)
    }
}
