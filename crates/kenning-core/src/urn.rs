//! URNs: `kenning://{domain}/{namespace}/{id}` and the domain they start with.
//!
//! The seed system's `subcog://` scheme with the same structure is accepted on input; output is
//! always `kenning://`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::FieldError;
use crate::memory::{MemoryId, Namespace};

const SCHEME: &str = "kenning://";
const LEGACY_SCHEME: &str = "subcog://";

/// The scope a memory belongs to, and with it the store that keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Domain {
    Project(String),
    User,
    Org(String),
}

impl Domain {
    /// The domain's kind without its id, as used in filters: `project`, `user` or `org`.
    pub fn scope(&self) -> &'static str {
        match self {
            Domain::Project(_) => "project",
            Domain::User => "user",
            Domain::Org(_) => "org",
        }
    }

    pub fn parse(field: &str, text: &str) -> Result<Domain, FieldError> {
        let invalid = |problem: &str| {
            FieldError::new(
                field,
                problem,
                text,
                "use `user`, `project:{project-id}` or `org:{org-id}`, e.g. `project:my-app`",
            )
        };
        match text.split_once(':') {
            None if text == "user" => Ok(Domain::User),
            None => Err(invalid("is not a known domain")),
            Some((scope, id)) => {
                if !is_valid_scope_id(id) {
                    return Err(invalid(
                        "has an id that is empty or holds characters other than [A-Za-z0-9._-]",
                    ));
                }
                match scope {
                    "project" => Ok(Domain::Project(id.to_owned())),
                    "org" => Ok(Domain::Org(id.to_owned())),
                    _ => Err(invalid("has an unknown scope before `:`")),
                }
            }
        }
    }
}

fn is_valid_scope_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Domain::Project(id) => write!(f, "project:{id}"),
            Domain::User => f.write_str("user"),
            Domain::Org(id) => write!(f, "org:{id}"),
        }
    }
}

impl FromStr for Domain {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Domain::parse("domain", s)
    }
}

impl Serialize for Domain {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Domain {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A parsed kenning address: a whole domain, one namespace in it, or one memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Urn {
    Domain(Domain),
    Namespace(Domain, Namespace),
    Memory(MemoryUrn),
}

/// The address of one memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryUrn {
    pub domain: Domain,
    pub namespace: Namespace,
    pub id: MemoryId,
}

impl MemoryUrn {
    pub fn new(domain: Domain, namespace: Namespace, id: MemoryId) -> Self {
        MemoryUrn { domain, namespace, id }
    }

    /// Parses a memory URN, refusing domain and namespace addresses.
    pub fn parse(field: &str, text: &str) -> Result<MemoryUrn, FieldError> {
        match Urn::parse(field, text)? {
            Urn::Memory(urn) => Ok(urn),
            _ => Err(FieldError::new(
                field,
                "addresses a domain or namespace, not one memory",
                text,
                "give the full URN, e.g. `kenning://user/learnings/01j9z3k4m5n6p7q8r9s0t1v2w3`",
            )),
        }
    }
}

impl fmt::Display for MemoryUrn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}/{}", self.domain, self.namespace, self.id)
    }
}

impl Serialize for MemoryUrn {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MemoryUrn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        MemoryUrn::parse("urn", &text).map_err(serde::de::Error::custom)
    }
}

impl Urn {
    pub fn parse(field: &str, text: &str) -> Result<Urn, FieldError> {
        let example = "use `kenning://{domain}/{namespace}/{id}`, e.g. `kenning://project:my-app/decisions/01j9z3k4m5n6p7q8r9s0t1v2w3`";
        let rest = text
            .strip_prefix(SCHEME)
            .or_else(|| text.strip_prefix(LEGACY_SCHEME))
            .ok_or_else(|| {
                FieldError::new(field, "does not start with `kenning://` (or `subcog://`)", text, example)
            })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let segments: Vec<&str> = rest.split('/').collect();
        let domain = || Domain::parse(field, segments[0]);
        let namespace = || {
            Namespace::parse(segments[1]).map_err(|error| FieldError { field: field.to_owned(), ..error })
        };
        match segments.len() {
            1 => Ok(Urn::Domain(domain()?)),
            2 => Ok(Urn::Namespace(domain()?, namespace()?)),
            3 => {
                let id = MemoryId::parse(segments[2])
                    .map_err(|error| FieldError { field: field.to_owned(), ..error })?;
                Ok(Urn::Memory(MemoryUrn::new(domain()?, namespace()?, id)))
            }
            _ => Err(FieldError::new(field, "has too many path segments", text, example)),
        }
    }
}

impl fmt::Display for Urn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Urn::Domain(domain) => write!(f, "{SCHEME}{domain}"),
            Urn::Namespace(domain, namespace) => write!(f, "{SCHEME}{domain}/{namespace}"),
            Urn::Memory(urn) => urn.fmt(f),
        }
    }
}
