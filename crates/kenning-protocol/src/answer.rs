//! Answers to ask steps, checked against the step's `expects`. The problem text goes back to the
//! agent with the step, so it says what was wrong and what would pass.

use kenning_core::MemoryUrn;
use regex::Regex;
use serde_json::Value;

use crate::model::Expect;

pub const KINDS: &[&str] = &["string", "number", "enum", "id", "id_list", "string_list"];

/// A list answer: a JSON array, or text with one item per line or separated by commas.
fn items(answer: &Value) -> Result<Vec<String>, String> {
    match answer {
        Value::Array(values) => values
            .iter()
            .map(|value| match value {
                Value::String(text) => Ok(text.trim().to_owned()),
                other => Err(format!("has an item that is not text: {other}")),
            })
            .collect(),
        Value::String(text) => {
            let separator = if text.contains('\n') { '\n' } else { ',' };
            Ok(text.split(separator).map(str::trim).filter(|item| !item.is_empty()).map(str::to_owned).collect())
        }
        Value::Null => Ok(Vec::new()),
        other => Err(format!("is not a list: {other}")),
    }
}

fn count_bounds(expect: &Expect, count: usize) -> Result<(), String> {
    if let Some(min) = expect.min_count.filter(|min| count < *min) {
        return Err(format!("has {count} items, fewer than the {min} needed"));
    }
    if let Some(max) = expect.max_count.filter(|max| count > *max) {
        return Err(format!("has {count} items, more than the {max} allowed"));
    }
    Ok(())
}

/// Checks an answer's form and returns it normalised (text trimmed, numbers as numbers, lists as
/// arrays). Ids are checked for form only; whether each names a memory of the right namespace
/// and kind is for the caller, who can read the store.
pub fn check(expect: &Expect, answer: &Value) -> Result<Value, String> {
    match expect.kind.as_str() {
        "string" => {
            let text = match answer {
                Value::String(text) => text.trim().to_owned(),
                Value::Number(number) => number.to_string(),
                other => return Err(format!("is not text: {other}")),
            };
            let length = text.chars().count();
            if let Some(min) = expect.min_length.filter(|min| length < *min) {
                return Err(format!("is {length} characters long, shorter than the {min} needed: say more"));
            }
            if let Some(max) = expect.max_length.filter(|max| length > *max) {
                return Err(format!("is {length} characters long, longer than the {max} allowed"));
            }
            if let Some(pattern) = &expect.pattern {
                let regex = Regex::new(&format!("^(?:{pattern})$")).map_err(|error| format!("cannot be checked: {error}"))?;
                if !regex.is_match(&text) {
                    return Err(format!("does not match the pattern `{pattern}`"));
                }
            }
            Ok(Value::String(text))
        }
        "number" => {
            let number = match answer {
                Value::Number(number) => number.as_f64(),
                Value::String(text) => text.trim().parse::<f64>().ok(),
                _ => None,
            }
            .filter(|number| number.is_finite())
            .ok_or_else(|| format!("is not a number: {answer}"))?;
            if let Some(min) = expect.min.filter(|min| number < *min) {
                return Err(format!("is {number}, below the minimum {min}"));
            }
            if let Some(max) = expect.max.filter(|max| number > *max) {
                return Err(format!("is {number}, above the maximum {max}"));
            }
            Ok(serde_json::Number::from_f64(number).map(Value::Number).unwrap_or(Value::Null))
        }
        "enum" => {
            let options = expect.options.as_deref().unwrap_or_default();
            let text = match answer {
                Value::String(text) => text.trim().to_owned(),
                other => other.to_string(),
            };
            options
                .iter()
                .find(|option| option.eq_ignore_ascii_case(&text))
                .map(|option| Value::String(option.clone()))
                .ok_or_else(|| format!("is `{text}`, not one of: {}", options.join(", ")))
        }
        "string_list" => {
            let items = items(answer)?;
            count_bounds(expect, items.len())?;
            if let Some(min) = expect.min_length {
                if let Some(short) = items.iter().find(|item| item.chars().count() < min) {
                    return Err(format!("has the item `{short}`, shorter than {min} characters"));
                }
            }
            Ok(Value::from(items))
        }
        "id" => {
            let text = match answer {
                Value::String(text) => text.trim().to_owned(),
                other => return Err(format!("is not a memory URN: {other}")),
            };
            MemoryUrn::parse("answer", &text).map_err(|error| format!("is not a memory URN ({})", error.problem))?;
            Ok(Value::String(text))
        }
        "id_list" => {
            let items = items(answer)?;
            count_bounds(expect, items.len())?;
            for item in &items {
                MemoryUrn::parse("answer", item).map_err(|error| format!("has `{item}`, which is not a memory URN ({})", error.problem))?;
            }
            Ok(Value::from(items))
        }
        other => Err(format!("cannot be checked: `{other}` is not an answer type")),
    }
}

/// The URNs an id or id_list answer names, for the caller to look up.
pub fn ids(expect: &Expect, answer: &Value) -> Vec<String> {
    match (expect.kind.as_str(), answer) {
        ("id", Value::String(urn)) => vec![urn.clone()],
        ("id_list", Value::Array(items)) => items.iter().filter_map(|item| item.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(kind: &str) -> Expect {
        Expect { kind: kind.to_owned(), ..Expect::default() }
    }

    #[test]
    fn strings_check_length_and_pattern() {
        let rule = Expect { min_length: Some(10), max_length: Some(20), pattern: Some("[A-Z].*".into()), ..expect("string") };
        assert_eq!(check(&rule, &json!("  Use caching  ")).unwrap(), json!("Use caching"));
        assert!(check(&rule, &json!("Short")).unwrap_err().contains("shorter than the 10"));
        assert!(check(&rule, &json!("Far too long for this field")).unwrap_err().contains("longer than the 20"));
        assert!(check(&rule, &json!("lower case start")).unwrap_err().contains("pattern"));
        assert!(check(&rule, &json!(["a"])).unwrap_err().contains("not text"));
    }

    #[test]
    fn numbers_check_bounds_and_accept_text() {
        let rule = Expect { min: Some(0.0), max: Some(1.0), ..expect("number") };
        assert_eq!(check(&rule, &json!("0.7")).unwrap(), json!(0.7));
        assert_eq!(check(&rule, &json!(1)).unwrap(), json!(1.0));
        assert!(check(&rule, &json!(1.5)).unwrap_err().contains("above the maximum 1"));
        assert!(check(&rule, &json!("-1")).unwrap_err().contains("below the minimum 0"));
        assert!(check(&rule, &json!("high")).unwrap_err().contains("not a number"));
    }

    #[test]
    fn enums_match_without_case() {
        let rule = Expect { options: Some(vec!["low".into(), "high".into()]), ..expect("enum") };
        assert_eq!(check(&rule, &json!("HIGH")).unwrap(), json!("high"));
        assert!(check(&rule, &json!("medium")).unwrap_err().contains("not one of: low, high"));
    }

    #[test]
    fn lists_accept_arrays_and_text_and_count() {
        let rule = Expect { min_count: Some(2), max_count: Some(3), ..expect("string_list") };
        assert_eq!(check(&rule, &json!("a, b")).unwrap(), json!(["a", "b"]));
        assert_eq!(check(&rule, &json!("one, two\nthree")).unwrap(), json!(["one, two", "three"]));
        assert_eq!(check(&rule, &json!(["x", "y", "z"])).unwrap(), json!(["x", "y", "z"]));
        assert!(check(&rule, &json!(["x"])).unwrap_err().contains("fewer than the 2"));
        assert!(check(&rule, &json!("a,b,c,d")).unwrap_err().contains("more than the 3"));
        assert!(check(&rule, &json!([1, 2])).unwrap_err().contains("not text"));
    }

    #[test]
    fn ids_are_memory_urns() {
        let urn = "kenning://user/decisions/01jabc";
        assert_eq!(check(&expect("id"), &json!(urn)).unwrap(), json!(urn));
        assert!(check(&expect("id"), &json!("dec_1")).unwrap_err().contains("not a memory URN"));
        let rule = Expect { max_count: Some(1), ..expect("id_list") };
        assert_eq!(ids(&rule, &check(&rule, &json!([urn])).unwrap()), [urn]);
        assert!(check(&rule, &json!([urn, urn])).unwrap_err().contains("more than the 1"));
        assert!(check(&rule, &json!(["nope"])).unwrap_err().contains("`nope`"));
    }
}
