//! Decisions, calibration, skills and anomalies as MCP resources (with the `decisions` toolset).
//!
//! Addresses (none can be a memory URN: a domain is only ever `user`, `project:…` or `org:…`):
//! - `kenning://decisions{?module,status,domain,cursor}`: decisions, newest first, paginated.
//! - `kenning://decisions/{decision_id}`: one decision with its signals, outcome and similar ones.
//! - `kenning://decisions/{decision_id}/causal-chain` and `…/similar`.
//! - `kenning://calibration{?domain}`: every module's calibration and the overall one.
//! - `kenning://calibration/{module}{?domain}`, `kenning://skills{?domain}`,
//!   `kenning://skills/{module}{?domain}` and `kenning://anomalies{?domain}`.
//!
//! Every one of them can be subscribed to; [`changed_by`] names the ones a write changes.

use rmcp::model::{Resource, ResourceTemplate};
use serde::Serialize;

use kenning_core::FieldError;
use kenning_engine::decisions::{CalibrationQuery, SkillsQuery};
use kenning_engine::{ChainAnalysis, DecisionQuery, DecisionService, Error as EngineError};

use crate::resources::ReadError;

const JSON: &str = "application/json";
const PREFIX: &str = "kenning://";
/// The first path segments that belong to decision resources.
const ROOTS: &[&str] = &["decisions", "calibration", "skills", "anomalies"];

/// A decision resource, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Decisions { module: Option<String>, status: Option<String>, cursor: Option<String> },
    Decision(String),
    CausalChain(String),
    Similar(String),
    /// All modules when `None`.
    Calibration(Option<String>),
    Skills(Option<String>),
    Anomalies,
}

/// A decision resource address and the domain it names (the default domain when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionUri {
    pub address: Address,
    pub domain: Option<String>,
}

impl DecisionUri {
    /// The address without its query, which is what changes are reported for.
    pub fn path(&self) -> String {
        match &self.address {
            Address::Decisions { .. } => format!("{PREFIX}decisions"),
            Address::Decision(id) => format!("{PREFIX}decisions/{id}"),
            Address::CausalChain(id) => format!("{PREFIX}decisions/{id}/causal-chain"),
            Address::Similar(id) => format!("{PREFIX}decisions/{id}/similar"),
            Address::Calibration(None) => format!("{PREFIX}calibration"),
            Address::Calibration(Some(module)) => format!("{PREFIX}calibration/{module}"),
            Address::Skills(None) => format!("{PREFIX}skills"),
            Address::Skills(Some(module)) => format!("{PREFIX}skills/{module}"),
            Address::Anomalies => format!("{PREFIX}anomalies"),
        }
    }
}

/// Parses `uri` if it is a decision resource; `None` when it is some other address.
pub fn parse(uri: &str) -> Option<Result<DecisionUri, FieldError>> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    if !ROOTS.contains(&segments[0]) {
        return None;
    }
    Some(parse_parts(uri, &segments, query))
}

fn parse_parts(uri: &str, segments: &[&str], query: &str) -> Result<DecisionUri, FieldError> {
    let mut params: Vec<(&str, String)> = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        params.push((key, value.to_owned()));
    }
    let listing = matches!(segments, ["decisions"]);
    let allowed: &[&str] = if listing { &["module", "status", "domain", "cursor"] } else { &["domain"] };
    if let Some((key, _)) = params.iter().find(|(key, _)| !allowed.contains(key)) {
        return Err(FieldError::new(
            "uri",
            format!("has the unknown query parameter `{key}`"),
            uri,
            format!("this resource takes: {}", allowed.iter().map(|name| format!("?{name}=")).collect::<Vec<_>>().join(", ")),
        ));
    }
    let param = |name: &str| params.iter().find(|(key, _)| *key == name).map(|(_, value)| value.clone());
    let address = match segments {
        ["decisions"] => Address::Decisions { module: param("module"), status: param("status"), cursor: param("cursor") },
        ["decisions", id] => Address::Decision((*id).to_owned()),
        ["decisions", id, "causal-chain"] => Address::CausalChain((*id).to_owned()),
        ["decisions", id, "similar"] => Address::Similar((*id).to_owned()),
        ["calibration"] => Address::Calibration(None),
        ["calibration", module] => Address::Calibration(Some((*module).to_owned())),
        ["skills"] => Address::Skills(None),
        ["skills", module] => Address::Skills(Some((*module).to_owned())),
        ["anomalies"] => Address::Anomalies,
        _ => {
            return Err(FieldError::new(
                "uri",
                "is not a decision resource address",
                uri,
                "use kenning://decisions, kenning://decisions/{id}[/causal-chain|/similar], kenning://calibration[/{module}], kenning://skills[/{module}] or kenning://anomalies",
            ));
        }
    };
    Ok(DecisionUri { address, domain: param("domain") })
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string_pretty(value).expect("views serialise")
}

/// Reads a decision resource as JSON text.
pub fn read(decisions: &DecisionService, uri: &str, parsed: &DecisionUri) -> Result<String, ReadError> {
    let domain = parsed.domain.clone();
    let not_found = |error: EngineError| match error {
        EngineError::DecisionNotFound { .. } => ReadError::NotFound(uri.to_owned()),
        other => ReadError::from(other),
    };
    Ok(match &parsed.address {
        Address::Decisions { module, status, cursor } => to_json(&decisions.query(DecisionQuery {
            module: module.clone(),
            status: status.clone(),
            cursor: cursor.clone(),
            domain,
            ..DecisionQuery::default()
        })?),
        Address::Decision(id) => to_json(&decisions.get(id, ChainAnalysis::Omitted).map_err(not_found)?),
        Address::CausalChain(id) => to_json(&decisions.get(id, ChainAnalysis::Included).map_err(not_found)?.analysis),
        Address::Similar(id) => to_json(&decisions.get(id, ChainAnalysis::Omitted).map_err(not_found)?.similar_decisions),
        Address::Calibration(None) => to_json(&decisions.calibration(CalibrationQuery { mode: Some("all".into()), domain, ..CalibrationQuery::default() })?.all),
        Address::Calibration(Some(module)) => to_json(
            &decisions
                .calibration(CalibrationQuery { mode: Some("module".into()), module: Some(module.clone()), domain, ..CalibrationQuery::default() })?
                .calibration,
        ),
        Address::Skills(module) => to_json(&decisions.skills(SkillsQuery { module: module.clone(), domain, ..SkillsQuery::default() })?),
        Address::Anomalies => to_json(&decisions.anomalies(domain.as_deref())?),
    })
}

pub fn templates() -> Vec<ResourceTemplate> {
    let template = |uri: &str, name: &str, title: &str, description: &str| {
        ResourceTemplate::new(uri, name).with_title(title).with_description(description).with_mime_type(JSON)
    };
    vec![
        template("kenning://decisions{?module,status,domain,cursor}", "decisions", "Decisions", "Decisions, newest first, filtered by module and status, paginated."),
        template("kenning://decisions/{decision_id}", "decision", "Decision", "One decision with its signals, outcome, similar decisions and antipatterns."),
        template("kenning://decisions/{decision_id}/causal-chain", "causal-chain", "Causal chain", "A decision's signals, outcome, lessons and skills."),
        template("kenning://decisions/{decision_id}/similar", "similar-decisions", "Similar decisions", "Past decisions like this one, with their success."),
        template("kenning://calibration/{module}{?domain}", "module-calibration", "Module calibration", "How well stated confidence matches outcomes in one module; subscribable."),
        template("kenning://skills/{module}{?domain}", "module-skills", "Module skills", "Skills and antipatterns mined from one module's outcomes; subscribable."),
    ]
}

/// The fixed decision resources of `resources/list`: the listings and each configured module's
/// calibration and skills.
pub fn catalogue(decisions: &DecisionService) -> Vec<Resource> {
    let resource = |uri: String, name: String, title: String, description: &str| {
        Resource::new(uri, name).with_title(title).with_description(description).with_mime_type(JSON)
    };
    let mut list = vec![
        resource(format!("{PREFIX}decisions"), "decisions".into(), "Decisions".into(), "Decisions, newest first, paginated."),
        resource(format!("{PREFIX}calibration"), "calibration".into(), "Calibration".into(), "Every module's calibration and the overall one."),
        resource(format!("{PREFIX}skills"), "skills".into(), "Skills".into(), "Skills and antipatterns mined from all outcomes."),
        resource(format!("{PREFIX}anomalies"), "anomalies".into(), "Anomalies".into(), "Modules whose success rate dropped or that are overconfident."),
    ];
    for module in decisions.modules().names() {
        list.push(resource(format!("{PREFIX}calibration/{module}"), format!("calibration/{module}"), format!("Calibration: {module}"), "Calibration of one module."));
        list.push(resource(format!("{PREFIX}skills/{module}"), format!("skills/{module}"), format!("Skills: {module}"), "Skills and antipatterns of one module."));
    }
    list
}

/// What a write to a decision changes, as resource paths.
pub enum Change<'a> {
    Captured,
    Updated { decision_id: &'a str },
    Outcome { decision_id: &'a str, module: &'a str },
}

/// The resource paths a change makes stale.
pub fn changed_by(change: &Change) -> Vec<String> {
    let decisions = format!("{PREFIX}decisions");
    match change {
        Change::Captured => vec![decisions],
        Change::Updated { decision_id } => vec![decisions.clone(), format!("{decisions}/{decision_id}"), format!("{decisions}/{decision_id}/causal-chain")],
        Change::Outcome { decision_id, module } => vec![
            decisions.clone(),
            format!("{decisions}/{decision_id}"),
            format!("{decisions}/{decision_id}/causal-chain"),
            format!("{PREFIX}calibration"),
            format!("{PREFIX}calibration/{module}"),
            format!("{PREFIX}skills"),
            format!("{PREFIX}skills/{module}"),
            format!("{PREFIX}anomalies"),
        ],
    }
}
