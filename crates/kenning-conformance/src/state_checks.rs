//! The checks of the [`StateStore`] contract, reached through [`kenning_core::MemoryStore::state`].
//! Each opens its own stores from the factory and panics on the first violation.

use chrono::SubsecRound;
use kenning_core::Error;
use kenning_core::state::{StateKind, StateRecord, StateStore};

use crate::MakeStore;
use crate::fixtures::at;

/// Times are kept to the microsecond, so the records are made with such times.
fn record(kind: StateKind, id: &str, revision: u64, minutes: i64, body: &str) -> StateRecord {
    StateRecord { kind, id: id.to_owned(), revision, updated_at: at(minutes).trunc_subsecs(6), body: body.to_owned() }
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
