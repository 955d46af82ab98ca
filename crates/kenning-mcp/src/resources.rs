//! Memories, namespaces and domains as MCP resources.
//!
//! Addresses:
//! - `kenning://stats`: the status report.
//! - `kenning://{domain}`: the domain's namespaces with counts and a page of its memories.
//! - `kenning://{domain}/{namespace}`: a page of the namespace's memories.
//! - `kenning://{domain}/{namespace}/{id}`: one memory.
//!
//! Listings take `?kind=` to list one kind and `?cursor=` for the next page.

use std::collections::BTreeMap;

use rmcp::ErrorData as McpError;
use rmcp::model::{Resource, ResourceTemplate};
use serde::Serialize;
use serde_json::json;

use kenning_core::{Domain, FieldError, MemoryKind, SearchFilter, Status, Urn};
use kenning_engine::views::{ListingPage, MemoryRef};
use kenning_engine::{Error as EngineError, MemoryService};

use crate::error::invalid_params;

pub const STATS_URI: &str = "kenning://stats";
const JSON: &str = "application/json";
/// Entries per `resources/list` page and memories per listing page.
pub const PAGE_SIZE: usize = 100;

pub fn templates() -> Vec<ResourceTemplate> {
    let template = |uri: &str, name: &str, title: &str, description: &str| {
        ResourceTemplate::new(uri, name).with_title(title).with_description(description).with_mime_type(JSON)
    };
    vec![
        template(
            "kenning://{domain}/{namespace}/{id}",
            "memory",
            "Memory",
            "One memory with every field, by URN; domain is `project:{id}`, `user` or `org:{id}`.",
        ),
        template(
            "kenning://{domain}/{namespace}{?kind,cursor}",
            "namespace",
            "Namespace listing",
            "The memories of one namespace in a domain, newest first, paginated.",
        ),
        template(
            "kenning://{domain}{?kind,cursor}",
            "domain",
            "Domain listing",
            "A domain's namespaces with counts and its memories, newest first, paginated; `kind` lists one kind.",
        ),
    ]
}

/// Active memories per domain, in the service's domain order.
type ActiveCounts = Vec<(Domain, usize)>;

/// The fixed entries of `resources/list` (stats, then each domain, its namespaces and its
/// kinds) and the number of active memories per domain.
fn catalogue(memory: &MemoryService) -> Result<(Vec<Resource>, ActiveCounts), EngineError> {
    let status = memory.status()?;
    let mut resources = vec![
        Resource::new(STATS_URI, "stats")
            .with_title("Memory statistics")
            .with_description("Counts per domain, namespace and kind; store locations; embedder; index health.")
            .with_mime_type(JSON),
    ];
    let mut active = Vec::new();
    for (domain, status) in memory.domains().zip(&status.domains) {
        active.push((domain.clone(), status.by_status.get("active").copied().unwrap_or(0) as usize));
        resources.push(
            Resource::new(&status.uri, status.domain.clone())
                .with_title(format!("Domain {}", status.domain))
                .with_description(format!("{} memories in the {} domain", status.total, status.domain))
                .with_mime_type(JSON),
        );
        for (namespace, count) in &status.by_namespace {
            resources.push(
                Resource::new(format!("{}/{namespace}", status.uri), format!("{}/{namespace}", status.domain))
                    .with_title(format!("{namespace} ({})", status.domain))
                    .with_description(format!("{count} active memories"))
                    .with_mime_type(JSON),
            );
        }
        for (kind, count) in status.by_kind.iter().filter(|(_, count)| **count > 0) {
            resources.push(
                Resource::new(format!("{}?kind={kind}", status.uri), format!("{}?kind={kind}", status.domain))
                    .with_title(format!("{kind} memories ({})", status.domain))
                    .with_description(format!("{count} active {kind} memories"))
                    .with_mime_type(JSON),
            );
        }
    }
    Ok((resources, active))
}

/// One page of `resources/list`, which is the catalogue (with `extra` fixed entries from other
/// services) followed by every active memory of each domain in turn; returns the page and the
/// offset of the next one.
pub fn list_page(memory: &MemoryService, extra: &[Resource], offset: usize) -> Result<(Vec<Resource>, Option<usize>), EngineError> {
    let (mut catalogue, active) = catalogue(memory)?;
    catalogue.extend_from_slice(extra);
    let total = catalogue.len() + active.iter().map(|(_, count)| count).sum::<usize>();
    let mut page: Vec<Resource> = catalogue.iter().skip(offset).take(PAGE_SIZE).cloned().collect();
    let mut skip = offset.saturating_sub(catalogue.len());
    let filter = SearchFilter::active();
    for (domain, count) in &active {
        if page.len() == PAGE_SIZE {
            break;
        }
        if skip >= *count {
            skip -= count;
            continue;
        }
        let cursor = kenning_core::Cursor { offset: skip }.encode();
        let listing = memory.list(domain, &filter, Some(&cursor), PAGE_SIZE - page.len())?;
        page.extend(listing.memories.iter().map(memory_resource));
        skip = 0;
    }
    let end = offset + page.len();
    Ok((page, (end < total).then_some(end)))
}

fn memory_resource(memory: &MemoryRef) -> Resource {
    Resource::new(&memory.urn, memory.title.clone())
        .with_title(memory.title.clone())
        .with_description(format!("{} memory in {}", memory.kind, memory.namespace))
        .with_mime_type(JSON)
}

#[derive(Serialize)]
struct DomainListing {
    uri: String,
    domain: String,
    namespaces: Vec<NamespaceCount>,
    by_kind: BTreeMap<String, u64>,
    #[serde(flatten)]
    page: ListingPage,
}

#[derive(Serialize)]
struct NamespaceCount {
    uri: String,
    name: String,
    count: u64,
}

/// What reading a resource returns, as JSON text.
pub fn read(memory: &MemoryService, uri: &str) -> Result<String, ReadError> {
    if uri == STATS_URI {
        return Ok(to_json(&memory.status()?));
    }
    let (address, query) = uri.split_once('?').unwrap_or((uri, ""));
    let mut kind = None;
    let mut cursor = None;
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        match pair.split_once('=') {
            Some(("kind", value)) => kind = Some(MemoryKind::parse(value)?),
            Some(("cursor", value)) => cursor = Some(value.to_owned()),
            _ => {
                return Err(ReadError::Invalid(FieldError::new(
                    "uri",
                    "has an unknown query parameter",
                    pair,
                    "use `?kind={episodic|semantic|procedural}` and `&cursor={next_cursor}` only",
                )));
            }
        }
    }
    let filter = |namespace: Option<kenning_core::Namespace>| SearchFilter {
        kinds: kind.into_iter().collect(),
        namespaces: namespace.into_iter().collect(),
        status: Some(Status::Active),
        ..SearchFilter::default()
    };
    match Urn::parse("uri", address)? {
        Urn::Memory(urn) => {
            if !query.is_empty() {
                return Err(ReadError::Invalid(FieldError::new("uri", "takes no query parameters for one memory", uri, format!("read `{urn}`"))));
            }
            Ok(to_json(&memory.get(&urn.to_string())?))
        }
        Urn::Namespace(domain, namespace) => {
            known_domain(memory, &domain, uri)?;
            Ok(to_json(&memory.list(&domain, &filter(Some(namespace)), cursor.as_deref(), PAGE_SIZE)?))
        }
        Urn::Domain(domain) => {
            known_domain(memory, &domain, uri)?;
            let status = memory.status()?;
            let counts = status.domains.into_iter().find(|entry| entry.domain == domain.to_string()).expect("known domain has status");
            let page = memory.list(&domain, &filter(None), cursor.as_deref(), PAGE_SIZE)?;
            Ok(to_json(&DomainListing {
                uri: address.to_owned(),
                domain: domain.to_string(),
                namespaces: counts
                    .by_namespace
                    .iter()
                    .map(|(name, count)| NamespaceCount { uri: format!("{address}/{name}"), name: name.clone(), count: *count })
                    .collect(),
                by_kind: counts.by_kind,
                page,
            }))
        }
    }
}

fn known_domain(memory: &MemoryService, domain: &Domain, uri: &str) -> Result<(), ReadError> {
    if memory.domains().any(|known| known == domain) { Ok(()) } else { Err(ReadError::NotFound(uri.to_owned())) }
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string_pretty(value).expect("views serialise")
}

/// Why a resource could not be read.
#[derive(Debug)]
pub enum ReadError {
    Invalid(FieldError),
    NotFound(String),
    Engine(EngineError),
}

impl From<FieldError> for ReadError {
    fn from(error: FieldError) -> Self {
        ReadError::Invalid(error)
    }
}

impl From<EngineError> for ReadError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Invalid(field) => ReadError::Invalid(field),
            EngineError::NotFound { urn } => ReadError::NotFound(urn),
            other => ReadError::Engine(other),
        }
    }
}

impl From<ReadError> for McpError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Invalid(field) => invalid_params(&field),
            ReadError::NotFound(uri) => McpError::resource_not_found(
                format!("no resource at {uri}"),
                Some(json!({"uri": uri, "suggestion": "list resources or use memory_recall to find valid URNs"})),
            ),
            ReadError::Engine(error) => McpError::internal_error(error.to_string(), None),
        }
    }
}
