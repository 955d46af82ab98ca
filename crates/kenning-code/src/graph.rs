//! The import graph: each file's imports, as the parser read them, resolved to files of the
//! repository; what does not resolve is an external dependency.
//!
//! Resolution by language:
//! - Rust: `mod x;` is `x.rs` or `x/mod.rs` beside the declaring module; `crate::a::b`,
//!   `self::`, `super::` and `other_crate::a` (a crate of this workspace, by its Cargo.toml
//!   name) map to the longest module path that is a file. Unresolved paths are external crates.
//! - Python: `a.b.c` is `a/b/c.py` or `a/b/c/__init__.py`, shortened one part at a time (the
//!   last parts may be names inside a module), from the root and from `src/`; leading dots are
//!   relative to the importing file's package.
//! - TypeScript and JavaScript: a specifier starting with `.` is a file beside the importer,
//!   with or without its extension, or a directory's `index`; `.js` may name a `.ts` file.
//! - Go: an import path under the module path of a `go.mod` is every non-test `.go` file of
//!   that package's directory.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::lang::Language;

/// Manifests the resolution needs: workspace crates and Go modules.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    /// Crate name (with `_` for `-`) → the crate's directory (`""` for the root).
    pub crates: BTreeMap<String, String>,
    /// A Cargo package's directory → its name as Cargo.toml spells it (for `cargo -p`).
    pub packages: BTreeMap<String, String>,
    /// Go module path → the directory holding its go.mod.
    pub go_modules: BTreeMap<String, String>,
}

impl Manifests {
    /// Reads a Cargo.toml's `[package] name`, or a go.mod's `module` line.
    pub fn add(&mut self, path: &str, text: &str) {
        let dir = parent(path).to_owned();
        if path == "Cargo.toml" || path.ends_with("/Cargo.toml") {
            let mut in_package = false;
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with('[') {
                    in_package = line == "[package]";
                } else if in_package
                    && let Some(value) = line.strip_prefix("name").map(str::trim_start).and_then(|rest| rest.strip_prefix('='))
                {
                    let name = value.trim().trim_matches('"');
                    self.crates.insert(name.replace('-', "_"), dir.clone());
                    self.packages.insert(dir.clone(), name.to_owned());
                }
            }
        } else if (path == "go.mod" || path.ends_with("/go.mod"))
            && let Some(module) = text.lines().find_map(|line| line.trim().strip_prefix("module "))
        {
            self.go_modules.insert(module.trim().trim_matches('"').to_owned(), dir);
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub imports: BTreeMap<String, BTreeSet<String>>,
    pub imported_by: BTreeMap<String, BTreeSet<String>>,
    /// Per file, the external packages it imports (crates, modules, npm packages).
    pub external: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// Resolves every file's imports against `files` (every indexed file).
    pub fn build<'a>(files: impl IntoIterator<Item = (&'a str, &'a [String])>, known: &BTreeSet<String>, manifests: &Manifests) -> Graph {
        let mut graph = Graph::default();
        for (path, specs) in files {
            let Some(language) = Language::of(path) else { continue };
            for spec in specs {
                let targets = resolve(path, language, spec, known, manifests);
                if targets.is_empty() {
                    if let Some(package) = external_name(language, spec) {
                        graph.external.entry(path.to_owned()).or_default().insert(package);
                    }
                }
                for target in targets {
                    if target != path {
                        graph.imports.entry(path.to_owned()).or_default().insert(target.clone());
                        graph.imported_by.entry(target).or_default().insert(path.to_owned());
                    }
                }
            }
        }
        graph
    }

    /// Files reachable from `start` along `imports` (or `imported_by`) within `depth` steps,
    /// each with its distance; `start` itself is left out.
    pub fn reach(&self, start: &str, reverse: bool, depth: usize) -> Vec<(String, usize)> {
        let edges = if reverse { &self.imported_by } else { &self.imports };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([(start.to_owned(), 0)]);
        while let Some((file, distance)) = queue.pop_front() {
            if distance == depth {
                continue;
            }
            for next in edges.get(&file).into_iter().flatten() {
                if next != start && !seen.contains_key(next) {
                    seen.insert(next.clone(), distance + 1);
                    queue.push_back((next.clone(), distance + 1));
                }
            }
        }
        let mut found: Vec<(String, usize)> = seen.into_iter().collect();
        found.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        found
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn join(dir: &str, rest: &str) -> String {
    if dir.is_empty() { rest.to_owned() } else { format!("{dir}/{rest}") }
}

/// `dir/..` folded; `None` when it climbs above the root.
fn normalise(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

fn resolve(path: &str, language: Language, spec: &str, known: &BTreeSet<String>, manifests: &Manifests) -> Vec<String> {
    let found = |candidate: &str| known.contains(candidate).then(|| candidate.to_owned());
    match language {
        Language::Rust => resolve_rust(path, spec, known, manifests).into_iter().collect(),
        Language::Python => resolve_python(path, spec, known).into_iter().collect(),
        Language::TypeScript | Language::JavaScript => {
            if !spec.starts_with('.') {
                return Vec::new();
            }
            let Some(base) = normalise(&join(parent(path), spec)) else { return Vec::new() };
            let stem = ["js", "jsx", "mjs", "cjs"].iter().find_map(|extension| base.strip_suffix(&format!(".{extension}")));
            let mut candidates = vec![base.clone()];
            for extension in ["ts", "tsx", "mts", "js", "jsx", "mjs", "cjs"] {
                candidates.push(format!("{base}.{extension}"));
                if let Some(stem) = stem {
                    candidates.push(format!("{stem}.{extension}"));
                }
            }
            for extension in ["ts", "tsx", "js", "jsx"] {
                candidates.push(format!("{base}/index.{extension}"));
            }
            candidates.iter().find_map(|candidate| found(candidate)).into_iter().collect()
        }
        Language::Go => {
            let Some((module, dir)) = manifests
                .go_modules
                .iter()
                .filter(|(module, _)| spec == module.as_str() || spec.starts_with(&format!("{module}/")))
                .max_by_key(|(module, _)| module.len())
            else {
                return Vec::new();
            };
            let package_dir = join(dir, spec[module.len()..].trim_start_matches('/'));
            known
                .iter()
                .filter(|file| parent(file) == package_dir && file.ends_with(".go") && !file.ends_with("_test.go"))
                .cloned()
                .collect()
        }
    }
}

/// The module path segments of a Rust file inside its crate, and the directory its `crate::`
/// paths start from: `crates/x/src/a/b.rs` is `[a, b]` from `crates/x/src`.
fn rust_module(path: &str, manifests: &Manifests) -> (String, Vec<String>) {
    let crate_dir = manifests
        .crates
        .values()
        .filter(|dir| dir.is_empty() || path.starts_with(&format!("{dir}/")))
        .max_by_key(|dir| dir.len())
        .cloned()
        .unwrap_or_default();
    let src = join(&crate_dir, "src");
    if let Some(inside) = path.strip_prefix(&format!("{src}/")) {
        let mut segments: Vec<String> = inside.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
        if matches!(segments.last().map(String::as_str), Some("mod")) || matches!(inside, "lib.rs" | "main.rs") {
            segments.pop();
        }
        (src, segments)
    } else {
        // An integration test, example or bench is a crate root of its own.
        (parent(path).to_owned(), Vec::new())
    }
}

/// The file of module `segments` under `src`, or of the longest prefix of it that is a file.
fn rust_module_file(src: &str, segments: &[String], known: &BTreeSet<String>) -> Option<String> {
    for length in (1..=segments.len()).rev() {
        let base = join(src, &segments[..length].join("/"));
        for candidate in [format!("{base}.rs"), format!("{base}/mod.rs")] {
            if known.contains(&candidate) {
                return Some(candidate);
            }
        }
    }
    ["lib.rs", "main.rs"].iter().map(|root| join(src, root)).find(|root| known.contains(root))
}

fn resolve_rust(path: &str, spec: &str, known: &BTreeSet<String>, manifests: &Manifests) -> Option<String> {
    if let Some(name) = spec.strip_prefix("mod:") {
        let dir = parent(path);
        let file_name = path.rsplit('/').next().unwrap_or(path);
        let own_dir = matches!(file_name, "lib.rs" | "main.rs" | "mod.rs")
            || matches!(dir.rsplit('/').next(), Some("tests" | "examples" | "benches" | "bin"));
        let module_dir = if own_dir { dir.to_owned() } else { join(dir, file_name.trim_end_matches(".rs")) };
        return [format!("{module_dir}/{name}.rs"), format!("{module_dir}/{name}/mod.rs")]
            .into_iter()
            .map(|candidate| normalise(&candidate).unwrap_or(candidate))
            .find(|candidate| known.contains(candidate));
    }
    let segments: Vec<String> =
        spec.split("::").filter(|segment| !segment.is_empty() && *segment != "self").map(str::to_owned).collect();
    let first = spec.split("::").next().unwrap_or_default();
    let (src, own) = rust_module(path, manifests);
    match first {
        "crate" => rust_module_file(&src, &segments[1..], known),
        "self" => {
            let full: Vec<String> = own.iter().cloned().chain(segments.iter().cloned()).collect();
            rust_module_file(&src, &full, known)
        }
        "super" => {
            let climbs = segments.iter().take_while(|segment| *segment == "super").count();
            let kept = own.len().checked_sub(climbs)?;
            let full: Vec<String> = own[..kept].iter().cloned().chain(segments[climbs..].iter().cloned()).collect();
            rust_module_file(&src, &full, known)
        }
        "std" | "core" | "alloc" => None,
        name => {
            if let Some(dir) = manifests.crates.get(name) {
                return rust_module_file(&join(dir, "src"), &segments[1..], known);
            }
            // A child module used by its bare name (`use store::Store` beside `mod store;`).
            let full: Vec<String> = own.iter().cloned().chain(segments.iter().cloned()).collect();
            let child = rust_module_file(&src, &full, known)?;
            (child != path && own.len() < full.len() && child.contains(name)).then_some(child)
        }
    }
}

fn resolve_python(path: &str, spec: &str, known: &BTreeSet<String>) -> Option<String> {
    let dots = spec.chars().take_while(|c| *c == '.').count();
    let rest: Vec<&str> = spec[dots..].split('.').filter(|part| !part.is_empty()).collect();
    let roots: Vec<String> = if dots > 0 {
        let mut base = parent(path).to_owned();
        for _ in 1..dots {
            if base.is_empty() {
                return None;
            }
            base = parent(&base).to_owned();
        }
        vec![base]
    } else {
        vec![String::new(), "src".to_owned()]
    };
    for root in &roots {
        for length in (1..=rest.len()).rev() {
            let base = join(root, &rest[..length].join("/"));
            for candidate in [format!("{base}.py"), format!("{base}/__init__.py"), format!("{base}.pyi")] {
                if known.contains(&candidate) {
                    return Some(candidate);
                }
            }
        }
        if rest.is_empty() {
            let candidate = join(root, "__init__.py");
            if known.contains(&candidate) {
                return Some(candidate);
            }
        }
    }
    None
}

/// The package an unresolved import names, as a person would: `serde` for `serde::Deserialize`,
/// `requests` for `requests.adapters`, `@scope/pkg` for `@scope/pkg/sub`.
fn external_name(language: Language, spec: &str) -> Option<String> {
    match language {
        Language::Rust => {
            let first = spec.split("::").next()?;
            (!matches!(first, "crate" | "self" | "super" | "std" | "core" | "alloc") && !first.starts_with("mod:")).then(|| first.to_owned())
        }
        Language::Python => (!spec.starts_with('.')).then(|| spec.split('.').next().unwrap_or(spec).to_owned()),
        Language::TypeScript | Language::JavaScript => {
            if spec.starts_with('.') || spec.starts_with('/') {
                return None;
            }
            let mut parts = spec.split('/');
            let first = parts.next()?;
            Some(if first.starts_with('@') { format!("{first}/{}", parts.next().unwrap_or_default()) } else { first.to_owned() })
        }
        Language::Go => Some(spec.to_owned()),
    }
}
