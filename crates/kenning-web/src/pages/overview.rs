//! `/`: counts per domain, namespace and kind, the embedder and index health, and the
//! decisions by status.

use std::fmt::Write;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Html;

use kenning_engine::DecisionQuery;

use super::blocking;
use crate::Web;
use crate::error::Error;
use crate::guard::Viewer;
use crate::html::{self, Section, escape};
use crate::params::url;

const DECISION_STATUSES: [&str; 5] = ["pending", "executed", "completed", "failed", "reworked"];

pub(crate) async fn page(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>) -> Result<Html<String>, Error> {
    let memory = viewer.memory.clone();
    let status = blocking(move || memory.status()).await?;
    let decisions = viewer.decisions.clone();
    let by_status = blocking(move || {
        DECISION_STATUSES
            .iter()
            .map(|status| {
                let query = DecisionQuery { status: Some((*status).to_owned()), limit: Some(1), ..DecisionQuery::default() };
                decisions.query(query).map(|page| (*status, page.total))
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;

    let mut body = String::from("<h1>Overview</h1>\n");
    let _ = writeln!(
        body,
        "<p class=\"lead\"><strong>{}</strong> memories · search <strong>{}</strong>{} · captures go to <code>{}</code></p>",
        status.total_memories,
        escape(&status.search_mode),
        status.embedder.as_ref().map(|e| format!(" with <code>{}</code> ({} dimensions)", escape(&e.model), e.dimensions)).unwrap_or_default(),
        escape(&status.default_domain)
    );
    if status.notes.is_empty() {
        body.push_str("<p class=\"ok\">Index health: every full-text index is in step and every memory has a vector.</p>\n");
    } else {
        body.push_str("<section aria-labelledby=\"health\"><h2 id=\"health\">Index health</h2><ul class=\"notes\">\n");
        for note in &status.notes {
            let _ = writeln!(body, "<li>{}</li>", escape(note));
        }
        body.push_str("</ul></section>\n");
    }
    for domain in &status.domains {
        let _ = writeln!(body, "<section class=\"domain\"><h2>{}</h2>", escape(&domain.domain));
        let _ = writeln!(
            body,
            "<p>{} memories in a {} store at <code>{}</code>{}</p>",
            domain.total,
            escape(&domain.backend),
            escape(&domain.location),
            domain.size_bytes.map(|size| format!(" ({:.1} MB)", size as f64 / 1e6)).unwrap_or_default()
        );
        let health = if domain.index.text_index_ok { "in step".to_owned() } else { "out of step: run <code>kenning reindex</code>".to_owned() };
        let _ = writeln!(body, "<p>Full-text index {health}; {} memories without a vector.</p>", domain.index.missing_vectors);
        body.push_str("<div class=\"columns\">");
        for (heading, counts, parameter) in
            [("Status", &domain.by_status, ""), ("Namespace", &domain.by_namespace, "namespace"), ("Kind", &domain.by_kind, "kind")]
        {
            let _ = write!(body, "<table><caption>{heading}</caption><tbody>");
            for (name, count) in counts {
                let label = if parameter.is_empty() {
                    escape(name)
                } else {
                    let href = url("/memories", &[("domain", &domain.domain), (parameter, name)]);
                    format!("<a href=\"{}\">{}</a>", escape(&href), escape(name))
                };
                let _ = write!(body, "<tr><th scope=\"row\">{label}</th><td class=\"number\">{count}</td></tr>");
            }
            body.push_str("</tbody></table>");
        }
        body.push_str("</div>");
        for warning in &domain.warnings {
            let _ = writeln!(body, "<p class=\"warning\">{}</p>", escape(warning));
        }
        body.push_str("</section>\n");
    }
    body.push_str("<section><h2>Decisions</h2><table><caption>By status</caption><tbody>");
    for (status, total) in by_status {
        let href = url("/decisions", &[("status", status)]);
        let _ = write!(body, "<tr><th scope=\"row\"><a href=\"{}\">{status}</a></th><td class=\"number\">{total}</td></tr>", escape(&href));
    }
    body.push_str("</tbody></table></section>\n");
    Ok(html::page(&web, &viewer, Section::Overview, "Overview", &body))
}
