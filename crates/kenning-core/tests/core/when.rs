use chrono::{DateTime, Utc};
use kenning_core::when::find_time_expression;

fn time(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

#[test]
fn time_expressions_name_the_span_they_mean() {
    let now = time("2023-08-16T12:00:00Z");
    // (query, needs a "now", span start, span end); `None` when the query names no time.
    type Case = (&'static str, Option<(bool, &'static str, &'static str)>);
    let cases: &[Case] = &[
        ("What painting did Melanie show on October 13, 2023?", Some((false, "2023-10-13", "2023-10-14"))),
        ("What did Gina find on 1 February, 2023?", Some((false, "2023-02-01", "2023-02-02"))),
        ("Which book did Tim finish on 8th December, 2023?", Some((false, "2023-12-08", "2023-12-09"))),
        ("the forest picture shared on December 1,2023", Some((false, "2023-12-01", "2023-12-02"))),
        ("deploy notes from 2023-03-07 please", Some((false, "2023-03-07", "2023-03-08"))),
        ("What did Maria donate in December 2023?", Some((false, "2023-12-01", "2024-01-01"))),
        ("Which tournament did Nate win in the beginning of November 2022?", Some((false, "2022-11-01", "2022-12-01"))),
        ("What happened on 13 Oct", Some((true, "2022-10-13", "2022-10-14"))),
        ("What happened on August 3", Some((true, "2023-08-03", "2023-08-04"))),
        ("When did Melanie go camping in June?", Some((true, "2023-06-01", "2023-07-01"))),
        ("Which outdoor spot did Joanna visit in September?", Some((true, "2022-09-01", "2022-10-01"))),
        ("What did we decide last August?", Some((true, "2022-08-01", "2022-09-01"))),
        ("Where was Tim in the second week of August?", Some((true, "2023-08-01", "2023-09-01"))),
        ("How many times has Melanie gone to the beach in 2023?", Some((false, "2023-01-01", "2024-01-01"))),
        ("What did I break yesterday?", Some((true, "2023-08-15", "2023-08-16"))),
        ("flaky tests today", Some((true, "2023-08-16", "2023-08-17"))),
        ("what changed this week", Some((true, "2023-08-10", "2023-08-17"))),
        ("what did we ship last week", Some((true, "2023-08-03", "2023-08-10"))),
        ("incidents last month", Some((true, "2023-07-01", "2023-08-01"))),
        ("migrations this year", Some((true, "2023-01-01", "2024-01-01"))),
        ("Where did John explore on a road trip last year?", Some((true, "2022-01-01", "2023-01-01"))),
        ("flaky tests in the past year", Some((true, "2022-08-17", "2023-08-17"))),
        ("what failed over the past month", Some((true, "2023-07-17", "2023-08-17"))),
        ("deploys in the past week", Some((true, "2023-08-10", "2023-08-17"))),
        ("What has changed since March?", Some((true, "2023-03-01", "2023-08-17"))),
        ("incidents since 2022", Some((true, "2022-01-01", "2023-08-17"))),
        ("what broke since 2023-08-01", Some((true, "2023-08-01", "2023-08-17"))),
        ("what did we learn since last week", Some((true, "2023-08-03", "2023-08-17"))),
        ("Since the build failed in May we pin the toolchain", Some((true, "2023-05-01", "2023-06-01"))),
        ("It may rain, so the build may fail", None),
        ("this may break the build", None),
        ("port 2023 on localhost", None),
        ("bump to version 10.2023.1", None),
        ("serial 12023-10-130", None),
        ("a march through the deps", None),
    ];
    for (query, expected) in cases {
        let found = find_time_expression(query);
        let got = found.map(|expression| {
            let span = expression.span(Some(now)).unwrap();
            assert_eq!(expression.span(None).is_none(), expression.needs_now(), "{query}: needs now");
            (expression.needs_now(), span.start.format("%Y-%m-%d").to_string(), span.end.format("%Y-%m-%d").to_string())
        });
        let want = expected.map(|(needs_now, start, end)| (needs_now, start.to_owned(), end.to_owned()));
        assert_eq!(got, want, "{query}");
    }
}

#[test]
fn spans_are_half_open_and_impossible_dates_name_none() {
    let span = find_time_expression("in May 2022").unwrap().span(None).unwrap();
    assert!(span.contains(time("2022-05-01T00:00:00Z")) && span.contains(time("2022-05-31T23:59:59Z")));
    assert!(!span.contains(time("2022-06-01T00:00:00Z")) && !span.contains(time("2022-04-30T23:59:59Z")));
    assert_eq!(find_time_expression("on 30 February 2023").unwrap().span(None), None);
    let leap = find_time_expression("on 29 February").unwrap();
    assert_eq!(leap.span(Some(time("2025-03-01T00:00:00Z"))).unwrap().start, time("2024-02-29T00:00:00Z"), "the latest 29 February");
}
