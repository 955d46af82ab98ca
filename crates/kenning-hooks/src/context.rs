//! The `<memory_context>` block (seed 004's shape) and the session-start context: recent
//! decisions, open blockers, preferences and calibration warnings for the modules in play.

use kenning_core::search::estimate_tokens;
use kenning_core::{Namespace, SearchFilter};
use kenning_engine::{DecisionQuery, RESOURCE_TEMPLATE};

use crate::{Error, Hooks};

/// How many of each kind of standing context session-start considers per domain.
const PER_SECTION: usize = 5;

/// One memory in a context block.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub uri: String,
    pub namespace: String,
    pub summary: String,
    pub timestamp: String,
    /// Fused relevance to a prompt or a failure; absent for standing context.
    pub relevance: Option<f64>,
    /// A line more: a decision's module and status, or a snippet of the memory.
    pub detail: Option<String>,
}

/// A calibration warning about a module.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub module: String,
    pub message: String,
}

/// A block of context to add to the agent's prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextBlock {
    pub project: Option<String>,
    /// A sentence before the resources saying what they are.
    pub note: Option<String>,
    pub warnings: Vec<Warning>,
    /// In priority order: when the budget runs out, the last ones are left out.
    pub resources: Vec<Resource>,
}

impl ContextBlock {
    /// The block as `<memory_context>` XML, holding as many warnings and resources, in order, as
    /// fit in `max_tokens`; `None` when there is nothing to say.
    pub fn render(&self, max_tokens: usize) -> Option<String> {
        if self.warnings.is_empty() && self.resources.is_empty() {
            return None;
        }
        let mut head = String::from("<memory_context>\n");
        if let Some(project) = &self.project {
            head.push_str(&format!("  <project>{}</project>\n", escape(project)));
        }
        if let Some(note) = &self.note {
            head.push_str(&format!("  <note>{}</note>\n", escape(note)));
        }
        let tail = format!("  <resource_template uri=\"{}\" />\n</memory_context>", escape(RESOURCE_TEMPLATE));
        // The section wrappers (`<resources>`, `<calibration_warnings>`) take up to 16 tokens.
        let mut used = estimate_tokens(&head) + estimate_tokens(&tail) + 16;
        let mut warnings = String::new();
        for warning in &self.warnings {
            let entry = format!("    <warning module=\"{}\">{}</warning>\n", escape(&warning.module), escape(&warning.message));
            if used + estimate_tokens(&entry) > max_tokens {
                break;
            }
            used += estimate_tokens(&entry);
            warnings.push_str(&entry);
        }
        let mut resources = String::new();
        for resource in &self.resources {
            let entry = render_resource(resource);
            if used + estimate_tokens(&entry) > max_tokens {
                break;
            }
            used += estimate_tokens(&entry);
            resources.push_str(&entry);
        }
        if warnings.is_empty() && resources.is_empty() {
            return None;
        }
        let mut text = head;
        if !warnings.is_empty() {
            text.push_str(&format!("  <calibration_warnings>\n{warnings}  </calibration_warnings>\n"));
        }
        if !resources.is_empty() {
            text.push_str(&format!("  <resources>\n{resources}  </resources>\n"));
        }
        text.push_str(&tail);
        Some(text)
    }
}

fn render_resource(resource: &Resource) -> String {
    let relevance = resource.relevance.map(|score| format!(" relevance=\"{score:.2}\"")).unwrap_or_default();
    let mut entry = format!("    <resource uri=\"{}\"{relevance}>\n", escape(&resource.uri));
    entry.push_str(&format!("      <summary>{}</summary>\n", escape(&resource.summary)));
    entry.push_str(&format!("      <namespace>{}</namespace>\n", escape(&resource.namespace)));
    entry.push_str(&format!("      <timestamp>{}</timestamp>\n", escape(&resource.timestamp)));
    if let Some(detail) = &resource.detail {
        entry.push_str(&format!("      <detail>{}</detail>\n", escape(detail)));
    }
    entry.push_str("    </resource>\n");
    entry
}

/// Escapes text for XML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => escaped.push(c),
        }
    }
    escaped
}

/// The project's standing context for a new session.
pub fn session_start(hooks: &Hooks) -> Result<Option<String>, Error> {
    let mut block = ContextBlock {
        project: hooks.project.clone(),
        note: Some("What kenning remembers for this project: recent decisions, open blockers and preferences. Recall more with memory_recall.".into()),
        ..ContextBlock::default()
    };
    // The modules in play are those of the latest structured decisions; their calibration
    // warnings are the ones worth the agent's attention now.
    let recent = hooks.decisions.query(DecisionQuery { limit: Some(PER_SECTION), ..DecisionQuery::default() })?;
    let mut modules_in_play: Vec<String> = Vec::new();
    for decision in &recent.decisions {
        if !modules_in_play.contains(&decision.module) {
            modules_in_play.push(decision.module.clone());
        }
    }
    for anomaly in hooks.decisions.anomalies(None)?.anomalies {
        if modules_in_play.contains(&anomaly.module) {
            block.warnings.push(Warning { module: anomaly.module, message: anomaly.message });
        }
    }
    // Every decision has a memory in `decisions`, and so does a decision a hook read from a
    // transcript: listing the namespace shows both.
    let decisions = listing(hooks, "decisions")?;
    let blockers = listing(hooks, "blockers")?;
    let preferences = listing(hooks, "preferences")?;
    block.resources.extend(blockers);
    block.resources.extend(decisions);
    block.resources.extend(preferences);
    Ok(block.render(hooks.budgets.session_start))
}

/// The newest active memories of a namespace in every domain.
fn listing(hooks: &Hooks, namespace: &str) -> Result<Vec<Resource>, Error> {
    let namespace = Namespace::parse(namespace).map_err(kenning_engine::Error::Invalid)?;
    let filter = SearchFilter { namespaces: vec![namespace], ..SearchFilter::active() };
    let mut found = Vec::new();
    let domains: Vec<_> = hooks.memory.domains().cloned().collect();
    for domain in &domains {
        found.extend(hooks.memory.newest(domain, &filter, PER_SECTION)?.into_iter().map(|memory| Resource {
            uri: memory.urn,
            namespace: memory.namespace,
            summary: memory.title,
            timestamp: memory.occurred_at,
            relevance: None,
            detail: None,
        }));
    }
    Ok(found)
}
