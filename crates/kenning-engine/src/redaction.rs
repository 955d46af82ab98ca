//! The one door every write goes through on its way to a store: [`redact`] replaces the secrets
//! in every string field of what is about to be written (see [`kenning_core::secrets`]) and
//! reports them for the response.
//!
//! Every write path calls it on its input before validating or storing anything: captures
//! (the MCP tools, hooks, test runs, consolidation's principles), updates and their reasons,
//! forget and restore reasons, promotions, imports with their whole history, decisions and their
//! updates (PR links included), signals, outcomes, workflows, protocol answers and the
//! resolution of contradictions. Redacting before validation keeps a tag's or a key's original
//! case for the rules that need it, and the stored text, its hash for duplicates and its vector
//! all come from the redacted text.

use kenning_core::secrets::{Redact, redact_record};

use crate::views::RedactionView;

/// Replaces the secrets in every string field of `record` and says what was replaced.
pub(crate) fn redact(record: &mut (impl Redact + ?Sized)) -> Vec<RedactionView> {
    redact_record(record).iter().map(RedactionView::from).collect()
}
