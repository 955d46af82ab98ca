//! `MemoryService::introspect`: the health of a domain's memory, in the shape of seed 001's
//! `memory_introspect`: counts by kind, how many are dormant, the links between memories, the
//! contradictions by state, and the consolidation runs.

use std::collections::BTreeMap;

use kenning_core::confidence::assess;
use kenning_core::state::StateKind;
use kenning_core::{SearchFilter, Status};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Result, check_interrupt};
use crate::service::MemoryService;

/// How many records introspection reads at a time while it assesses every active memory.
const SCAN_PAGE: usize = 1000;

/// One domain's memory at a glance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Introspection {
    pub domain: String,
    /// Active memories per kind: `episodic`, `semantic`, `procedural`.
    pub episodic: u64,
    pub semantic: u64,
    pub procedural: u64,
    /// Active memories whose confidence has decayed under the dormancy threshold.
    pub dormant: u64,
    /// Forgotten memories (kept with their history, out of recall).
    pub forgotten: u64,
    /// Links from active memories to other memories, in all.
    #[serde(rename = "causalLinks")]
    pub causal_links: u64,
    /// The same links per relation (`derived-from`, `supersedes`, `produced`, …).
    pub links_by_relation: BTreeMap<String, u64>,
    /// Active memories carrying supporting or contradicting evidence.
    pub reinforced: u64,
    pub contradicted: u64,
    /// The domain's contradictions by state.
    pub contradictions: crate::views::ContradictionCounts,
    /// When the newest completed consolidation run of the domain finished.
    #[serde(rename = "lastConsolidation", default, skip_serializing_if = "Option::is_none")]
    pub last_consolidation: Option<String>,
    /// Consolidation runs recorded in the domain, whatever their status.
    #[serde(rename = "totalConsolidationRuns")]
    pub total_consolidation_runs: u64,
}

impl MemoryService {
    /// Counts by kind and status, dormant memories (each active memory's confidence is assessed
    /// now, so this reads them all), links by relation and evidence, for `domain` or the default
    /// domain.
    pub fn introspect(&self, domain: Option<&str>) -> Result<Introspection> {
        let entry = match domain {
            Some(text) => self.resolve_domain("domain", text)?,
            None => &self.domain_stores()[0],
        };
        let stats = entry.store.stats()?;
        let kind = |name: &str| stats.by_kind.get(name).copied().unwrap_or(0);
        let mut introspection = Introspection {
            domain: entry.domain.to_string(),
            episodic: kind("episodic"),
            semantic: kind("semantic"),
            procedural: kind("procedural"),
            dormant: 0,
            forgotten: stats.by_status.get("forgotten").copied().unwrap_or(0),
            causal_links: 0,
            links_by_relation: BTreeMap::new(),
            reinforced: 0,
            contradicted: 0,
            last_consolidation: None,
            total_consolidation_runs: 0,
            contradictions: self.contradiction_counts(Some(&entry.domain.to_string()))?,
        };
        if let Some(state) = entry.store.state() {
            let mut offset = 0;
            loop {
                let page = state.list_state(StateKind::ConsolidationRun, offset, SCAN_PAGE)?;
                for record in &page {
                    introspection.total_consolidation_runs += 1;
                    let run = crate::consolidation::decode(record)?;
                    if run.status == "completed" && run.finished_at > introspection.last_consolidation {
                        introspection.last_consolidation = run.finished_at;
                    }
                }
                if page.len() < SCAN_PAGE {
                    break;
                }
                offset += page.len();
            }
        }
        let active = SearchFilter { status: Some(Status::Active), ..SearchFilter::default() };
        let now = self.now();
        let mut offset = 0;
        loop {
            check_interrupt()?;
            let page = entry.store.list(&active, offset, SCAN_PAGE)?;
            for memory in &page {
                if assess(memory, now, &self.decay).dormant {
                    introspection.dormant += 1;
                }
                for link in &memory.links {
                    introspection.causal_links += 1;
                    *introspection.links_by_relation.entry(link.relation.clone()).or_default() += 1;
                }
                let evidence = kenning_core::confidence::evidence_counts(&memory.metadata);
                introspection.reinforced += u64::from(evidence.supporting > 0);
                introspection.contradicted += u64::from(evidence.contradicting > 0);
            }
            if page.len() < SCAN_PAGE {
                break;
            }
            offset += page.len();
        }
        Ok(introspection)
    }
}
