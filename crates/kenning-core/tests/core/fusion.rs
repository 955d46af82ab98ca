use kenning_core::search::{FUSION_SCALE_DEPTH, FusionList, score_fusion};

type Scored = Vec<(&'static str, f64)>;
/// A case: what it shows, the lists as (weight, hits, unlisted score), the fused result.
type Case = (&'static str, Vec<(f64, Scored, Option<f64>)>, Scored);

fn fused(lists: &[(f64, Scored, Option<f64>)]) -> Scored {
    let lists: Vec<FusionList<&str>> = lists
        .iter()
        .map(|(weight, hits, unlisted_score)| FusionList { weight: *weight, hits: hits.clone(), unlisted_score: *unlisted_score })
        .collect();
    score_fusion(&lists).into_iter().map(|(item, score)| (item, (score * 1000.0).round() / 1000.0)).collect()
}

#[test]
fn scores_are_scaled_per_list_and_combined_by_weight() {
    let cases: &[Case] = &[
        (
            "a short list scales from its best down to its last, whatever its score range",
            vec![(0.5, vec![("a", 12.0), ("b", 9.0), ("c", 3.0)], None), (0.5, vec![("b", 0.71), ("c", 0.70), ("d", 0.61)], None)],
            vec![("b", 0.833), ("a", 0.5), ("c", 0.45), ("d", 0.0)],
        ),
        (
            "or down to the score of what it left out, when that is known",
            vec![(0.5, vec![("a", 12.0), ("b", 9.0), ("c", 3.0)], Some(0.0)), (0.5, vec![("b", 0.71), ("c", 0.70), ("d", 0.61)], None)],
            vec![("b", 0.875), ("c", 0.575), ("a", 0.5), ("d", 0.0)],
        ),
        (
            "a clear winner stays clear, where rank fusion would put it one step ahead",
            vec![(0.5, vec![("a", 20.0), ("b", 2.0), ("c", 1.0)], None), (0.5, vec![("b", 0.9), ("a", 0.2), ("c", 0.1)], None)],
            vec![("a", 0.563), ("b", 0.526), ("c", 0.0)],
        ),
        (
            "a list of one, or of equal scores, scales to 1",
            vec![(1.0, vec![("a", 3.0)], None), (0.5, vec![("b", 2.0), ("c", 2.0)], None)],
            vec![("a", 1.0), ("b", 0.5), ("c", 0.5)],
        ),
        ("empty lists add nothing", vec![(0.5, vec![], Some(0.0)), (0.5, vec![("a", 0.3), ("b", 0.1)], None)], vec![("a", 0.5), ("b", 0.0)]),
    ];
    for (name, lists, expected) in cases {
        assert_eq!(fused(lists), *expected, "{name}");
    }
}

#[test]
fn the_scale_ends_at_a_fixed_depth_so_longer_lists_keep_the_same_top_scores() {
    let list = |length: usize| FusionList {
        weight: 1.0,
        hits: (0..length).map(|rank| (rank, 1000.0 - rank as f64)).collect(),
        unlisted_score: Some(0.0),
    };
    let short = score_fusion(&[list(FUSION_SCALE_DEPTH)]);
    let long = score_fusion(&[list(FUSION_SCALE_DEPTH * 3)]);
    assert_eq!(short, long[..FUSION_SCALE_DEPTH]);
    assert!(long[FUSION_SCALE_DEPTH..].iter().all(|(_, score)| *score == 0.0), "deeper hits are held at 0");
    let order: Vec<usize> = long.iter().map(|(item, _)| *item).collect();
    assert_eq!(order, (0..FUSION_SCALE_DEPTH * 3).collect::<Vec<_>>(), "ties keep first-seen order");
}
