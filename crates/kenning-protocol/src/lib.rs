//! Guided protocols: procedures written in YAML that walk an agent through a task one question
//! at a time (seed 002's Membrane runner), asking for exactly the answers needed and writing
//! linked memories only when the dialogue completes.
//!
//! - [`model`] is the file format; [`load`] reads files with the position of every node
//!   (`serde-saphyr`) and refuses, naming file, line and field, whatever cannot run: unknown
//!   fields and step types, missing fields, targets that do not exist, loops among the steps
//!   and protocols that call themselves. [`load::Library`] holds the shipped protocols
//!   (compiled in) and those of folders loaded over them, a file replacing a shipped protocol
//!   of the same name.
//! - [`machine`] runs a [`machine::Session`]: ask (typed answers checked by [`answer`]),
//!   query, branch (`if`/`then`/`else` and `on`/`cases`), call_protocol (a call stack; the
//!   callee's `returns` come back to the caller), create and update (added to the session's
//!   plan, written by the caller at completion).
//! - [`template`] renders `{var}`, `{var.field}` and the filters slugify, truncate, timestamp,
//!   format_list and count.
//!
//! The crate does no I/O except reading protocol folders in [`load::Library::load_dir`]; the
//! store, recall and the clock come from its caller.

pub mod answer;
pub mod load;
pub mod machine;
pub mod model;
pub mod template;

pub use load::{Library, LoadError, Loaded};
pub use machine::{MachineError, Plan, Prompt, Session, World};
