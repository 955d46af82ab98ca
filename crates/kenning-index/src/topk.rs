//! Keeping the best `k` of a stream of scored documents.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::documents::Slot;

/// The best `k` (score, slot) pairs seen so far; equal scores go to the smaller memory id, so
/// that results do not depend on the order documents were indexed in.
pub(crate) struct TopK<'a> {
    k: usize,
    heap: BinaryHeap<Reverse<Candidate<'a>>>,
}

struct Candidate<'a> {
    score: f64,
    slot: Slot,
    /// The memory id's bytes, which order as the id does.
    id: &'a [u8],
}

impl PartialEq for Candidate<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate<'_> {}

impl Ord for Candidate<'_> {
    /// Better candidates are greater: a higher score, or an equal score and a smaller id.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then_with(|| other.id.cmp(self.id))
    }
}

impl PartialOrd for Candidate<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<'a> TopK<'a> {
    pub fn new(k: usize) -> TopK<'a> {
        TopK { k, heap: BinaryHeap::with_capacity(k.saturating_add(1).min(4096)) }
    }

    /// A cheap pre-check, so that filters are only evaluated for scores that may make the cut.
    pub fn admits(&self, score: f64) -> bool {
        !score.is_nan()
            && (self.heap.len() < self.k || self.heap.peek().is_some_and(|Reverse(worst)| score >= worst.score))
    }

    pub fn push(&mut self, score: f64, slot: Slot, id: &'a [u8]) {
        let candidate = Candidate { score, slot, id };
        if self.heap.len() < self.k {
            self.heap.push(Reverse(candidate));
            return;
        }
        // Full: the candidate takes the worst one's place if it is better, in one sift of the
        // heap, and is turned away otherwise without touching it. Documents that tie with the
        // worst score are common (equal lengths, equal counts of the same words), and were each
        // pushed and popped again.
        if let Some(mut worst) = self.heap.peek_mut()
            && candidate > worst.0
        {
            *worst = Reverse(candidate);
        }
    }

    pub fn into_sorted(self) -> Vec<(f64, Slot)> {
        // Ascending order of `Reverse` is best first.
        self.heap.into_sorted_vec().into_iter().map(|Reverse(c)| (c.score, c.slot)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_and_breaks_ties_by_id() {
        let mut top = TopK::new(2);
        for (score, slot, id) in [(0.1, 0, "a"), (0.9, 1, "b"), (0.5, 2, "d"), (0.5, 3, "c"), (0.2, 4, "e")] {
            if top.admits(score) {
                top.push(score, slot, id.as_bytes());
            }
        }
        assert_eq!(top.into_sorted(), [(0.9, 1), (0.5, 3)]);
    }

    #[test]
    fn keeps_what_sorting_every_candidate_keeps() {
        let ids: Vec<String> = (0..400).map(|n| format!("m{:03}", (n * 7919) % 400)).collect();
        let scores: Vec<f64> = (0..400).map(|n| f64::from((n * 31 % 17) as u32) / 4.0).collect();
        for k in [0, 1, 5, 64, 399, 400, 500] {
            let mut top = TopK::new(k);
            for (slot, (score, id)) in scores.iter().zip(&ids).enumerate() {
                if top.admits(*score) {
                    top.push(*score, slot as Slot, id.as_bytes());
                }
            }
            let mut every: Vec<(f64, &String, Slot)> = scores.iter().zip(&ids).enumerate().map(|(slot, (score, id))| (*score, id, slot as Slot)).collect();
            every.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            let expected: Vec<(f64, Slot)> = every.into_iter().take(k).map(|(score, _, slot)| (score, slot)).collect();
            assert_eq!(top.into_sorted(), expected, "k = {k}");
        }
    }
}
