//! Parsing one source file with tree-sitter: its chunks (functions, types, methods: the units a
//! search returns), its imports as written, and its own documentation.
//!
//! A chunk is a definition: a function, a type, and each member of a container (an `impl`
//! block, a class, a trait, an inline module), named `Container::member`. The container is a
//! chunk too: whole when it has at most [`SPLIT_LINES`] lines, its header when longer.

use tree_sitter::{Node, Parser};

use crate::lang::Language;

/// A container longer than this many lines is kept as its header only (its members are chunks).
pub const SPLIT_LINES: usize = 80;
/// The most text of one chunk that is kept and searched.
pub const CHUNK_TEXT_BYTES: usize = 6000;
/// Files larger than this are indexed by name only: generated or vendored code, not reading.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// What the parser found in one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedFile {
    /// The file's own documentation: module doc comments, a docstring, a leading comment.
    pub doc: String,
    pub chunks: Vec<Chunk>,
    /// Imports as written (see [`crate::graph`] for how each language's are read).
    pub imports: Vec<String>,
    pub lines: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub name: String,
    /// The grammar's name for it, simplified: `function`, `method`, `struct`, `class`, `impl`, …
    pub kind: String,
    /// 1-based, inclusive.
    pub start_line: usize,
    pub end_line: usize,
    pub signature: String,
    pub doc: String,
    pub text: String,
}

/// Parses `source`, the text of the file at `path`, in `language`.
pub fn parse(path: &str, language: Language, source: &str) -> ParsedFile {
    let lines = source.lines().count();
    if source.len() > MAX_FILE_BYTES {
        return ParsedFile { lines, ..ParsedFile::default() };
    }
    let mut parser = Parser::new();
    if parser.set_language(&language.grammar(path)).is_err() {
        return ParsedFile { lines, ..ParsedFile::default() };
    }
    let Some(tree) = parser.parse(source, None) else {
        return ParsedFile { lines, ..ParsedFile::default() };
    };
    let root = tree.root_node();
    let mut walker = Walker { source, language, chunks: Vec::new() };
    walker.members(root, "");
    ParsedFile { doc: file_doc(root, source, language), chunks: walker.chunks, imports: imports(root, source, language), lines }
}

struct Walker<'s> {
    source: &'s str,
    language: Language,
    chunks: Vec<Chunk>,
}

/// How a node takes part in chunking.
enum Role<'t> {
    /// A definition kept whole.
    Leaf { kind: &'static str, name: String },
    /// A definition whose members may become chunks of their own.
    Container { kind: &'static str, name: String, body: Node<'t> },
    /// A wrapper (an export, a decorator list) around the node that matters.
    Wrapper(Node<'t>),
    Other,
}

impl<'s> Walker<'s> {
    fn text(&self, node: Node<'_>) -> &'s str {
        &self.source[node.byte_range()]
    }

    fn field_text(&self, node: Node<'_>, field: &str) -> Option<String> {
        node.child_by_field_name(field).map(|child| self.text(child).to_owned())
    }

    fn members(&mut self, container: Node<'_>, prefix: &str) {
        let mut cursor = container.walk();
        let children: Vec<Node<'_>> = container.named_children(&mut cursor).collect();
        for child in children {
            self.item(child, child, prefix);
        }
    }

    /// `outer` is the node whose range the chunk covers (a decorated or exported definition
    /// includes its decorators and `export`), `node` the definition itself.
    fn item(&mut self, outer: Node<'_>, node: Node<'_>, prefix: &str) {
        match self.role(node) {
            Role::Wrapper(inner) => self.item(outer, inner, prefix),
            Role::Leaf { kind, name } => {
                let kind = if !prefix.is_empty() && kind == "function" { "method" } else { kind };
                self.push(outer, node, kind, qualified(prefix, &name, self.language));
            }
            Role::Container { kind, name, body } => {
                // The container is a chunk of its own (whole when short, its header when
                // long), and each member is one too: a search should land on the method.
                let lines = outer.end_position().row - outer.start_position().row + 1;
                let name = qualified(prefix, &name, self.language);
                let mut chunk = self.chunk(outer, node, kind, name.clone());
                if lines > SPLIT_LINES {
                    let header_end = body.start_byte().max(outer.start_byte());
                    chunk.text = truncate(self.source[outer.start_byte()..header_end].trim_end(), CHUNK_TEXT_BYTES).to_owned();
                }
                self.chunks.push(chunk);
                self.members(body, &name);
            }
            Role::Other => {}
        }
    }

    fn push(&mut self, outer: Node<'_>, node: Node<'_>, kind: &str, name: String) {
        let chunk = self.chunk(outer, node, kind, name);
        self.chunks.push(chunk);
    }

    fn chunk(&self, outer: Node<'_>, node: Node<'_>, kind: &str, name: String) -> Chunk {
        let text = self.text(outer);
        let signature = match node.child_by_field_name("body") {
            Some(body) if body.start_byte() > node.start_byte() => &self.source[node.start_byte()..body.start_byte()],
            _ => text.lines().next().unwrap_or_default(),
        };
        Chunk {
            name,
            kind: kind.to_owned(),
            start_line: outer.start_position().row + 1,
            end_line: outer.end_position().row + 1,
            signature: truncate(&collapse(signature), 300).to_owned(),
            doc: self.doc_of(outer, node),
            text: truncate(text, CHUNK_TEXT_BYTES).to_owned(),
        }
    }

    fn role<'t>(&self, node: Node<'t>) -> Role<'t> {
        let name = |field: &str| self.field_text(node, field).unwrap_or_default();
        let body = node.child_by_field_name("body");
        match (self.language, node.kind()) {
            (Language::Rust, "function_item" | "function_signature_item") => Role::Leaf { kind: "function", name: name("name") },
            (Language::Rust, "struct_item") => Role::Leaf { kind: "struct", name: name("name") },
            (Language::Rust, "enum_item") => Role::Leaf { kind: "enum", name: name("name") },
            (Language::Rust, "union_item") => Role::Leaf { kind: "union", name: name("name") },
            (Language::Rust, "type_item") => Role::Leaf { kind: "type", name: name("name") },
            (Language::Rust, "macro_definition") => Role::Leaf { kind: "macro", name: name("name") },
            (Language::Rust, "const_item" | "static_item") => Role::Leaf { kind: "constant", name: name("name") },
            (Language::Rust, "trait_item") => match body {
                Some(body) => Role::Container { kind: "trait", name: name("name"), body },
                None => Role::Other,
            },
            (Language::Rust, "impl_item") => match body {
                Some(body) => {
                    let target = collapse(&name("type"));
                    let name = match self.field_text(node, "trait") {
                        Some(trait_name) => format!("{} for {target}", collapse(&trait_name)),
                        None => target,
                    };
                    Role::Container { kind: "impl", name, body }
                }
                None => Role::Other,
            },
            (Language::Rust, "mod_item") => match body {
                Some(body) => Role::Container { kind: "module", name: name("name"), body },
                None => Role::Other,
            },
            (Language::Python, "function_definition") => Role::Leaf { kind: "function", name: name("name") },
            (Language::Python, "class_definition") => match body {
                Some(body) => Role::Container { kind: "class", name: name("name"), body },
                None => Role::Other,
            },
            (Language::Python, "decorated_definition") => node.child_by_field_name("definition").map_or(Role::Other, Role::Wrapper),
            (Language::TypeScript | Language::JavaScript, kind) => self.script_role(node, kind),
            (Language::Go, "function_declaration") => Role::Leaf { kind: "function", name: name("name") },
            (Language::Go, "method_declaration") => {
                let receiver = node.child_by_field_name("receiver").map(|receiver| go_receiver(self.text(receiver))).unwrap_or_default();
                Role::Leaf { kind: "method", name: qualified(&receiver, &name("name"), Language::Go) }
            }
            (Language::Go, "type_declaration") => {
                let mut cursor = node.walk();
                let spec = node.named_children(&mut cursor).find(|child| matches!(child.kind(), "type_spec" | "type_alias"));
                let name = spec.and_then(|spec| self.field_text(spec, "name")).unwrap_or_default();
                let kind = match spec.and_then(|spec| spec.child_by_field_name("type")).map(|kind| kind.kind()) {
                    Some("struct_type") => "struct",
                    Some("interface_type") => "interface",
                    _ => "type",
                };
                Role::Leaf { kind, name }
            }
            _ => Role::Other,
        }
    }

    fn script_role<'t>(&self, node: Node<'t>, kind: &str) -> Role<'t> {
        let name = |field: &str| self.field_text(node, field).unwrap_or_default();
        let body = node.child_by_field_name("body");
        match kind {
            "function_declaration" | "generator_function_declaration" | "function_signature" => Role::Leaf { kind: "function", name: name("name") },
            "method_definition" | "method_signature" | "abstract_method_signature" => Role::Leaf { kind: "method", name: name("name") },
            "interface_declaration" => Role::Leaf { kind: "interface", name: name("name") },
            "type_alias_declaration" => Role::Leaf { kind: "type", name: name("name") },
            "enum_declaration" => Role::Leaf { kind: "enum", name: name("name") },
            "class_declaration" | "abstract_class_declaration" | "class" => match body {
                Some(body) => Role::Container { kind: "class", name: name("name"), body },
                None => Role::Other,
            },
            "internal_module" | "module" => match body {
                Some(body) => Role::Container { kind: "namespace", name: name("name"), body },
                None => Role::Other,
            },
            "export_statement" => {
                node.child_by_field_name("declaration").or_else(|| node.child_by_field_name("value")).map_or(Role::Other, Role::Wrapper)
            }
            "lexical_declaration" | "variable_declaration" => {
                // `const handler = () => …` and `const Widget = class …` define a function or a
                // class; any other variable is data, not a unit of code.
                let mut cursor = node.walk();
                let declarator = node.named_children(&mut cursor).find(|child| child.kind() == "variable_declarator");
                let value = declarator.and_then(|declarator| declarator.child_by_field_name("value"));
                match value.map(|value| value.kind()) {
                    Some("arrow_function" | "function_expression" | "function" | "generator_function") => {
                        let name = declarator.and_then(|declarator| self.field_text(declarator, "name")).unwrap_or_default();
                        Role::Leaf { kind: "function", name }
                    }
                    Some("class") => {
                        let name = declarator.and_then(|declarator| self.field_text(declarator, "name")).unwrap_or_default();
                        Role::Leaf { kind: "class", name }
                    }
                    _ => Role::Other,
                }
            }
            _ => Role::Other,
        }
    }

    /// The doc comment or docstring of a definition: the comments right above it (for Rust
    /// only `///` and `/** */`), or a Python docstring.
    fn doc_of(&self, outer: Node<'_>, node: Node<'_>) -> String {
        if self.language == Language::Python
            && let Some(body) = node.child_by_field_name("body")
            && let Some(first) = body.named_child(0)
            && first.kind() == "expression_statement"
            && let Some(string) = first.named_child(0)
            && string.kind() == "string"
        {
            return clean_docstring(self.text(string));
        }
        let mut comments: Vec<&str> = Vec::new();
        let mut next_row = outer.start_position().row;
        let mut sibling = outer.prev_sibling();
        while let Some(previous) = sibling {
            let kind = previous.kind();
            if kind == "attribute_item" {
                next_row = previous.start_position().row;
                sibling = previous.prev_sibling();
                continue;
            }
            if !kind.contains("comment") || previous.end_position().row + 1 < next_row {
                break;
            }
            let text = self.text(previous);
            if self.language == Language::Rust && !(text.starts_with("///") || text.starts_with("/**")) {
                break;
            }
            comments.push(text);
            next_row = previous.start_position().row;
            sibling = previous.prev_sibling();
        }
        comments.reverse();
        clean_comments(&comments)
    }
}

fn qualified(prefix: &str, name: &str, language: Language) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        let separator = if language == Language::Rust { "::" } else { "." };
        format!("{prefix}{separator}{name}")
    }
}

/// `(s *Server)` → `Server`.
fn go_receiver(text: &str) -> String {
    let inner = text.trim_matches(|c| c == '(' || c == ')').trim();
    let kind = inner.rsplit(' ').next().unwrap_or(inner);
    kind.trim_start_matches('*').split('[').next().unwrap_or_default().to_owned()
}

/// The documentation at the top of a file.
fn file_doc(root: Node<'_>, source: &str, language: Language) -> String {
    let mut cursor = root.walk();
    let children: Vec<Node<'_>> = root.named_children(&mut cursor).collect();
    match language {
        Language::Python => children
            .first()
            .filter(|first| first.kind() == "expression_statement")
            .and_then(|first| first.named_child(0))
            .filter(|string| string.kind() == "string")
            .map(|string| clean_docstring(&source[string.byte_range()]))
            .unwrap_or_default(),
        Language::Rust => {
            let inner: Vec<&str> = children
                .iter()
                .take_while(|child| child.kind().contains("comment"))
                .map(|child| &source[child.byte_range()])
                .filter(|text| text.starts_with("//!") || text.starts_with("/*!"))
                .collect();
            clean_comments(&inner)
        }
        Language::Go | Language::TypeScript | Language::JavaScript => {
            let leading: Vec<&str> =
                children.iter().take_while(|child| child.kind() == "comment").map(|child| &source[child.byte_range()]).collect();
            clean_comments(&leading)
        }
    }
}

/// Every import of the file, anywhere in it (imports inside functions and conditionals count).
fn imports(root: Node<'_>, source: &str, language: Language) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root];
    let text = |node: Node<'_>| source[node.byte_range()].to_owned();
    while let Some(node) = stack.pop() {
        match (language, node.kind()) {
            (Language::Rust, "use_declaration") => {
                if let Some(argument) = node.child_by_field_name("argument") {
                    rust_use_paths(argument, source, "", &mut found);
                }
                continue;
            }
            (Language::Rust, "mod_item") if node.child_by_field_name("body").is_none() => {
                if let Some(name) = node.child_by_field_name("name") {
                    found.push(format!("mod:{}", text(name)));
                }
                continue;
            }
            (Language::Python, "import_statement") => {
                let mut cursor = node.walk();
                for name in node.children_by_field_name("name", &mut cursor) {
                    found.push(python_name(name, source));
                }
                continue;
            }
            (Language::Python, "import_from_statement") => {
                let module = node.child_by_field_name("module_name").map(text).unwrap_or_default();
                let mut cursor = node.walk();
                let names: Vec<String> = node.children_by_field_name("name", &mut cursor).map(|name| python_name(name, source)).collect();
                if names.is_empty() {
                    found.push(module.clone());
                }
                for name in names {
                    found.push(if module.ends_with('.') { format!("{module}{name}") } else { format!("{module}.{name}") });
                }
                continue;
            }
            (Language::TypeScript | Language::JavaScript, "import_statement" | "export_statement") => {
                if let Some(source_node) = node.child_by_field_name("source") {
                    found.push(unquote(&text(source_node)));
                }
            }
            (Language::TypeScript | Language::JavaScript, "call_expression") => {
                let callee = node.child_by_field_name("function").map(|function| text(function));
                if matches!(callee.as_deref(), Some("require" | "import"))
                    && let Some(arguments) = node.child_by_field_name("arguments")
                    && let Some(first) = arguments.named_child(0)
                    && first.kind() == "string"
                {
                    found.push(unquote(&text(first)));
                }
            }
            (Language::Go, "import_spec") => {
                if let Some(path) = node.child_by_field_name("path") {
                    found.push(unquote(&text(path)));
                }
                continue;
            }
            _ => {}
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    found.retain(|spec| !spec.is_empty());
    found.sort();
    found.dedup();
    found
}

/// The paths a Rust use tree names: `a::{b, c::D}` gives `a::b` and `a::c::D`.
fn rust_use_paths(node: Node<'_>, source: &str, prefix: &str, out: &mut Vec<String>) {
    let join = |rest: &str| if prefix.is_empty() { rest.to_owned() } else { format!("{prefix}::{rest}") };
    match node.kind() {
        "scoped_use_list" => {
            let path = node.child_by_field_name("path").map(|path| join(&source[path.byte_range()])).unwrap_or_else(|| prefix.to_owned());
            if let Some(list) = node.child_by_field_name("list") {
                rust_use_paths(list, source, &path, out);
            }
        }
        "use_list" => {
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                rust_use_paths(child, source, prefix, out);
            }
        }
        "use_as_clause" => {
            if let Some(path) = node.child_by_field_name("path") {
                rust_use_paths(path, source, prefix, out);
            }
        }
        "use_wildcard" => {
            let text = &source[node.byte_range()];
            out.push(join(text.trim_end_matches('*').trim_end_matches("::")));
        }
        _ if node.kind().contains("comment") => {}
        _ => out.push(join(&collapse(&source[node.byte_range()]).replace(' ', ""))),
    }
}

fn python_name(node: Node<'_>, source: &str) -> String {
    let node = if node.kind() == "aliased_import" { node.child_by_field_name("name").unwrap_or(node) } else { node };
    source[node.byte_range()].to_owned()
}

fn unquote(text: &str) -> String {
    text.trim_matches(|c| c == '"' || c == '\'' || c == '`').to_owned()
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Comment text without its markers (`///`, `//!`, `//`, `#`, `/** */`, leading `*`).
fn clean_comments(comments: &[&str]) -> String {
    let mut lines = Vec::new();
    for comment in comments {
        for line in comment.lines() {
            let line = line.trim();
            let line = line
                .trim_start_matches("/**")
                .trim_start_matches("/*!")
                .trim_start_matches("/*")
                .trim_end_matches("*/")
                .trim_start_matches("///")
                .trim_start_matches("//!")
                .trim_start_matches("//")
                .trim_start_matches('#')
                .trim_start_matches('*');
            lines.push(line.trim().to_owned());
        }
    }
    truncate(lines.join("\n").trim(), 2000).to_owned()
}

fn clean_docstring(text: &str) -> String {
    let text = text.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let text = text.trim_matches('"').trim_matches('\'');
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    truncate(lines.join("\n").trim(), 2000).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_chunks_docs_and_imports() {
        let source = "//! The module.\nuse crate::a::{b, c::D};\nmod store;\n\n/// Adds.\n#[inline]\npub fn add(x: i32) -> i32 { x }\n\nstruct S;\nimpl S {\n    fn m(&self) {}\n}\n";
        let parsed = parse("src/lib.rs", Language::Rust, source);
        assert_eq!(parsed.doc, "The module.");
        assert_eq!(parsed.imports, vec!["crate::a::b", "crate::a::c::D", "mod:store"]);
        let names: Vec<&str> = parsed.chunks.iter().map(|chunk| chunk.name.as_str()).collect();
        assert_eq!(names, vec!["add", "S", "S", "S::m"]);
        assert_eq!(parsed.chunks[0].doc, "Adds.");
        assert_eq!(parsed.chunks[0].signature, "pub fn add(x: i32) -> i32");
        assert_eq!(parsed.chunks[0].start_line, 7);
    }

    #[test]
    fn python_from_imports_and_docstrings() {
        let source = "\"\"\"Tools.\"\"\"\nfrom .models import User, Group as G\nimport os.path\n\ndef f():\n    \"\"\"Does f.\"\"\"\n    return 1\n";
        let parsed = parse("pkg/tools.py", Language::Python, source);
        assert_eq!(parsed.doc, "Tools.");
        assert_eq!(parsed.imports, vec![".models.Group", ".models.User", "os.path"]);
        assert_eq!(parsed.chunks[0].doc, "Does f.");
    }
}
