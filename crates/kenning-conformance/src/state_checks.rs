//! The checks of the [`StateStore`] contract, reached through [`kenning_core::MemoryStore::state`].
//! Each opens its own stores from the factory and panics on the first violation.

use chrono::SubsecRound;
use kenning_core::Error;
use kenning_core::state::{StateKind, StateRecord, StateStore};

use crate::MakeStore;
use crate::fixtures::at;

/// Times are kept to the microsecond, so the records are made with such times.
fn record(kind: StateKind, id: &str, revision: u64, minutes: i64, body: &str) -> StateRecord {
    StateRecord { kind, id: id.to_owned(), revision, updated_at: at(minutes).trunc_subsecs(6), body: body.to_owned(), subjects: Vec::new() }
}

fn about(kind: StateKind, id: &str, revision: u64, minutes: i64, subjects: &[&str]) -> StateRecord {
    StateRecord { subjects: subjects.iter().map(|subject| (*subject).to_owned()).collect(), ..record(kind, id, revision, minutes, id) }
}

fn ids(records: &[StateRecord]) -> Vec<(&str, u64)> {
    records.iter().map(|record| (record.id.as_str(), record.revision)).collect()
}

fn with_state(make: MakeStore, check: impl FnOnce(&dyn StateStore)) {
    let store = make();
    let state = store.state().expect("a backend run through the state checks keeps working state");
    check(state);
}

pub fn state_put_get_round_trip(make: MakeStore) {
    with_state(make, |state| {
        let first = record(StateKind::Workflow, "wf_1", 1, 0, r#"{"name":"ship"}"#);
        state.put_state(&first).unwrap();
        assert_eq!(state.get_state(StateKind::Workflow, "wf_1").unwrap(), Some(first.clone()));
        assert_eq!(state.get_state(StateKind::ProtocolSession, "wf_1").unwrap(), None, "kinds have their own ids");
        let run = record(StateKind::ConsolidationRun, "wf_1", 1, 1, r#"{"status":"running"}"#);
        state.put_state(&run).unwrap();
        assert_eq!(state.get_state(StateKind::ConsolidationRun, "wf_1").unwrap(), Some(run), "every kind is kept");
        assert_eq!(state.get_state(StateKind::Workflow, "wf_2").unwrap(), None);
        let second = record(StateKind::Workflow, "wf_1", 2, 5, r#"{"name":"ship","step":"done"}"#);
        state.put_state(&second).unwrap();
        assert_eq!(state.get_state(StateKind::Workflow, "wf_1").unwrap(), Some(second));
    });
}

pub fn state_put_is_compare_and_swap(make: MakeStore) {
    with_state(make, |state| {
        state.put_state(&record(StateKind::Workflow, "wf_1", 1, 0, "a")).unwrap();
        assert!(
            matches!(state.put_state(&record(StateKind::Workflow, "wf_1", 1, 1, "b")), Err(Error::Conflict { .. })),
            "creating an existing record is a conflict"
        );
        state.put_state(&record(StateKind::Workflow, "wf_1", 2, 2, "c")).unwrap();
        assert!(
            matches!(state.put_state(&record(StateKind::Workflow, "wf_1", 2, 3, "d")), Err(Error::Conflict { .. })),
            "a writer that read revision 1 loses to the one that wrote revision 2"
        );
        assert!(matches!(state.put_state(&record(StateKind::Workflow, "wf_1", 4, 3, "e")), Err(Error::Conflict { .. })));
        assert!(
            matches!(state.put_state(&record(StateKind::Workflow, "wf_9", 2, 3, "f")), Err(Error::NotFound(_))),
            "replacing a record that does not exist"
        );
        assert_eq!(state.get_state(StateKind::Workflow, "wf_1").unwrap().unwrap().body, "c", "refused writes change nothing");
    });
}

pub fn state_put_many_checks_each_record_in_order(make: MakeStore) {
    with_state(make, |state| {
        assert!(state.put_states(&[]).unwrap().is_empty());
        state.put_state(&record(StateKind::Workflow, "wf_1", 1, 0, "a")).unwrap();
        let written = state
            .put_states(&[
                record(StateKind::Contradiction, "ct_1", 1, 1, "new"),
                record(StateKind::Contradiction, "ct_1", 2, 2, "its next revision"),
                record(StateKind::Workflow, "wf_1", 1, 3, "created again"),
                record(StateKind::Workflow, "wf_1", 3, 4, "a revision skipped"),
                record(StateKind::Workflow, "wf_9", 2, 5, "not there"),
                record(StateKind::Workflow, "wf_1", 2, 6, "b"),
            ])
            .unwrap();
        assert_eq!(written, [true, true, false, false, false, true], "each record is checked against what the ones before it wrote");
        assert_eq!(state.get_state(StateKind::Contradiction, "ct_1").unwrap().unwrap().body, "its next revision");
        let workflow = state.get_state(StateKind::Workflow, "wf_1").unwrap().unwrap();
        assert_eq!((workflow.revision, workflow.body.as_str()), (2, "b"), "refused records change nothing");
        assert_eq!(state.get_state(StateKind::Workflow, "wf_9").unwrap(), None);
    });
}

pub fn state_lists_newest_first_per_kind(make: MakeStore) {
    with_state(make, |state| {
        for (n, minutes) in [(1, 10), (2, 30), (3, 20), (4, 30)] {
            state.put_state(&record(StateKind::Workflow, &format!("wf_{n}"), 1, minutes, "{}")).unwrap();
        }
        state.put_state(&record(StateKind::ProtocolSession, "ps_1", 1, 40, "{}")).unwrap();
        let ids = |offset, limit| -> Vec<String> {
            state.list_state(StateKind::Workflow, offset, limit).unwrap().into_iter().map(|record| record.id).collect()
        };
        assert_eq!(ids(0, 10), ["wf_2", "wf_4", "wf_3", "wf_1"], "newest first, ties by id");
        assert_eq!(ids(1, 2), ["wf_4", "wf_3"]);
        assert!(ids(4, 10).is_empty());
        state.put_state(&record(StateKind::Workflow, "wf_1", 2, 50, "{}")).unwrap();
        assert_eq!(ids(0, 1), ["wf_1"], "an update moves a record to the front");
        assert_eq!(state.list_state(StateKind::ProtocolSession, 0, 10).unwrap().len(), 1);
    });
}

pub fn state_delete_removes_one_record(make: MakeStore) {
    with_state(make, |state| {
        state.put_state(&record(StateKind::ProtocolSession, "ps_1", 1, 0, "{}")).unwrap();
        state.put_state(&record(StateKind::ProtocolSession, "ps_2", 1, 0, "{}")).unwrap();
        assert!(state.delete_state(StateKind::ProtocolSession, "ps_1").unwrap());
        assert!(!state.delete_state(StateKind::ProtocolSession, "ps_1").unwrap());
        assert!(!state.delete_state(StateKind::Workflow, "ps_2").unwrap(), "another kind's id is another record");
        assert_eq!(state.get_state(StateKind::ProtocolSession, "ps_1").unwrap(), None);
        assert!(state.get_state(StateKind::ProtocolSession, "ps_2").unwrap().is_some());
        state.put_state(&record(StateKind::ProtocolSession, "ps_1", 1, 1, "again")).unwrap();
        assert_eq!(state.get_state(StateKind::ProtocolSession, "ps_1").unwrap().unwrap().body, "again", "a deleted id can be created anew");
    });
}

/// Every kind of state, contradictions included, is kept apart: one id under each kind is
/// three records, each read, listed, changed and deleted on its own.
pub fn state_every_kind_is_kept_apart(make: MakeStore) {
    with_state(make, |state| {
        let kinds = [StateKind::Workflow, StateKind::ProtocolSession, StateKind::Contradiction];
        for (minutes, kind) in kinds.iter().enumerate() {
            state.put_state(&record(*kind, "same_1", 1, minutes as i64, kind.as_str())).unwrap();
        }
        for kind in kinds {
            assert_eq!(state.get_state(kind, "same_1").unwrap().unwrap().body, kind.as_str());
            let listed = state.list_state(kind, 0, 10).unwrap();
            assert_eq!(listed.iter().map(|record| record.body.as_str()).collect::<Vec<_>>(), [kind.as_str()]);
        }
        let update = record(StateKind::Contradiction, "same_1", 2, 9, r#"{"state":"resolved"}"#);
        state.put_state(&update).unwrap();
        assert_eq!(state.get_state(StateKind::Contradiction, "same_1").unwrap(), Some(update));
        assert!(matches!(state.put_state(&record(StateKind::Contradiction, "same_1", 2, 10, "stale")), Err(Error::Conflict { .. })));
        assert_eq!(state.get_state(StateKind::Workflow, "same_1").unwrap().unwrap().revision, 1, "another kind's record did not move");
        assert!(state.delete_state(StateKind::Contradiction, "same_1").unwrap());
        assert!(state.get_state(StateKind::ProtocolSession, "same_1").unwrap().is_some());
    });
}

/// A record is found by each of its subjects as last written, newest first, within its kind,
/// once however many of them are asked about: a later revision's subjects replace the earlier
/// ones, a refused write changes none, and a deleted record is found by none.
pub fn state_records_are_found_by_their_subjects(make: MakeStore) {
    with_state(make, |state| {
        let kind = StateKind::Contradiction;
        let first = about(kind, "ct_1", 1, 0, &["urn:m1", "urn:m2"]);
        state.put_state(&first).unwrap();
        state.put_state(&about(kind, "ct_2", 1, 1, &["urn:m2", "urn:m3"])).unwrap();
        state.put_state(&about(StateKind::Workflow, "wf_1", 1, 2, &["urn:m2"])).unwrap();
        assert_eq!(ids(&state.state_about(kind, &["urn:m2"]).unwrap()), [("ct_2", 1), ("ct_1", 1)], "newest first");
        assert_eq!(state.state_about(kind, &["urn:m1"]).unwrap(), [first.clone()], "found as written, subjects and all");
        assert_eq!(state.get_state(kind, "ct_1").unwrap(), Some(first.clone()));
        assert_eq!(state.list_state(kind, 0, 10).unwrap()[1], first);
        assert!(state.state_about(kind, &["urn:m9"]).unwrap().is_empty());
        assert!(state.state_about(kind, &["urn:m"]).unwrap().is_empty(), "a subject is matched whole");
        assert_eq!(ids(&state.state_about(StateKind::Workflow, &["urn:m2"]).unwrap()), [("wf_1", 1)], "each kind is found apart");
        assert_eq!(ids(&state.state_about(kind, &["urn:m1", "urn:m3", "urn:m9"]).unwrap()), [("ct_2", 1), ("ct_1", 1)], "any of several subjects");
        assert_eq!(ids(&state.state_about(kind, &["urn:m1", "urn:m2", "urn:m2"]).unwrap()), [("ct_2", 1), ("ct_1", 1)], "each record once");
        assert!(state.state_about(kind, &[]).unwrap().is_empty());

        state.put_state(&about(kind, "ct_1", 2, 3, &["urn:m1", "urn:m4"])).unwrap();
        assert_eq!(ids(&state.state_about(kind, &["urn:m2"]).unwrap()), [("ct_2", 1)], "a later revision's subjects replace the earlier");
        assert_eq!(ids(&state.state_about(kind, &["urn:m4"]).unwrap()), [("ct_1", 2)]);
        assert_eq!(ids(&state.state_about(kind, &["urn:m1"]).unwrap()), [("ct_1", 2)]);
        state.put_state(&about(kind, "ct_1", 3, 4, &["urn:m1", "urn:m4"])).unwrap();
        assert_eq!(ids(&state.state_about(kind, &["urn:m4"]).unwrap()), [("ct_1", 3)], "the same subjects again");

        assert!(matches!(state.put_state(&about(kind, "ct_2", 1, 5, &["urn:m7"])), Err(Error::Conflict { .. })));
        assert!(state.state_about(kind, &["urn:m7"]).unwrap().is_empty(), "a refused write changes no subject");
        let written = state.put_states(&[about(kind, "ct_3", 1, 6, &["urn:m5"]), about(kind, "ct_3", 2, 7, &["urn:m5", "urn:m6"]), about(kind, "ct_2", 5, 8, &["urn:m8"])]).unwrap();
        assert_eq!(written, [true, true, false]);
        assert_eq!(ids(&state.state_about(kind, &["urn:m6"]).unwrap()), [("ct_3", 2)]);
        assert_eq!(ids(&state.state_about(kind, &["urn:m5"]).unwrap()), [("ct_3", 2)]);
        assert!(state.state_about(kind, &["urn:m8"]).unwrap().is_empty());

        assert!(state.delete_state(kind, "ct_1").unwrap());
        assert!(state.state_about(kind, &["urn:m1"]).unwrap().is_empty(), "a deleted record is found by none of its subjects");
        state.put_state(&about(kind, "ct_1", 1, 9, &["urn:m3"])).unwrap();
        assert!(state.state_about(kind, &["urn:m4"]).unwrap().is_empty(), "a record made anew has only its new subjects");
        assert_eq!(ids(&state.state_about(kind, &["urn:m3"]).unwrap()), [("ct_1", 1), ("ct_2", 1)]);
    });
}
