//! The claim rule on the labelled development set and on generated statements: no distinct
//! claim is ever judged the same, whatever its wording.

use kenning_core::claim::{ClaimRules, Judgement};
use proptest::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Pair {
    id: String,
    label: String,
    a: String,
    b: String,
}

fn pairs() -> Vec<Pair> {
    let text = include_str!("../fixtures/judgment-dev.jsonl");
    text.lines().filter(|line| !line.trim().is_empty()).map(|line| serde_json::from_str(line).expect("a pair reads")).collect()
}

#[test]
fn no_distinct_pair_of_the_development_set_is_judged_the_same() {
    let rules = ClaimRules::default();
    let pairs = pairs();
    assert!(pairs.len() >= 300, "the development set has {} pairs", pairs.len());
    let wrongly_same: Vec<&str> =
        pairs.iter().filter(|pair| pair.label != "paraphrase" && rules.judge(&pair.a, &pair.b) == Judgement::Same).map(|pair| pair.id.as_str()).collect();
    assert!(wrongly_same.is_empty(), "distinct claims judged the same: {wrongly_same:?}");
    // In both orders: the rule is symmetric.
    for pair in &pairs {
        assert_eq!(rules.judge(&pair.a, &pair.b), rules.judge(&pair.b, &pair.a), "{}", pair.id);
    }
}

/// A statement about two named things in different roles, with a number, maybe negated.
fn statement(template: usize, first: &str, second: &str, number: u32, negated: bool, frame: usize) -> String {
    let not = |positive: &str, negative: &str| if negated { negative.to_owned() } else { positive.to_owned() };
    let body = match template % 8 {
        0 => format!("{first} {} {second} {number} times per minute", not("calls", "never calls")),
        1 => format!("{first} {} events to {second} on port {number}", not("sends", "does not send")),
        2 => format!("{} {first} before {second} and wait {number} seconds", not("deploy", "do not deploy")),
        3 => format!("{first} owns the billing service and {second} {} it within {number} hours", not("reviews", "never reviews")),
        4 => format!("write to {first} and {} from {second} with a timeout of {number} ms", not("read", "do not read")),
        5 => format!("use {first}, not {second}, for the export job on {number} workers{}", not("", " unless told otherwise, never")),
        6 => format!("if {first} fails, {} {second} {number} times", not("retry", "do not retry")),
        _ => format!("{first} {} {second} by {number} percent", not("is faster than", "is not faster than")),
    };
    match frame % 4 {
        0 => format!("{body}."),
        1 => format!("In staging, {body}."),
        2 => format!("Every night {body}!"),
        _ => format!("{body} in production."),
    }
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Z][a-z]{3,9}",
        "[a-z]{3,6}-[a-z]{3,6}-[0-9]",
        prop::sample::select(vec!["Postgres", "Redis", "Kafka", "GitHub", "Vault", "Alice", "Bob", "Berlin", "Lisbon", "S3"]).prop_map(str::to_owned),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A statement and the same statement with another number, the opposite polarity, or its
    /// two named things swapped, are never judged the same claim.
    #[test]
    fn a_number_a_negation_or_the_order_of_two_named_things_is_never_the_same_claim(
        template in 0usize..8,
        frame in 0usize..4,
        (first, second) in (name(), name()).prop_filter("two different names", |(a, b)| a.to_lowercase() != b.to_lowercase()),
        (number, other) in (1u32..5000, 1u32..5000).prop_filter("two different numbers", |(a, b)| a != b),
        negated in any::<bool>(),
    ) {
        let rules = ClaimRules::default();
        let original = statement(template, &first, &second, number, negated, frame);
        for changed in [
            statement(template, &first, &second, other, negated, frame),
            statement(template, &first, &second, number, !negated, frame),
            statement(template, &second, &first, number, negated, frame),
        ] {
            prop_assert_ne!(rules.judge(&original, &changed), Judgement::Same, "{} / {}", original, changed);
        }
    }
}

