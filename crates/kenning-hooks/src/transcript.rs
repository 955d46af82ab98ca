//! What a session learnt, read by rules that need no language model: sentences that state a
//! decision, a fix or its cause, a blocker, or (from the user) a standing preference. Each
//! becomes a memory with `source: hook` in its metadata and the tag `hook`. A sentence making
//! the same claim as another one read is kept once; the capture's claim rule merges one that says
//! what a stored memory says, and the store's duplicate check keeps a sentence from being stored
//! twice when the same turns are read again.
//!
//! What is read depends on the event. A stop reads the turn that just ended: its final answer
//! from the hook input (`last_assistant_message`: the client may not have written it to the
//! transcript yet when the hook runs) and the transcript from the turn's prompt on for what came
//! before. A compaction and the session's end read the whole transcript, catching whatever the
//! stops left (a turn with more findings than one capture takes, a turn that never stopped).
//!
//! Only what a person typed counts as told by the user: the client also writes entries of the
//! user's role that no one typed (the summary that replaces a compacted conversation, the output
//! of the user's `!` shell commands and of slash commands, system reminders), and those are
//! skipped, as are code blocks in any message.
//!
//! With a language model configured, the model reads the same turns instead
//! ([`extraction_request`], [`parse_extraction`]) and states each finding in its own words,
//! which catches what no cue word marks; if it fails or answers out of shape, the rules run.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use kenning_core::CaptureInput;
use kenning_core::claim::{Claim, ClaimRules, Judgement};
use kenning_core::llm::{CompletionRequest, Message};
use serde::Deserialize;
use serde_json::Value;

use crate::{Error, HookEvent, HookInput, Hooks};

/// The most of a transcript read, from its end, at a compaction or the session's end: a long
/// session's early turns were read by the stops that followed them.
const MAX_TRANSCRIPT_BYTES: u64 = 8 * 1024 * 1024;
/// The most a stop reads from the transcript's end: the turn that just ended. The client writes
/// large entries (request snapshots) beside the conversation, so this is in bytes, not lines.
const STOP_TRANSCRIPT_BYTES: u64 = 2 * 1024 * 1024;
/// The most new memories one run stores; findings already stored do not count against it.
const MAX_CAPTURES: usize = 12;
/// The most findings one run considers, newest first.
const MAX_FINDINGS: usize = 120;
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

/// The tags the client wraps around text it puts in the user's role without the user typing
/// it: a `!` shell command and its output, a slash command and its output, reminders.
const CLIENT_TAGS: &[&str] = &[
    "bash-input",
    "bash-stdout",
    "bash-stderr",
    "command-name",
    "command-message",
    "command-args",
    "command-stdout",
    "command-stderr",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "system-reminder",
    "user-prompt-submit-hook",
    "task-notification",
];

/// One line of Claude Code's transcript, with only the fields the rules read.
#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type", default)]
    kind: String,
    /// The summary that replaces a compacted conversation, written in the user's role.
    #[serde(rename = "isCompactSummary", default)]
    compact_summary: bool,
    /// Entries the client adds for its own use (a slash command's caveat, for instance).
    #[serde(rename = "isMeta", default)]
    meta: bool,
    #[serde(rename = "isVisibleInTranscriptOnly", default)]
    transcript_only: bool,
    /// A subagent's conversation, not the user's.
    #[serde(rename = "isSidechain", default)]
    sidechain: bool,
    #[serde(default)]
    message: Option<EntryMessage>,
}

#[derive(Deserialize)]
struct EntryMessage {
    #[serde(default)]
    content: Value,
}

/// The texts of a transcript's user prompts and assistant replies, in order. Lines that are not
/// JSON, tool calls and tool results are skipped, and so is text in the user's role that the
/// user did not type (see [`CLIENT_TAGS`]).
pub fn texts(transcript: &str) -> Vec<(Speaker, String)> {
    let mut found = Vec::new();
    for line in transcript.lines() {
        // Most lines are the client's bookkeeping, some of them large: only conversation
        // entries are parsed.
        if !(line.contains("\"type\":\"user\"") || line.contains("\"type\":\"assistant\"") || line.contains("\"type\": \"")) {
            continue;
        }
        let Ok(entry) = serde_json::from_str::<Entry>(line) else { continue };
        let speaker = match entry.kind.as_str() {
            "user" => Speaker::User,
            "assistant" => Speaker::Assistant,
            _ => continue,
        };
        if entry.compact_summary || entry.meta || entry.transcript_only || entry.sidechain {
            continue;
        }
        let Some(message) = entry.message else { continue };
        let mut push = |text: &str| {
            let text = if speaker == Speaker::User { without_client_text(text) } else { text.to_owned() };
            if !text.trim().is_empty() {
                found.push((speaker, text));
            }
        };
        match &message.content {
            Value::String(text) => push(text),
            Value::Array(blocks) => {
                for block in blocks {
                    if block.get("type").and_then(Value::as_str) == Some("text")
                        && let Some(text) = block.get("text").and_then(Value::as_str)
                    {
                        push(text);
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// The text with every `<tag>…</tag>` of [`CLIENT_TAGS`] taken out.
fn without_client_text(text: &str) -> String {
    let mut kept = text.to_owned();
    for tag in CLIENT_TAGS {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        while let Some(start) = kept.find(&open) {
            let end = kept[start..].find(&close).map_or(kept.len(), |offset| start + offset + close.len());
            kept.replace_range(start..end, "");
        }
    }
    kept
}

/// Splits a text into sentences: at line breaks and after `.`, `!` or `?` followed by a space.
/// Code blocks (between ``` or ~~~ fences) hold no sentences.
pub fn sentences(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let line = trimmed.trim_start_matches(['-', '*', '#', '>', ' ']).trim();
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

/// Everything worth keeping in these texts, without repeats (a sentence making the same claim as
/// one found before, by [`ClaimRules`], is one): what the user said first (their preferences are
/// the rarest findings and the costliest to lose), then the assistant's, each newest first; at
/// most [`MAX_FINDINGS`].
pub fn findings(texts: &[(Speaker, String)]) -> Vec<Finding> {
    let rules = ClaimRules::default();
    let mut found: Vec<Finding> = Vec::new();
    let mut claims: Vec<Claim> = Vec::new();
    for wanted in [Speaker::User, Speaker::Assistant] {
        for (speaker, text) in texts.iter().rev().filter(|(speaker, _)| *speaker == wanted) {
            for sentence in sentences(text).into_iter().rev() {
                let Some(namespace) = classify(*speaker, &sentence) else { continue };
                let claim = rules.claim(&sentence);
                if found.iter().any(|finding| finding.sentence == sentence) || claims.iter().any(|known| rules.compare(known, &claim) == Judgement::Same) {
                    continue;
                }
                claims.push(claim);
                found.push(Finding { namespace, speaker: *speaker, sentence });
                if found.len() == MAX_FINDINGS {
                    return found;
                }
            }
        }
    }
    found
}

/// The texts of the turn that just ended: the transcript from the turn's prompt (the last text
/// the user typed) on, and the prompt and the final answer from the hook input when the
/// transcript does not hold them yet (Claude Code hands over the answer; Gemini CLI both).
pub fn last_turn(transcript: &str, prompt: Option<&str>, last_answer: Option<&str>) -> Vec<(Speaker, String)> {
    let all = texts(transcript);
    let start = all.iter().rposition(|(speaker, _)| *speaker == Speaker::User).unwrap_or(0);
    let mut turn = all[start..].to_vec();
    if let Some(prompt) = prompt.map(str::trim).filter(|prompt| !prompt.is_empty())
        && !turn.iter().any(|(speaker, text)| *speaker == Speaker::User && text.trim() == prompt)
    {
        turn.insert(0, (Speaker::User, prompt.to_owned()));
    }
    if let Some(answer) = last_answer.map(str::trim).filter(|answer| !answer.is_empty())
        && !turn.iter().any(|(speaker, text)| *speaker == Speaker::Assistant && text.trim() == answer)
    {
        turn.push((Speaker::Assistant, answer.to_owned()));
    }
    turn
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
/// are dropped, as are repeats; at most [`MAX_FINDINGS`] are kept.
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
        if found.len() == MAX_FINDINGS {
            break;
        }
    }
    Some(found)
}

/// Reads up to `limit` bytes from the end of the transcript, from the first whole line.
fn read_transcript(path: &str, limit: u64) -> Result<String, Error> {
    let error = |message: String| Error::Transcript { path: path.to_owned(), message };
    let mut file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    let size = file.metadata().map_err(|e| error(e.to_string()))?.len();
    let cut = size > limit;
    if cut {
        file.seek(SeekFrom::Start(size - limit)).map_err(|e| error(e.to_string()))?;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| error(e.to_string()))?;
    if cut {
        let first_line = bytes.iter().position(|byte| *byte == b'\n').map_or(bytes.len(), |newline| newline + 1);
        bytes.drain(..first_line);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The texts an event reads: the turn that just ended for a stop, the whole transcript (up to
/// [`MAX_TRANSCRIPT_BYTES`]) for a compaction or the session's end.
fn texts_of(event: HookEvent, input: &HookInput) -> Result<Vec<(Speaker, String)>, Error> {
    let path = input.transcript_path.as_deref().filter(|path| !path.is_empty());
    let last_answer = input.last_assistant_message.as_deref();
    if event == HookEvent::Stop {
        let transcript = match path {
            Some(path) => read_transcript(path, STOP_TRANSCRIPT_BYTES)?,
            None => String::new(),
        };
        return Ok(last_turn(&transcript, input.prompt.as_deref(), last_answer));
    }
    match path {
        Some(path) => Ok(texts(&read_transcript(path, MAX_TRANSCRIPT_BYTES)?)),
        None => Ok(Vec::new()),
    }
}

/// Captures what the session learnt; returns how many new memories were stored.
pub fn capture_session(hooks: &Hooks, event: HookEvent, input: &HookInput) -> Result<usize, Error> {
    let turns = texts_of(event, input)?;
    if turns.is_empty() {
        return Ok(0);
    }
    let rules = || (findings(&turns), "rules".to_owned());
    let (found, extractor) = match hooks.memory.llm() {
        Some(model) => match model.complete(&extraction_request(&turns)).map(|completion| parse_extraction(&completion.text)) {
            Ok(Some(found)) => (found, model.name()),
            Ok(None) => {
                tracing::warn!(model = %model.name(), "the model's findings were out of shape; the rules read the transcript");
                rules()
            }
            Err(error) => {
                tracing::warn!(%error, "the model could not read the transcript; the rules read it");
                rules()
            }
        },
        None => rules(),
    };
    store_new(hooks, found.into_iter().map(|finding| capture_input(finding, event, input, &extractor)).collect())
}

/// Stores findings in order until [`MAX_CAPTURES`] of them were new: those the store already
/// holds do not count, so a finding past the first few is not lost because earlier ones were
/// stored by an earlier stop.
fn store_new(hooks: &Hooks, inputs: Vec<CaptureInput>) -> Result<usize, Error> {
    // What an earlier stop stored word for word would be reported as a duplicate: it is left
    // out at the cost of one lookup, before any finding is redacted or judged.
    let held = hooks.memory.held_already(&inputs, None)?;
    let mut created = 0;
    let mut rest = inputs.into_iter().zip(held).filter_map(|(input, held)| (!held).then_some(input));
    while created < MAX_CAPTURES {
        let batch: Vec<CaptureInput> = rest.by_ref().take(MAX_CAPTURES - created).collect();
        if batch.is_empty() {
            break;
        }
        created += hooks.memory.capture_many(batch, None)?.iter().filter(|outcome| outcome.created).count();
    }
    Ok(created)
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
        let found: Vec<String> = findings(&texts(&transcript)).into_iter().map(|finding| finding.sentence).collect();
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
