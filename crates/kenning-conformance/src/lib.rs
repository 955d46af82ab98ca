//! The conformance suite every [`MemoryStore`] backend must pass.
//!
//! Each check in [`checks`] takes a factory that opens a fresh, empty store and exercises one
//! part of the trait's contract: round trips, duplicate detection, compare-and-swap with
//! history, every [`kenning_core::SearchFilter`] field in listing, text and vector search,
//! ranking, export and import, statistics, index rebuilds and access counts. [`fixtures`] builds
//! the memories and vectors they use.
//!
//! A backend's test binary instantiates the suite with [`conformance_tests!`], which expands to
//! one `#[test]` per check so that a failure names the rule that broke:
//!
//! ```ignore
//! kenning_conformance::conformance_tests!({
//!     let dir = tempfile::tempdir().unwrap();
//!     let next = std::sync::atomic::AtomicUsize::new(0);
//!     move || -> Box<dyn kenning_core::MemoryStore> {
//!         let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!         Box::new(MyStore::open(&dir.path().join(format!("{n}.db"))).unwrap())
//!     }
//! });
//! ```
//!
//! The expression is evaluated once per test, so the factory can own what its stores need,
//! such as a temporary directory, and it is dropped when the test ends.
//!
//! Durability and multi-process behaviour are part of the contract too, but checking them needs
//! processes to kill and spawn, so backends test those themselves.
//!
//! A backend that also keeps decisions runs [`decision_conformance_tests!`] the same way, with a
//! factory of [`DecisionStore`]s; [`decision_checks`] holds those checks. A backend that keeps
//! working state (its [`MemoryStore::state`] answers) runs [`state_conformance_tests!`] with a
//! factory of [`MemoryStore`]s; [`state_checks`] holds those checks.
//!
//! [`services`] is the one rule for the workspace's tests that need something from outside it
//! (a PostgreSQL server, a Python with the MCP SDK, the MiniLM model): skipped with a notice in a
//! plain `cargo test`, a failure under `scripts/test`.

use kenning_core::MemoryStore;
use kenning_core::decision::DecisionStore;

pub mod checks;
pub mod decision_checks;
pub mod fixtures;
pub mod services;
pub mod state_checks;

/// Opens a fresh, empty store each time it is called.
pub type MakeStore<'a> = &'a dyn Fn() -> Box<dyn MemoryStore>;

/// Opens a fresh, empty decision store each time it is called.
pub type MakeDecisionStore<'a> = &'a dyn Fn() -> Box<dyn DecisionStore>;

/// Expands to one `#[test]` per check of the [`kenning_core::state::StateStore`] contract, run
/// on the state of stores the factory opens (an `impl Fn() -> Box<dyn MemoryStore>`, as for
/// [`conformance_tests!`]).
#[macro_export]
macro_rules! state_conformance_tests {
    ($make:expr) => {
        $crate::state_conformance_tests!(@each $make;
            state_put_get_round_trip,
            state_put_is_compare_and_swap,
            state_put_many_checks_each_record_in_order,
            state_lists_newest_first_per_kind,
            state_delete_removes_one_record,
            state_every_kind_is_kept_apart,
            state_records_are_found_by_their_subjects,
        );
    };
    (@each $make:expr; $($check:ident),+ $(,)?) => {
        $(
            #[test]
            fn $check() {
                let make = $make;
                $crate::state_checks::$check(&make);
            }
        )+
    };
}

/// Expands to one `#[test]` per check of the [`DecisionStore`] contract; the argument is an
/// expression yielding an `impl Fn() -> Box<dyn DecisionStore>`, as for [`conformance_tests!`].
#[macro_export]
macro_rules! decision_conformance_tests {
    ($make:expr) => {
        $crate::decision_conformance_tests!(@each $make;
            decision_and_its_memory_are_written_together,
            update_decision_is_compare_and_swap,
            a_stale_memory_version_rolls_the_decision_back,
            list_and_count_filter_decisions,
            signals_are_kept_in_order_with_their_edges,
            an_outcome_stores_lessons_and_edges_once,
            outcomes_come_oldest_first_across_modules,
            the_causal_chain_survives_cycles,
            memory_links_are_mirrored_as_edges,
            skills_sync_inserts_replaces_and_rewires,
            purge_removes_decisions_with_their_signals_and_outcomes,
        );
    };
    (@each $make:expr; $($check:ident),+ $(,)?) => {
        $(
            #[test]
            fn $check() {
                let make = $make;
                $crate::decision_checks::$check(&make);
            }
        )+
    };
}

/// Expands to one `#[test]` per conformance check, named after the check. The argument is an
/// expression, evaluated at the start of each test, that yields an
/// `impl Fn() -> Box<dyn MemoryStore>` opening a fresh, empty store per call.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@each $make;
            insert_get_round_trip,
            duplicates_across_calls_are_not_written,
            duplicates_within_a_batch_are_not_written,
            active_holders_are_the_duplicates_insert_would_skip,
            a_large_batch_is_stored_as_a_small_one_is,
            forgotten_memories_do_not_block_a_new_capture,
            replace_is_compare_and_swap_with_history,
            replace_many_is_all_or_none,
            replace_many_applies_changes_in_order,
            replace_keeps_text_search_in_step,
            replace_keeps_or_drops_vectors,
            status_filter,
            filters_in_list_and_count,
            filters_in_search_text,
            filters_in_search_vector,
            provenance_filters_follow_updates_and_imports,
            search_text_survives_hostile_queries,
            search_text_ranks_best_first,
            neighbours_are_the_memories_captured_next_to_one,
            search_vector_ranks_by_cosine,
            search_vector_many_finds_what_search_vector_finds,
            vectors_of_other_models_are_never_compared,
            missing_and_set_embeddings,
            list_paginates_newest_first,
            export_import_is_lossless,
            import_skips_existing_unless_newer,
            import_never_duplicates_active_content,
            stats_counts,
            rebuild_index_restores_text_search,
            record_access_bumps_counts,
            replace_keeps_reads_recorded_since_the_caller_read,
            purge_removes_everything_an_author_wrote,
            change_mark_moves_on_writes_only,
        );
    };
    (@each $make:expr; $($check:ident),+ $(,)?) => {
        $(
            #[test]
            fn $check() {
                let make = $make;
                $crate::checks::$check(&make);
            }
        )+
    };
}
