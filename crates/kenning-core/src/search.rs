//! Search vocabulary shared by every backend: filters, scored hits, score fusion, token budgets,
//! cursors and snippets.

use std::collections::HashMap;
use std::hash::Hash;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::memory::{MemoryId, MemoryKind, Namespace, Status};

/// Restricts which memories a search or listing considers. Empty lists mean "no restriction".
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchFilter {
    pub kinds: Vec<MemoryKind>,
    pub namespaces: Vec<Namespace>,
    /// A memory must carry every one of these tags.
    pub tags: Vec<String>,
    /// Bounds on [`crate::Memory::occurred_at`], inclusive.
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub min_confidence: Option<f64>,
    /// `None` lists every status; searches use `Some(Active)`.
    pub status: Option<Status>,
    /// Only memories captured on this branch (metadata `git_branch`).
    pub branch: Option<String>,
    /// Only memories about this file or directory: a path relative to the repository root in
    /// the normal form of [`crate::provenance::normalise_relative`] (see [`crate::provenance`]).
    pub file: Option<String>,
    /// Only memories of this session or conversation (metadata `session_id`, or
    /// `conversation_id`; see [`crate::provenance::session_of`]).
    pub session: Option<String>,
}

impl SearchFilter {
    pub fn active() -> Self {
        SearchFilter { status: Some(Status::Active), ..SearchFilter::default() }
    }

    /// The filter as the conditions a memory must meet, every one of them, in a fixed order.
    ///
    /// Every backend answers a filter through this list and matches [`FilterCondition`] without
    /// a wildcard arm: the destructuring below makes a new field a compile error here, and its new
    /// variant then a compile error in every backend, so no backend can silently ignore it.
    pub fn conditions(&self) -> Vec<FilterCondition<'_>> {
        let SearchFilter { kinds, namespaces, tags, since, until, min_confidence, status, branch: _, file: _, session: _ } = self;
        let mut conditions = Vec::new();
        if !kinds.is_empty() {
            conditions.push(FilterCondition::Kinds(kinds));
        }
        if !namespaces.is_empty() {
            conditions.push(FilterCondition::Namespaces(namespaces));
        }
        if !tags.is_empty() {
            conditions.push(FilterCondition::Tags(tags));
        }
        conditions.extend(since.map(FilterCondition::Since));
        conditions.extend(until.map(FilterCondition::Until));
        conditions.extend(min_confidence.map(FilterCondition::MinConfidence));
        // `branch`, `file` and `session` are answered together, as the facets they name.
        let facets = self.facets();
        if !facets.is_empty() {
            conditions.push(FilterCondition::Facets(facets));
        }
        conditions.extend(status.map(FilterCondition::Status));
        conditions
    }

    /// The facets a memory must carry, every one of them, to pass the provenance filters
    /// (`branch`, `file`, `session`); backends match them against [`crate::provenance::facets`].
    pub fn facets(&self) -> Vec<String> {
        let branch = self.branch.as_deref().map(crate::provenance::branch_facet);
        let file = self.file.as_deref().map(crate::provenance::file_facet);
        let session = self.session.as_deref().map(crate::provenance::session_facet);
        branch.into_iter().chain(file).chain(session).collect()
    }
}

/// One condition of a [`SearchFilter`], as [`SearchFilter::conditions`] lists them. Lists are
/// never empty: an empty list in the filter restricts nothing and gives no condition.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterCondition<'a> {
    /// The memory is of one of these kinds.
    Kinds(&'a [MemoryKind]),
    /// The memory is in one of these namespaces.
    Namespaces(&'a [Namespace]),
    /// The memory carries every one of these tags.
    Tags(&'a [String]),
    /// [`crate::Memory::occurred_at`] is at or after this moment.
    Since(DateTime<Utc>),
    /// [`crate::Memory::occurred_at`] is at or before this moment.
    Until(DateTime<Utc>),
    /// The stated confidence is at least this.
    MinConfidence(f64),
    /// The memory carries every one of these facets ([`crate::provenance::facets`]).
    Facets(Vec<String>),
    /// The memory has this status.
    Status(Status),
}

/// A memory id with a backend score: higher is better; scores are comparable within one list only.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredId {
    pub id: MemoryId,
    pub score: f64,
}

/// How much of each memory a listing returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    /// Title, snippet, URN and scores.
    #[default]
    Light,
    /// Every field, content included.
    Full,
}

impl Detail {
    pub fn parse(text: &str) -> Result<Detail, FieldError> {
        match text {
            "light" => Ok(Detail::Light),
            "full" => Ok(Detail::Full),
            _ => Err(FieldError::new("detail", "is not an allowed value", text, "use `light` (title, snippet, URN) or `full` (content included)")),
        }
    }
}

/// How far down each ranked list [`score_fusion`] reaches to find the score that it scales to
/// zero. A fixed depth, rather than however many hits a page asked for, keeps the fused order,
/// and so every page of a recall, the same whatever the page size.
pub const FUSION_SCALE_DEPTH: usize = 100;

/// One ranked list for [`score_fusion`].
#[derive(Debug, Clone, PartialEq)]
pub struct FusionList<T> {
    pub weight: f64,
    /// Items and their scores, best first.
    pub hits: Vec<(T, f64)>,
    /// What an item the list leaves out scores in it, if that is known: 0 for full text, where
    /// a missing item shares no word with the query. A list shorter than
    /// [`FUSION_SCALE_DEPTH`] then scales down to this score rather than to its last hit, so
    /// the last of three matches counts as a weaker match, not as no match. `None` for a list
    /// that, when short, holds everything (vector search over a small store).
    pub unlisted_score: Option<f64>,
}

/// Fuses weighted ranked lists by a convex combination of their scaled scores. Each list has
/// its scores scaled to `[0, 1]`: its best score maps to 1 and its score at rank
/// [`FUSION_SCALE_DEPTH`] to 0, with deeper scores held at 0; a shorter list scales down to
/// its [`FusionList::unlisted_score`], or else to its last score. An item scores the weighted
/// sum of its scaled scores over the lists it appears in, so with weights summing to 1 the best
/// possible score is 1.
///
/// Unlike reciprocal rank fusion, this keeps how far apart the scores of a list are: a clear
/// winner in one list stays a clear winner, where rank fusion would make it one step better than
/// a runner-up. Bruch et al. (2023, "An Analysis of Fusion Functions for Hybrid Retrieval")
/// found such a combination better than rank fusion for lexical and dense retrieval, and it
/// gives later stages (time preferences, neighbours) a score to work with. Ties keep
/// first-seen order.
pub fn score_fusion<T: Clone + Eq + Hash>(lists: &[FusionList<T>]) -> Vec<(T, f64)> {
    let mut scores: HashMap<T, (f64, usize)> = HashMap::new();
    let mut order = 0;
    for list in lists {
        let Some((_, best)) = list.hits.first() else { continue };
        let floor = match (list.hits.get(FUSION_SCALE_DEPTH - 1), list.unlisted_score) {
            (Some((_, score)), _) => *score,
            (None, Some(unlisted)) => unlisted,
            (None, None) => list.hits[list.hits.len() - 1].1,
        };
        let range = best - floor;
        for (item, score) in &list.hits {
            let scaled = if range > 0.0 { ((score - floor) / range).clamp(0.0, 1.0) } else { 1.0 };
            let entry = scores.entry(item.clone()).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            entry.0 += list.weight * scaled;
        }
    }
    let mut fused: Vec<(T, f64, usize)> = scores.into_iter().map(|(item, (score, seen))| (item, score, seen)).collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    fused.into_iter().map(|(item, score, _)| (item, score)).collect()
}

/// A rough token count (four characters a token), good enough to keep responses inside a budget.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The longest search query accepted, in bytes: some 4,000 tokens, more than any question and
/// room for a pasted error message. Only its first 32 distinct words are searched for (the
/// search index's analyzer sets that number), so the work stays bounded.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;

/// Refuses a search query longer than [`MAX_QUERY_BYTES`], naming `field`.
pub fn check_query_length(field: &str, query: &str) -> Result<(), FieldError> {
    if query.len() <= MAX_QUERY_BYTES {
        return Ok(());
    }
    let mut end = 80;
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    Err(FieldError::new(
        field,
        format!("is {} bytes, more than the {MAX_QUERY_BYTES}-byte limit of a search query", query.len()),
        format!("{}…", &query[..end]),
        "search with the few words that matter (an error message's first line, a function name); only the first 32 distinct words of a query are used anyway",
    ))
}

/// The largest offset a cursor carries: far past any listing, small enough that no page
/// arithmetic on it can overflow.
const MAX_CURSOR_OFFSET: usize = u32::MAX as usize;

/// An opaque position in a paginated listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub offset: usize,
}

impl Cursor {
    pub fn encode(self) -> String {
        format!("o{:x}", self.offset)
    }

    /// Reads a cursor this server issued. Anything else is refused, including a cursor in a form
    /// the server never writes (`o+1f`, `o01f`) or past [`MAX_CURSOR_OFFSET`], so that no listing
    /// does arithmetic on an offset a caller crafted.
    pub fn decode(text: &str) -> Result<Cursor, FieldError> {
        text.strip_prefix('o')
            .filter(|hex| !hex.is_empty() && hex.len() <= 8 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .and_then(|hex| usize::from_str_radix(hex, 16).ok())
            .map(|offset| Cursor { offset })
            .filter(|cursor| cursor.offset <= MAX_CURSOR_OFFSET && cursor.encode() == text)
            .ok_or_else(|| FieldError::new("cursor", "is not a cursor this server issued", text, "pass the `next_cursor` of the previous page unchanged, or omit it for the first page"))
    }
}

/// How many distinct query terms [`snippet`] looks for.
const MAX_SNIPPET_TERMS: usize = 16;

/// Up to `max_chars` of `content` around the first occurrence of any of the query's first
/// distinct terms, on word boundaries, with ellipses where it was cut.
pub fn snippet(content: &str, query: &str, max_chars: usize) -> String {
    let flat: String = content.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        return flat;
    }
    let lower = flat.to_lowercase();
    // Each term is one scan of the content, so only the first few distinct ones are looked for:
    // the work stays linear in the content whatever the query's length.
    let mut terms: Vec<String> = Vec::new();
    for term in query.split(|c: char| !c.is_alphanumeric()).filter(|term| term.chars().count() >= 3) {
        let term = term.to_lowercase();
        if !terms.contains(&term) {
            terms.push(term);
            if terms.len() == MAX_SNIPPET_TERMS {
                break;
            }
        }
    }
    let hit = terms.iter().filter_map(|term| lower.find(term.as_str())).min().unwrap_or(0);
    // `lower` can differ in byte length from `flat` for some scripts; map the hit by character index.
    let hit_chars = lower[..hit].chars().count();
    let start_chars = hit_chars.saturating_sub(max_chars / 4);
    let chars: Vec<char> = flat.chars().collect();
    let mut start = start_chars.min(chars.len());
    while start > 0 && !chars[start - 1].is_whitespace() {
        start -= 1;
    }
    let mut end = (start + max_chars).min(chars.len());
    if end < chars.len()
        && let Some(space) = chars[start..end].iter().rposition(|c| c.is_whitespace())
            && space > max_chars / 2 {
                end = start + space;
            }
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        assert_eq!(Cursor::decode(&Cursor { offset: 300 }.encode()).unwrap().offset, 300);
        let error = Cursor::decode("page-2").unwrap_err();
        assert_eq!(error.field, "cursor");
    }

    /// Regression: `offffffffffffffff` decoded to usize::MAX and overflowed page arithmetic.
    #[test]
    fn crafted_cursors_are_refused() {
        for crafted in ["offffffffffffffff", "o100000000", "o+1", "o01", "oA", "o", "o-1", "o1 "] {
            assert_eq!(Cursor::decode(crafted).unwrap_err().field, "cursor", "{crafted}");
        }
        assert_eq!(Cursor::decode("offffffff").unwrap().offset, MAX_CURSOR_OFFSET);
    }

    #[test]
    fn oversized_queries_are_refused_naming_the_field() {
        assert!(check_query_length("query", &"a".repeat(MAX_QUERY_BYTES)).is_ok());
        let error = check_query_length("text", &"é".repeat(MAX_QUERY_BYTES)).unwrap_err();
        assert_eq!(error.field, "text");
    }

    #[test]
    fn snippet_centres_on_the_query() {
        let content = format!("{} the connection pool was exhausted {}", "filler ".repeat(40), "tail ".repeat(40));
        let cut = snippet(&content, "connection pool", 60);
        assert!(cut.contains("connection pool"), "{cut}");
        assert!(cut.starts_with('…') && cut.ends_with('…'));
        assert!(cut.chars().count() <= 62);
    }

    #[test]
    fn snippet_keeps_short_content_whole() {
        assert_eq!(snippet("short\n text", "x", 100), "short text");
    }
}
