//! Secrets never stored: API keys, tokens, passwords, private keys and credentials in connection
//! strings are found in text and replaced by `[REDACTED:kind]` before a memory is written.
//!
//! [`redact`] scans one text; [`redact_capture`] and [`redact_update`] scan every free-text field
//! of a capture or an update (title, content, metadata values) and report what they replaced as
//! [`Redaction`]s, so that the response can say so. [`redact_decision`],
//! [`redact_decision_update`], [`redact_signal`] and [`redact_outcome`] do the same for the free
//! text of decisions: statement, rationale, assumptions, alternatives, notes, signal
//! descriptions and metrics, outcome lessons and observed signals.
//!
//! Detection runs from the most specific rule to the most general: first the formats that name
//! themselves (PEM blocks, JWTs, `sk-ant-`, `ghp_`, `xoxb-`, `AKIA…`), then credentials inside
//! URLs and connection strings, then `password = …`-style assignments. A later rule never rewrites
//! what an earlier one already replaced, so each secret is reported once, under its most precise
//! kind. The general rules keep what only looks like a secret: placeholders (`${DB_PASSWORD}`,
//! `<token>`, `****`), references in code (`os.environ["X"]`, `config.password`, `get_token()`),
//! numbers, booleans, and prose such as "the password: rotate it monthly". Hex digests (commit
//! SHAs, checksums), UUIDs, base64 images and lockfile integrity hashes match no rule: no rule
//! flags a string for looking random alone, because those are random too.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

use crate::decision::{CaptureDecision, OutcomeInput, SignalInput, UpdateDecision};
use crate::input::{CaptureInput, UpdateInput};

/// What kind of secret a redaction replaced; the name appears in the marker `[REDACTED:name]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretKind {
    PrivateKey,
    Jwt,
    AnthropicApiKey,
    OpenaiApiKey,
    GithubToken,
    GitlabToken,
    SlackToken,
    SlackWebhook,
    AwsAccessKeyId,
    AwsSecretAccessKey,
    GoogleApiKey,
    StripeKey,
    NpmToken,
    BearerToken,
    BasicAuth,
    UrlPassword,
    ConnectionStringPassword,
    Password,
    Secret,
    ApiKey,
    Token,
}

impl SecretKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "private-key",
            SecretKind::Jwt => "jwt",
            SecretKind::AnthropicApiKey => "anthropic-api-key",
            SecretKind::OpenaiApiKey => "openai-api-key",
            SecretKind::GithubToken => "github-token",
            SecretKind::GitlabToken => "gitlab-token",
            SecretKind::SlackToken => "slack-token",
            SecretKind::SlackWebhook => "slack-webhook",
            SecretKind::AwsAccessKeyId => "aws-access-key-id",
            SecretKind::AwsSecretAccessKey => "aws-secret-access-key",
            SecretKind::GoogleApiKey => "google-api-key",
            SecretKind::StripeKey => "stripe-key",
            SecretKind::NpmToken => "npm-token",
            SecretKind::BearerToken => "bearer-token",
            SecretKind::BasicAuth => "basic-auth",
            SecretKind::UrlPassword => "url-password",
            SecretKind::ConnectionStringPassword => "connection-string-password",
            SecretKind::Password => "password",
            SecretKind::Secret => "secret",
            SecretKind::ApiKey => "api-key",
            SecretKind::Token => "token",
        }
    }

    /// The marker that replaces a secret of this kind.
    pub fn marker(self) -> String {
        format!("{MARKER_PREFIX}{}]", self.as_str())
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const MARKER_PREFIX: &str = "[REDACTED:";

/// Secrets of one kind replaced in one field of a capture or update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// `title`, `content` or `metadata.{key}`; for a decision `statement`, `rationale`,
    /// `assumptions[n]`, `alternatives[n]`, `notes`, `description`, `metrics.{key}`,
    /// `lessons_learned[n]` or `signals.{key}`.
    pub field: String,
    pub kind: SecretKind,
    pub count: usize,
}

/// A text with its secrets replaced, and the kind of each secret replaced, in order of rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted<'a> {
    pub text: Cow<'a, str>,
    pub kinds: Vec<SecretKind>,
}

/// Which part of a match is the secret, and whether a match is one.
enum Replace {
    /// The whole match is the secret.
    Whole,
    /// Only this capture group is; the rest (a key name, a URL's user) stays.
    Group(usize),
    /// The `value` group of an assignment, if the assignment passes the checks for
    /// placeholders, code references and prose.
    Assignment,
}

struct Rule {
    kind: Option<SecretKind>,
    pattern: Regex,
    replace: Replace,
    /// A further check on the secret's text: random tokens must mix letters and digits.
    check: fn(&str) -> bool,
}

fn any(_: &str) -> bool {
    true
}

/// Random keys mix letter cases and digits; a word-like `sk-learn-compatible-models` does not.
fn looks_random(text: &str) -> bool {
    let digits = text.bytes().any(|b| b.is_ascii_digit());
    let upper = text.bytes().any(|b| b.is_ascii_uppercase());
    let lower = text.bytes().any(|b| b.is_ascii_lowercase());
    digits && upper && lower
}

fn rule(kind: SecretKind, pattern: &str, replace: Replace, check: fn(&str) -> bool) -> Rule {
    Rule { kind: Some(kind), pattern: Regex::new(pattern).expect("secret patterns are valid"), replace, check }
}

/// The assignment rule takes its kind from the key it assigns.
const ASSIGNMENT: &str = r#"(?i)["']?\b(?P<key>(?:[a-z0-9]+[_.-])*(?:password|passwd|passphrase|pwd|secret|secret[_-]?key|secret[_-]?key[_-]?base|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|bearer[_-]?token|private[_-]?key|token))\b(?P<key_quote>["']?)[ \t]*(?P<op>:=|=>|=|:)[ \t]*(?P<value>"[^"\n]*"|'[^'\n]*'|`[^`\n]*`|[^\s"'`,;&(){}\[\]]+)(?P<after>\(?)"#;

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    use SecretKind::*;
    vec![
        rule(
            PrivateKey,
            r"(?s)-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            Replace::Whole,
            any,
        ),
        rule(Jwt, r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", Replace::Whole, any),
        rule(AnthropicApiKey, r"\bsk-ant-[A-Za-z0-9_-]{20,}", Replace::Whole, looks_random),
        rule(OpenaiApiKey, r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", Replace::Whole, looks_random),
        rule(GithubToken, r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b", Replace::Whole, any),
        rule(GithubToken, r"\bgithub_pat_[A-Za-z0-9_]{50,255}\b", Replace::Whole, any),
        rule(GitlabToken, r"\bglpat-[A-Za-z0-9_-]{20,}", Replace::Whole, any),
        rule(SlackWebhook, r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,}", Replace::Whole, any),
        rule(SlackToken, r"\bxox[abposre]-[A-Za-z0-9-]{10,}", Replace::Whole, any),
        rule(AwsAccessKeyId, r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", Replace::Whole, any),
        rule(
            AwsSecretAccessKey,
            r#"(?i)(?:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)["']?\s*(?::=|=>|=|:)\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            Replace::Group(1),
            any,
        ),
        rule(GoogleApiKey, r"\bAIza[0-9A-Za-z_-]{35}\b", Replace::Whole, any),
        rule(StripeKey, r"\b(?:sk|rk|pk)_live_[0-9A-Za-z]{16,}\b|\b(?:sk|rk)_test_[0-9A-Za-z]{16,}\b", Replace::Whole, any),
        rule(NpmToken, r"\bnpm_[A-Za-z0-9]{36}\b", Replace::Whole, any),
        rule(BasicAuth, r"(?i)\bauthorization\s*:\s*basic\s+([A-Za-z0-9+/]{8,}=*)", Replace::Group(1), any),
        rule(BearerToken, r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)", Replace::Group(1), looks_random),
        rule(UrlPassword, r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@\[\]]*:([^\s@/?#]+)@", Replace::Group(1), |value| {
            !is_placeholder(value)
        }),
        rule(
            ConnectionStringPassword,
            r"(?i);[ \t]*(?:password|pwd)[ \t]*=[ \t]*([^;\r\n]+)",
            Replace::Group(1),
            |value| !is_placeholder(value.trim()),
        ),
        rule(
            ConnectionStringPassword,
            r"(?i)\b(?:password|pwd)=([^;\s]+);",
            Replace::Group(1),
            |value| !is_placeholder(value),
        ),
        Rule { kind: None, pattern: Regex::new(ASSIGNMENT).expect("secret patterns are valid"), replace: Replace::Assignment, check: any },
    ]
});

/// Replaces every secret in `text` by `[REDACTED:kind]`.
pub fn redact(text: &str) -> Redacted<'_> {
    let mut current: Cow<'_, str> = Cow::Borrowed(text);
    let mut kinds = Vec::new();
    for rule in RULES.iter() {
        let replaced = replace_rule(rule, &current, &mut kinds);
        if let Some(replaced) = replaced {
            current = Cow::Owned(replaced);
        }
    }
    Redacted { text: current, kinds }
}

/// Applies one rule; `None` when it replaced nothing.
fn replace_rule(rule: &Rule, text: &str, kinds: &mut Vec<SecretKind>) -> Option<String> {
    let mut output = String::new();
    let mut last = 0;
    let mut replaced = false;
    for captures in rule.pattern.captures_iter(text) {
        let Some((start, end, kind)) = secret_span(rule, text, &captures) else { continue };
        output.push_str(&text[last..start]);
        output.push_str(&kind.marker());
        last = end;
        replaced = true;
        kinds.push(kind);
    }
    if !replaced {
        return None;
    }
    output.push_str(&text[last..]);
    Some(output)
}

/// Where the secret of one match lies and its kind, or `None` when the match is not a secret.
fn secret_span(rule: &Rule, text: &str, captures: &Captures<'_>) -> Option<(usize, usize, SecretKind)> {
    let (span, kind) = match rule.replace {
        Replace::Whole => (captures.get(0)?, rule.kind?),
        Replace::Group(index) => (captures.get(index)?, rule.kind?),
        Replace::Assignment => return assignment_span(text, captures),
    };
    let secret = span.as_str();
    if secret.starts_with(MARKER_PREFIX) || secret.contains(MARKER_PREFIX) || !(rule.check)(secret) {
        return None;
    }
    Some((span.start(), span.end(), kind))
}

/// An assignment's value is a secret unless it is a placeholder, a number, a boolean, a reference
/// in code, or a plain word after a colon in running text (a key inside a sentence, or a word
/// the sentence goes on after: "password: rotate it monthly").
fn assignment_span(text: &str, captures: &Captures<'_>) -> Option<(usize, usize, SecretKind)> {
    let key = captures.name("key")?;
    let value = captures.name("value")?;
    let raw = value.as_str();
    let quoted = raw.len() >= 2 && matches!(raw.as_bytes()[0], b'"' | b'\'' | b'`');
    let (start, end) = if quoted { (value.start() + 1, value.end() - 1) } else { (value.start(), value.end()) };
    let secret = &text[start..end];
    if secret.chars().count() < 4 || is_placeholder(secret) || secret.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    if !quoted {
        let called = captures.name("after").is_some_and(|after| !after.as_str().is_empty());
        if called || is_code_reference(secret) {
            return None;
        }
        let op = captures.name("op").map_or("", |op| op.as_str());
        let key_quoted = captures.name("key_quote").is_some_and(|quote| !quote.as_str().is_empty());
        let plain_word = secret.chars().all(char::is_alphabetic);
        let sentence_goes_on = text[value.end()..].lines().next().is_some_and(|rest| rest.trim_start().starts_with(char::is_alphabetic));
        if op == ":" && !key_quoted && plain_word && (!starts_line(text, key.start()) || sentence_goes_on) {
            return None;
        }
    }
    Some((start, end, assignment_kind(key.as_str())))
}

/// Whether only indentation, a list dash or `export` precede `position` on its line: a key
/// there is a YAML or shell key, not a word in a sentence.
fn starts_line(text: &str, position: usize) -> bool {
    let line_start = text[..position].rfind('\n').map_or(0, |index| index + 1);
    let lead = text[line_start..position].trim_start();
    let lead = lead.strip_prefix("- ").unwrap_or(lead).trim_start();
    let lead = lead.strip_prefix("export ").unwrap_or(lead).trim_start();
    lead.is_empty() || lead == "\"" || lead == "'"
}

fn assignment_kind(key: &str) -> SecretKind {
    let key = key.to_ascii_lowercase();
    let last = key.rsplit(['_', '.', '-']).next().unwrap_or(&key);
    if key.contains("password") || key.contains("passwd") || key.contains("passphrase") || last == "pwd" {
        SecretKind::Password
    } else if key.contains("api") && key.contains("key") {
        SecretKind::ApiKey
    } else if key.contains("private") {
        SecretKind::PrivateKey
    } else if key.contains("secret") || key.contains("access") && key.ends_with("key") {
        SecretKind::Secret
    } else {
        SecretKind::Token
    }
}

/// Placeholders stand for a secret without being one: `${DB_PASSWORD}`, `$TOKEN`, `<api-key>`,
/// `{{ secret }}`, `%(password)s`, `****`, `xxxxxxxx`, `your-api-key-here`, `changeme`.
fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let first = value.chars().next().unwrap_or(' ');
    if matches!(first, '$' | '<' | '{' | '%' | '[' | '(' | '@' | '#') || value.starts_with(MARKER_PREFIX) {
        return true;
    }
    let mut chars = value.chars();
    if let Some(first) = chars.next()
        && chars.all(|c| c == first)
    {
        return true;
    }
    const WORDS: &[&str] = &[
        "true", "false", "null", "none", "nil", "undefined", "required", "optional", "empty", "redacted", "hidden",
        "secret", "password", "token", "string", "str", "bool", "int",
    ];
    WORDS.contains(&lower.as_str())
        || ["your", "example", "placeholder", "dummy", "changeme", "replace", "xxxx", "...", "…"]
            .iter()
            .any(|word| lower.contains(word))
}

/// A value in code that reads a secret from elsewhere: `os.environ`, `config.db.password`,
/// `process.env.TOKEN`, or a variable such as `userPassword` or `api_key_input`.
fn is_code_reference(value: &str) -> bool {
    let identifier = |part: &str| {
        part.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if value.contains('.') && value.split('.').all(identifier) {
        return true;
    }
    let letters_only = value.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
    let camel = value.as_bytes().windows(2).any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase());
    letters_only && (value.contains('_') || camel)
}

/// Redacts the title, content and metadata values of a capture in place.
pub fn redact_capture(input: &mut CaptureInput) -> Vec<Redaction> {
    let mut found = Vec::new();
    redact_field(&mut input.content, "content", &mut found);
    if let Some(title) = input.title.as_mut() {
        redact_field(title, "title", &mut found);
    }
    redact_metadata(&mut input.metadata, &mut found);
    found
}

/// Redacts the title, content and metadata values of an update in place.
pub fn redact_update(input: &mut UpdateInput) -> Vec<Redaction> {
    let mut found = Vec::new();
    if let Some(content) = input.content.as_mut() {
        redact_field(content, "content", &mut found);
    }
    if let Some(title) = input.title.as_mut() {
        redact_field(title, "title", &mut found);
    }
    if let Some(metadata) = input.metadata.as_mut() {
        redact_metadata(metadata, &mut found);
    }
    found
}

/// Redacts the statement, rationale, assumptions and alternatives of a decision in place.
pub fn redact_decision(input: &mut CaptureDecision) -> Vec<Redaction> {
    let mut found = Vec::new();
    redact_field(&mut input.statement, "statement", &mut found);
    if let Some(rationale) = input.rationale.as_mut() {
        redact_field(rationale, "rationale", &mut found);
    }
    if let Some(problem) = input.problem.as_mut() {
        redact_field(problem, "problem", &mut found);
    }
    redact_list(&mut input.assumptions, "assumptions", &mut found);
    redact_list(&mut input.risks, "risks", &mut found);
    if let Some(alternatives) = input.alternatives.as_mut() {
        redact_list(alternatives, "alternatives", &mut found);
    }
    found
}

/// Redacts the notes of a decision update in place.
pub fn redact_decision_update(input: &mut UpdateDecision) -> Vec<Redaction> {
    let mut found = Vec::new();
    if let Some(notes) = input.notes.as_mut() {
        redact_field(notes, "notes", &mut found);
    }
    found
}

/// Redacts a signal's description and the text inside its metrics in place.
pub fn redact_signal(input: &mut SignalInput) -> Vec<Redaction> {
    let mut found = Vec::new();
    if let Some(description) = input.description.as_mut() {
        redact_field(description, "description", &mut found);
    }
    redact_values(&mut input.metrics, "metrics", &mut found);
    found
}

/// Redacts an outcome's lessons and the text inside its observed signals in place.
pub fn redact_outcome(input: &mut OutcomeInput) -> Vec<Redaction> {
    let mut found = Vec::new();
    redact_list(&mut input.lessons_learned, "lessons_learned", &mut found);
    redact_values(&mut input.signals, "signals", &mut found);
    if let Some(notes) = input.notes.as_mut() {
        redact_field(notes, "notes", &mut found);
    }
    found
}

fn redact_list(items: &mut [String], field: &str, found: &mut Vec<Redaction>) {
    for (n, item) in items.iter_mut().enumerate() {
        redact_field(item, &format!("{field}[{n}]"), found);
    }
}

/// Every string inside a map of JSON values (nested arrays and objects included), each
/// reported under `{field}.{key}`.
fn redact_values(values: &mut BTreeMap<String, serde_json::Value>, field: &str, found: &mut Vec<Redaction>) {
    fn walk(value: &mut serde_json::Value, field: &str, found: &mut Vec<Redaction>) {
        match value {
            serde_json::Value::String(text) => redact_field(text, field, found),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|item| walk(item, field, found)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|item| walk(item, field, found)),
            _ => {}
        }
    }
    for (key, value) in values.iter_mut() {
        walk(value, &format!("{field}.{key}"), found);
    }
}

fn redact_metadata(metadata: &mut BTreeMap<String, String>, found: &mut Vec<Redaction>) {
    for (key, value) in metadata.iter_mut() {
        redact_field(value, &format!("metadata.{key}"), found);
    }
}

/// Redacts one field in place, adding one [`Redaction`] per kind found.
pub fn redact_field(text: &mut String, field: &str, found: &mut Vec<Redaction>) {
    let redacted = redact(text);
    if redacted.kinds.is_empty() {
        return;
    }
    let mut counts: BTreeMap<SecretKind, usize> = BTreeMap::new();
    for kind in &redacted.kinds {
        *counts.entry(*kind).or_default() += 1;
    }
    *text = redacted.text.into_owned();
    found.extend(counts.into_iter().map(|(kind, count)| Redaction { field: field.to_owned(), kind, count }));
}
