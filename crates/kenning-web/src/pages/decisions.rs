//! Decisions: the list by status, module and text, and one decision with its signals, outcome,
//! similar decisions and the antipatterns it matches.

use std::fmt::Write;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::response::Html;

use kenning_engine::{ChainAnalysis, DecisionQuery};

use super::blocking;
use crate::Web;
use crate::error::Error;
use crate::guard::Viewer;
use crate::html::{self, Section, badge, escape, percent, stated_percent, time};
use crate::params::{Params, url};

const PAGE_SIZE: usize = 20;
const SIGNALS_PER_PAGE: usize = 20;
const STATUSES: [&str; 5] = ["pending", "executed", "completed", "failed", "reworked"];

fn decision_href(id: &str) -> String {
    url("/decision", &[("id", id)])
}

/// `GET /decisions`.
pub(crate) async fn list(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Html<String>, Error> {
    let params = Params::query(raw)?;
    let text = |name: &str| params.text(name).unwrap_or_default().to_owned();
    let (status, module, query_text, domain) = (text("status"), text("module"), text("q"), text("domain"));
    let limit = params.number("limit", 1, 100)?.unwrap_or(PAGE_SIZE);
    let cursor = params.text("cursor").map(str::to_owned);
    let query = DecisionQuery {
        text: params.text("q").map(str::to_owned),
        module: params.text("module").map(str::to_owned),
        status: params.text("status").map(str::to_owned),
        domain: params.text("domain").map(str::to_owned),
        cursor: cursor.clone(),
        limit: Some(limit),
        ..DecisionQuery::default()
    };
    let decisions = viewer.decisions.clone();
    let page = blocking(move || decisions.query(query)).await?;

    let option = |value: &str| (value.to_owned(), value.to_owned());
    let mut statuses = vec![(String::new(), "any status".to_owned())];
    statuses.extend(STATUSES.iter().map(|status| option(status)));
    let mut modules = vec![(String::new(), "any module".to_owned())];
    modules.extend(viewer.decisions.modules().names().iter().map(|module| option(module)));
    let mut domains = vec![(String::new(), "default domain".to_owned())];
    domains.extend(viewer.decisions.domains().map(|domain| option(&domain.to_string())));
    let mut body = format!(
        "<h1>Decisions</h1>\n<form method=\"get\" action=\"/decisions\" class=\"search\" role=\"search\">\n\
         <label class=\"grow\">Text <input type=\"search\" name=\"q\" value=\"{}\" data-shortcut=\"/\"></label>\n{}\n{}\n{}\n\
         <button type=\"submit\">Show</button>\n</form>\n",
        escape(&query_text),
        html::select("status", "Status", &statuses, Some(&status)),
        html::select("module", "Module", &modules, Some(&module)),
        html::select("domain", "Domain", &domains, Some(&domain)),
    );
    if page.decisions.is_empty() {
        body.push_str("<p class=\"empty\">No decisions match.</p>\n");
    } else {
        body.push_str(
            "<div class=\"scroll\"><table class=\"list\"><thead><tr><th scope=\"col\">Decision</th><th scope=\"col\">Module</th>\
             <th scope=\"col\">Status</th><th scope=\"col\" class=\"number\">Confidence</th><th scope=\"col\">Outcome</th>\
             <th scope=\"col\" class=\"number\">Signals</th><th scope=\"col\">Made</th></tr></thead><tbody>\n",
        );
        for decision in &page.decisions {
            let outcome = match (&decision.outcome, decision.score) {
                (Some(outcome), Some(score)) => format!("{} {:.2}", badge(outcome), score),
                _ => "<span class=\"muted\">none yet</span>".to_owned(),
            };
            let _ = writeln!(
                body,
                "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"number\">{}</td><td>{outcome}</td><td class=\"number\">{}</td><td>{}</td></tr>",
                escape(&decision_href(&decision.decision_id)),
                escape(&decision.statement),
                escape(&decision.module),
                badge(&decision.status),
                stated_percent(decision.confidence),
                decision.signal_count,
                time(&decision.created_at)
            );
        }
        body.push_str("</tbody></table></div>\n");
    }
    let limit_text = limit.to_string();
    let mut pairs = vec![("q", query_text.as_str()), ("status", &status), ("module", &module), ("domain", &domain)];
    if limit != PAGE_SIZE {
        pairs.push(("limit", &limit_text));
    }
    let first = cursor.is_some().then(|| url("/decisions", &pairs));
    let next = page.next_cursor.as_deref().map(|next| {
        let mut pairs = pairs.clone();
        pairs.push(("cursor", next));
        url("/decisions", &pairs)
    });
    body.push_str(&html::pager(&format!("{} of {} decisions in {}", page.decisions.len(), page.total, page.domain), first, next));
    Ok(html::page(&web, &viewer, Section::Decisions, "Decisions", &body))
}

/// `GET /decision?id=dec_…`.
pub(crate) async fn detail(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Html<String>, Error> {
    let params = Params::query(raw)?;
    let id = params.required("id", "open a decision from the list, or pass its id as ?id=dec_…")?.to_owned();
    let offset = params.number("signals", 0, 1_000_000)?.unwrap_or(0);
    let decisions = viewer.decisions.clone();
    let detail = blocking(move || decisions.get(&id, ChainAnalysis::Included)).await?;
    let decision = &detail.decision;
    let mut body = format!("<h1>{} {}</h1>\n", escape(&decision.statement), badge(&decision.status));
    let _ = writeln!(
        body,
        "<p class=\"lead\">Module <strong>{}</strong> · stated confidence <strong>{}</strong> (now {}) · risk {} · estimated success <strong>{}</strong></p>",
        escape(&decision.module),
        stated_percent(decision.confidence),
        stated_percent(decision.current_confidence),
        escape(&decision.risk_level),
        percent(detail.estimated_success)
    );
    body.push_str("<dl class=\"fields\">\n");
    let mut row = |name: &str, value: String| {
        let _ = writeln!(body, "<dt>{name}</dt><dd>{value}</dd>");
    };
    row("Id", format!("<code>{}</code>", escape(&decision.decision_id)));
    row("Memory", format!("<a href=\"{}\"><code>{}</code></a>", escape(&url("/memory", &[("urn", &decision.urn)])), escape(&decision.urn)));
    row("Alternatives", list_items(&decision.alternatives));
    if !decision.assumptions.is_empty() {
        row("Assumptions", list_items(&decision.assumptions));
    }
    if let Some(rationale) = &decision.rationale {
        row("Rationale", escape(rationale));
    }
    let files: Vec<String> = decision.file_path.iter().chain(&decision.related_files).cloned().collect();
    if !files.is_empty() {
        row("Files", list_items(&files));
    }
    if let Some(pr) = &decision.linked_pr {
        row("Pull request", escape(pr));
    }
    if let Some(commit) = &decision.linked_commit {
        row("Commit", format!("<code>{}</code>", escape(commit)));
    }
    row("Made", format!("{} by {}", time(&decision.created_at), escape(&decision.created_by)));
    row("Updated", time(&decision.updated_at));
    body.push_str("</dl>\n");
    if !decision.notes.is_empty() {
        body.push_str("<section><h2>Notes</h2><ul>\n");
        for note in &decision.notes {
            let _ = writeln!(body, "<li>{} {}</li>", time(&note.at), escape(&note.text));
        }
        body.push_str("</ul></section>\n");
    }
    body.push_str("<section><h2>Signals</h2>\n");
    if decision.signals.is_empty() {
        body.push_str("<p class=\"empty\">No signals recorded.</p>\n");
    } else {
        body.push_str("<div class=\"scroll\"><table class=\"list\"><thead><tr><th scope=\"col\">Signal</th><th scope=\"col\">Valence</th><th scope=\"col\">Description</th><th scope=\"col\">Recorded</th></tr></thead><tbody>\n");
        for signal in decision.signals.iter().skip(offset).take(SIGNALS_PER_PAGE) {
            let _ = writeln!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&signal.signal_type),
                badge(&signal.valence),
                escape(signal.description.as_deref().unwrap_or("")),
                time(&signal.recorded_at)
            );
        }
        body.push_str("</tbody></table></div>\n");
        let end = (offset + SIGNALS_PER_PAGE).min(decision.signals.len());
        let first = (offset > 0).then(|| decision_href(&decision.decision_id));
        let next = (end < decision.signals.len()).then(|| url("/decision", &[("id", &decision.decision_id), ("signals", &end.to_string())]));
        body.push_str(&html::pager(&format!("signals {}-{} of {}", offset + 1, end, decision.signals.len()), first, next));
    }
    body.push_str("</section>\n<section><h2>Outcome</h2>\n");
    match &decision.outcome {
        None => body.push_str("<p class=\"empty\">No outcome recorded yet.</p>\n"),
        Some(outcome) => {
            let _ = writeln!(body, "<p>{} with score <strong>{:.2}</strong>, {}</p>", badge(&outcome.final_status), outcome.final_score, time(&outcome.completed_at));
            if !outcome.lessons_learned.is_empty() {
                body.push_str("<h3>Lessons</h3><ul>\n");
                for (index, lesson) in outcome.lessons_learned.iter().enumerate() {
                    match outcome.lesson_urns.get(index) {
                        Some(urn) => {
                            let _ = writeln!(body, "<li><a href=\"{}\">{}</a></li>", escape(&url("/memory", &[("urn", urn)])), escape(lesson));
                        }
                        None => {
                            let _ = writeln!(body, "<li>{}</li>", escape(lesson));
                        }
                    }
                }
                body.push_str("</ul>\n");
            }
        }
    }
    body.push_str("</section>\n");
    if !detail.antipatterns_triggered.is_empty() {
        body.push_str("<section><h2>Antipatterns it matches</h2><ul class=\"warnings\">\n");
        for antipattern in &detail.antipatterns_triggered {
            let _ = writeln!(
                body,
                "<li>{} (succeeded {} of the time; similarity {:.2})</li>",
                escape(&antipattern.pattern),
                percent(antipattern.success_rate),
                antipattern.similarity
            );
        }
        body.push_str("</ul></section>\n");
    }
    body.push_str("<section><h2>Similar decisions</h2>\n");
    if detail.similar_decisions.is_empty() {
        body.push_str("<p class=\"empty\">None.</p>\n");
    }
    body.push_str("<ul>\n");
    for similar in &detail.similar_decisions {
        let _ = writeln!(
            body,
            "<li><a href=\"{}\">{}</a> · {} · {} · similarity {:.2}{}</li>",
            escape(&decision_href(&similar.decision_id)),
            escape(&similar.statement),
            escape(&similar.module),
            badge(&similar.status),
            similar.similarity,
            similar.success_rate.map(|rate| format!(" · success {}", percent(rate))).unwrap_or_default()
        );
    }
    body.push_str("</ul></section>\n");
    Ok(html::page(&web, &viewer, Section::Decisions, &decision.statement, &body))
}

fn list_items(items: &[String]) -> String {
    let items: String = items.iter().map(|item| format!("<li>{}</li>", escape(item))).collect();
    format!("<ul class=\"plain\">{items}</ul>")
}
