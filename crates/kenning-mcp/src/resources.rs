//! Memories, namespaces and domains as MCP resources.
//!
//! Addresses:
//! - `kenning://stats`: the status report.
//! - `kenning://{domain}`: the domain's namespaces with counts and a page of its memories.
//! - `kenning://{domain}/{namespace}`: a page of the namespace's memories.
//! - `kenning://{domain}/{namespace}/{id}`: one memory.
//! - `kenning://{kind}` (`episodic`, `semantic`, `procedural`): the memories of one kind across
//!   every domain, domain by domain, newest first. Seed 003's `memory://{kind}/list` and
//!   `memory://stats` are read as these and `kenning://stats`.
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
        template(
            "kenning://{kind}{?cursor}",
            "kind",
            "Kind listing",
            "The memories of one kind (episodic, semantic or procedural) across every domain, newest first, paginated.",
        ),
    ]
}

/// The kind a cross-domain kind listing names: `kenning://{kind}`, or seed 003's
/// `memory://{kind}/list`.
fn listed_kind(address: &str) -> Option<MemoryKind> {
    let kind = address.strip_prefix("kenning://").or_else(|| address.strip_prefix("memory://")?.strip_suffix("/list"))?;
    MemoryKind::parse(kind).ok()
}

/// The memories of one kind across every domain: a page of the domains' active memories of
/// that kind one domain after the other, each newest first.
#[derive(Serialize)]
struct KindListing {
    uri: String,
    kind: String,
    total: u64,
    by_domain: BTreeMap<String, u64>,
    memories: Vec<MemoryRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

fn kind_listing(memory: &MemoryService, kind: MemoryKind, cursor: Option<&str>) -> Result<KindListing, ReadError> {
    let filter = SearchFilter { kinds: vec![kind], status: Some(Status::Active), ..SearchFilter::default() };
    let offset = cursor.map(kenning_core::Cursor::decode).transpose()?.map_or(0, |cursor| cursor.offset);
    let domains: Vec<Domain> = memory.domains().cloned().collect();
    let mut by_domain = BTreeMap::new();
    let mut counts = Vec::with_capacity(domains.len());
    for domain in &domains {
        let count = memory.list(domain, &filter, None, 0)?.total;
        by_domain.insert(domain.to_string(), count);
        counts.push(count as usize);
    }
    let total: usize = counts.iter().sum();
    let mut memories = Vec::new();
    let mut skip = offset;
    for (domain, count) in domains.iter().zip(counts) {
        if memories.len() == PAGE_SIZE {
            break;
        }
        if skip >= count {
            skip -= count;
            continue;
        }
        let start = kenning_core::Cursor { offset: skip }.encode();
        memories.extend(memory.list(domain, &filter, Some(&start), PAGE_SIZE - memories.len())?.memories);
        skip = 0;
    }
    let end = offset + memories.len();
    Ok(KindListing {
        uri: format!("kenning://{kind}"),
        kind: kind.to_string(),
        total: total as u64,
        by_domain,
        memories,
        next_cursor: (end < total).then(|| kenning_core::Cursor { offset: end }.encode()),
    })
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
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for (kind, count) in status.domains.iter().flat_map(|domain| &domain.by_kind) {
        *kinds.entry(kind.as_str()).or_default() += count;
    }
    for (kind, count) in kinds.into_iter().filter(|(_, count)| *count > 0) {
        resources.push(
            Resource::new(format!("kenning://{kind}"), kind.to_owned())
                .with_title(format!("{kind} memories"))
                .with_description(format!("{count} {kind} memories across every domain"))
                .with_mime_type(JSON),
        );
    }
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
    if uri == STATS_URI || uri == "memory://stats" {
        return Ok(to_json(&memory.status()?));
    }
    let (address, query) = uri.split_once('?').unwrap_or((uri, ""));
    if let Some(kind) = listed_kind(address) {
        let cursor = match query.split_once('=') {
            None if query.is_empty() => None,
            Some(("cursor", value)) => Some(value),
            _ => {
                return Err(ReadError::Invalid(FieldError::new(
                    "uri",
                    "has an unknown query parameter",
                    query,
                    "a kind listing takes `?cursor={next_cursor}` only",
                )));
            }
        };
        return Ok(to_json(&kind_listing(memory, kind, cursor)?));
    }
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
            let domain = known_domain(memory, &domain, uri)?;
            Ok(to_json(&memory.list(&domain, &filter(Some(namespace)), cursor.as_deref(), PAGE_SIZE)?))
        }
        Urn::Domain(domain) => {
            let domain = known_domain(memory, &domain, uri)?;
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

/// The domain of this server that `domain` names (an earlier id of the project names the
/// project's domain as it is now).
fn known_domain(memory: &MemoryService, domain: &Domain, uri: &str) -> Result<Domain, ReadError> {
    memory.canonical_domain(domain).cloned().ok_or_else(|| ReadError::NotFound(uri.to_owned()))
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
            EngineError::NotFound { target } => ReadError::NotFound(target),
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
