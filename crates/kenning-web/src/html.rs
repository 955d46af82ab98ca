//! The page layout, escaping and small pieces of markup every page shares.

use std::fmt::Write;

use axum::response::Html;
use kenning_core::FieldError;

use crate::Web;
use crate::guard::Viewer;

/// Text made safe for HTML content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// The sections of the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Overview,
    Memories,
    Decisions,
    Calibration,
}

const SECTIONS: [(Section, &str, &str, &str); 4] = [
    (Section::Overview, "/", "Overview", "o"),
    (Section::Memories, "/memories", "Memories", "m"),
    (Section::Decisions, "/decisions", "Decisions", "d"),
    (Section::Calibration, "/calibration", "Calibration", "c"),
];

fn document(title: &str, header: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <title>{} · kenning</title>\n<link rel=\"stylesheet\" href=\"/assets/app.css\">\n\
         <link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">\n\
         <script src=\"/assets/app.js\" defer></script>\n</head>\n<body>\n\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\n{header}\
         <main id=\"main\" tabindex=\"-1\">\n{body}\n</main>\n</body>\n</html>\n",
        escape(title)
    )
}

/// A whole page: navigation (with access keys), the live-update notice, and the body.
pub(crate) fn page(web: &Web, viewer: &Viewer, section: Section, title: &str, body: &str) -> Html<String> {
    let mut header = String::from("<header class=\"top\">\n<a class=\"brand\" href=\"/\">kenning</a>\n<nav aria-label=\"Sections\"><ul>\n");
    for (which, href, label, key) in SECTIONS {
        let current = if which == section { " aria-current=\"page\"" } else { "" };
        let _ = writeln!(header, "<li><a href=\"{href}\" accesskey=\"{key}\"{current}>{label}</a></li>");
    }
    header.push_str("</ul></nav>\n<div class=\"who\">");
    if viewer.read_only {
        header.push_str("<span class=\"badge\" title=\"the server or the signed-in key is read-only: nothing can be changed here\">read-only</span> ");
    }
    if let Some(identity) = &viewer.identity {
        let token = web.csrf.issue("logout", viewer.subject(), now());
        let _ = write!(
            header,
            "<form method=\"post\" action=\"/logout\" class=\"inline\"><input type=\"hidden\" name=\"csrf_token\" value=\"{}\">\
             <span>{}</span> <button type=\"submit\">Sign out</button></form>",
            escape(&token),
            escape(identity)
        );
    }
    header.push_str("</div>\n<p id=\"live\" class=\"live\" role=\"status\" aria-live=\"polite\" hidden></p>\n</header>\n");
    Html(document(title, &header, body))
}

/// A page outside the signed-in layout (errors, sign-in).
pub(crate) fn bare_page(title: &str, body: &str) -> Html<String> {
    let header = "<header class=\"top\"><a class=\"brand\" href=\"/\">kenning</a></header>\n";
    Html(document(title, header, body))
}

/// A field error as the page shows it: the field, the problem, what was received, what to do.
pub(crate) fn field_error(error: &FieldError) -> String {
    let received = match error.received.as_str() {
        Some(text) => text.to_owned(),
        None => error.received.to_string(),
    };
    format!(
        "<p><strong>Invalid <code class=\"field\">{}</code></strong>: {}</p>\n<p>Received: <code>{}</code></p>\n<p class=\"suggestion\">{}</p>",
        escape(&error.field),
        escape(&error.problem),
        escape(&received),
        escape(&error.suggestion)
    )
}

/// The current time in Unix seconds, for form tokens.
pub(crate) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// An RFC 3339 timestamp shortened for reading (`2026-05-04 13:02`), with the full value in a
/// `<time>` element.
pub(crate) fn time(text: &str) -> String {
    let short = match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(time) => time.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M").to_string(),
        Err(_) => text.to_owned(),
    };
    format!("<time datetime=\"{}\">{}</time>", escape(text), escape(&short))
}

/// A number between 0 and 1 as a percentage.
pub(crate) fn percent(value: f64) -> String {
    format!("{:.0}%", value * 100.0)
}

/// A confidence that may not have been stated.
pub(crate) fn stated_percent(value: Option<f64>) -> String {
    value.map_or_else(|| "not stated".to_owned(), percent)
}

/// A status word as a coloured badge.
pub(crate) fn badge(word: &str) -> String {
    format!("<span class=\"badge status-{}\">{}</span>", escape(&word.replace(['_', ' '], "-")), escape(&word.replace('_', " ")))
}

/// A `<select>` of `options` (value, label) with `selected` chosen; the first option may be
/// the empty "any" choice.
pub(crate) fn select(name: &str, label: &str, options: &[(String, String)], selected: Option<&str>) -> String {
    let mut out = format!("<label>{} <select name=\"{}\">", escape(label), escape(name));
    for (value, text) in options {
        let chosen = if Some(value.as_str()) == selected { " selected" } else { "" };
        let _ = write!(out, "<option value=\"{}\"{chosen}>{}</option>", escape(value), escape(text));
    }
    out.push_str("</select></label>");
    out
}

/// Links to the first and next pages of a cursor-paged list, and the count shown.
pub(crate) fn pager(shown: &str, first: Option<String>, next: Option<String>) -> String {
    let mut out = format!("<nav class=\"pager\" aria-label=\"Pages\"><span>{}</span>", escape(shown));
    if let Some(first) = first {
        let _ = write!(out, " <a href=\"{}\" rel=\"first\">First page</a>", escape(&first));
    }
    if let Some(next) = next {
        let _ = write!(out, " <a href=\"{}\" rel=\"next\">Next page</a>", escape(&next));
    }
    out.push_str("</nav>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }
}
