//! The nearest episodes of every episode, found all at once among the episodes themselves.
//!
//! [`super::cluster`] compares an episode with the clusters of its nearest episodes. Asking a
//! store's vector index once per episode reads every stored vector each time, so a run over n
//! episodes costs n² (most of the five minutes a run over 100,000 took). Here a forest of random projection trees
//! splits the episodes again and again by which of two of them each is nearer, until a part
//! holds at most [`LEAF`] episodes; every pair within a part is compared, and each episode keeps
//! the most similar others of all the parts it fell in over [`TREES`] trees. [`ROUNDS`] rounds
//! then compare each episode with the nearest of its nearest, which finds most of what the
//! trees missed. The work grows as n log n and is shared among the machine's cores, and the
//! same vectors give the same answer on any machine (the splits follow fixed seeds). The
//! answer is approximate: `kenning-bench consolidation` measures how
//! many of the exact nearest it finds.

use std::sync::atomic::{AtomicBool, Ordering};

/// How many trees split the episodes: each is another chance for two near episodes to share
/// a part.
const TREES: usize = 16;
/// The most episodes a part holds once it is no longer split; every pair within it is compared.
const LEAF: usize = 64;
/// How many rounds compare each episode with the nearest of its nearest, and how many of each.
const ROUNDS: usize = 2;
const REFINE: usize = 12;
/// How many episodes a round compares between two reports of its progress; the comparisons of
/// one step are shared among the cores.
const REFINE_STEP: usize = 5000;
/// The seed of the splits (tree `t` uses this plus `t`), so that a run is reproducible.
const SEED: u64 = 0x6b65_6e6e_696e_6731;
/// How many tries at two episodes that split a part before it is cut in half as it lies.
const SPLIT_TRIES: usize = 3;

/// The positions of up to `k` vectors most similar (cosine) to each vector of `vectors`, most
/// similar first, itself left out; `None` for a vector that cannot be compared: empty, zero, or
/// of another length than the first non-empty one. `progress` is told how much of the work is
/// done, as a share of `vectors.len()`, after each tree, every [`REFINE_STEP`] episodes of a
/// round and at the end; when it answers `false` the work stops and `None` is returned.
pub fn nearest_episodes(vectors: &[Vec<f32>], k: usize, progress: &mut dyn FnMut(usize, usize) -> bool) -> Option<Vec<Option<Vec<usize>>>> {
    let total = vectors.len();
    let dims = vectors.iter().map(Vec::len).find(|length| *length > 0).unwrap_or(0);
    let lengths: Vec<f32> = vectors.iter().map(|vector| if vector.len() == dims { dot(vector, vector).sqrt() } else { 0.0 }).collect();
    // The vectors that can be compared, as positions in `vectors`.
    let rows: Vec<usize> = (0..total).filter(|position| lengths[*position] > 0.0).collect();
    let forest = Forest { vectors, lengths: &lengths, rows: &rows };
    // Each tree and each round is one part of the work, reported as a share of `total`.
    let parts = TREES + ROUNDS;
    let mut report = |part: usize, done: usize| progress((part * rows.len() + done) * total / (parts * rows.len()).max(1), total);
    // The trees are independent: the machine's cores grow them side by side, this thread one
    // share and reporting, each core into lists of its own, merged after. Every tree has its
    // own seed and lists keep the best by a total order, so the answer does not depend on how
    // many cores there are.
    let workers = std::thread::available_parallelism().map_or(1, usize::from).min(TREES);
    let stop = AtomicBool::new(false);
    let (mine, theirs) = std::thread::scope(|scope| {
        let (forest, stop) = (&forest, &stop);
        let spawned: Vec<_> = (1..workers).map(|worker| scope.spawn(move || forest.grow_trees(worker, workers, k, &mut |_| !stop.load(Ordering::Relaxed)))).collect();
        let mine = forest.grow_trees(0, workers, k, &mut |grown| {
            let going = report((grown * workers).min(TREES), 0);
            if !going {
                stop.store(true, Ordering::Relaxed);
            }
            going
        });
        let theirs: Vec<Option<Vec<Nearest>>> = spawned.into_iter().map(|worker| worker.join().expect("growing a tree does not panic")).collect();
        (mine, theirs)
    });
    let mut lists = mine?;
    for other in theirs {
        for (list, other) in lists.iter_mut().zip(other?) {
            for (similarity, row) in other.entries {
                list.offer(similarity, row, k);
            }
        }
    }
    for round in 0..ROUNDS {
        if !forest.refine(&mut lists, k, workers, &mut |done| report(TREES + round, done)) {
            return None;
        }
    }
    if !progress(total, total) {
        return None;
    }
    let mut found: Vec<Option<Vec<usize>>> = vec![None; total];
    for (row, list) in lists.into_iter().enumerate() {
        found[rows[row]] = Some(list.entries.iter().map(|(_, other)| rows[*other as usize]).collect());
    }
    Some(found)
}

/// The vectors that can be compared: row `r` is `vectors[rows[r]]`, of length `lengths[rows[r]]`.
struct Forest<'a> {
    vectors: &'a [Vec<f32>],
    lengths: &'a [f32],
    rows: &'a [usize],
}

impl Forest<'_> {
    fn cosine(&self, a: u32, b: u32) -> f32 {
        let (a, b) = (self.rows[a as usize], self.rows[b as usize]);
        dot(&self.vectors[a], &self.vectors[b]) / (self.lengths[a] * self.lengths[b])
    }

    /// The trees from `first` on, every `step`th, into lists of their own. `keep_going` hears
    /// how many trees are grown after each; `false` stops the work and `None` is returned.
    fn grow_trees(&self, first: usize, step: usize, k: usize, keep_going: &mut dyn FnMut(usize) -> bool) -> Option<Vec<Nearest>> {
        let mut lists: Vec<Nearest> = (0..self.rows.len()).map(|_| Nearest::default()).collect();
        for (grown, tree) in (first..TREES).step_by(step).enumerate() {
            let mut order: Vec<u32> = (0..self.rows.len() as u32).collect();
            let mut random = SplitMix(SEED.wrapping_add(tree as u64));
            self.grow(&mut order, &mut random, &mut lists, k);
            if !keep_going(grown + 1) {
                return None;
            }
        }
        Some(lists)
    }

    /// One tree: `order` (every row once) is split part by part in place, and each leaf's pairs
    /// are offered to both members' lists.
    fn grow(&self, order: &mut [u32], random: &mut SplitMix, lists: &mut [Nearest], k: usize) {
        let mut parts = vec![(0, order.len())];
        while let Some((start, end)) = parts.pop() {
            let part = &mut order[start..end];
            if part.len() <= LEAF {
                for (at, &a) in part.iter().enumerate() {
                    for &b in &part[at + 1..] {
                        let similarity = self.cosine(a, b);
                        lists[a as usize].offer(similarity, b, k);
                        lists[b as usize].offer(similarity, a, k);
                    }
                }
                continue;
            }
            let middle = self.split(part, random);
            parts.push((start, start + middle));
            parts.push((start + middle, end));
        }
    }

    /// Puts the rows of `part` nearer one of two of them (picked at random) before those nearer
    /// the other, and says where the second group begins. When the two are the same vector, or
    /// every row falls on one side, other two are tried; after that the part is cut in half as
    /// it lies, so that a part of identical vectors still ends in leaves.
    fn split(&self, part: &mut [u32], random: &mut SplitMix) -> usize {
        for _ in 0..SPLIT_TRIES {
            let first = part[random.below(part.len())];
            let second = part[random.below(part.len())];
            let (a, b) = (&self.vectors[self.rows[first as usize]], &self.vectors[self.rows[second as usize]]);
            let (length_a, length_b) = (self.lengths[self.rows[first as usize]], self.lengths[self.rows[second as usize]]);
            // The normal of the plane halfway between the two unit vectors.
            let normal: Vec<f32> = a.iter().zip(b).map(|(x, y)| x / length_a - y / length_b).collect();
            if normal.iter().all(|x| *x == 0.0) {
                continue;
            }
            let mut nearer_first = 0;
            for at in 0..part.len() {
                if dot(&self.vectors[self.rows[part[at] as usize]], &normal) > 0.0 {
                    part.swap(at, nearer_first);
                    nearer_first += 1;
                }
            }
            if nearer_first > 0 && nearer_first < part.len() {
                return nearer_first;
            }
        }
        part.len() / 2
    }

    /// Compares each row with the nearest [`REFINE`] of its nearest [`REFINE`]: a neighbour's
    /// neighbour is likely a neighbour, and the trees may have split it off. [`REFINE_STEP`]
    /// rows at a time, the comparisons are made on `workers` cores from the lists as they stand
    /// and then offered in the rows' order, so the answer does not depend on the cores.
    /// `progress` hears how many rows are done after each step; `false` stops the round.
    fn refine(&self, lists: &mut [Nearest], k: usize, workers: usize, progress: &mut dyn FnMut(usize) -> bool) -> bool {
        for start in (0..lists.len()).step_by(REFINE_STEP) {
            if start > 0 && !progress(start) {
                return false;
            }
            let end = (start + REFINE_STEP).min(lists.len());
            let share = (end - start).div_ceil(workers);
            let standing: &[Nearest] = lists;
            let compared: Vec<Vec<(u32, u32, f32)>> = std::thread::scope(|scope| {
                let spawned: Vec<_> =
                    (start..end).step_by(share).map(|from| scope.spawn(move || self.compare_near(standing, from..(from + share).min(end)))).collect();
                spawned.into_iter().map(|worker| worker.join().expect("comparing vectors does not panic")).collect()
            });
            for (row, other, similarity) in compared.into_iter().flatten() {
                lists[row as usize].offer(similarity, other, k);
                lists[other as usize].offer(similarity, row, k);
            }
        }
        true
    }

    /// Each row of `rows` with each of the nearest [`REFINE`] of its nearest [`REFINE`] that
    /// its list does not hold yet, and their similarity.
    fn compare_near(&self, lists: &[Nearest], rows: std::ops::Range<usize>) -> Vec<(u32, u32, f32)> {
        let mut compared = Vec::new();
        let mut candidates: Vec<u32> = Vec::with_capacity(REFINE * REFINE);
        for row in rows {
            candidates.clear();
            for &(_, near) in lists[row].entries.iter().take(REFINE) {
                candidates.extend(lists[near as usize].entries.iter().take(REFINE).map(|(_, other)| *other));
            }
            candidates.sort_unstable();
            candidates.dedup();
            let row = row as u32;
            for &other in &candidates {
                if other != row && !lists[row as usize].holds(other) {
                    compared.push((row, other, self.cosine(row, other)));
                }
            }
        }
        compared
    }
}

/// A row's most similar rows so far, most similar first (ties: the lower row first), so that
/// what a list keeps does not depend on the order rows are offered in.
#[derive(Default)]
struct Nearest {
    entries: Vec<(f32, u32)>,
}

impl Nearest {
    fn holds(&self, other: u32) -> bool {
        self.entries.iter().any(|(_, held)| *held == other)
    }

    fn offer(&mut self, similarity: f32, other: u32, k: usize) {
        let before = |(held, held_row): &(f32, u32)| *held > similarity || (*held == similarity && *held_row < other);
        if k == 0 || (self.entries.len() == k && before(&self.entries[k - 1])) || self.holds(other) {
            return;
        }
        let at = self.entries.partition_point(before);
        if self.entries.len() == k {
            self.entries.pop();
        }
        self.entries.insert(at, (similarity, other));
    }
}

/// The dot product, summed in eight lanes so that the compiler can use vector instructions.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks.remainder().iter().zip(b_chunks.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// SplitMix64: a small, fixed sequence of pseudo-random numbers.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `bound` (not zero).
    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` vectors of `dims` components around `centres` topics, each a topic's direction
    /// with noise, as episodes about a few things are.
    fn topics(count: usize, centres: usize, dims: usize, noise: f32) -> Vec<Vec<f32>> {
        let mut random = SplitMix(7);
        let mut uniform = move || (random.next() >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0;
        let centres: Vec<Vec<f32>> = (0..centres).map(|_| (0..dims).map(|_| uniform()).collect()).collect();
        (0..count).map(|at| centres[at % centres.len()].iter().map(|x| x + noise * uniform()).collect()).collect()
    }

    fn exact(vectors: &[Vec<f32>], position: usize, k: usize) -> Vec<usize> {
        let cosine = |a: &[f32], b: &[f32]| dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt());
        let mut others: Vec<(f32, usize)> =
            (0..vectors.len()).filter(|other| *other != position).map(|other| (cosine(&vectors[position], &vectors[other]), other)).collect();
        others.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        others.into_iter().take(k).map(|(_, other)| other).collect()
    }

    #[test]
    fn most_of_the_exact_nearest_are_found() {
        let vectors = topics(4000, 150, 64, 0.9);
        let found = nearest_episodes(&vectors, 32, &mut |_, _| true).unwrap();
        let (mut hits, mut asked) = (0, 0);
        for position in (0..vectors.len()).step_by(37) {
            let near = found[position].as_ref().unwrap();
            assert!(!near.contains(&position), "an episode is not its own neighbour");
            let truth = exact(&vectors, position, 10);
            hits += truth.iter().filter(|other| near.contains(other)).count();
            asked += truth.len();
        }
        let recall = hits as f64 / asked as f64;
        assert!(recall >= 0.9, "recall@10 among the 32 found: {recall:.3}");
    }

    #[test]
    fn lists_are_most_similar_first_and_the_answer_is_reproducible() {
        let vectors = topics(500, 20, 16, 0.5);
        let found = nearest_episodes(&vectors, 8, &mut |_, _| true).unwrap();
        assert_eq!(found, nearest_episodes(&vectors, 8, &mut |_, _| true).unwrap());
        let cosine = |a: &[f32], b: &[f32]| dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt());
        for (position, near) in found.iter().enumerate() {
            let near = near.as_ref().unwrap();
            assert_eq!(near.len(), 8);
            let similarities: Vec<f32> = near.iter().map(|other| cosine(&vectors[position], &vectors[*other])).collect();
            assert!(similarities.windows(2).all(|pair| pair[0] >= pair[1]), "{similarities:?}");
        }
    }

    #[test]
    fn trees_grown_apart_and_merged_keep_what_one_core_keeps() {
        let vectors = topics(600, 30, 16, 0.4);
        let lengths: Vec<f32> = vectors.iter().map(|vector| dot(vector, vector).sqrt()).collect();
        let rows: Vec<usize> = (0..vectors.len()).collect();
        let forest = Forest { vectors: &vectors, lengths: &lengths, rows: &rows };
        let entries = |lists: Vec<Nearest>| lists.into_iter().map(|list| list.entries).collect::<Vec<_>>();
        let alone = entries(forest.grow_trees(0, 1, 8, &mut |_| true).unwrap());
        for workers in [2, 3, 5] {
            let mut lists = forest.grow_trees(0, workers, 8, &mut |_| true).unwrap();
            for worker in 1..workers {
                for (list, other) in lists.iter_mut().zip(forest.grow_trees(worker, workers, 8, &mut |_| true).unwrap()) {
                    for (similarity, row) in other.entries {
                        list.offer(similarity, row, 8);
                    }
                }
            }
            assert_eq!(entries(lists), alone, "{workers} cores");
        }
    }

    #[test]
    fn vectors_that_cannot_be_compared_have_no_list_and_identical_ones_find_each_other() {
        let mut vectors = vec![vec![1.0, 0.0, 0.0]; 120];
        vectors.push(Vec::new());
        vectors.push(vec![0.0, 0.0, 0.0]);
        vectors.push(vec![1.0, 0.0]);
        let found = nearest_episodes(&vectors, 4, &mut |_, _| true).unwrap();
        assert_eq!(found[120..], [None, None, None]);
        assert!(found[..120].iter().all(|near| near.as_ref().is_some_and(|near| near.len() == 4)));
    }

    #[test]
    fn progress_is_reported_and_can_stop_the_work() {
        let vectors = topics(300, 10, 8, 0.3);
        let mut heard = Vec::new();
        nearest_episodes(&vectors, 4, &mut |done, total| {
            heard.push((done, total));
            true
        })
        .unwrap();
        assert!(heard.len() >= 2, "reports while the trees grow, one at the end: {heard:?}");
        assert_eq!(heard.last(), Some(&(300, 300)));
        assert!(heard.windows(2).all(|pair| pair[0].0 < pair[1].0));
        assert_eq!(nearest_episodes(&vectors, 4, &mut |done, _| done < 100), None);
    }
}
