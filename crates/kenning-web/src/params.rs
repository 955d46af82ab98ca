//! Query strings and form bodies, read into named values with field errors that say which
//! parameter was wrong, what was received and what to send instead.

use kenning_core::FieldError;

/// The decoded `name=value` pairs of a query string or an `application/x-www-form-urlencoded`
/// body, in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Params(Vec<(String, String)>);

/// The most `name=value` pairs a query string or form may hold: no page takes more than a
/// dozen, so more is a mistake or an attack, refused before any of it is used.
pub(crate) const MAX_PAIRS: usize = 64;

impl Params {
    pub(crate) fn parse(text: &[u8]) -> Result<Params, FieldError> {
        let mut pairs = Vec::new();
        for (name, value) in form_urlencoded::parse(text) {
            if pairs.len() == MAX_PAIRS {
                return Err(FieldError::new(
                    name.chars().take(64).collect::<String>(),
                    format!("is one parameter too many: a request may hold at most {MAX_PAIRS}"),
                    format!("more than {MAX_PAIRS} parameters"),
                    "send each parameter once; a list goes in one value, separated by commas (`tag=a,b`)",
                ));
            }
            pairs.push((name.into_owned(), value.into_owned()));
        }
        Ok(Params(pairs))
    }

    pub(crate) fn query(raw: Option<String>) -> Result<Params, FieldError> {
        Params::parse(raw.unwrap_or_default().as_bytes())
    }

    /// The last value given for `name`, trimmed; absent when missing or blank.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.trim()).filter(|value| !value.is_empty())
    }

    /// Every value of `name`, each split at commas, blanks dropped: `tag=a&tag=b,c` is a, b, c.
    pub(crate) fn list(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(key, _)| key == name)
            .flat_map(|(_, value)| value.split(','))
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// A required text value.
    pub(crate) fn required(&self, name: &str, suggestion: &str) -> Result<&str, FieldError> {
        self.text(name).ok_or_else(|| FieldError::new(name, "is missing", "", suggestion))
    }

    /// A whole number in `min..=max`, or `None` when absent.
    pub(crate) fn number(&self, name: &str, min: usize, max: usize) -> Result<Option<usize>, FieldError> {
        let Some(text) = self.text(name) else { return Ok(None) };
        match text.parse::<usize>() {
            Ok(value) if (min..=max).contains(&value) => Ok(Some(value)),
            Ok(_) => Err(FieldError::new(name, format!("must be between {min} and {max}"), text, format!("use a number from {min} to {max}"))),
            Err(_) => Err(FieldError::new(name, "is not a whole number", text, format!("use a number from {min} to {max}, e.g. {min}"))),
        }
    }

    /// A number between 0 and 1, or `None` when absent.
    pub(crate) fn fraction(&self, name: &str) -> Result<Option<f64>, FieldError> {
        let Some(text) = self.text(name) else { return Ok(None) };
        match text.parse::<f64>() {
            Ok(value) if (0.0..=1.0).contains(&value) => Ok(Some(value)),
            _ => Err(FieldError::new(name, "is not a number between 0 and 1", text, "use e.g. 0.7")),
        }
    }

    /// A checkbox: present (with any value but `0` or `false`) means ticked.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.text(name).is_some_and(|value| !matches!(value, "0" | "false" | "off"))
    }
}

/// A path with its query string, leaving out empty values.
pub(crate) fn url(path: &str, pairs: &[(&str, &str)]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    let mut any = false;
    for (name, value) in pairs.iter().filter(|(_, value)| !value.is_empty()) {
        query.append_pair(name, value);
        any = true;
    }
    if any { format!("{path}?{}", query.finish()) } else { path.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_values_lists_and_numbers_with_field_errors() {
        let params = Params::parse(b"q=+pool+size+&tag=a&tag=b,%20c&limit=abc&page=7&blank=").unwrap();
        assert_eq!(params.text("q"), Some("pool size"));
        assert_eq!(params.text("blank"), None);
        assert_eq!(params.list("tag"), ["a", "b", "c"]);
        assert_eq!(params.number("limit", 1, 100).unwrap_err().field, "limit");
        assert_eq!(params.number("page", 1, 5).unwrap_err().received, "7");
        assert_eq!(params.number("missing", 1, 5).unwrap(), None);
        assert_eq!(url("/memories", &[("q", "a b"), ("tag", "")]), "/memories?q=a+b");
    }

    #[test]
    fn a_flood_of_parameters_is_refused_naming_the_one_past_the_limit() {
        let flood = vec!["tag=x"; MAX_PAIRS + 1].join("&");
        let error = Params::parse(flood.as_bytes()).unwrap_err();
        assert_eq!(error.field, "tag");
        assert!(Params::parse(vec!["tag=x"; MAX_PAIRS].join("&").as_bytes()).is_ok());
    }
}
