//! Memories: search (hybrid recall with its filters) or browse, one memory with its version
//! history and links, and forget / restore behind a confirmation form.

use std::fmt::Write;
use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};

use kenning_core::FieldError;
use kenning_engine::RecallRequest;
use kenning_engine::views::{HistoryView, MemoryView};

use super::{blocking, writable};
use crate::Web;
use crate::csrf;
use crate::error::Error;
use crate::guard::Viewer;
use crate::html::{self, Section, badge, escape, time};
use crate::params::{Params, url};

/// Results per page.
const PAGE_SIZE: usize = 20;
/// Superseded versions shown per page of a memory's history.
const VERSIONS_PER_PAGE: usize = 10;
const KINDS: [&str; 3] = ["episodic", "semantic", "procedural"];

/// The filters of the search form, as received (the engine checks them).
struct Filters {
    query: String,
    domain: String,
    namespace: String,
    kind: String,
    tags: String,
    since: String,
    until: String,
    forgotten: bool,
}

impl Filters {
    fn read(params: &Params) -> Filters {
        let text = |name: &str| params.text(name).unwrap_or_default().to_owned();
        Filters {
            query: text("q"),
            domain: text("domain"),
            namespace: text("namespace"),
            kind: text("kind"),
            tags: params.list("tag").join(", "),
            since: text("since"),
            until: text("until"),
            forgotten: params.flag("forgotten"),
        }
    }

    fn pairs(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("q", &self.query),
            ("domain", &self.domain),
            ("namespace", &self.namespace),
            ("kind", &self.kind),
            ("tag", &self.tags),
            ("since", &self.since),
            ("until", &self.until),
            ("forgotten", if self.forgotten { "1" } else { "" }),
        ]
    }

    fn request(&self, params: &Params, cursor: Option<String>, limit: usize) -> RecallRequest {
        RecallRequest {
            query: self.query.clone(),
            limit: Some(limit),
            cursor,
            kinds: params.list("kind"),
            namespaces: params.list("namespace"),
            tags: params.list("tag"),
            domains: params.list("domain"),
            since: params.text("since").map(str::to_owned),
            until: params.text("until").map(str::to_owned),
            ..RecallRequest::default()
        }
    }

    fn form(&self, viewer: &Viewer) -> String {
        let mut domains = vec![(String::new(), "every domain".to_owned())];
        domains.extend(viewer.memory.domains().map(|domain| (domain.to_string(), domain.to_string())));
        let mut kinds = vec![(String::new(), "any kind".to_owned())];
        kinds.extend(KINDS.iter().map(|kind| ((*kind).to_owned(), (*kind).to_owned())));
        let mut namespaces = String::from("<datalist id=\"namespaces\">");
        for namespace in kenning_core::BUILT_IN_NAMESPACES {
            let _ = write!(namespaces, "<option value=\"{namespace}\">");
        }
        namespaces.push_str("</datalist>");
        format!(
            "<form method=\"get\" action=\"/memories\" class=\"search\" role=\"search\">\n\
             <label class=\"grow\">Search <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"what are you looking for? (press /)\" data-shortcut=\"/\"></label>\n\
             <details{}><summary>Filters</summary><div class=\"filters\">\n{}\n\
             <label>Namespace <input name=\"namespace\" list=\"namespaces\" value=\"{}\" size=\"12\"></label>{namespaces}\n{}\n\
             <label>Tags <input name=\"tag\" value=\"{}\" placeholder=\"comma separated\" size=\"14\"></label>\n\
             <label>Since <input type=\"date\" name=\"since\" value=\"{}\"></label>\n\
             <label>Until <input type=\"date\" name=\"until\" value=\"{}\"></label>\n\
             <label class=\"check\"><input type=\"checkbox\" name=\"forgotten\" value=\"1\"{}> forgotten too (browsing)</label>\n\
             </div></details>\n<button type=\"submit\">Search</button>\n</form>\n",
            escape(&self.query),
            if self.domain.is_empty() && self.namespace.is_empty() && self.kind.is_empty() && self.tags.is_empty() && self.since.is_empty() && self.until.is_empty() && !self.forgotten { "" } else { " open" },
            html::select("domain", "Domain", &domains, Some(&self.domain)),
            escape(&self.namespace),
            html::select("kind", "Kind", &kinds, Some(&self.kind)),
            escape(&self.tags),
            escape(&self.since),
            escape(&self.until),
            if self.forgotten { " checked" } else { "" },
        )
    }
}

fn memory_href(urn: &str) -> String {
    url("/memory", &[("urn", urn)])
}

/// `GET /memories`: recall when there is a query, else the newest memories of one domain.
pub(crate) async fn search(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Html<String>, Error> {
    let params = Params::query(raw)?;
    let filters = Filters::read(&params);
    let limit = params.number("limit", 1, 100)?.unwrap_or(PAGE_SIZE);
    let cursor = params.text("cursor").map(str::to_owned);
    let request = filters.request(&params, cursor.clone(), limit);
    let mut body = String::from("<h1>Memories</h1>\n");
    body.push_str(&filters.form(&viewer));
    let mut pairs = filters.pairs();
    let limit_text = limit.to_string();
    if limit != PAGE_SIZE {
        pairs.push(("limit", &limit_text));
    }
    let first = cursor.is_some().then(|| url("/memories", &pairs));
    if filters.query.is_empty() {
        let memory = viewer.memory.clone();
        let forgotten = filters.forgotten;
        let page = blocking(move || memory.browse(request, forgotten)).await?;
        let _ = writeln!(body, "<h2 class=\"sub\">Newest in {}</h2>", escape(&page.uri));
        if page.memories.is_empty() {
            body.push_str("<p class=\"empty\">No memories match.</p>\n");
        }
        body.push_str("<ol class=\"results\">\n");
        for memory in &page.memories {
            let _ = writeln!(
                body,
                "<li><article><h3><a href=\"{}\">{}</a></h3><p class=\"meta\">{} · {} · {}{}</p></article></li>",
                escape(&memory_href(&memory.urn)),
                escape(&memory.title),
                escape(&memory.namespace),
                escape(&memory.kind),
                time(&memory.occurred_at),
                if memory.status == "active" { String::new() } else { format!(" {}", badge(&memory.status)) }
            );
        }
        body.push_str("</ol>\n");
        let next = page.next_cursor.as_deref().map(|next| with_cursor(&pairs, next));
        body.push_str(&html::pager(&format!("{} of {} memories", page.memories.len(), page.total), first, next));
    } else {
        let memory = viewer.memory.clone();
        let page = blocking(move || memory.recall(request)).await?;
        let _ = writeln!(body, "<h2 class=\"sub\">Results <span class=\"muted\">({} search)</span></h2>", escape(&page.mode));
        for unavailable in &page.unavailable {
            let _ = writeln!(body, "<p class=\"warning\">{} could not be searched: {}</p>", escape(&unavailable.domain), escape(&unavailable.message));
        }
        if page.results.is_empty() {
            body.push_str("<p class=\"empty\">Nothing found. Try other words or fewer filters.</p>\n");
        }
        body.push_str("<ol class=\"results\">\n");
        for hit in &page.results {
            let tags: String = hit.tags.iter().map(|tag| format!(" <span class=\"tag\">{}</span>", escape(tag))).collect();
            let _ = writeln!(
                body,
                "<li><article><h3><a href=\"{}\">{}</a></h3><p class=\"meta\">{} · {} · {} · score {:.2} · {}{tags}</p>{}</article></li>",
                escape(&memory_href(&hit.urn)),
                escape(&hit.title),
                escape(&hit.domain),
                escape(&hit.namespace),
                escape(&hit.kind),
                hit.score,
                time(&hit.occurred_at),
                hit.snippet.as_deref().map(|snippet| format!("<p class=\"snippet\">{}</p>", escape(snippet))).unwrap_or_default()
            );
        }
        body.push_str("</ol>\n");
        let next = page.next_cursor.as_deref().map(|next| with_cursor(&pairs, next));
        let shown = format!("{} results{}", page.results.len(), if page.truncated { " (cut to the token budget)" } else { "" });
        body.push_str(&html::pager(&shown, first, next));
    }
    Ok(html::page(&web, &viewer, Section::Memories, "Memories", &body))
}

fn with_cursor(pairs: &[(&str, &str)], cursor: &str) -> String {
    let mut pairs = pairs.to_vec();
    pairs.push(("cursor", cursor));
    url("/memories", &pairs)
}

/// `GET /memory?urn=…`: one memory, its links, metadata and version history.
pub(crate) async fn detail(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Html<String>, Error> {
    let params = Params::query(raw)?;
    let urn = params.required("urn", "open a memory from the search page, or pass its URN as ?urn=kenning://…")?.to_owned();
    let offset = params.number("versions", 0, 1_000_000)?.unwrap_or(0);
    let memory = viewer.memory.clone();
    let history: HistoryView = blocking(move || memory.history(&urn)).await?;
    let current = &history.current;
    let mut body = String::new();
    if let Some(done) = params.text("done") {
        let message = match done {
            "forgotten" => "Forgotten: recall no longer finds it. It can be restored.",
            "restored" => "Restored: recall finds it again.",
            _ => "Nothing had to change.",
        };
        let _ = writeln!(body, "<p class=\"notice\" role=\"status\">{}</p>", escape(message));
    }
    let _ = writeln!(body, "<h1>{} {}</h1>", escape(&current.title), badge(&current.status));
    body.push_str(&actions(&viewer, current));
    let _ = writeln!(body, "<pre class=\"content\">{}</pre>", escape(&current.content));
    body.push_str(&fields(current));
    if !current.links.is_empty() {
        body.push_str("<section><h2>Links</h2><ul>\n");
        for link in &current.links {
            let _ = writeln!(body, "<li>{} <a href=\"{}\"><code>{}</code></a></li>", escape(&link.relation), escape(&memory_href(&link.target)), escape(&link.target));
        }
        body.push_str("</ul></section>\n");
    }
    if !current.metadata.is_empty() {
        body.push_str("<section><h2>Metadata</h2><dl class=\"fields\">\n");
        for (key, value) in &current.metadata {
            let _ = writeln!(body, "<dt>{}</dt><dd>{}</dd>", escape(key), escape(value));
        }
        body.push_str("</dl></section>\n");
    }
    let _ = writeln!(body, "<section><h2>History</h2>");
    if history.versions.is_empty() {
        body.push_str("<p class=\"empty\">Never changed since it was captured.</p>\n");
    }
    body.push_str("<ol class=\"versions\">\n");
    for version in history.versions.iter().skip(offset).take(VERSIONS_PER_PAGE) {
        let _ = writeln!(
            body,
            "<li><details><summary>version {} · superseded {} · {}</summary><p>{} {}</p><pre class=\"content\">{}</pre></details></li>",
            version.version,
            time(&version.superseded_at),
            escape(&version.reason),
            escape(&version.memory.title),
            badge(&version.memory.status),
            escape(&version.memory.content)
        );
    }
    body.push_str("</ol>\n");
    let end = (offset + VERSIONS_PER_PAGE).min(history.versions.len());
    let first = (offset > 0).then(|| url("/memory", &[("urn", &history.urn)]));
    let next = (end < history.versions.len()).then(|| url("/memory", &[("urn", &history.urn), ("versions", &end.to_string())]));
    if first.is_some() || next.is_some() {
        body.push_str(&html::pager(&format!("versions {}-{} of {}", offset + 1, end, history.versions.len()), first, next));
    }
    body.push_str("</section>\n");
    Ok(html::page(&web, &viewer, Section::Memories, &current.title, &body))
}

fn fields(memory: &MemoryView) -> String {
    let mut out = String::from("<dl class=\"fields\">\n");
    let mut row = |name: &str, value: String| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{value}</dd>");
    };
    row("URN", format!("<code>{}</code>", escape(&memory.urn)));
    row("Domain", escape(&memory.domain));
    row("Namespace", escape(&memory.namespace));
    row("Kind", escape(&memory.kind));
    row("Tags", memory.tags.iter().map(|tag| format!("<span class=\"tag\">{}</span>", escape(tag))).collect::<Vec<_>>().join(" "));
    row("Source", escape(&memory.source));
    row("Confidence", format!("{:.2}", memory.confidence));
    row("Salience", format!("{:.2}", memory.salience));
    if let Some(author) = &memory.author {
        row("Author", escape(author));
    }
    row("Captured", time(&memory.created_at));
    row("Updated", time(&memory.updated_at));
    if let Some(event_time) = &memory.event_time {
        row("Happened", time(event_time));
    }
    row("Read", format!("{} times", memory.access_count));
    row("Version", memory.version.to_string());
    out.push_str("</dl>\n");
    out
}

/// The forget or restore button, leading to the confirmation page; none for a viewer who may
/// change nothing.
fn actions(viewer: &Viewer, memory: &MemoryView) -> String {
    if viewer.read_only {
        return String::new();
    }
    let (action, label) = if memory.status == "forgotten" { ("restore", "Restore…") } else { ("forget", "Forget…") };
    format!("<p class=\"actions\"><a class=\"button\" href=\"{}\">{label}</a></p>\n", escape(&url(&format!("/memory/{action}"), &[("urn", &memory.urn)])))
}

#[derive(Clone, Copy)]
enum Change {
    Forget,
    Restore,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Forget => "forget",
            Change::Restore => "restore",
        }
    }

    /// What a form token for this change of `urn` is bound to.
    fn form(self, urn: &str) -> String {
        format!("{}\n{urn}", self.name())
    }
}

/// The confirmation page, with the error of a refused submission when there is one.
fn confirmation(web: &Web, viewer: &Viewer, change: Change, memory: &MemoryView, reason: &str, error: Option<&FieldError>) -> Html<String> {
    let token = web.csrf.issue(&change.form(&memory.urn), viewer.subject(), html::now());
    let (title, explanation, button) = match change {
        Change::Forget => (
            "Forget this memory?",
            "Recall will no longer find it. Its record and history are kept, and it can be restored.",
            "Forget",
        ),
        Change::Restore => ("Restore this memory?", "Recall will find it again.", "Restore"),
    };
    let mut body = format!("<h1>{title}</h1>\n<p><strong>{}</strong> <code>{}</code></p>\n<p>{explanation}</p>\n", escape(&memory.title), escape(&memory.urn));
    if let Some(error) = error {
        let _ = writeln!(body, "<div class=\"error\" role=\"alert\">{}</div>", html::field_error(error));
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"/memory/{name}\" class=\"confirm\">\n\
         <input type=\"hidden\" name=\"urn\" value=\"{urn}\">\n<input type=\"hidden\" name=\"{field}\" value=\"{token}\">\n\
         <label>Reason (kept in the history) <input name=\"reason\" value=\"{reason}\" required autofocus size=\"40\"></label>\n\
         <div class=\"buttons\"><button type=\"submit\" class=\"{name}\">{button}</button> <a href=\"{back}\">Cancel</a></div>\n</form>\n",
        name = change.name(),
        urn = escape(&memory.urn),
        field = csrf::FIELD,
        token = escape(&token),
        reason = escape(reason),
        back = escape(&memory_href(&memory.urn)),
    );
    html::page(web, viewer, Section::Memories, title, &body)
}

async fn confirm(web: Arc<Web>, viewer: Viewer, raw: Option<String>, change: Change) -> Result<Html<String>, Error> {
    writable(&viewer)?;
    let params = Params::query(raw)?;
    let urn = params.required("urn", "open the memory first and use its button")?.to_owned();
    let memory = viewer.memory.clone();
    let view = blocking(move || memory.get(&urn)).await?;
    Ok(confirmation(&web, &viewer, change, &view, "", None))
}

pub(crate) async fn confirm_forget(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Html<String>, Error> {
    confirm(web, viewer, raw, Change::Forget).await
}

pub(crate) async fn confirm_restore(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, RawQuery(raw): RawQuery) -> Result<Html<String>, Error> {
    confirm(web, viewer, raw, Change::Restore).await
}

/// `POST /memory/forget` and `/memory/restore`: read-only switch, CSRF token, then the engine's
/// change, audited as the MCP tool of the same name; back to the memory on success, or the
/// confirmation page again naming the field at fault.
async fn apply(web: Arc<Web>, viewer: Viewer, body: Bytes, change: Change) -> Result<Response, Error> {
    writable(&viewer)?;
    let params = Params::parse(&body)?;
    let urn = params.required("urn", "open the memory first and use its button")?.to_owned();
    web.csrf.check(params.text(csrf::FIELD), &change.form(&urn), viewer.subject(), html::now())?;
    let reason = params.text("reason").unwrap_or_default().to_owned();
    let memory = viewer.memory.clone();
    let (target, why) = (urn.clone(), reason.clone());
    let result = blocking(move || match change {
        Change::Forget => memory.forget(&target, &why),
        Change::Restore => memory.restore(&target, &why),
    })
    .await;
    match result {
        Ok(outcome) => {
            let done = match (change, outcome.changed) {
                (_, false) => "unchanged",
                (Change::Forget, true) => "forgotten",
                (Change::Restore, true) => "restored",
            };
            Ok(Redirect::to(&url("/memory", &[("urn", &outcome.urn), ("done", done)])).into_response())
        }
        Err(Error::Invalid(field)) => {
            let memory = viewer.memory.clone();
            let view = blocking(move || memory.get(&urn)).await?;
            Ok((StatusCode::BAD_REQUEST, confirmation(&web, &viewer, change, &view, &reason, Some(&field))).into_response())
        }
        Err(other) => Err(other),
    }
}

pub(crate) async fn forget(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, body: Bytes) -> Result<Response, Error> {
    apply(web, viewer, body, Change::Forget).await
}

pub(crate) async fn restore(State(web): State<Arc<Web>>, Extension(viewer): Extension<Viewer>, body: Bytes) -> Result<Response, Error> {
    apply(web, viewer, body, Change::Restore).await
}
