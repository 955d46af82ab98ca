//! The `<memory_context>` block (seed 004's shape, with each memory's text) and the
//! session-start context: recent decisions, open blockers, preferences and calibration warnings
//! for the modules in play; after a compaction, also what this session captured, since the
//! summary that replaced the conversation may have dropped it.

use kenning_core::search::estimate_tokens;
use kenning_core::{Memory, Namespace, SearchFilter};
use kenning_engine::views::MemoryRef;
use kenning_engine::{DecisionQuery, RESOURCE_TEMPLATE};

use crate::{Error, HookInput, Hooks};

/// How many of each kind of standing context session-start considers per domain.
const PER_SECTION: usize = 5;
/// The most of one memory's text a context block carries: a memory is one fact, decision or
/// lesson, and past this it is a document the agent can read with `memory_get`.
pub const MAX_TEXT_CHARS: usize = 480;
/// The least room, in tokens, worth giving a memory's text when the budget runs short.
const MIN_TEXT_TOKENS: usize = 12;

/// One memory in a context block.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub uri: String,
    pub namespace: String,
    pub summary: String,
    pub timestamp: String,
    /// Fused relevance to a prompt or a failure; absent for standing context.
    pub relevance: Option<f64>,
    /// The memory's text, cut to [`MAX_TEXT_CHARS`].
    pub text: Option<String>,
    /// A line more: a decision's module and status.
    pub detail: Option<String>,
}

impl Resource {
    /// A memory as standing context (no relevance).
    pub fn of(memory: &Memory) -> Resource {
        let shown = MemoryRef::from(memory);
        Resource {
            uri: shown.urn,
            namespace: shown.namespace,
            summary: shown.title,
            timestamp: shown.occurred_at,
            relevance: None,
            text: Some(bounded(&memory.content, MAX_TEXT_CHARS)),
            detail: None,
        }
    }
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
            let mut entry = render_resource(resource, None);
            if used + estimate_tokens(&entry) > max_tokens {
                // The last memory that fits at all gets what is left for its text.
                let bare = estimate_tokens(&render_resource(resource, Some(0)));
                let room = max_tokens.saturating_sub(used + bare);
                if resource.text.is_none() || room < MIN_TEXT_TOKENS {
                    break;
                }
                entry = render_resource(resource, Some(room * 4));
                if used + estimate_tokens(&entry) > max_tokens {
                    break;
                }
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

/// One resource; `text_chars` cuts its text shorter (the whole entry's markup aside).
fn render_resource(resource: &Resource, text_chars: Option<usize>) -> String {
    let relevance = resource.relevance.map(|score| format!(" relevance=\"{score:.2}\"")).unwrap_or_default();
    let mut entry = format!("    <resource uri=\"{}\"{relevance}>\n", escape(&resource.uri));
    let text = resource.text.as_deref().map(|text| match text_chars {
        Some(chars) => bounded(text, chars),
        None => text.to_owned(),
    });
    // A title made from the text's first line says nothing the text does not.
    let title = resource.summary.trim_end_matches('…');
    if text.as_deref().is_none_or(|text| !text.starts_with(title)) {
        entry.push_str(&format!("      <summary>{}</summary>\n", escape(&resource.summary)));
    }
    entry.push_str(&format!("      <namespace>{}</namespace>\n", escape(&resource.namespace)));
    entry.push_str(&format!("      <timestamp>{}</timestamp>\n", escape(&resource.timestamp)));
    if let Some(detail) = &resource.detail {
        entry.push_str(&format!("      <detail>{}</detail>\n", escape(detail)));
    }
    if let Some(text) = text.filter(|text| !text.is_empty()) {
        entry.push_str(&format!("      <text>{}</text>\n", escape(&text)));
    }
    entry.push_str("    </resource>\n");
    entry
}

/// `text` cut to at most `max_chars` characters, at a word's end, marked with `…` when cut.
pub fn bounded(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let Some(keep) = max_chars.checked_sub(1) else { return String::new() };
    let cut: String = text.chars().take(keep).collect();
    let at_word = match cut.rfind(char::is_whitespace) {
        Some(space) if space > cut.len() / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", at_word.trim_end())
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

/// The project's standing context for a new, resumed or compacted session.
pub fn session_start(hooks: &Hooks, input: &HookInput) -> Result<Option<String>, Error> {
    let mut block = ContextBlock {
        project: hooks.project.clone(),
        note: Some("What kenning remembers for this project: recent decisions, open blockers and preferences. Recall more with memory_recall.".into()),
        ..ContextBlock::default()
    };
    // A compaction replaced the conversation with a summary: what kenning captured from this
    // session comes first, so that the summary's gaps are filled.
    let session = input.session_id.as_deref().filter(|session| !session.is_empty());
    if let (Some("compact"), Some(session)) = (input.source.as_deref(), session) {
        let filter = SearchFilter { session: Some(session.to_owned()), ..SearchFilter::active() };
        for domain in hooks.memory.domains() {
            block.resources.extend(hooks.memory.newest_memories(domain, &filter, PER_SECTION * 2)?.iter().map(Resource::of));
        }
        if !block.resources.is_empty() {
            block.note = Some(
                "What kenning captured earlier in this session (before the compaction), then recent decisions, open blockers and preferences. Recall more with memory_recall."
                    .into(),
            );
        }
    }
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
    for namespace in ["blockers", "decisions", "preferences"] {
        for resource in listing(hooks, namespace)? {
            if !block.resources.iter().any(|shown| shown.uri == resource.uri) {
                block.resources.push(resource);
            }
        }
    }
    Ok(block.render(hooks.budgets.session_start))
}

/// The newest active memories of a namespace in every domain.
fn listing(hooks: &Hooks, namespace: &str) -> Result<Vec<Resource>, Error> {
    let namespace = Namespace::parse(namespace).map_err(kenning_engine::Error::Invalid)?;
    let filter = SearchFilter { namespaces: vec![namespace], ..SearchFilter::active() };
    let mut found = Vec::new();
    for domain in hooks.memory.domains() {
        found.extend(hooks.memory.newest_memories(domain, &filter, PER_SECTION)?.iter().map(Resource::of));
    }
    Ok(found)
}
