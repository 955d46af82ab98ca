//! Templates: text with `{var}`, `{var.field}` and filters `{var | truncate(80) | slugify}`.
//! `{{` and `}}` stand for literal braces. A variable that is not set renders empty, so an
//! optional answer left out leaves no trace.
//!
//! Filters: `slugify` (lower-case words joined by `-`), `truncate(n)` (at most n characters,
//! ending in `…` when cut), `timestamp` / `timestamp(date)` (a time as RFC 3339 or as a date;
//! the built-in variable `now` is the time of the step), `format_list` (a markdown bullet
//! list) and `count` (the number of items).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

/// The variables a template reads: answers, query results, inputs and returns.
pub type Context = Map<String, Value>;

pub const FILTERS: &[&str] = &["slugify", "truncate", "timestamp", "format_list", "count"];

#[derive(Debug, Clone, PartialEq)]
enum Filter {
    Slugify,
    Truncate(usize),
    Timestamp { date: bool },
    FormatList,
    Count,
}

#[derive(Debug, Clone, PartialEq)]
struct Placeholder {
    path: String,
    filters: Vec<Filter>,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Slot(Placeholder),
}

fn parse_filter(text: &str) -> Result<Filter, String> {
    let text = text.trim();
    let (name, argument) = match text.split_once('(') {
        Some((name, rest)) => {
            let argument = rest.strip_suffix(')').ok_or_else(|| format!("filter `{text}` opens `(` without closing it"))?;
            (name.trim(), Some(argument.trim()))
        }
        None => (text, None),
    };
    match (name, argument) {
        ("slugify", None) => Ok(Filter::Slugify),
        ("format_list", None) => Ok(Filter::FormatList),
        ("count", None) => Ok(Filter::Count),
        ("timestamp", None) => Ok(Filter::Timestamp { date: false }),
        ("timestamp", Some("date")) => Ok(Filter::Timestamp { date: true }),
        ("timestamp", Some(other)) => Err(format!("timestamp takes no argument or `date`, not `{other}`")),
        ("truncate", Some(number)) => match number.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Filter::Truncate(n)),
            _ => Err(format!("truncate takes a positive number of characters, not `{number}`")),
        },
        ("truncate", None) => Err("truncate needs its length, e.g. `truncate(80)`".to_owned()),
        (name, Some(_)) if FILTERS.contains(&name) => Err(format!("filter `{name}` takes no argument")),
        (name, _) => Err(format!("`{name}` is not a filter; filters are {}", FILTERS.join(", "))),
    }
}

fn valid_path(path: &str) -> bool {
    !path.is_empty() && path.split('.').all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

fn parse(template: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|&(_, next)| next) == Some('{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek().map(|&(_, next)| next) == Some('}') => {
                chars.next();
                text.push('}');
            }
            '}' => return Err(format!("a `}}` at character {at} closes nothing; write `}}}}` for a literal brace")),
            '{' => {
                let mut inner = String::new();
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    inner.push(c);
                }
                if !closed {
                    return Err(format!("the `{{` at character {at} is never closed; write `{{{{` for a literal brace"));
                }
                let mut parts = inner.split('|');
                let path = parts.next().unwrap_or_default().trim().to_owned();
                if !valid_path(&path) {
                    return Err(format!("`{{{inner}}}` does not name a variable (letters, digits, `_`, and `.` between fields)"));
                }
                let filters = parts.map(parse_filter).collect::<Result<Vec<_>, _>>()?;
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Slot(Placeholder { path, filters }));
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// Checks a template's syntax and filters; returns the variables it reads (their first part).
pub fn check(template: &str) -> Result<Vec<String>, String> {
    Ok(parse(template)?
        .into_iter()
        .filter_map(|piece| match piece {
            Piece::Slot(slot) => Some(slot.path.split('.').next().unwrap_or_default().to_owned()),
            Piece::Text(_) => None,
        })
        .collect())
}

/// The value at a dotted path; `now` is the time of the step unless the context sets it.
pub fn lookup(context: &Context, path: &str, now: DateTime<Utc>) -> Value {
    let mut parts = path.split('.');
    let first = parts.next().unwrap_or_default();
    let mut current = match context.get(first) {
        Some(value) => value.clone(),
        None if first == "now" => Value::String(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
        None => return Value::Null,
    };
    for part in parts {
        current = match &current {
            Value::Object(map) => map.get(part).cloned().unwrap_or(Value::Null),
            Value::Array(items) => match part.parse::<usize>() {
                Ok(index) => items.get(index).cloned().unwrap_or(Value::Null),
                Err(_) if part == "count" => Value::from(items.len()),
                Err(_) => Value::Null,
            },
            _ => Value::Null,
        };
    }
    current
}

/// A value as text: strings as they are, lists joined by `, `, nothing for null.
pub fn text_of(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

fn slugify(text: &str) -> String {
    let mut slug = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_owned()
}

fn apply(filter: &Filter, value: Value) -> Value {
    match filter {
        Filter::Slugify => Value::String(slugify(&text_of(&value))),
        Filter::Truncate(max) => {
            let text = text_of(&value);
            if text.chars().count() <= *max {
                Value::String(text)
            } else {
                Value::String(format!("{}…", text.chars().take(max - 1).collect::<String>().trim_end()))
            }
        }
        Filter::Timestamp { date } => {
            let text = text_of(&value);
            match DateTime::parse_from_rfc3339(&text) {
                Ok(time) if *date => Value::String(time.format("%Y-%m-%d").to_string()),
                Ok(time) => Value::String(time.with_timezone(&Utc).to_rfc3339_opts(SecondsFormat::Secs, true)),
                Err(_) => Value::String(text),
            }
        }
        Filter::FormatList => {
            let items = match value {
                Value::Array(items) => items,
                Value::Null => Vec::new(),
                other => vec![other],
            };
            Value::String(items.iter().map(|item| format!("- {}", text_of(item))).collect::<Vec<_>>().join("\n"))
        }
        Filter::Count => Value::from(match &value {
            Value::Array(items) => items.len(),
            Value::Object(map) => map.len(),
            Value::Null => 0,
            Value::String(text) if text.trim().is_empty() => 0,
            _ => 1,
        }),
    }
}

fn evaluate(slot: &Placeholder, context: &Context, now: DateTime<Utc>) -> Value {
    slot.filters.iter().fold(lookup(context, &slot.path, now), |value, filter| apply(filter, value))
}

/// Renders a template to text.
pub fn render(template: &str, context: &Context, now: DateTime<Utc>) -> Result<String, String> {
    let mut out = String::new();
    for piece in parse(template)? {
        match piece {
            Piece::Text(text) => out.push_str(&text),
            Piece::Slot(slot) => out.push_str(&text_of(&evaluate(&slot, context, now))),
        }
    }
    Ok(out)
}

/// Renders a template that is one placeholder and nothing else to the value itself (a list
/// stays a list), any other template to text.
pub fn render_value(template: &str, context: &Context, now: DateTime<Utc>) -> Result<Value, String> {
    let pieces = parse(template)?;
    match pieces.as_slice() {
        [Piece::Slot(slot)] => Ok(evaluate(slot, context, now)),
        _ => render(template, context, now).map(Value::String),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context() -> Context {
        json!({
            "title": "Use PostgreSQL for the Refunds Service!",
            "items": ["alpha", "beta"],
            "similar": {"count": 2, "items": [{"urn": "kenning://user/decisions/a", "title": "A"}]},
            "when": "2026-03-01T09:30:00Z",
            "empty": ""
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn render_ok(template: &str) -> String {
        render(template, &context(), now()).unwrap()
    }

    #[test]
    fn variables_and_fields_interpolate() {
        assert_eq!(render_ok("Decision: {title}"), "Decision: Use PostgreSQL for the Refunds Service!");
        assert_eq!(render_ok("{similar.count} like it, first {similar.items.0.title}"), "2 like it, first A");
        assert_eq!(render_ok("[{missing}]"), "[]");
        assert_eq!(render_ok("{items}"), "alpha, beta");
        assert_eq!(render_ok("{{literal}} {title | truncate(3)}"), "{literal} Us…");
    }

    #[test]
    fn every_filter() {
        assert_eq!(render_ok("{title | slugify}"), "use-postgresql-for-the-refunds-service");
        assert_eq!(render_ok("{title | truncate(12)}"), "Use Postgre…");
        assert_eq!(render_ok("{title | truncate(100)}"), "Use PostgreSQL for the Refunds Service!");
        assert_eq!(render_ok("{when | timestamp}"), "2026-03-01T09:30:00Z");
        assert_eq!(render_ok("{when | timestamp(date)}"), "2026-03-01");
        assert_eq!(render_ok("{now | timestamp(date)}"), "2026-11-24");
        assert_eq!(render_ok("{items | format_list}"), "- alpha\n- beta");
        assert_eq!(render_ok("{items | count} {missing | count} {empty | count} {title | count}"), "2 0 0 1");
        assert_eq!(render_ok("{title | slugify | truncate(4)}"), "use…");
    }

    #[test]
    fn a_single_placeholder_keeps_its_value() {
        assert_eq!(render_value("{items}", &context(), now()).unwrap(), json!(["alpha", "beta"]));
        assert_eq!(render_value("{items | count}", &context(), now()).unwrap(), json!(2));
        assert_eq!(render_value("n={items | count}", &context(), now()).unwrap(), json!("n=2"));
    }

    #[test]
    fn malformed_templates_are_refused() {
        for (template, problem) in [
            ("{title", "never closed"),
            ("title}", "closes nothing"),
            ("{title | shout}", "not a filter"),
            ("{title | truncate}", "needs its length"),
            ("{title | truncate(x)}", "positive number"),
            ("{title | slugify(3)}", "takes no argument"),
            ("{ | count}", "does not name a variable"),
            ("{a..b}", "does not name a variable"),
        ] {
            let error = check(template).unwrap_err();
            assert!(error.contains(problem), "{template}: {error}");
        }
        assert_eq!(check("{a.b} and {c | count}").unwrap(), ["a", "c"]);
    }
}
