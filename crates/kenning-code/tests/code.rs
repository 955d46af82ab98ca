//! The coding toolsets' machinery on small fixture repositories, one per language, copied
//! into temporary git repositories: confinement, the index and its refresh, the graph, search,
//! runners and their output.

mod code {
    pub mod common;
    mod confinement;
    mod docs;
    mod repo;
    mod runners;
}
