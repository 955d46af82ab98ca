//! Reading protocol files and refusing the ones that cannot run: every error names the file,
//! the line and the field. A protocol's steps must form a graph without cycles and protocols
//! must not call themselves, directly or through others, so every run ends.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;

use crate::answer::KINDS;
use crate::model::{Protocol, StepDef};
use crate::template;

/// The step name that ends a protocol.
pub const END: &str = "end";
pub const STEP_TYPES: &[&str] = &["ask", "query", "branch", "call_protocol", "create", "update"];
pub const MAX_STEPS: usize = 100;

/// A protocol that cannot be loaded, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: `{field}` {problem}; {suggestion}")]
pub struct LoadError {
    pub file: String,
    /// 1-based; 0 when the problem has no single place.
    pub line: u64,
    pub field: String,
    pub problem: String,
    pub suggestion: String,
}

/// A protocol that passed every check, with where it came from and its skill's markdown.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub protocol: Protocol,
    pub file: String,
    pub skill: Option<String>,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

struct Checker<'a> {
    file: &'a str,
}

impl Checker<'_> {
    fn error(&self, line: u64, field: impl Into<String>, problem: impl Into<String>, suggestion: impl Into<String>) -> LoadError {
        LoadError { file: self.file.to_owned(), line, field: field.into(), problem: problem.into(), suggestion: suggestion.into() }
    }

    fn template(&self, line: u64, field: &str, text: &str) -> Result<(), LoadError> {
        template::check(text).map(|_| ()).map_err(|problem| self.error(line, field, problem, "see the template rules: {var}, {var.field}, {var | filter}"))
    }
}

/// The step after `index` when it names none: the next in the file, or the end.
pub fn following(protocol: &Protocol, index: usize) -> String {
    protocol.steps.get(index + 1).map(|step| step.value.id.clone()).unwrap_or_else(|| END.to_owned())
}

/// Every step `index` may go to, with the field that names it.
pub fn successors(protocol: &Protocol, index: usize) -> Vec<(String, String)> {
    let step = &protocol.steps[index].value;
    let after = step.next.clone().unwrap_or_else(|| following(protocol, index));
    match step.kind.as_str() {
        "branch" if step.condition.is_some() => vec![
            ("then".to_owned(), step.then.clone().unwrap_or_default()),
            ("else".to_owned(), step.otherwise.clone().unwrap_or(after)),
        ],
        "branch" => {
            let mut targets: Vec<(String, String)> =
                step.cases.iter().flatten().map(|(case, target)| (format!("cases.{case}"), target.clone())).collect();
            targets.push(("default".to_owned(), step.default.clone().unwrap_or(after)));
            targets
        }
        _ => vec![("next".to_owned(), after)],
    }
}

/// Reads and checks one protocol file's text.
pub fn parse(file: &str, text: &str) -> Result<Protocol, LoadError> {
    let checker = Checker { file };
    let protocol: Protocol = serde_saphyr::from_str(text).map_err(|error| {
        let line = error.location().map(|location| location.line()).unwrap_or(0);
        checker.error(line, "yaml", error.without_snippet().to_string(), "fix the YAML; every field is listed in the protocol format")
    })?;
    check(&checker, &protocol)?;
    Ok(protocol)
}

fn check(checker: &Checker<'_>, protocol: &Protocol) -> Result<(), LoadError> {
    if !valid_name(&protocol.name) {
        return Err(checker.error(1, "name", format!("`{}` is not a protocol name", protocol.name), "use lower-case letters, digits and `_`, starting with a letter"));
    }
    if protocol.description.trim().is_empty() {
        return Err(checker.error(1, "description", "is empty", "say in one sentence what the protocol achieves"));
    }
    for (field, names) in [("inputs", &protocol.inputs), ("returns", &protocol.returns)] {
        if let Some(bad) = names.iter().find(|name| !valid_name(name)) {
            return Err(checker.error(1, field, format!("has `{bad}`, which is not a variable name"), "use lower-case letters, digits and `_`"));
        }
    }
    if protocol.steps.is_empty() || protocol.steps.len() > MAX_STEPS {
        return Err(checker.error(1, "steps", format!("has {} steps", protocol.steps.len()), format!("give 1 to {MAX_STEPS} steps")));
    }
    let mut ids = BTreeSet::new();
    for (index, step) in protocol.steps.iter().enumerate() {
        let line = step.referenced.line();
        let id = &step.value.id;
        if !valid_name(id) || id == END {
            return Err(checker.error(line, format!("steps[{index}].id"), format!("`{id}` is not a step id"), "use lower-case letters, digits and `_`; `end` is reserved"));
        }
        if !ids.insert(id.clone()) {
            return Err(checker.error(line, format!("steps[{index}].id"), format!("repeats the id `{id}`"), "give every step its own id"));
        }
    }
    // `as` names of planned memories, in file order: a link may name a memory planned by an
    // earlier step.
    let mut names = BTreeSet::new();
    for (index, step) in protocol.steps.iter().enumerate() {
        check_step(checker, index, step.referenced.line(), &step.value, &mut names)?;
        for (field, target) in successors(protocol, index) {
            if target != END && !ids.contains(&target) {
                let near = kenning_core::closest(&target, ids.iter().map(String::as_str));
                return Err(checker.error(
                    step.referenced.line(),
                    format!("steps[{index}].{field}"),
                    format!("names `{target}`, which is not a step of this protocol"),
                    match near {
                        Some(near) => format!("did you mean `{near}`? or `end` to finish"),
                        None => "name a step id, or `end` to finish".to_owned(),
                    },
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(protocol) {
        let index = protocol.steps.iter().position(|step| step.value.id == cycle[0]).unwrap_or(0);
        return Err(checker.error(
            protocol.steps[index].referenced.line(),
            format!("steps[{index}].next"),
            format!("makes the protocol loop: {}", cycle.join(" -> ")),
            "protocols run forward only; ask for a list in one step instead of looping",
        ));
    }
    Ok(())
}

fn check_step(checker: &Checker<'_>, index: usize, line: u64, step: &StepDef, names: &mut BTreeSet<String>) -> Result<(), LoadError> {
    let at = |field: &str| format!("steps[{index}].{field}");
    let missing = |field: &str, what: &str| checker.error(line, at(field), format!("is missing: a {} step needs it", step.kind), what.to_owned());
    if let Some(store) = &step.store_as {
        if !valid_name(store) {
            return Err(checker.error(line, at("store_as"), format!("`{store}` is not a variable name"), "use lower-case letters, digits and `_`"));
        }
    }
    match step.kind.as_str() {
        "ask" => {
            let question = step.question.as_deref().ok_or_else(|| missing("question", "write the question the agent answers"))?;
            checker.template(line, &at("question"), question)?;
            let expects = step.expects.as_ref().ok_or_else(|| missing("expects", "say what answer is expected, e.g. `expects: {type: string, min_length: 10}`"))?;
            if !KINDS.contains(&expects.kind.as_str()) {
                return Err(checker.error(line, at("expects.type"), format!("`{}` is not an answer type", expects.kind), format!("one of {}", KINDS.join(", "))));
            }
            if let Some(source) = expects.options_from.as_deref().filter(|source| !crate::machine::OPTION_SOURCES.contains(source)) {
                return Err(checker.error(line, at("expects.options_from"), format!("`{source}` is not a list the server knows"), format!("one of {}", crate::machine::OPTION_SOURCES.join(", "))));
            }
            if expects.kind == "enum" && expects.options.as_ref().is_none_or(Vec::is_empty) && expects.options_from.is_none() {
                return Err(checker.error(line, at("expects.options"), "is missing: an enum needs its options", "list the accepted answers"));
            }
            if let Some(pattern) = &expects.pattern {
                Regex::new(pattern).map_err(|error| checker.error(line, at("expects.pattern"), format!("is not a regular expression: {error}"), "fix the pattern"))?;
            }
            if let (Some(min), Some(max)) = (expects.min_count, expects.max_count) {
                if min > max {
                    return Err(checker.error(line, at("expects.min_count"), format!("{min} is above max_count {max}"), "swap them"));
                }
            }
        }
        "query" => {
            let query = step.query.as_ref().ok_or_else(|| missing("query", "give `query: {recall: \"{topic}\"}` or `query: {graph: \"{urn}\"}`"))?;
            match (&query.recall, &query.graph) {
                (Some(text), None) => checker.template(line, &at("query.recall"), text)?,
                (None, Some(urn)) => checker.template(line, &at("query.graph"), urn)?,
                _ => return Err(checker.error(line, at("query"), "needs exactly one of `recall` and `graph`", "recall searches memories by text; graph walks the links around one memory")),
            }
            if let Some(depth) = query.depth.filter(|depth| !(1..=3).contains(depth)) {
                return Err(checker.error(line, at("query.depth"), format!("is {depth}"), "give 1 to 3"));
            }
        }
        "branch" => match (&step.condition, &step.cases) {
            (Some(condition), None) => {
                if step.then.is_none() {
                    return Err(missing("then", "name the step taken when the condition holds"));
                }
                let tests = [condition.equals.is_some(), condition.not_equals.is_some(), condition.present.is_some(), condition.count_at_least.is_some()];
                if tests.iter().filter(|test| **test).count() != 1 {
                    return Err(checker.error(line, at("if"), "must hold exactly one test", "use one of equals, not_equals, present, count_at_least"));
                }
            }
            (None, Some(_)) => {
                if step.on.is_none() {
                    return Err(missing("on", "name the variable whose value picks a case"));
                }
            }
            _ => {
                return Err(checker.error(line, at("if"), "a branch needs either `if` with `then` (and `else`) or `on` with `cases`", "pick one form"));
            }
        },
        "call_protocol" => {
            if step.protocol.is_none() {
                return Err(missing("protocol", "name the protocol to call"));
            }
            for (name, value) in step.with.iter().flatten() {
                checker.template(line, &at(&format!("with.{name}")), value)?;
            }
        }
        "create" => {
            if step.memories.is_none() && step.decision.is_none() {
                return Err(missing("memories", "list the memories to write, or a `decision`"));
            }
            for (position, memory) in step.memories.iter().flatten().enumerate() {
                let field = |name: &str| at(&format!("memories[{position}].{name}"));
                for (name, text) in [("title", &memory.title), ("content", &memory.content), ("namespace", &memory.namespace)] {
                    checker.template(line, &field(name), text)?;
                }
                for (link, spec) in memory.links.iter().enumerate() {
                    match spec.to.strip_prefix('@') {
                        Some(target) if !names.contains(target) => {
                            return Err(checker.error(line, field(&format!("links[{link}].to")), format!("names `@{target}`, no memory created before this one"), "link to an earlier memory's `as` name, or to a URN"));
                        }
                        Some(_) => {}
                        None => checker.template(line, &field(&format!("links[{link}].to")), &spec.to)?,
                    }
                }
                if let Some(name) = &memory.name {
                    names.insert(name.clone());
                }
            }
            if let Some(decision) = &step.decision {
                for (name, text) in [("statement", &decision.statement), ("alternatives", &decision.alternatives), ("confidence", &decision.confidence)] {
                    checker.template(line, &at(&format!("decision.{name}")), text)?;
                }
            }
        }
        "update" => {
            let memory = step.memory.as_deref().ok_or_else(|| missing("memory", "give the URN of the memory to change, e.g. `{target}`"))?;
            checker.template(line, &at("memory"), memory)?;
            let reason = step.reason.as_deref().ok_or_else(|| missing("reason", "say why the memory changes; it goes into its history"))?;
            checker.template(line, &at("reason"), reason)?;
            for (name, text) in [("title", &step.title), ("content", &step.content)] {
                if let Some(text) = text {
                    checker.template(line, &at(name), text)?;
                }
            }
        }
        other => {
            return Err(checker.error(
                line,
                at("type"),
                format!("`{other}` is not a step type"),
                match kenning_core::closest(other, STEP_TYPES.iter().copied()) {
                    Some(near) => format!("did you mean `{near}`? step types: {}", STEP_TYPES.join(", ")),
                    None => format!("step types: {}", STEP_TYPES.join(", ")),
                },
            ));
        }
    }
    Ok(())
}

/// A cycle among the steps as the path that closes it, or `None`.
fn find_cycle(protocol: &Protocol) -> Option<Vec<String>> {
    let index: BTreeMap<&str, usize> = protocol.steps.iter().enumerate().map(|(i, step)| (step.value.id.as_str(), i)).collect();
    let edges: Vec<Vec<usize>> = (0..protocol.steps.len())
        .map(|i| successors(protocol, i).into_iter().filter_map(|(_, target)| index.get(target.as_str()).copied()).collect())
        .collect();
    let ids: Vec<String> = protocol.steps.iter().map(|step| step.value.id.clone()).collect();
    kenning_core::graph::find_cycle(&edges, &ids)
}

/// The protocols a run can use: the shipped ones, then folders whose files replace shipped
/// ones of the same name. Files that fail their checks are left out and kept in `problems`.
#[derive(Debug, Clone, Default)]
pub struct Library {
    protocols: BTreeMap<String, Loaded>,
    skills: BTreeMap<String, String>,
    pub problems: Vec<LoadError>,
}

/// The protocols compiled into the binary, with their file names.
const SHIPPED: &[(&str, &str)] = &[
    ("capture_decision.yaml", include_str!("../protocols/capture_decision.yaml")),
    ("record_work.yaml", include_str!("../protocols/record_work.yaml")),
    ("investigate.yaml", include_str!("../protocols/investigate.yaml")),
    ("resolve_blocker.yaml", include_str!("../protocols/resolve_blocker.yaml")),
    ("add_invariant.yaml", include_str!("../protocols/add_invariant.yaml")),
    ("explore_space.yaml", include_str!("../protocols/explore_space.yaml")),
    ("add_objectives.yaml", include_str!("../protocols/add_objectives.yaml")),
    ("add_health_coverage.yaml", include_str!("../protocols/add_health_coverage.yaml")),
    ("add_implementation.yaml", include_str!("../protocols/add_implementation.yaml")),
];

const SHIPPED_SKILLS: &[(&str, &str)] = &[
    ("decision_capture", include_str!("../skills/decision_capture.md")),
    ("progress_tracking", include_str!("../skills/progress_tracking.md")),
    ("escalation_handling", include_str!("../skills/escalation_handling.md")),
    ("module_design", include_str!("../skills/module_design.md")),
    ("health_coverage", include_str!("../skills/health_coverage.md")),
    ("feature_implementation", include_str!("../skills/feature_implementation.md")),
];

impl Library {
    /// The shipped protocols and skills.
    pub fn shipped() -> Library {
        let mut library = Library::default();
        for (name, text) in SHIPPED_SKILLS {
            library.skills.insert((*name).to_owned(), (*text).to_owned());
        }
        for (file, text) in SHIPPED {
            library.add(&format!("shipped:{file}"), text);
        }
        library.check_calls();
        library
    }

    /// Adds one protocol file's text, replacing a protocol of the same name; a file that fails
    /// its checks is recorded in `problems`.
    pub fn add(&mut self, file: &str, text: &str) {
        match parse(file, text) {
            Ok(protocol) => {
                self.problems.retain(|problem| problem.file != file);
                self.protocols.insert(protocol.name.clone(), Loaded { protocol, file: file.to_owned(), skill: None });
            }
            Err(error) => self.problems.push(error),
        }
    }

    /// Loads `dir/*.yaml` (and `.yml`) and `dir/skills/*.md` over what is loaded; a folder that
    /// does not exist adds nothing. A file that is a symbolic link leading out of the folder is
    /// not read (a repository's folder could otherwise show any file of the machine as a skill).
    pub fn load_dir(&mut self, dir: &Path) {
        let Ok(folder) = std::fs::canonicalize(dir) else { return };
        let inside = |path: &Path| std::fs::canonicalize(path).is_ok_and(|real| real.starts_with(&folder));
        if let Ok(entries) = std::fs::read_dir(dir.join("skills")) {
            let mut paths: Vec<_> = entries.flatten().map(|entry| entry.path()).filter(|path| path.extension().is_some_and(|ext| ext == "md")).collect();
            paths.sort();
            for path in paths.into_iter().filter(|path| inside(path)) {
                if let (Some(stem), Ok(text)) = (path.file_stem().and_then(|stem| stem.to_str()), std::fs::read_to_string(&path)) {
                    self.skills.insert(stem.to_owned(), text);
                }
            }
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut paths: Vec<_> =
            entries.flatten().map(|entry| entry.path()).filter(|path| path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml")).collect();
        paths.sort();
        for path in paths {
            let file = path.display().to_string();
            if !inside(&path) {
                self.problems.push(LoadError {
                    file,
                    line: 0,
                    field: "file".into(),
                    problem: "leads out of its folder through a symbolic link, so it is not read".into(),
                    suggestion: "keep protocol files in the folder itself".into(),
                });
                continue;
            }
            match std::fs::read_to_string(&path) {
                Ok(text) => self.add(&file, &text),
                Err(error) => self.problems.push(LoadError { file, line: 0, field: "file".into(), problem: format!("cannot be read: {error}"), suggestion: "check its permissions and encoding (UTF-8)".into() }),
            }
        }
        self.check_calls();
    }

    /// Refuses protocols that call one that does not exist, leave out one of its inputs, name a
    /// skill that is not loaded, or call themselves (directly or through others), and attaches
    /// each protocol's skill.
    fn check_calls(&mut self) {
        loop {
            let mut refused: Option<(String, LoadError)> = None;
            'protocols: for (name, loaded) in &self.protocols {
                for (index, step) in loaded.protocol.steps.iter().enumerate() {
                    let Some(callee) = step.value.protocol.as_deref().filter(|_| step.value.kind == "call_protocol") else { continue };
                    let line = step.referenced.line();
                    let field = format!("steps[{index}].protocol");
                    let error = |problem: String, suggestion: String| LoadError { file: loaded.file.clone(), line, field: field.clone(), problem, suggestion };
                    match self.protocols.get(callee) {
                        None => {
                            refused = Some((name.clone(), error(format!("names `{callee}`, which is not a loaded protocol"), format!("loaded protocols: {}", self.protocols.keys().cloned().collect::<Vec<_>>().join(", ")))));
                            break 'protocols;
                        }
                        Some(target) => {
                            let given: BTreeSet<&str> = step.value.with.iter().flatten().map(|(key, _)| key.as_str()).collect();
                            if let Some(input) = target.protocol.inputs.iter().find(|input| !given.contains(input.as_str())) {
                                refused = Some((name.clone(), LoadError { field: format!("steps[{index}].with"), ..error(format!("leaves out `{input}`, an input of `{callee}`"), format!("add `{input}: \"{{…}}\"` to `with`")) }));
                                break 'protocols;
                            }
                        }
                    }
                }
            }
            if refused.is_none() {
                let unknown = self.protocols.iter().find(|(_, loaded)| loaded.protocol.skill.as_ref().is_some_and(|skill| !self.skills.contains_key(skill)));
                if let Some((name, loaded)) = unknown {
                    let skill = loaded.protocol.skill.clone().unwrap_or_default();
                    refused = Some((name.clone(), LoadError {
                        file: loaded.file.clone(),
                        line: 1,
                        field: "skill".into(),
                        problem: format!("names `{skill}`, which is not a loaded skill"),
                        suggestion: format!("add skills/{skill}.md beside the protocol, or use one of: {}", self.skills.keys().cloned().collect::<Vec<_>>().join(", ")),
                    }));
                }
            }
            if refused.is_none() {
                if let Some(cycle) = self.call_cycle() {
                    let loaded = &self.protocols[&cycle[0]];
                    let (index, line) = loaded.protocol.steps.iter().enumerate().find(|(_, step)| step.value.protocol.as_deref() == cycle.get(1).map(String::as_str)).map(|(i, step)| (i, step.referenced.line())).unwrap_or((0, 0));
                    refused = Some((cycle[0].clone(), LoadError {
                        file: loaded.file.clone(),
                        line,
                        field: format!("steps[{index}].protocol"),
                        problem: format!("makes protocols call each other without end: {}", cycle.join(" -> ")),
                        suggestion: "a protocol may call others, never itself again".into(),
                    }));
                }
            }
            match refused {
                Some((name, error)) => {
                    self.protocols.remove(&name);
                    self.problems.push(error);
                }
                None => break,
            }
        }
        for loaded in self.protocols.values_mut() {
            loaded.skill = loaded.protocol.skill.as_ref().and_then(|skill| self.skills.get(skill).cloned());
        }
    }

    fn call_cycle(&self) -> Option<Vec<String>> {
        let names: Vec<String> = self.protocols.keys().cloned().collect();
        let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, name)| (name.as_str(), i)).collect();
        let edges: Vec<Vec<usize>> = self
            .protocols
            .values()
            .map(|loaded| {
                loaded.protocol.steps.iter().filter(|step| step.value.kind == "call_protocol").filter_map(|step| step.value.protocol.as_deref().and_then(|callee| index.get(callee).copied())).collect()
            })
            .collect();
        kenning_core::graph::find_cycle(&edges, &names)
    }

    pub fn get(&self, name: &str) -> Option<&Loaded> {
        self.protocols.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.protocols.keys().map(String::as_str)
    }

    pub fn protocols(&self) -> impl Iterator<Item = &Loaded> {
        self.protocols.values()
    }
}
