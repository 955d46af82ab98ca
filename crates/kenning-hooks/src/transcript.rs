//! What a session learnt, read from Claude Code's transcript (JSON lines) by rules that need no
//! language model: sentences that state a decision, a fix or its cause, a blocker, or (from the
//! user) a standing preference. Each becomes a memory with `source: hook` in its metadata and
//! the tag `hook`; the store's exact-duplicate check keeps a sentence from being stored twice
//! when the same transcript is read again at the next stop.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use kenning_core::CaptureInput;
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

/// Everything worth keeping in a transcript, newest first, without repeats, at most `limit`.
pub fn findings(transcript: &str, limit: usize) -> Vec<Finding> {
    let mut found: Vec<Finding> = Vec::new();
    for (speaker, text) in texts(transcript).into_iter().rev() {
        for sentence in sentences(&text).into_iter().rev() {
            let Some(namespace) = classify(speaker, &sentence) else { continue };
            if found.iter().any(|finding| finding.sentence == sentence) {
                continue;
            }
            found.push(Finding { namespace, speaker, sentence });
            if found.len() == limit {
                return found;
            }
        }
    }
    found
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
    let found = findings(&transcript, MAX_CAPTURES);
    if found.is_empty() {
        return Ok(0);
    }
    let inputs: Vec<CaptureInput> = found.into_iter().map(|finding| capture_input(finding, event, input)).collect();
    let outcomes = hooks.memory.capture_many(inputs, None)?;
    Ok(outcomes.iter().filter(|outcome| outcome.created).count())
}

fn capture_input(finding: Finding, event: HookEvent, input: &HookInput) -> CaptureInput {
    let mut metadata = BTreeMap::from([("source".to_owned(), "hook".to_owned()), ("hook_event".to_owned(), event.to_string())]);
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
