//! What a session learnt, read from Claude Code's transcript (JSON lines) by rules that need no
//! language model: sentences that state a decision, a fix or its cause, a blocker, or (from the
//! user) a standing preference. Each becomes a memory with `source: hook` in its metadata and
//! the tag `hook`. A sentence making the same claim as another of the same run is kept once;
//! the capture's claim rule merges one that says what a stored memory says (and once merged,
//! the same wording read again at the next stop confirms nothing new), and the store's
//! exact-duplicate check keeps a sentence from being stored twice.
//!
//! With a language model configured, the model reads the same turns instead
//! ([`extraction_request`], [`parse_extraction`]) and states each finding in its own words,
//! which catches what no cue word marks; if it fails or answers out of shape, the rules run.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use kenning_core::CaptureInput;
use kenning_core::claim::{Claim, ClaimRules, Judgement};
use kenning_core::llm::{CompletionRequest, Message};
use serde_json::Value;

use crate::{Error, HookEvent, HookInput, Hooks};

/// The most of a transcript read, from its end: a long session's early turns were read by the
/// stops that followed them.
const MAX_TRANSCRIPT_BYTES: u64 = 8 * 1024 * 1024;
/// A stop reads only the latest lines (the turn that just ended and a margin); a compaction
/// reads everything it is about to summarise away.
const STOP_LINES: usize = 200;
/// The most memories one run captures.
const MAX_CAPTURES: usize = 12;
const MIN_SENTENCE_CHARS: usize = 25;
const MAX_SENTENCE_CHARS: usize = 400;

/// Who said a sentence in the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    User,
    Assistant,
}

/// A sentence worth keeping and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub namespace: &'static str,
    pub speaker: Speaker,
    pub sentence: String,
}

const DECISION_CUES: &[&str] = &[
    "we decided", "i decided", "decided to", "decision:", "we'll go with", "we will go with", "going with", "we chose",
    "i chose", "chose to", "opted for", "switched to", "we will use", "we'll use", "let's use", "settled on",
    "instead of",
];
const FIX_CUES: &[&str] = &[
    "the fix was", "the fix is", "fixed by", "fixed it by", "root cause", "the problem was", "the issue was",
    "the bug was", "turned out", "turns out", "the cause was", "failed because", "fails because", "failing because",
    "was caused by", "is caused by", "the solution was", "lesson:", "learned that", "learnt that",
];
const BLOCKER_CUES: &[&str] = &[
    "blocked by", "blocked on", "blocker:", "can't proceed", "cannot proceed", "waiting on", "is blocking",
    "don't have access", "do not have access", "needs approval", "permission denied",
];
const PREFERENCE_STARTS: &[&str] =
    &["always ", "never ", "prefer ", "please always", "please never", "i prefer", "we prefer", "from now on", "don't ever"];

/// The rule a sentence meets, if any: blockers first (a blocker often mentions a decision),
/// then fixes, then decisions; preferences only from the user.
pub fn classify(speaker: Speaker, sentence: &str) -> Option<&'static str> {
    let lower = sentence.to_lowercase();
    if lower.ends_with('?') || lower.contains("```") {
        return None;
    }
    let has = |cues: &[&str]| cues.iter().any(|cue| lower.contains(cue));
    if speaker == Speaker::User && PREFERENCE_STARTS.iter().any(|start| lower.starts_with(start)) {
        return Some("preferences");
    }
    if has(BLOCKER_CUES) {
        Some("blockers")
    } else if has(FIX_CUES) {
        Some("learnings")
    } else if has(DECISION_CUES) {
        Some("decisions")
    } else {
        None
    }
}

/// The texts of a transcript's user prompts and assistant replies, in order. Lines that are not
/// JSON, tool calls and tool results are skipped.
pub fn texts(transcript: &str) -> Vec<(Speaker, String)> {
    let mut found = Vec::new();
    for line in transcript.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else { continue };
        let speaker = match entry.get("type").and_then(Value::as_str) {
            Some("user") => Speaker::User,
            Some("assistant") => Speaker::Assistant,
            _ => continue,
        };
        let Some(content) = entry.get("message").and_then(|message| message.get("content")) else { continue };
        match content {
            Value::String(text) => found.push((speaker, text.clone())),
            Value::Array(blocks) => {
                for block in blocks {
                    if block.get("type").and_then(Value::as_str) == Some("text")
                        && let Some(text) = block.get("text").and_then(Value::as_str)
                    {
                        found.push((speaker, text.to_owned()));
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Splits a text into sentences: at line breaks and after `.`, `!` or `?` followed by a space.
pub fn sentences(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim().trim_start_matches(['-', '*', '#', '>', ' ']).trim();
        let mut start = 0;
        let bytes = line.as_bytes();
        for index in 0..bytes.len() {
            let ends = matches!(bytes[index], b'.' | b'!' | b'?') && bytes.get(index + 1).is_some_and(|next| *next == b' ');
            if ends {
                found.push(line[start..=index].trim().to_owned());
                start = index + 1;
            }
        }
        found.push(line[start..].trim().to_owned());
    }
    found.retain(|sentence| (MIN_SENTENCE_CHARS..=MAX_SENTENCE_CHARS).contains(&sentence.chars().count()));
    found
}

/// Everything worth keeping in a transcript, newest first, without repeats (a sentence making
/// the same claim as a newer one found, by [`ClaimRules`], is one), at most `limit`.
pub fn findings(transcript: &str, limit: usize) -> Vec<Finding> {
    let rules = ClaimRules::default();
    let mut found: Vec<Finding> = Vec::new();
    let mut claims: Vec<Claim> = Vec::new();
    for (speaker, text) in texts(transcript).into_iter().rev() {
        for sentence in sentences(&text).into_iter().rev() {
            let Some(namespace) = classify(speaker, &sentence) else { continue };
            let claim = rules.claim(&sentence);
            if found.iter().any(|finding| finding.sentence == sentence) || claims.iter().any(|known| rules.compare(known, &claim) == Judgement::Same) {
                continue;
            }
            claims.push(claim);
            found.push(Finding { namespace, speaker, sentence });
            if found.len() == limit {
                return found;
            }
        }
    }
    found
}

/// The most transcript text a model is given, from the end: enough for the turns since the last
/// stop and some before, well inside any model's context.
const MAX_MODEL_TEXT_CHARS: usize = 24_000;

/// The namespaces a model's finding may go to, as the rules use them.
const FINDING_NAMESPACES: &[&str] = &["decisions", "learnings", "blockers", "preferences"];

/// The request asking a model what in these turns is worth remembering.
pub fn extraction_request(turns: &[(Speaker, String)]) -> CompletionRequest {
    let mut text = String::new();
    for (speaker, said) in turns.iter().rev() {
        let line = format!("{}: {}\n", if *speaker == Speaker::User { "USER" } else { "ASSISTANT" }, said.trim());
        if text.chars().count() + line.chars().count() > MAX_MODEL_TEXT_CHARS {
            break;
        }
        text.insert_str(0, &line);
    }
    CompletionRequest {
        system: Some(format!(
            "You read a coding session between a user and an assistant and note what a later session on the same project \
             should remember: decisions and why, causes and fixes of failures, blockers, and the user's standing \
             preferences. Skip chit-chat, plans not carried out and anything only true for this session. Write each \
             finding as one self-contained sentence of at most 300 characters. Answer with one JSON object only: \
             {{\"memories\": [{{\"namespace\": one of {FINDING_NAMESPACES:?}, \"speaker\": \"user\" or \"assistant\" (who \
             said it), \"content\": \"...\"}}]}}, at most {MAX_CAPTURES} findings, most important first; an empty list when \
             nothing is worth keeping."
        )),
        messages: vec![Message::user(text)],
        max_tokens: 1500,
        temperature: Some(0.0),
        json: true,
    }
}

/// Reads a model's answer to [`extraction_request`]. `None` when it is not a JSON object with a
/// `memories` list; findings with an unknown namespace or speaker, or a sentence out of bounds,
/// are dropped, as are repeats; at most [`MAX_CAPTURES`] are kept.
pub fn parse_extraction(answer: &str) -> Option<Vec<Finding>> {
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    let value: Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    let memories = value.get("memories")?.as_array()?;
    let mut found: Vec<Finding> = Vec::new();
    for memory in memories {
        let Some(namespace) = memory.get("namespace").and_then(Value::as_str).and_then(|name| FINDING_NAMESPACES.iter().find(|known| **known == name)) else {
            continue;
        };
        let speaker = match memory.get("speaker").and_then(Value::as_str) {
            Some("user") => Speaker::User,
            Some("assistant") => Speaker::Assistant,
            _ => continue,
        };
        let Some(sentence) = memory.get("content").and_then(Value::as_str).map(str::trim) else { continue };
        if !(MIN_SENTENCE_CHARS..=MAX_SENTENCE_CHARS).contains(&sentence.chars().count()) || found.iter().any(|finding| finding.sentence == sentence) {
            continue;
        }
        found.push(Finding { namespace, speaker, sentence: sentence.to_owned() });
        if found.len() == MAX_CAPTURES {
            break;
        }
    }
    Some(found)
}

/// Reads the end of the transcript (all of it up to [`MAX_TRANSCRIPT_BYTES`]).
fn read_transcript(path: &str) -> Result<String, Error> {
    let error = |message: String| Error::Transcript { path: path.to_owned(), message };
    let mut file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    let size = file.metadata().map_err(|e| error(e.to_string()))?.len();
    if size > MAX_TRANSCRIPT_BYTES {
        file.seek(SeekFrom::Start(size - MAX_TRANSCRIPT_BYTES)).map_err(|e| error(e.to_string()))?;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| error(e.to_string()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Captures what the session learnt; returns how many new memories were stored.
pub fn capture_session(hooks: &Hooks, event: HookEvent, input: &HookInput) -> Result<usize, Error> {
    let Some(path) = input.transcript_path.as_deref().filter(|path| !path.is_empty()) else { return Ok(0) };
    let transcript = read_transcript(path)?;
    let transcript = if event == HookEvent::Stop {
        let lines: Vec<&str> = transcript.lines().collect();
        lines[lines.len().saturating_sub(STOP_LINES)..].join("\n")
    } else {
        transcript
    };
    let rules = || (findings(&transcript, MAX_CAPTURES), "rules".to_owned());
    let (found, extractor) = match hooks.memory.llm() {
        Some(model) => {
            let turns = texts(&transcript);
            match model.complete(&extraction_request(&turns)).map(|completion| parse_extraction(&completion.text)) {
                Ok(Some(found)) => (found, model.name()),
                Ok(None) => {
                    tracing::warn!(model = %model.name(), "the model's findings were out of shape; the rules read the transcript");
                    rules()
                }
                Err(error) => {
                    tracing::warn!(%error, "the model could not read the transcript; the rules read it");
                    rules()
                }
            }
        }
        None => rules(),
    };
    if found.is_empty() {
        return Ok(0);
    }
    let inputs: Vec<CaptureInput> = found.into_iter().map(|finding| capture_input(finding, event, input, &extractor)).collect();
    let outcomes = hooks.memory.capture_many(inputs, None)?;
    Ok(outcomes.iter().filter(|outcome| outcome.created).count())
}

/// The capture of one finding; `extractor` is `rules` or the model that found it.
fn capture_input(finding: Finding, event: HookEvent, input: &HookInput, extractor: &str) -> CaptureInput {
    let mut metadata = BTreeMap::from([
        ("source".to_owned(), "hook".to_owned()),
        ("hook_event".to_owned(), event.to_string()),
        ("extracted_by".to_owned(), extractor.chars().take(128).collect()),
    ]);
    if let Some(session) = input.session_id.as_deref().filter(|session| !session.is_empty()) {
        metadata.insert("session_id".to_owned(), session.chars().take(128).collect());
    }
    CaptureInput {
        content: finding.sentence,
        namespace: Some(finding.namespace.to_owned()),
        source: Some(match finding.speaker {
            Speaker::User => "told-by-user",
            Speaker::Assistant => "model-generated",
        }
        .to_owned()),
        tags: vec!["hook".to_owned()],
        metadata,
        ..CaptureInput::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_making_the_same_claim_as_a_newer_one_is_kept_once() {
        let turn = |text: &str| format!("{{\"type\": \"user\", \"message\": {{\"content\": \"{text}\"}}}}");
        let transcript = [
            turn("Always run cargo fmt before committing Rust code."),
            turn("Always run gofmt before committing Go code."),
            turn("Always run cargo fmt before you commit Rust code."),
            turn("Never run cargo fmt before committing Rust code."),
        ]
        .join("\n");
        let found: Vec<String> = findings(&transcript, MAX_CAPTURES).into_iter().map(|finding| finding.sentence).collect();
        assert_eq!(
            found,
            [
                "Never run cargo fmt before committing Rust code.",
                "Always run cargo fmt before you commit Rust code.",
                "Always run gofmt before committing Go code.",
            ]
        );
    }

    #[test]
    fn a_model_extraction_is_read_strictly() {
        let answer = r#"Here you go:
        {"memories": [
            {"namespace": "decisions", "speaker": "assistant", "content": "We chose SQLite WAL mode so that readers never block the writer."},
            {"namespace": "learnings", "speaker": "user", "content": "The flaky auth test failed because the CI clock runs in UTC."},
            {"namespace": "gossip", "speaker": "user", "content": "Someone said the coffee machine is broken again today."},
            {"namespace": "blockers", "speaker": "robot", "content": "Waiting on the security review before the release."},
            {"namespace": "learnings", "speaker": "user", "content": "too short"},
            {"namespace": "decisions", "speaker": "assistant", "content": "We chose SQLite WAL mode so that readers never block the writer."}
        ]}"#;
        let found = parse_extraction(answer).unwrap();
        assert_eq!(
            found.iter().map(|finding| (finding.namespace, finding.speaker)).collect::<Vec<_>>(),
            [("decisions", Speaker::Assistant), ("learnings", Speaker::User)]
        );
        assert_eq!(parse_extraction(r#"{"memories": []}"#), Some(Vec::new()));
        assert_eq!(parse_extraction("Nothing worth keeping."), None);
        assert_eq!(parse_extraction(r#"{"notes": []}"#), None);
    }

    #[test]
    fn the_model_reads_the_latest_turns_within_a_bound() {
        let long = "x".repeat(10_000);
        let turns: Vec<(Speaker, String)> =
            (0..10).map(|turn| (if turn % 2 == 0 { Speaker::User } else { Speaker::Assistant }, format!("turn {turn} {long}"))).collect();
        let request = extraction_request(&turns);
        let text = &request.messages[0].content;
        assert!(text.chars().count() <= MAX_MODEL_TEXT_CHARS);
        assert!(text.contains("turn 9") && !text.contains("turn 0"), "the newest turns are kept");
        assert!(request.json && request.system.unwrap().contains("\"memories\""));
    }
}
