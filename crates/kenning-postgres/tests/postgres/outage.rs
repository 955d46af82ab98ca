//! The organisation database going away in the middle of a run and coming back: recall keeps
//! answering from the project and user domains and says that org is missing; a capture to org
//! fails with a clear error and is written nowhere else; once the database is back, the same
//! service (no restart) recalls from org again.
//!
//! The outage is made by a TCP relay between the store and the test server ([`Relay`]).

use std::time::Duration;

use kenning_core::{CaptureInput, SearchFilter};

use super::domains::{capture, recall, three_domains};
use super::relay::Relay;
use super::*;

#[test]
fn recall_degrades_while_the_org_database_is_away_and_recovers_without_a_restart() {
    if !servers(&[PG_URL]) {
        return;
    }
    let (relay, url) = Relay::to(&server_url());
    let settings = Settings { connect_timeout: Duration::from_secs(2), ..settings_for(url, &fresh_schema("outage")) };
    let (service, _dir) = three_domains(PostgresStore::open(&settings).unwrap());

    let project = capture(&service, "project", "Deploys of this app go out through the blue-green pipeline.");
    let user = capture(&service, "user", "I like deploys to run after the tests, never before.");
    let org = capture(&service, "org", "Every deploy is announced in the release channel first.");
    let before = recall(&service, "deploys");
    assert_eq!(before.results.len(), 3, "{before:?}");

    relay.down();
    let degraded = recall(&service, "deploys");
    let urns: Vec<&str> = degraded.results.iter().map(|hit| hit.urn.as_str()).collect();
    assert!(urns.contains(&project.as_str()) && urns.contains(&user.as_str()), "{urns:?}");
    assert!(!urns.contains(&org.as_str()));
    assert_eq!(degraded.unavailable.len(), 1, "{degraded:?}");
    assert_eq!(degraded.unavailable[0].domain, "org:acme");
    assert!(degraded.unavailable[0].message.contains("unreachable"), "{}", degraded.unavailable[0].message);

    // A capture to org fails, says why, and lands nowhere else.
    // What each other domain holds; not its size on disk, which the background recording of
    // the recalls above may still be changing.
    let counts = |service: &kenning_engine::MemoryService| {
        let mut domains = serde_json::to_value(service.status().unwrap().domains.iter().filter(|d| d.domain != "org:acme").collect::<Vec<_>>()).unwrap();
        for domain in domains.as_array_mut().unwrap() {
            domain.as_object_mut().unwrap().remove("size_bytes");
        }
        domains
    };
    let status_before = counts(&service);
    let input = CaptureInput { content: "Rollbacks need a second approver.".to_owned(), ..CaptureInput::default() };
    match service.capture(input, Some("org")) {
        Err(kenning_engine::Error::Unavailable(message)) => assert!(message.contains("unreachable"), "{message}"),
        other => panic!("expected the org domain to be unavailable, got {other:?}"),
    }
    let status_after = counts(&service);
    assert_eq!(status_before, status_after, "the failed capture was written to another domain");

    relay.up();
    let recovered = recall(&service, "deploys");
    assert!(recovered.unavailable.is_empty(), "{recovered:?}");
    assert!(recovered.results.iter().any(|hit| hit.urn == org), "{recovered:?}");
    let input = CaptureInput { content: "Rollbacks need a second approver.".to_owned(), ..CaptureInput::default() };
    assert!(service.capture(input, Some("org")).unwrap().created);
    let _ = SearchFilter::active();
}
