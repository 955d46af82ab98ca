//! What a language model is asked about a contradiction, and the strict reading of its answer.
//!
//! Two questions: at capture, whether a conflict the rules found is real ([`judge_request`],
//! [`parse_judgement`]); when settling, which memory holds ([`resolve_request`],
//! [`parse_resolution`]). Each answer must be one JSON object of the documented shape (a
//! Markdown code fence around it is tolerated, nothing else); anything else is an error, on which
//! the caller falls back to the rule and says so.

use serde::Deserialize;

use super::{Contradiction, ContradictionKind, Detection, Resolution, Verdict};
use crate::llm::{CompletionRequest, Message};

/// The longest memory text put in a prompt; the rest is cut, which keeps a request small.
const MAX_PROMPT_TEXT: usize = 2_000;
/// The longest explanation or conditions kept from an answer.
const MAX_ANSWER_TEXT: usize = 1_000;

const JUDGE_SYSTEM: &str = "You check a memory store of a software project for contradictions. \
You are given an older note (A) and a newer note (B) that a rule flagged as conflicting. \
Decide whether they really make claims that cannot both be true at the same time about the same thing. \
Notes about different components, environments or events do not conflict. \
Answer with one JSON object only: {\"conflict\": true or false, \"kind\": \"negation\" | \"changed_value\" | \"superseded\", \"explanation\": \"one sentence\"}.";

const RESOLVE_SYSTEM: &str = "You settle a contradiction between two notes in a software project's memory. \
A is the older note and B the newer one; each comes with its source and when it was captured. \
Decide which holds now: \"a_wins\", \"b_wins\", or \"context_dependent\" when each holds under different conditions. \
Answer with one JSON object only: {\"resolution\": \"a_wins\" | \"b_wins\" | \"context_dependent\", \
\"conditions\": \"when each holds (for context_dependent only, else null)\", \"explanation\": \"one or two sentences\"}.";

/// A note as a prompt shows it.
#[derive(Debug, Clone, Copy)]
pub struct Note<'a> {
    pub content: &'a str,
    pub source: &'a str,
    /// RFC 3339.
    pub captured: &'a str,
}

fn cut(text: &str) -> String {
    if text.len() <= MAX_PROMPT_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_PROMPT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn render(label: &str, note: Note<'_>) -> String {
    format!("{label} (source: {}, captured {}):\n{}", note.source, note.captured, cut(note.content))
}

/// The request asking whether a detected conflict is real.
pub fn judge_request(older: Note<'_>, newer: Note<'_>, detection: &Detection) -> CompletionRequest {
    let prompt = format!(
        "{}\n\n{}\n\nThe rule saw a {} conflict: A says `{}`, B says `{}`.",
        render("A", older),
        render("B", newer),
        detection.kind,
        detection.older.join(" "),
        detection.newer.join(" ")
    );
    CompletionRequest { system: Some(JUDGE_SYSTEM.to_owned()), messages: vec![Message::user(prompt)], max_tokens: 200, temperature: Some(0.0), json: true }
}

/// The request asking which side of a contradiction holds.
pub fn resolve_request(record: &Contradiction, a: Note<'_>, b: Note<'_>) -> CompletionRequest {
    let prompt = format!(
        "{}\n\n{}\n\nThe conflict ({}): A says `{}`, B says `{}`.",
        render("A", a),
        render("B", b),
        record.kind,
        record.evidence.a.join(" "),
        record.evidence.b.join(" ")
    );
    CompletionRequest { system: Some(RESOLVE_SYSTEM.to_owned()), messages: vec![Message::user(prompt)], max_tokens: 300, temperature: Some(0.0), json: true }
}

/// A model's verdict on a detected conflict.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub conflict: bool,
    /// The model's kind when it names one; the rule's otherwise.
    pub kind: Option<ContradictionKind>,
    pub explanation: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JudgementAnswer {
    conflict: bool,
    #[serde(default)]
    kind: Option<String>,
    explanation: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolutionAnswer {
    resolution: String,
    #[serde(default)]
    conditions: Option<String>,
    explanation: String,
}

/// The JSON object of an answer: the whole text, or the inside of one Markdown code fence.
fn json_object(text: &str) -> Result<&str, String> {
    let text = text.trim();
    let inner = match text.strip_prefix("```") {
        Some(rest) => {
            let rest = rest.strip_prefix("json").unwrap_or(rest);
            rest.strip_suffix("```").ok_or_else(|| "an unclosed code fence".to_owned())?.trim()
        }
        None => text,
    };
    if inner.starts_with('{') && inner.ends_with('}') { Ok(inner) } else { Err(format!("not a JSON object: `{}`", preview(text))) }
}

fn preview(text: &str) -> String {
    text.chars().take(80).collect()
}

fn bounded(field: &str, text: String) -> Result<String, String> {
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err(format!("`{field}` is empty"));
    }
    Ok(if text.chars().count() > MAX_ANSWER_TEXT { text.chars().take(MAX_ANSWER_TEXT).collect::<String>() + "…" } else { text })
}

/// Reads a judgement answer, or says what is wrong with it.
pub fn parse_judgement(text: &str) -> Result<Judgement, String> {
    let answer: JudgementAnswer = serde_json::from_str(json_object(text)?).map_err(|error| format!("not the judgement shape: {error}"))?;
    let kind = match answer.kind.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(kind) => Some(ContradictionKind::parse(kind).map_err(|_| format!("unknown kind `{kind}`"))?),
    };
    Ok(Judgement { conflict: answer.conflict, kind, explanation: bounded("explanation", answer.explanation)? })
}

/// Reads a resolution answer, or says what is wrong with it. `model` names who decided.
pub fn parse_resolution(text: &str, model: &str) -> Result<Resolution, String> {
    let answer: ResolutionAnswer = serde_json::from_str(json_object(text)?).map_err(|error| format!("not the resolution shape: {error}"))?;
    let verdict = Verdict::parse(answer.resolution.trim()).map_err(|_| format!("unknown resolution `{}`", answer.resolution))?;
    let conditions = answer.conditions.map(|text| text.trim().to_owned()).filter(|text| !text.is_empty());
    let conditions = match (verdict, conditions) {
        (Verdict::ContextDependent, Some(text)) => Some(bounded("conditions", text)?),
        (Verdict::ContextDependent, None) => return Err("`context_dependent` without its `conditions`".to_owned()),
        // Conditions on a plain win say nothing the verdict does not; they are dropped.
        (_, _) => None,
    };
    Ok(Resolution { verdict, conditions, explanation: bounded("explanation", answer.explanation)?, decided_by: format!("llm:{model}") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contradiction::detect;

    fn note(content: &str) -> Note<'_> {
        Note { content, source: "told-by-user", captured: "2026-01-01T00:00:00Z" }
    }

    #[test]
    fn requests_carry_both_notes_and_the_evidence() {
        let detection = detect("timeout is 30s", "timeout is 60s", None).unwrap();
        let request = judge_request(note("timeout is 30s"), note("timeout is 60s"), &detection);
        let prompt = &request.messages[0].content;
        assert!(prompt.contains("A (source: told-by-user") && prompt.contains("timeout is 60s") && prompt.contains("changed_value"));
        assert!(request.json && request.system.as_deref().unwrap().contains("\"conflict\""));
        let long = "x".repeat(5_000);
        let request = judge_request(note(&long), note("b"), &detection);
        assert!(request.messages[0].content.len() < 2_500, "long notes are cut");
        let record = crate::contradiction::Contradiction::open("ctr_1".into(), "a".into(), "b".into(), &detection, "test", chrono::Utc::now());
        let request = resolve_request(&record, note("timeout is 30s"), note("timeout is 60s"));
        assert!(request.messages[0].content.contains("A says `timeout 30s`"));
        assert!(request.system.as_deref().unwrap().contains("context_dependent"));
    }

    #[test]
    fn judgements_parse_strictly() {
        let good = parse_judgement(r#"{"conflict": true, "kind": "changed_value", "explanation": "Two timeouts."}"#).unwrap();
        assert_eq!((good.conflict, good.kind, good.explanation.as_str()), (true, Some(ContradictionKind::ChangedValue), "Two timeouts."));
        let fenced = parse_judgement("```json\n{\"conflict\": false, \"explanation\": \"Different services.\"}\n```").unwrap();
        assert_eq!((fenced.conflict, fenced.kind), (false, None));
        for bad in [
            "",
            "Yes, they conflict.",
            r#"Sure! {"conflict": true, "explanation": "x"}"#,
            r#"{"conflict": "yes", "explanation": "x"}"#,
            r#"{"conflict": true}"#,
            r#"{"conflict": true, "explanation": "  "}"#,
            r#"{"conflict": true, "kind": "opposite", "explanation": "x"}"#,
            r#"{"conflict": true, "explanation": "x", "confidence": 0.9}"#,
            "```json\n{\"conflict\": true, \"explanation\": \"x\"}",
        ] {
            assert!(parse_judgement(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn resolutions_parse_strictly() {
        let win = parse_resolution(r#"{"resolution": "b_wins", "conditions": null, "explanation": "B is newer."}"#, "m").unwrap();
        assert_eq!((win.verdict, win.conditions, win.decided_by.as_str()), (Verdict::BWins, None, "llm:m"));
        let context = parse_resolution(r#"{"resolution": "context_dependent", "conditions": "A in staging, B in production", "explanation": "Both hold."}"#, "m").unwrap();
        assert_eq!(context.conditions.as_deref(), Some("A in staging, B in production"));
        let dropped = parse_resolution(r#"{"resolution": "a_wins", "conditions": "always", "explanation": "A was observed."}"#, "m").unwrap();
        assert_eq!(dropped.conditions, None);
        for bad in [
            r#"{"resolution": "context_dependent", "explanation": "Both."}"#,
            r#"{"resolution": "context_dependent", "conditions": " ", "explanation": "Both."}"#,
            r#"{"resolution": "c_wins", "explanation": "x"}"#,
            r#"{"resolution": "a_wins"}"#,
            r#"["a_wins"]"#,
        ] {
            assert!(parse_resolution(bad, "m").is_err(), "accepted {bad:?}");
        }
        let long = format!(r#"{{"resolution": "a_wins", "explanation": "{}"}}"#, "y".repeat(3_000));
        assert!(parse_resolution(&long, "m").unwrap().explanation.chars().count() <= 1_001);
    }
}
