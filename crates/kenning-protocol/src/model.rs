//! A protocol as its YAML file says it. Every struct refuses unknown fields, so a misspelt key is
//! an error with its line rather than a setting silently ignored; which fields a step needs
//! depends on its `type` and is checked by [`crate::load`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

/// One protocol file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    /// Lower-case letters, digits and `_`; the file is found by it and a project file of the same
    /// name replaces a shipped one.
    pub name: String,
    /// One sentence: what following the protocol achieves.
    pub description: String,
    /// The skill (markdown in `skills/{skill}.md`) handed to the agent with the first step.
    #[serde(default)]
    pub skill: Option<String>,
    /// Variables a caller (or a calling protocol's `with`) must give at the start.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// Variables handed back to a calling protocol when this one ends.
    #[serde(default)]
    pub returns: Vec<String>,
    pub steps: Vec<Spanned<StepDef>>,
}

/// One step. `type` says which of the other fields apply.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The step after this one; default the next in the file, `end` to finish.
    #[serde(default)]
    pub next: Option<String>,
    /// Where the step's result goes in the context; default the step's id.
    #[serde(default)]
    pub store_as: Option<String>,

    // ask
    #[serde(default)]
    pub question: Option<String>,
    #[serde(default)]
    pub expects: Option<Expect>,
    #[serde(default)]
    pub examples: Option<Examples>,
    /// An ask step whose answer may be left out (`null` or empty).
    #[serde(default)]
    pub optional: bool,

    // query
    #[serde(default)]
    pub query: Option<QuerySpec>,

    // branch
    #[serde(default, rename = "if")]
    pub condition: Option<Condition>,
    #[serde(default)]
    pub then: Option<String>,
    #[serde(default, rename = "else")]
    pub otherwise: Option<String>,
    /// The variable whose value picks one of `cases`.
    #[serde(default)]
    pub on: Option<String>,
    #[serde(default)]
    pub cases: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub default: Option<String>,

    // call_protocol
    #[serde(default)]
    pub protocol: Option<String>,
    /// Inputs of the called protocol, as templates over this one's context.
    #[serde(default)]
    pub with: Option<BTreeMap<String, String>>,

    // create
    #[serde(default)]
    pub memories: Option<Vec<MemorySpec>>,
    /// A decision for the decisions toolset, so that calibration counts it.
    #[serde(default)]
    pub decision: Option<DecisionSpec>,

    // update
    /// The URN of the memory to change (a template).
    #[serde(default)]
    pub memory: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What an ask step accepts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// string, number, enum, id, id_list or string_list.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub min_length: Option<usize>,
    #[serde(default)]
    pub max_length: Option<usize>,
    /// A regular expression the whole answer must match.
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default)]
    pub options: Option<Vec<String>>,
    /// Enums whose options the server knows: `modules` (the configured decision modules).
    #[serde(default)]
    pub options_from: Option<String>,
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    #[serde(default)]
    pub min_count: Option<usize>,
    #[serde(default)]
    pub max_count: Option<usize>,
    /// For ids: the namespace the memory must be in.
    #[serde(default)]
    pub namespace: Option<String>,
    /// For ids: the kind (episodic, semantic, procedural) the memory must be.
    #[serde(default)]
    pub memory_kind: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    #[serde(default)]
    pub good: Vec<String>,
    #[serde(default)]
    pub bad: Vec<String>,
}

/// A recall (`recall`: the query text) or a walk of the graph around one memory (`graph`: its
/// URN; the memories it links to, through decisions' signals and outcomes, and those linking to
/// it), whose results join the context as `{count, items: [{urn, title, …}], urns, titles}`.
/// Exactly one of `recall` and `graph` is given; both are templates.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuerySpec {
    #[serde(default)]
    pub recall: Option<String>,
    #[serde(default)]
    pub graph: Option<String>,
    /// How many edges a graph walk follows, 1 to 3; default 2.
    #[serde(default)]
    pub depth: Option<u32>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// A test on one variable of the context; exactly one test is given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// A variable, with `.field` to go inside it.
    pub var: String,
    #[serde(default)]
    pub equals: Option<String>,
    #[serde(default)]
    pub not_equals: Option<String>,
    /// Whether the variable is set and not empty.
    #[serde(default)]
    pub present: Option<bool>,
    /// Lists: at least this many items.
    #[serde(default)]
    pub count_at_least: Option<usize>,
}

/// A memory written when the protocol completes; every text is a template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    /// A name later memories of the same protocol link to with `to: "@name"`.
    #[serde(default, rename = "as")]
    pub name: Option<String>,
    pub namespace: String,
    #[serde(default)]
    pub kind: Option<String>,
    pub title: String,
    pub content: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// `@name` of a memory this protocol creates, or a URN template; a template that renders to
    /// a list links each item.
    pub to: String,
    #[serde(default)]
    pub relation: Option<String>,
}

/// A decision captured through the decisions toolset; texts are templates, `alternatives` names
/// a list variable.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionSpec {
    pub statement: String,
    pub alternatives: String,
    pub confidence: String,
    #[serde(default)]
    pub module: Option<String>,
    #[serde(default)]
    pub rationale: Option<String>,
}
