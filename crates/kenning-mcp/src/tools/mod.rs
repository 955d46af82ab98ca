//! Toolsets: each is one `#[tool_router]` block on [`crate::KenningServer`].

pub mod decisions;
pub mod docs;
pub mod dynamics;
pub mod memory;
pub mod org;
pub mod protocols;
pub mod repo;
pub mod sync;
pub mod test;
pub mod workflows;
