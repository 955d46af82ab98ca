//! Retrieval metrics as the LoCoMo development split's README defines them.
//!
//! A question is scored when its category is 1 to 4 and it names at least one evidence turn
//! (category 5 is adversarial: its answer is "not mentioned" and its evidence meaningless). For
//! a scored question with evidence set `E` and ranking `R`, at each cutoff `k`:
//!
//! - `recall_all@k` is 1 when every id of `E` is among the first `k` of `R`, else 0;
//! - `recall_any@k` is 1 when any is;
//! - `frac@k` is the share of `E` among the first `k` of `R`;
//! - `session_recall_all@k` is `recall_all` over sessions: every session of `E` (a turn id
//!   without its last `:` part) among the first `k` distinct sessions of `R`, in ranked order.
//!
//! Each is averaged over the scored questions, overall and (`recall_all@10`) per category.
//! Evidence ids are a set: naming a turn twice does not make it count twice.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::locomo::session_of;

/// How many ranked turns each question keeps: the deepest cutoff.
pub const RANKING_DEPTH: usize = 20;
pub const CUTOFFS: [usize; 4] = [1, 5, 10, 20];
pub const SESSION_CUTOFFS: [usize; 2] = [5, 10];
/// The cutoff of the per-category figure.
pub const CATEGORY_CUTOFF: usize = 10;

/// Why a question is left out of the scores, or `None` when it counts.
pub fn skip_reason(category: i64, evidence: &[String]) -> Option<SkipReason> {
    if !(1..=4).contains(&category) {
        Some(SkipReason::Category)
    } else if evidence.is_empty() {
        Some(SkipReason::NoEvidence)
    } else {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Category 5 (adversarial) or any other outside 1 to 4.
    Category,
    NoEvidence,
}

/// One scored question's figures, one entry per cutoff.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionScore {
    pub recall_all: [bool; CUTOFFS.len()],
    pub recall_any: [bool; CUTOFFS.len()],
    pub frac: [f64; CUTOFFS.len()],
    pub session_recall_all: [bool; SESSION_CUTOFFS.len()],
}

/// Scores one ranking against non-empty evidence.
pub fn score(evidence: &[String], ranked: &[String]) -> QuestionScore {
    let evidence: HashSet<&str> = evidence.iter().map(String::as_str).collect();
    assert!(!evidence.is_empty(), "only questions with evidence are scored");
    let found_within = |k: usize| {
        let top: HashSet<&str> = ranked.iter().take(k).map(String::as_str).collect();
        evidence.iter().filter(|id| top.contains(*id)).count()
    };
    let found = CUTOFFS.map(found_within);

    let evidence_sessions: HashSet<&str> = evidence.iter().map(|id| session_of(id)).collect();
    let mut ranked_sessions: Vec<&str> = Vec::new();
    for id in ranked {
        let session = session_of(id);
        if !ranked_sessions.contains(&session) {
            ranked_sessions.push(session);
        }
    }
    let session_recall_all = SESSION_CUTOFFS.map(|k| {
        let top = &ranked_sessions[..k.min(ranked_sessions.len())];
        evidence_sessions.iter().all(|session| top.contains(session))
    });

    QuestionScore {
        recall_all: found.map(|count| count == evidence.len()),
        recall_any: found.map(|count| count > 0),
        frac: found.map(|count| count as f64 / evidence.len() as f64),
        session_recall_all,
    }
}

/// Running sums over the questions of a run.
#[derive(Debug, Default)]
pub struct Scorecard {
    scored: usize,
    skipped_category: usize,
    skipped_no_evidence: usize,
    recall_all: [f64; CUTOFFS.len()],
    recall_any: [f64; CUTOFFS.len()],
    frac: [f64; CUTOFFS.len()],
    session_recall_all: [f64; SESSION_CUTOFFS.len()],
    /// Per category: questions and how many had all their evidence within `CATEGORY_CUTOFF`.
    categories: BTreeMap<i64, (usize, usize)>,
}

impl Scorecard {
    /// Adds one question: scores it, or counts why it was skipped.
    pub fn add(&mut self, category: i64, evidence: &[String], ranked: &[String]) {
        match skip_reason(category, evidence) {
            Some(SkipReason::Category) => self.skipped_category += 1,
            Some(SkipReason::NoEvidence) => self.skipped_no_evidence += 1,
            None => {
                let score = score(evidence, ranked);
                self.scored += 1;
                for (index, _) in CUTOFFS.iter().enumerate() {
                    self.recall_all[index] += f64::from(u8::from(score.recall_all[index]));
                    self.recall_any[index] += f64::from(u8::from(score.recall_any[index]));
                    self.frac[index] += score.frac[index];
                }
                for (index, _) in SESSION_CUTOFFS.iter().enumerate() {
                    self.session_recall_all[index] += f64::from(u8::from(score.session_recall_all[index]));
                }
                let category_index = CUTOFFS.iter().position(|&k| k == CATEGORY_CUTOFF).expect("the category cutoff is a cutoff");
                let entry = self.categories.entry(category).or_default();
                entry.0 += 1;
                entry.1 += usize::from(score.recall_all[category_index]);
            }
        }
    }

    /// The averages; every figure is 0 when nothing was scored.
    pub fn summary(&self) -> Scores {
        let mean = |sum: f64| if self.scored == 0 { 0.0 } else { rounded(sum / self.scored as f64) };
        let mut metrics = Vec::new();
        for (name, sums) in [("recall_all", &self.recall_all), ("recall_any", &self.recall_any), ("frac", &self.frac)] {
            metrics.extend(CUTOFFS.iter().zip(sums).map(|(k, sum)| (format!("{name}@{k}"), mean(*sum))));
        }
        metrics.extend(
            SESSION_CUTOFFS.iter().zip(&self.session_recall_all).map(|(k, sum)| (format!("session_recall_all@{k}"), mean(*sum))),
        );
        let by_category = self
            .categories
            .iter()
            .map(|(&category, &(questions, hits))| {
                (category, CategoryScore { questions, recall_all_at_10: rounded(hits as f64 / questions as f64) })
            })
            .collect();
        Scores {
            scored: self.scored,
            skipped: self.skipped_category + self.skipped_no_evidence,
            skipped_category: self.skipped_category,
            skipped_no_evidence: self.skipped_no_evidence,
            metrics: Figures(metrics),
            by_category,
        }
    }
}

/// Four decimals: one question of 760 moves a figure by 0.0013.
fn rounded(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

/// A run's averages and what they were taken over.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scores {
    pub scored: usize,
    pub skipped: usize,
    /// Questions whose category is outside 1 to 4 (the adversarial category 5).
    pub skipped_category: usize,
    /// Questions of categories 1 to 4 that name no evidence turn.
    pub skipped_no_evidence: usize,
    pub metrics: Figures,
    pub by_category: BTreeMap<i64, CategoryScore>,
}

impl Scores {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.metrics.0.iter().find(|(key, _)| key == name).map(|(_, value)| *value)
    }
}

/// Named figures that serialise as one JSON object in a fixed order (by metric, then cutoff),
/// so that the line reads the same way every run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures(pub Vec<(String, f64)>);

impl Serialize for Figures {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryScore {
    pub questions: usize,
    #[serde(rename = "recall_all@10")]
    pub recall_all_at_10: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    /// Twenty ranked turns from sessions c:D1 (turns 1-5), c:D2 (6-10), c:D3 (11-15), c:D4 (16-20),
    /// with the given turns substituted at 1-based ranks.
    fn ranking(placed: &[(usize, &str)]) -> Vec<String> {
        let mut ranked: Vec<String> = (1..=20).map(|n| format!("c:D{}:{n}", (n - 1) / 5 + 1)).collect();
        for (rank, id) in placed {
            ranked[rank - 1] = (*id).to_owned();
        }
        ranked
    }

    #[test]
    fn one_question_at_every_cutoff() {
        let figures = |recall_all, recall_any, frac, session_recall_all| QuestionScore { recall_all, recall_any, frac, session_recall_all };
        let cases = [
            ("c:D1:1", ranking(&[]), figures([true; 4], [true; 4], [1.0; 4], [true; 2])),
            ("c:D4:20", ranking(&[]), figures([false, false, false, true], [false, false, false, true], [0.0, 0.0, 0.0, 1.0], [true; 2])),
            ("c:D1:3 c:D2:7", ranking(&[]), figures([false, false, true, true], [false, true, true, true], [0.0, 0.5, 1.0, 1.0], [true; 2])),
            ("c:D9:1", ranking(&[]), figures([false; 4], [false; 4], [0.0; 4], [false; 2])),
            // Naming the same turn twice is one piece of evidence.
            ("c:D1:2 c:D1:2 c:D9:1", ranking(&[]), figures([false; 4], [false, true, true, true], [0.0, 0.5, 0.5, 0.5], [false; 2])),
            (
                "x:S1:1 x:S2:1 x:S3:1 x:S4:1",
                ranking(&[(2, "x:S1:1"), (4, "x:S2:1"), (9, "x:S3:1"), (20, "x:S4:1")]),
                figures([false, false, false, true], [false, true, true, true], [0.0, 0.5, 0.75, 1.0], [false, true]),
            ),
        ];
        for (evidence, ranked, expected) in cases {
            assert_eq!(score(&ids(evidence), &ranked), expected, "evidence {evidence}");
        }
    }

    #[test]
    fn sessions_count_in_ranked_order_of_first_appearance() {
        // Sessions in rank order: A, B, C, D, E, F; the evidence's session F is sixth, so it is
        // within the first 10 distinct sessions but not the first 5, however deep its turn.
        let ranked = ids("c:A:1 c:A:2 c:B:1 c:C:1 c:B:2 c:D:1 c:E:1 c:F:9 c:F:1");
        let score = score(&ids("c:F:1"), &ranked);
        assert_eq!(score.session_recall_all, [false, true]);
        assert_eq!(score.recall_all, [false, false, true, true]);
        // A short ranking still scores: there are fewer than k sessions, not an error.
        assert_eq!(super::score(&ids("c:A:5"), &ids("c:A:1")).session_recall_all, [true, true]);
        assert_eq!(super::score(&ids("c:A:5"), &[]).recall_any, [false; 4]);
    }

    #[test]
    fn averages_skip_what_the_readme_leaves_out() {
        let mut card = Scorecard::default();
        card.add(1, &ids("c:D1:1"), &ranking(&[]));
        card.add(1, &ids("c:D4:20"), &ranking(&[]));
        card.add(2, &ids("c:D1:3 c:D2:7"), &ranking(&[]));
        card.add(4, &ids("c:D9:1"), &ranking(&[]));
        card.add(5, &ids("c:D1:1"), &ranking(&[]));
        card.add(0, &ids("c:D1:1"), &ranking(&[]));
        card.add(3, &[], &ranking(&[]));
        let scores = card.summary();
        assert_eq!((scores.scored, scores.skipped, scores.skipped_category, scores.skipped_no_evidence), (4, 3, 2, 1));
        let expected = [
            ("recall_all@1", 0.25), ("recall_all@5", 0.25), ("recall_all@10", 0.5), ("recall_all@20", 0.75),
            ("recall_any@1", 0.25), ("recall_any@5", 0.5), ("recall_any@10", 0.5), ("recall_any@20", 0.75),
            ("frac@1", 0.25), ("frac@5", 0.375), ("frac@10", 0.5), ("frac@20", 0.75),
            ("session_recall_all@5", 0.75), ("session_recall_all@10", 0.75),
        ];
        assert_eq!(scores.metrics.0, expected.map(|(name, value)| (name.to_owned(), value)).to_vec());
        let categories: Vec<(i64, usize, f64)> =
            scores.by_category.iter().map(|(category, score)| (*category, score.questions, score.recall_all_at_10)).collect();
        assert_eq!(categories, [(1, 2, 0.5), (2, 1, 1.0), (4, 1, 0.0)]);
        assert_eq!(
            serde_json::to_string(&scores.metrics).unwrap(),
            r#"{"recall_all@1":0.25,"recall_all@5":0.25,"recall_all@10":0.5,"recall_all@20":0.75,"recall_any@1":0.25,"recall_any@5":0.5,"recall_any@10":0.5,"recall_any@20":0.75,"frac@1":0.25,"frac@5":0.375,"frac@10":0.5,"frac@20":0.75,"session_recall_all@5":0.75,"session_recall_all@10":0.75}"#
        );
    }

    #[test]
    fn averages_round_to_four_decimals_and_nothing_scored_is_zero() {
        let mut card = Scorecard::default();
        for evidence in ["c:D1:1", "c:D9:1", "c:D9:2"] {
            card.add(4, &ids(evidence), &ranking(&[]));
        }
        assert_eq!(card.summary().get("recall_all@1"), Some(0.3333));
        assert_eq!(Scorecard::default().summary().get("frac@20"), Some(0.0));
    }
}
