//! What the capture checks make of a memory's text, made once and kept for the memories read
//! most recently.
//!
//! Judging a capture compares its claim with its nearest memories' claims, and the
//! contradiction check reads their sentences and statements: reading a text costs far more
//! than comparing two read ones. The same memories come back as the neighbours of capture
//! after capture (a session keeps writing about the same few things, and a bulk load's
//! captures share their neighbours), so an [`Analysis`] is kept per memory id in
//! [`Analyses`], with the text it was made from: an entry whose memory has changed since
//! reads as absent. A capture's own analysis is kept once it is stored, since it is the
//! likeliest neighbour of the next one.
//!
//! Analyses are made on every core when there are enough of them ([`prepare`]): each reads
//! its parts once, and comparisons afterwards only read what is made. The contradiction
//! checks of a batch's captures are spread over the cores the same way ([`on_every_core`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kenning_core::claim::{Claim, ClaimRules};
use kenning_core::contradiction::Reading;
use kenning_core::{Memory, MemoryId};

/// How many analyses are kept. A made analysis of a note of a few sentences holds about 12 KB
/// (its words are shared terms, but its sets and lists of them are its own), so this keeps
/// about 48 MB. A bulk load's captures find most of their neighbours here: at 10,000 memories,
/// keeping 1,024 made a capture read five or six neighbours afresh.
const KEPT: usize = 4096;
/// The fewest analyses a thread of [`prepare`] is given: starting a thread costs more than a
/// handful of readings.
const PARALLEL_FROM: usize = 24;

/// One text as the checks read it: its claim (made on first use, since only a memory of the
/// capture's namespace and kind is judged by it) and its reading for the contradiction rules.
pub(crate) struct Analysis {
    claim: OnceLock<Claim>,
    reading: Reading<'static>,
}

impl Analysis {
    pub(crate) fn new(content: &str) -> Analysis {
        Analysis { claim: OnceLock::new(), reading: Reading::owned(content.to_owned()) }
    }

    /// Its claim. The words the claim is made from are those the reading's statements are made
    /// from too, so both are made at once from one reading of the text.
    pub(crate) fn claim(&self, rules: &ClaimRules) -> &Claim {
        self.claim.get_or_init(|| self.reading.with_words(|words| rules.claim_of(words)))
    }

    pub(crate) fn reading(&self) -> &Reading<'static> {
        &self.reading
    }

    /// Makes now the parts the checks will read.
    fn prepare(&self, rules: &ClaimRules, needs: Needs) {
        if needs.claim {
            self.claim(rules);
        }
        if needs.reading {
            self.reading.prepare();
        }
    }
}

/// Which parts of an analysis the checks of a batch will read: the claim of a memory judged
/// against a capture, the reading of one checked for contradictions. A part not made ahead is
/// made on first use, so a wrong guess costs time, never an answer.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Needs {
    pub claim: bool,
    pub reading: bool,
}

impl Needs {
    pub(crate) const ALL: Needs = Needs { claim: true, reading: true };
}

/// The analyses of the memories read most recently, by memory id.
#[derive(Default)]
pub(crate) struct Analyses {
    kept: Mutex<HashMap<MemoryId, Arc<Analysis>>>,
}

impl Analyses {
    /// The analysis of `memory` as it reads now: the kept one, or a new one not yet made,
    /// kept from now on; with whether it is new.
    pub(crate) fn of(&self, memory: &Memory) -> (Arc<Analysis>, bool) {
        let mut kept = self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(analysis) = kept.get(&memory.id)
            && analysis.reading.text() == memory.content
        {
            return (analysis.clone(), false);
        }
        let analysis = Arc::new(Analysis::new(&memory.content));
        make_room(&mut kept, &memory.id);
        kept.insert(memory.id.clone(), analysis.clone());
        (analysis, true)
    }

    /// Keeps `analysis` as that of the memory `id`.
    pub(crate) fn keep(&self, id: &MemoryId, analysis: Arc<Analysis>) {
        let mut kept = self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        make_room(&mut kept, id);
        kept.insert(id.clone(), analysis);
    }
}

/// When full, drops an arbitrary entry other than `id`'s to make room for it: the map's order
/// is random, so no pattern of ids is always the one dropped.
fn make_room(kept: &mut HashMap<MemoryId, Arc<Analysis>>, id: &MemoryId) {
    if kept.len() >= KEPT
        && !kept.contains_key(id)
        && let Some(dropped) = kept.keys().next().cloned()
    {
        kept.remove(&dropped);
    }
}

/// Makes the parts each analysis needs now, on every core, when there are enough of them for
/// two threads at least. Fewer (a single capture, a batch whose neighbours were read lately)
/// are left to be made as the checks use them.
pub(crate) fn prepare(rules: &ClaimRules, analyses: &[(&Analysis, Needs)]) {
    if analyses.len() < 2 * PARALLEL_FROM {
        return;
    }
    on_every_core(analyses.len(), |at| analyses[at].0.prepare(rules, analyses[at].1));
}

/// `work` of each position below `count`, in order, on every core when there are at least
/// [`PARALLEL_FROM`] positions per thread: each thread takes the next position not yet taken,
/// so that one long text does not hold up a share.
pub(crate) fn on_every_core<T: Send>(count: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = crate::cores().min(count / PARALLEL_FROM);
    if threads <= 1 {
        return (0..count).map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let share = || {
        let mut done = Vec::new();
        loop {
            let at = next.fetch_add(1, Ordering::Relaxed);
            if at >= count {
                return done;
            }
            done.push((at, work(at)));
        }
    };
    let mut done: Vec<(usize, T)> = std::thread::scope(|scope| {
        let others: Vec<_> = (1..threads).map(|_| scope.spawn(share)).collect();
        let mut done = share();
        for other in others {
            done.extend(other.join().expect("the checks do not panic"));
        }
        done
    });
    done.sort_unstable_by_key(|(at, _)| *at);
    done.into_iter().map(|(_, value)| value).collect()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use kenning_core::CaptureInput;

    use super::*;
    use crate::ids::new_memory_id;

    fn memory(content: &str) -> Memory {
        let input = CaptureInput { content: content.to_owned(), ..CaptureInput::default() };
        let id = MemoryId::parse(&new_memory_id(Utc::now())).unwrap();
        kenning_core::input::build_memory(input, kenning_core::Domain::User, id, Utc::now()).unwrap()
    }

    #[test]
    fn a_memory_is_read_once_until_its_words_change_and_the_store_stays_bounded() {
        let analyses = Analyses::default();
        let mut stored = memory("The request timeout is 30 seconds.");
        let (first, new) = analyses.of(&stored);
        assert!(new);
        let (again, new) = analyses.of(&stored);
        assert!(!new && Arc::ptr_eq(&first, &again), "the kept analysis is reused");
        stored.content = "The request timeout is 60 seconds.".to_owned();
        let (changed, new) = analyses.of(&stored);
        assert!(new && changed.reading().text() == stored.content, "a changed memory is read again");
        for _ in 0..KEPT + 100 {
            let other = memory("Another note.");
            analyses.keep(&other.id, Arc::new(Analysis::new(&other.content)));
        }
        assert_eq!(analyses.kept.lock().unwrap().len(), KEPT);
    }

    #[test]
    fn analyses_made_on_several_threads_read_as_made_on_one() {
        let rules = ClaimRules::default();
        let texts: Vec<String> = (0..4 * PARALLEL_FROM).map(|at| format!("The worker pool of service {at} holds {} threads.", at % 7)).collect();
        let made: Vec<Analysis> = texts.iter().map(|text| Analysis::new(text)).collect();
        prepare(&rules, &made.iter().map(|analysis| (analysis, Needs::ALL)).collect::<Vec<_>>());
        for (analysis, text) in made.iter().zip(&texts) {
            assert_eq!(analysis.claim.get(), Some(&rules.claim(text)), "{text}");
        }
    }
}
