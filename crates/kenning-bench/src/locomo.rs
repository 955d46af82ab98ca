//! Reading retrieval data sets in the flattened LoCoMo format: a turns file and a queries file,
//! both JSON lines.
//!
//! A turn is `{id, conv, date_time, speaker, text}`; a query is `{qid, conv, category, question,
//! evidence}`, where `evidence` lists turn ids. Other fields (`session`, `answer`,
//! `adversarial`) are ignored, so a file with more fields still reads. Any malformed line is an
//! error naming the file, the line number and the field, because a benchmark that silently
//! skipped lines would report figures for a data set other than the one named.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use chrono::{NaiveDateTime, SecondsFormat};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// One dialogue turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Turn {
    /// The line of the turns file it was read from.
    #[serde(skip)]
    pub line: usize,
    pub id: String,
    pub conv: String,
    /// When the turn's session took place, e.g. `1:56 pm on 8 May, 2023`.
    pub date_time: String,
    pub speaker: String,
    pub text: String,
    /// `date_time` as an RFC 3339 timestamp, filled in on reading.
    #[serde(skip)]
    pub event_time: String,
}

/// One question, with the turns that answer it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Query {
    /// The line of the queries file it was read from.
    #[serde(skip)]
    pub line: usize,
    pub qid: String,
    pub conv: String,
    pub category: i64,
    pub question: String,
    pub evidence: Vec<String>,
}

/// A turns file's conversations, in the order they first appear.
#[derive(Debug)]
pub struct Conversations {
    pub conversations: Vec<Conversation>,
    pub turns: usize,
}

#[derive(Debug)]
pub struct Conversation {
    pub id: String,
    pub turns: Vec<Turn>,
}

/// Reads a turns file, parsing every session date. Turn ids must be unique across the file.
pub fn read_turns(path: &Path) -> Result<Conversations> {
    let mut conversations: Vec<Conversation> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids = HashSet::new();
    let mut turns = 0;
    for (line, mut turn) in read_lines::<Turn>(path)? {
        let at = || format!("{} line {line}", path.display());
        if !ids.insert(turn.id.clone()) {
            bail!("{}, field `id`: turn id `{}` appears twice; turn ids must be unique", at(), turn.id);
        }
        turn.line = line;
        turn.event_time = session_time(&turn.date_time)
            .with_context(|| format!("{}, field `date_time`: cannot read `{}`", at(), turn.date_time))?;
        let position = *index.entry(turn.conv.clone()).or_insert_with(|| {
            conversations.push(Conversation { id: turn.conv.clone(), turns: Vec::new() });
            conversations.len() - 1
        });
        conversations[position].turns.push(turn);
        turns += 1;
    }
    Ok(Conversations { conversations, turns })
}

/// Reads a queries file. Question ids must be unique, and every question's conversation must
/// have turns, or its recall would search an empty store.
pub fn read_queries(path: &Path, conversations: &Conversations) -> Result<Vec<Query>> {
    let known: HashSet<&str> = conversations.conversations.iter().map(|conv| conv.id.as_str()).collect();
    let mut qids = HashSet::new();
    let mut queries = Vec::new();
    for (line, mut query) in read_lines::<Query>(path)? {
        query.line = line;
        let at = format!("{} line {line}", path.display());
        if !qids.insert(query.qid.clone()) {
            bail!("{at}, field `qid`: question id `{}` appears twice; question ids must be unique", query.qid);
        }
        if !known.contains(query.conv.as_str()) {
            bail!("{at}, field `conv`: conversation `{}` has no turns in the turns file; is it the matching file?", query.conv);
        }
        if query.question.trim().is_empty() {
            bail!("{at}, field `question`: is empty");
        }
        queries.push(query);
    }
    Ok(queries)
}

/// The non-blank lines of a JSON-lines file, each deserialised, numbered from 1.
fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<(usize, T)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut items = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_number = index + 1;
        let mut deserializer = serde_json::Deserializer::from_str(line);
        let item = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            // The path is `.` for a missing field (the message names it) and `?` for a line
            // that is not JSON at all.
            let field = match error.path().to_string() {
                path if path == "." || path == "?" => String::new(),
                path => format!(", field `{path}`"),
            };
            anyhow::anyhow!("{} line {line_number}{field}: {}", path.display(), error.inner())
        })?;
        items.push((line_number, item));
    }
    Ok(items)
}

/// A LoCoMo session date such as `1:56 pm on 8 May, 2023`, as an RFC 3339 timestamp. The data
/// names no time zone, so the time is taken as UTC: what matters for recall is the order and
/// distance of events, which any one zone preserves.
pub fn session_time(text: &str) -> Result<String> {
    let time = NaiveDateTime::parse_from_str(text.trim(), "%I:%M %p on %d %B, %Y")
        .context("expected a session date like `1:56 pm on 8 May, 2023`")?;
    Ok(time.and_utc().to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// The session a turn id belongs to: everything before its last `:` (`conv-26:D1:3` is in
/// `conv-26:D1`). An id without a `:` is its own session.
pub fn session_of(turn_id: &str) -> &str {
    turn_id.rsplit_once(':').map_or(turn_id, |(session, _)| session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dates_become_utc_timestamps() {
        for (text, expected) in [
            ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00Z"),
            ("12:06 am on 11 November, 2022", "2022-11-11T00:06:00Z"),
            ("12:30 pm on 1 January, 2024", "2024-01-01T12:30:00Z"),
            ("10:04 AM on 19 December, 2023", "2023-12-19T10:04:00Z"),
            (" 9:55 am on 22 October, 2023 ", "2023-10-22T09:55:00Z"),
        ] {
            assert_eq!(session_time(text).unwrap(), expected, "{text}");
        }
        for text in ["8 May 2023", "1:56 pm on 31 February, 2023", "13:56 pm on 8 May, 2023", ""] {
            assert!(session_time(text).is_err(), "{text} was accepted");
        }
    }

    #[test]
    fn sessions_are_the_turn_id_without_its_last_part() {
        assert_eq!(session_of("conv-26:D1:3"), "conv-26:D1");
        assert_eq!(session_of("a:b"), "a");
        assert_eq!(session_of("plain"), "plain");
    }

    #[test]
    fn the_committed_coding_set_reads_and_its_evidence_names_turns_of_the_question_conversation() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/coding-dev");
        let data = read_turns(&dir.join("turns.jsonl")).unwrap();
        let queries = read_queries(&dir.join("queries.jsonl"), &data).unwrap();
        let turn_conversation: BTreeMap<&str, &str> = data
            .conversations
            .iter()
            .flat_map(|conv| conv.turns.iter().map(|turn| (turn.id.as_str(), conv.id.as_str())))
            .collect();
        for conversation in &data.conversations {
            // The store keeps one memory for a repeated content, so a repeat could never rank.
            let mut contents = HashSet::new();
            for turn in &conversation.turns {
                assert!(contents.insert((&turn.speaker, &turn.text)), "turn {} repeats an earlier turn", turn.id);
            }
        }
        for query in &queries {
            assert!((1..=4).contains(&query.category) && !query.evidence.is_empty(), "{} would not be scored", query.qid);
            for id in &query.evidence {
                assert_eq!(turn_conversation.get(id.as_str()), Some(&query.conv.as_str()), "{}: evidence {id}", query.qid);
            }
        }
    }

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn malformed_lines_name_the_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let good = r#"{"id": "c:D1:1", "conv": "c", "date_time": "1:56 pm on 8 May, 2023", "speaker": "A", "text": "hi"}"#;
        let cases = [
            (format!("{good}\n\n{{\"id\": \"c:D1:2\", \"conv\": \"c\"}}\n"), "line 3: missing field `date_time`"),
            (format!("{good}\n{}", good.replace("\"A\"", "7")), "line 2, field `speaker`: invalid type: integer `7`"),
            (format!("{good}\n{good}"), "line 2, field `id`: turn id `c:D1:1` appears twice"),
            (good.replace("1:56 pm on 8 May, 2023", "yesterday"), "line 1, field `date_time`: cannot read `yesterday`"),
            ("{not json".to_owned(), "line 1: key must be a string"),
        ];
        for (text, expected) in cases {
            let path = write(dir.path(), "turns.jsonl", &text);
            let error = format!("{:#}", read_turns(&path).expect_err("malformed turns were accepted"));
            assert!(error.contains("turns.jsonl") && error.contains(expected), "{error:?} lacks {expected:?}");
        }

        let turns = read_turns(&write(dir.path(), "turns.jsonl", good)).unwrap();
        let query = r#"{"qid": "q1", "conv": "c", "category": 4, "question": "hi?", "evidence": ["c:D1:1"], "answer": 2022}"#;
        let cases = [
            (query.replace("[\"c:D1:1\"]", "\"c:D1:1\""), "line 1, field `evidence`: invalid type: string"),
            (query.replace("4,", "\"four\","), "line 1, field `category`: invalid type: string"),
            (query.replace("\"conv\": \"c\"", "\"conv\": \"d\""), "line 1, field `conv`: conversation `d` has no turns"),
            (format!("{query}\n{query}"), "line 2, field `qid`: question id `q1` appears twice"),
        ];
        for (text, expected) in cases {
            let path = write(dir.path(), "queries.jsonl", &text);
            let error = format!("{:#}", read_queries(&path, &turns).expect_err("malformed queries were accepted"));
            assert!(error.contains("queries.jsonl") && error.contains(expected), "{error:?} lacks {expected:?}");
        }
        let queries = read_queries(&write(dir.path(), "queries.jsonl", query), &turns).unwrap();
        assert_eq!(queries[0].evidence, ["c:D1:1"]);
    }
}
