//! Human-readable output for the terminal.

use std::fmt::Write;

use kenning_engine::views::{CaptureOutcome, ChangeOutcome, HistoryView, MemoryView, RecallPage, StatusReport, SyncView};

pub fn capture(outcome: &CaptureOutcome) -> String {
    let mut out = format!(
        "{} {}\n  {}\n",
        if outcome.created { "captured" } else { "already known" },
        outcome.urn,
        outcome.title
    );
    for warning in &outcome.warnings {
        let _ = writeln!(out, "  note: {warning}");
    }
    out
}

pub fn recall(page: &RecallPage) -> String {
    let mut out = String::new();
    for domain in &page.unavailable {
        let _ = writeln!(out, "note: {} was left out: {}", domain.domain, domain.message);
    }
    for domain in &page.degraded {
        let _ = writeln!(out, "note: {}: {}", domain.domain, domain.message);
    }
    if page.results.is_empty() {
        out.push_str("no memories match\n");
        return out;
    }
    for hit in &page.results {
        let _ = writeln!(out, "{:>5.3}  {}  [{}/{}]", hit.score, hit.title, hit.namespace, hit.kind);
        let _ = writeln!(out, "       {}", hit.urn);
        if let Some(text) = hit.snippet.as_ref().or(hit.content.as_ref()) {
            for line in text.lines() {
                let _ = writeln!(out, "       {line}");
            }
        }
    }
    let _ = writeln!(out, "({} results, {} search, ~{} tokens{})", page.results.len(), page.mode, page.estimated_tokens, if page.truncated { ", cut to the token budget" } else { "" });
    if let Some(cursor) = &page.next_cursor {
        let _ = writeln!(out, "more: --cursor {cursor}");
    }
    out
}

pub fn memory(view: &MemoryView) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n{}\n", view.urn, view.title);
    let rows = [
        ("kind", view.kind.clone()),
        ("status", view.status.clone()),
        ("tags", view.tags.join(", ")),
        ("source", view.source.clone()),
        ("confidence", format!("{:.2}", view.confidence)),
        ("salience", format!("{:.2}", view.salience)),
        ("created", view.created_at.clone()),
        ("updated", view.updated_at.clone()),
        ("event time", view.event_time.clone().unwrap_or_default()),
        ("accessed", format!("{} times", view.access_count)),
        ("version", view.version.to_string()),
        ("author", view.author.clone().unwrap_or_default()),
    ];
    for (label, value) in rows.iter().filter(|(_, value)| !value.is_empty()) {
        let _ = writeln!(out, "{label:>11}  {value}");
    }
    for (key, value) in &view.metadata {
        let _ = writeln!(out, "{:>11}  {key}={value}", "meta");
    }
    for link in &view.links {
        let _ = writeln!(out, "{:>11}  {} {}", "link", link.relation, link.target);
    }
    let _ = writeln!(out, "\n{}", view.content);
    out
}

pub fn change(outcome: &ChangeOutcome) -> String {
    let mut out = if outcome.changed {
        format!("{} is now {} (version {})\n", outcome.urn, outcome.status, outcome.version)
    } else {
        format!("{} was already {}; nothing changed\n", outcome.urn, outcome.status)
    };
    for warning in &outcome.warnings {
        let _ = writeln!(out, "  note: {warning}");
    }
    out
}

pub fn history(view: &HistoryView) -> String {
    let mut out = format!("{}\n  v{} (current)  {}\n", view.urn, view.current.version, view.current.title);
    for version in &view.versions {
        let _ = writeln!(out, "  v{}  replaced {}  because: {}", version.version, version.superseded_at, version.reason);
        let _ = writeln!(out, "       {}", version.memory.title);
    }
    out
}

pub fn status(report: &StatusReport) -> String {
    let mut out = String::new();
    let embedder = match &report.embedder {
        Some(embedder) => format!("{} ({} dimensions)", embedder.model, embedder.dimensions),
        None => "none".to_owned(),
    };
    let _ = writeln!(out, "memories: {}   search: {}   embedder: {}", report.total_memories, report.search_mode, embedder);
    for domain in &report.domains {
        let active = domain.by_status.get("active").copied().unwrap_or(0);
        let _ = writeln!(out, "\n{}  ({} active of {}, {} at {})", domain.domain, active, domain.total, domain.backend, domain.location);
        for (namespace, count) in &domain.by_namespace {
            let _ = writeln!(out, "  {namespace:<16} {count:>7}");
        }
        let kinds: Vec<String> = domain.by_kind.iter().filter(|(_, count)| **count > 0).map(|(kind, count)| format!("{kind} {count}")).collect();
        if !kinds.is_empty() {
            let _ = writeln!(out, "  kinds: {}", kinds.join(", "));
        }
        let _ = writeln!(
            out,
            "  index: full-text {}, {} missing vectors",
            if domain.index.text_index_ok { "ok" } else { "OUT OF STEP" },
            domain.index.missing_vectors
        );
    }
    for note in &report.notes {
        let _ = writeln!(out, "\nnote: {note}");
    }
    out
}

pub fn sync(view: &SyncView) -> String {
    format!(
        "synced {} with {}: received {}, merged {}, sent {} ({} round{}); embedded {}\n",
        view.domain,
        view.remote,
        view.received,
        view.merged,
        view.sent,
        view.attempts,
        if view.attempts == 1 { "" } else { "s" },
        view.embedded
    )
}

pub(crate) fn purge(summary: &crate::PurgeSummary) -> String {
    let mut out = String::new();
    let verb = if summary.dry_run { "would remove" } else { "removed" };
    for domain in &summary.domains {
        let counts = &domain.counts;
        out.push_str(&format!(
            "{}: {verb} {} memories, {} versions, {} decisions, {} signals, {} outcomes, {} edges, {} vectors, {} workflows, {} contradictions\n",
            domain.domain,
            counts.memories,
            counts.versions,
            counts.decisions,
            counts.signals,
            counts.outcomes,
            counts.edges,
            counts.vectors,
            counts.workflows,
            counts.contradictions
        ));
    }
    if summary.dry_run {
        out.push_str(&format!("nothing was removed; run `kenning purge --author {} --yes` to remove it\n", summary.author));
    }
    out
}
