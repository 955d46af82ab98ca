//! A deterministic synthetic corpus of coding-agent memories, and queries against it.
//!
//! Real memory stores are private and differ from team to team, so the benchmark builds its own:
//! decisions, learnings, blockers, conventions and so on, written from templates that combine
//! shared vocabularies (components, technologies, file paths, error messages, people). Sharing
//! the vocabularies is what makes the queries realistic: a question about "the billing worker"
//! or "deadlock detected" matches some memories strongly and many weakly, as in a real store,
//! instead of matching everything or nothing.
//!
//! Every memory is drawn from its own random stream, seeded by the corpus seed and its index.
//! Memory `i` is therefore the same whatever the corpus size, and a query that paraphrases
//! memory `i` can regenerate it instead of the whole corpus being held in memory.

use std::collections::BTreeMap;

use fastrand::Rng;
use kenning_core::{BUILT_IN_NAMESPACES, CaptureInput};

/// A seeded generator of memories and queries.
#[derive(Debug, Clone, Copy)]
pub struct Corpus {
    seed: u64,
}

/// A memory before capture, with the phrase a user looking for it would most likely type.
struct Draft {
    input: CaptureInput,
    key_phrase: String,
}

/// Separates the query streams from the memory streams of the same seed.
const QUERY_STREAM: u64 = 0x5155_4552_5953_0000;

impl Corpus {
    pub fn new(seed: u64) -> Corpus {
        Corpus { seed }
    }

    /// Memory number `index` of this corpus.
    pub fn memory(&self, index: usize) -> CaptureInput {
        self.draft(index).input
    }

    /// Query number `index`, for a store holding memories `0..memories`. About half restate a
    /// stored memory's key phrase (what an agent types to find something it knows exists), a
    /// tenth paste an error message, and the rest are natural questions built from the
    /// vocabularies, which match many memories partially.
    pub fn query(&self, index: usize, memories: usize) -> String {
        let mut rng = Rng::with_seed(stream(self.seed ^ QUERY_STREAM, index as u64));
        match rng.usize(0..100) {
            0..50 if memories > 0 => {
                let phrase = self.draft(rng.usize(0..memories)).key_phrase;
                paraphrase(&mut rng, &phrase)
            }
            0..60 => {
                let error = pick(&mut rng, ERRORS);
                if rng.bool() { error.to_owned() } else { format!("how to fix {error}") }
            }
            _ => question(&mut rng),
        }
    }

    fn draft(&self, index: usize) -> Draft {
        let mut rng = Rng::with_seed(stream(self.seed, index as u64));
        let facts = Facts::draw(&mut rng);
        let namespace = pick(&mut rng, BUILT_IN_NAMESPACES);
        let lead = lead(&mut rng, namespace, &facts);
        let content = elaborate(&mut rng, &lead, &facts);
        let input = CaptureInput {
            // Agents leave the title out often enough that deriving it from the content matters.
            title: (rng.usize(0..10) < 7).then(|| lead.title.clone()),
            content,
            kind: (rng.usize(0..10) < 3).then(|| pick(&mut rng, &["episodic", "semantic", "procedural"]).to_owned()),
            namespace: Some(namespace.to_owned()),
            tags: tags(&mut rng, namespace, &facts),
            category: (rng.usize(0..5) == 0).then(|| pick(&mut rng, CATEGORIES).to_owned()),
            source: Some(source(&mut rng).to_owned()),
            confidence: rng.bool().then(|| hundredths(0.4 + rng.f64() * 0.6)),
            salience: (rng.usize(0..5) == 0).then(|| hundredths(0.1 + rng.f64() * 0.9)),
            event_time: (rng.usize(0..4) == 0)
                .then(|| format!("{}-{:02}-{:02}", rng.u32(2023..=2025), rng.u32(1..=12), rng.u32(1..=28))),
            // Links need the URNs of memories captured earlier, which only exist once a run has
            // stored them; the store's cost of keeping a link is a few bytes of its record.
            links: Vec::new(),
            metadata: metadata(&mut rng, &facts),
            author: None,
        };
        Draft { input, key_phrase: lead.key_phrase }
    }
}

/// SplitMix64 of the seed and a stream number, so that neighbouring indexes get unrelated
/// streams rather than the overlapping ones consecutive seeds could give.
fn stream(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> T {
    items[rng.usize(0..items.len())]
}

fn hundredths(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// Lower-case and hyphenated, as tags must be.
fn slug(text: &str) -> String {
    let mut slug = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_owned()
}

const COMPONENTS: &[&str] = &[
    "auth service", "billing worker", "search indexer", "session cache", "payment gateway", "notification queue",
    "CLI parser", "migration runner", "rate limiter", "feature-flag client", "ingest pipeline", "GraphQL gateway",
    "websocket hub", "job scheduler", "config loader", "image resizer", "audit log", "export service",
    "checkout page", "admin dashboard", "metrics exporter", "email sender", "webhook dispatcher", "API gateway",
    "user profile service", "file upload handler", "report generator", "permissions module", "build pipeline",
    "deploy script", "cache warmer", "event bus", "inventory service", "pricing engine", "onboarding flow",
    "mobile sync endpoint", "data retention job", "tenant router", "invoice renderer", "login form",
];

const TECHNOLOGIES: &[&str] = &[
    "PostgreSQL", "SQLite", "Redis", "Kafka", "RabbitMQ", "tokio", "axum", "actix-web", "React", "TypeScript",
    "Docker", "Kubernetes", "Terraform", "GitHub Actions", "gRPC", "protobuf", "serde", "OpenTelemetry",
    "Prometheus", "nginx", "S3", "DynamoDB", "Elasticsearch", "pytest", "Jest", "Playwright", "Vite", "webpack",
    "Node.js", "FastAPI", "Django", "SQLAlchemy", "Prisma", "sqlx", "diesel", "reqwest", "Celery", "Sentry",
    "Grafana", "Helm",
];

const ERRORS: &[&str] = &[
    "connection refused (os error 111)",
    "deadlock detected",
    "ECONNRESET",
    "called `Option::unwrap()` on a `None` value",
    "TypeError: Cannot read properties of undefined (reading 'id')",
    "database is locked",
    "OOMKilled",
    "certificate has expired",
    "429 Too Many Requests",
    "context deadline exceeded",
    "borrowed value does not live long enough",
    "ModuleNotFoundError: No module named 'yaml'",
    "No 'Access-Control-Allow-Origin' header is present",
    "relation \"users\" does not exist",
    "lock timeout exceeded on table accounts",
    "too many open files",
    "segmentation fault (core dumped)",
    "ERR_REQUIRE_ESM",
    "duplicate key value violates unique constraint",
    "SSL routines: wrong version number",
    "future cannot be sent between threads safely",
    "502 Bad Gateway",
    "JavaScript heap out of memory",
    "serialization failure: could not serialize access",
    "unexpected end of JSON input",
    "permission denied (publickey)",
    "no space left on device",
    "cannot borrow `self` as mutable more than once",
];

const PEOPLE: &[&str] = &[
    "Priya", "Marcus", "Chen", "Ana", "Tomás", "Fatima", "Jonas", "Aiko", "Sam", "Olu", "Ingrid", "Rafael",
    "Mei", "Dmitri", "Leila", "Noah",
];

const MODULES: &[&str] = &[
    "session", "handler", "retry", "pool", "config", "schema", "cache", "client", "router", "middleware", "worker",
    "queue", "token", "invoice", "export", "metrics", "limiter", "auth", "parser", "loader", "webhook", "upload",
];

const INFRA_FILES: &[&str] = &[
    ".github/workflows/ci.yml", "deploy/helm/values.yaml", "docker-compose.yml", "terraform/modules/rds/main.tf",
    "Dockerfile", "Cargo.toml", "package.json", "pyproject.toml", ".env.example", "nginx/conf.d/api.conf",
];

const TABLES: &[&str] = &["users", "sessions", "invoices", "orders", "events", "audit_log", "api_keys", "jobs", "tenants"];

const COLUMNS: &[&str] = &["tenant_id", "created_at", "user_id", "status", "email", "external_ref", "updated_at"];

const RESOURCES: &[&str] = &["users", "invoices", "sessions", "orders", "webhooks", "projects", "tokens", "reports", "uploads"];

const ENV_VARS: &[&str] = &[
    "DATABASE_URL", "REDIS_URL", "RUST_LOG", "NODE_OPTIONS", "KAFKA_BROKERS", "SENTRY_DSN", "JWT_SECRET",
    "S3_BUCKET", "FEATURE_FLAGS_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "POOL_MAX_SIZE", "HTTP_TIMEOUT_MS",
];

const SECRETS: &[&str] = &[
    "API tokens", "session cookies", "the JWT signing key", "customer email addresses", "database passwords",
    "webhook signing secrets", "OAuth refresh tokens",
];

const PATTERNS: &[&str] = &[
    "retry with exponential backoff and jitter", "the repository pattern", "a circuit breaker", "an outbox table",
    "builder structs", "newtype wrappers for ids", "idempotency keys", "RAII guards", "a typed error enum per crate",
    "dependency injection through constructor arguments", "a bounded channel between producer and consumer",
];

const REASONS: &[&str] = &[
    "it halves p95 latency in our load test",
    "the team already runs it in production",
    "it has first-class async support",
    "the alternative's licence is incompatible with ours",
    "it removes a network hop",
    "operations asked for fewer moving parts",
    "it supports transactional DDL",
    "the managed offering is cheaper at our volume",
    "its client library is the only one with proper cancellation",
];

const CAUSES: &[&str] = &[
    "a missing index on the foreign key",
    "the connection pool sized to 5 while the worker runs 32 tasks",
    "clock skew between nodes",
    "a stale cache entry surviving the deploy",
    "a retry loop with no upper bound",
    "a future that was never awaited",
    "serde defaulting a missing field to zero",
    "timezone-naive timestamps",
    "two migrations racing at startup",
    "an N+1 query in the serializer",
    "a mutex held across an await point",
    "the health check hitting the database on every probe",
];

const FIXES: &[&str] = &[
    "added the index concurrently",
    "raised the pool size to 20 and added a 2 s acquire timeout",
    "moved the check and the write into one transaction",
    "pinned the dependency to the previous minor version",
    "added a 30 s timeout and surfaced it as a typed error",
    "switched every timestamp to UTC",
    "batched the lookups into one query",
    "replaced the mutex with a channel",
    "made the handler idempotent with a request key",
    "cached the result for 60 s",
];

const LANGUAGES: &[(&str, &str)] = &[("Rust", "clippy"), ("TypeScript", "eslint"), ("Python", "ruff"), ("Go", "golangci-lint")];

const EXTRA_TAGS: &[&str] = &[
    "ci", "flaky", "regression", "p1", "oncall", "refactor", "perf", "breaking-change", "docs", "migration",
    "onboarding", "incident", "backend", "frontend", "infra",
];

const CATEGORIES: &[&str] = &["architecture", "debugging-lesson", "onboarding", "incident", "refactor", "review-feedback"];

/// The pieces one memory is written from, drawn once so that its title, body and tags agree.
struct Facts {
    component: &'static str,
    other_component: &'static str,
    tech: &'static str,
    other_tech: &'static str,
    path: String,
    line: u32,
    error: &'static str,
    person: &'static str,
    ticket: String,
    commit: String,
    table: &'static str,
    column: &'static str,
    cause: &'static str,
    fix: &'static str,
    before_ms: u32,
    after_ms: u32,
}

impl Facts {
    fn draw(rng: &mut Rng) -> Facts {
        let before_ms = rng.u32(40..2500);
        Facts {
            component: pick(rng, COMPONENTS),
            other_component: pick(rng, COMPONENTS),
            tech: pick(rng, TECHNOLOGIES),
            other_tech: pick(rng, TECHNOLOGIES),
            path: path(rng),
            line: rng.u32(12..1400),
            error: pick(rng, ERRORS),
            person: pick(rng, PEOPLE),
            ticket: format!("KEN-{}", rng.u32(100..10_000)),
            commit: format!("{:07x}", rng.u32(0..0x1000_0000)),
            table: pick(rng, TABLES),
            column: pick(rng, COLUMNS),
            cause: pick(rng, CAUSES),
            fix: pick(rng, FIXES),
            before_ms,
            after_ms: rng.u32(5..before_ms.max(6)),
        }
    }
}

fn path(rng: &mut Rng) -> String {
    let module = pick(rng, MODULES);
    let other = pick(rng, MODULES);
    match rng.usize(0..5) {
        0 => format!("crates/{other}/src/{module}.rs"),
        1 => {
            let mut chars = module.chars();
            let upper: String = chars.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(chars).collect();
            format!("web/src/{other}/{upper}.tsx")
        }
        2 => format!("services/{other}/{module}.py"),
        3 => format!("internal/{other}/{module}.go"),
        _ => pick(rng, INFRA_FILES).to_owned(),
    }
}

/// A memory's opening: its title, first sentence and key phrase.
struct Lead {
    title: String,
    sentence: String,
    key_phrase: String,
}

fn lead(rng: &mut Rng, namespace: &str, f: &Facts) -> Lead {
    let (title, sentence, key_phrase) = match (namespace, rng.usize(0..2)) {
        ("decisions", 0) => (
            format!("Use {} for the {}", f.tech, f.component),
            format!("We chose {} over {} for the {} because {}.", f.tech, f.other_tech, f.component, pick(rng, REASONS)),
            format!("{} for the {}", f.tech, f.component),
        ),
        ("decisions", _) => (
            format!("{} stays on {} until {}", f.component, f.other_tech, f.ticket),
            format!(
                "{} decided to keep the {} on {} for now; moving to {} is tracked in {}.",
                f.person, f.component, f.other_tech, f.tech, f.ticket
            ),
            format!("keep {} on {}", f.component, f.other_tech),
        ),
        ("learnings", 0) => (
            format!("{} in the {} was {}", f.error, f.component, f.cause),
            format!("`{}` in the {} turned out to be {}; we {}.", f.error, f.component, f.cause, f.fix),
            format!("{} {}", f.component, f.error),
        ),
        ("learnings", _) => (
            format!("{} needs explicit configuration in {}", f.tech, f.path),
            format!(
                "{} does not pick up its settings from the environment in {}; they must be passed when the {} starts.",
                f.tech, f.path, f.component
            ),
            format!("{} configuration {}", f.tech, f.component),
        ),
        ("patterns", 0) => (
            format!("Wrap {} calls in {}", f.tech, pick(rng, PATTERNS)),
            format!("Every call from the {} to {} goes through {}, see {}:{}.", f.component, f.tech, pick(rng, PATTERNS), f.path, f.line),
            format!("{} calls from the {}", f.tech, f.component),
        ),
        ("patterns", _) => (
            format!("How the {} talks to the {}", f.component, f.other_component),
            format!(
                "The {} never calls the {} directly: it publishes an event on {} and the {} consumes it.",
                f.component, f.other_component, f.tech, f.other_component
            ),
            format!("{} events to the {}", f.component, f.other_component),
        ),
        ("blockers", 0) => (
            format!("Blocked: {} deploy fails with {}", f.component, f.error),
            format!("The {} deploy fails with `{}` since commit {}; waiting on {} to look at it.", f.component, f.error, f.commit, f.person),
            format!("{} deploy fails", f.component),
        ),
        ("blockers", _) => (
            format!("Waiting on {} access for the {}", f.tech, f.component),
            format!("Cannot finish {} until {} grants the {} service account access to {}.", f.ticket, f.person, f.component, f.tech),
            format!("{} access for the {}", f.tech, f.component),
        ),
        ("progress", 0) => (
            format!("Migrating the {} to {}", f.component, f.tech),
            format!("Moved {} of {} endpoints of the {} to {}; the rest are tracked in {}.", f.line % 40 + 1, f.line % 40 + 12, f.component, f.tech, f.ticket),
            format!("migrating the {} to {}", f.component, f.tech),
        ),
        ("progress", _) => (
            format!("{} done for the {}", f.ticket, f.component),
            format!("Finished {} for the {}: merged as {} after review from {}.", f.ticket, f.component, f.commit, f.person),
            format!("{} {}", f.ticket, f.component),
        ),
        ("context", 0) => (
            format!("{}'s team owns the {}", f.person, f.component),
            format!("The {} belongs to {}'s team; it talks to the {} over {}.", f.component, f.person, f.other_component, f.tech),
            format!("who owns the {}", f.component),
        ),
        ("context", _) => (
            format!("Where the {} lives", f.component),
            format!("The {} is implemented in {} and deployed with {}.", f.component, f.path, f.tech),
            format!("{} {}", f.component, f.path),
        ),
        ("tech-debt", 0) => (
            format!("The {} still uses {}", f.component, f.other_tech),
            format!("The {} still depends on {} in {}; replacing it with {} is worth a day ({}).", f.component, f.other_tech, f.path, f.tech, f.ticket),
            format!("{} still uses {}", f.component, f.other_tech),
        ),
        ("tech-debt", _) => (
            format!("Duplicated retry logic in {}", f.path),
            format!("{}:{} copies the retry loop of the {} instead of sharing it; both drift.", f.path, f.line, f.other_component),
            format!("duplicated retry logic {}", f.component),
        ),
        ("apis", 0) => {
            let resource = pick(rng, RESOURCES);
            (
                format!("POST /v1/{resource} returns 409 on replays"),
                format!("POST /v1/{resource} on the {} returns 409 when the idempotency key was used before, with the original id in the body.", f.component),
                format!("POST /v1/{resource} 409"),
            )
        }
        ("apis", _) => {
            let resource = pick(rng, RESOURCES);
            (
                format!("GET /v2/{resource} pagination"),
                format!("GET /v2/{resource} pages with an opaque cursor, at most 100 items; the {} ignores `offset`.", f.component),
                format!("{resource} pagination cursor"),
            )
        }
        ("config", 0) => {
            let var = pick(rng, ENV_VARS);
            (
                format!("{var} must be set for the {}", f.component),
                format!("The {} refuses to start without {var}; in staging it is read from {}.", f.component, f.path),
                format!("{var} {}", f.component),
            )
        }
        ("config", _) => (
            format!("{} connection pool size", f.tech),
            format!("The {} runs with a {} pool of {} connections; more exhausts the server's limit.", f.component, f.tech, f.line % 40 + 5),
            format!("{} pool size", f.tech),
        ),
        ("security", 0) => {
            let secret = pick(rng, SECRETS);
            (
                format!("Never log {secret}"),
                format!("The {} must redact {secret} before logging; {} found them in plain text in {}.", f.component, f.person, f.path),
                format!("log {secret}"),
            )
        }
        ("security", _) => (
            format!("{} tokens are scoped per tenant", f.component),
            format!("Tokens issued by the {} carry the tenant id and are checked against `{}.{}` on every request.", f.component, f.table, f.column),
            format!("{} tenant tokens", f.component),
        ),
        ("performance", 0) => (
            format!("{} p95 from {} ms to {} ms", f.component, f.before_ms, f.after_ms),
            format!("After we {}, the {} p95 went from {} ms to {} ms.", f.fix, f.component, f.before_ms, f.after_ms),
            format!("{} p95 latency", f.component),
        ),
        ("performance", _) => (
            format!("Slow query on {}.{}", f.table, f.column),
            format!("Queries on `{}` filtering by `{}` take {} ms without an index; the {} issues one per request.", f.table, f.column, f.before_ms, f.component),
            format!("slow query {} {}", f.table, f.column),
        ),
        ("testing", 0) => (
            format!("Flaky test in the {}", f.component),
            format!("The {} integration test fails one run in twenty with `{}`; the cause is {}.", f.component, f.error, f.cause),
            format!("flaky {} test", f.component),
        ),
        ("testing", _) => (
            format!("Run {} tests against a real {}", f.component, f.tech),
            format!("Tests of the {} run against a real {} started by the CI job in {}; mocks hid two bugs.", f.component, f.tech, f.path),
            format!("{} tests real {}", f.component, f.tech),
        ),
        ("preferences", 0) => (
            format!("{} prefers {} over {}", f.person, f.tech, f.other_tech),
            format!("{} prefers {} over {} for new work on the {}.", f.person, f.tech, f.other_tech, f.component),
            format!("{} prefers {}", f.person, f.tech),
        ),
        ("preferences", _) => (
            format!("{} wants small pull requests", f.person),
            // One limit per person: two memories giving a person's limit as two numbers would
            // be a changed preference, a real contradiction this corpus must not make by chance.
            format!("{} asks for pull requests under {} lines, one concern each, with the test in the same commit.", f.person, person_limit(f.person)),
            format!("{} pull request size", f.person),
        ),
        ("standards", 0) => {
            let (language, linter) = pick(rng, LANGUAGES);
            (
                format!("{language} code passes {linter} with no warnings"),
                format!("All {language} code, the {} included, must pass {linter} with warnings as errors before merge.", f.component),
                format!("{language} {linter} warnings"),
            )
        }
        (_, _) => (
            format!("Errors from the {} name the failing field", f.component),
            format!("Every error the {} returns names the field, the value received and how to fix it.", f.component),
            format!("{} error messages", f.component),
        ),
    };
    Lead { title, sentence, key_phrase }
}

/// Grows a lead into a one-liner (a third), a paragraph (two fifths) or a few paragraphs of
/// markdown with a heading, a list and an error block (the rest), the range of lengths agents
/// actually write.
fn elaborate(rng: &mut Rng, lead: &Lead, f: &Facts) -> String {
    match rng.usize(0..100) {
        0..35 => format!("{} ({})", lead.sentence, f.ticket),
        35..75 => {
            let count = rng.usize(2..5);
            let mut text = lead.sentence.clone();
            for sentence in details(rng, f, count) {
                text.push(' ');
                text.push_str(&sentence);
            }
            text
        }
        _ => {
            let (intro, bullets, follow_up) = (rng.usize(1..3), rng.usize(2..6), rng.usize(1..4));
            let mut sentences = details(rng, f, intro + bullets + follow_up).into_iter();
            let mut text = format!("# {}\n\n{}", lead.title, lead.sentence);
            for sentence in sentences.by_ref().take(intro) {
                text.push(' ');
                text.push_str(&sentence);
            }
            text.push_str("\n\n## Details\n\n");
            for sentence in sentences.by_ref().take(bullets) {
                text.push_str(&format!("- {sentence}\n"));
            }
            if rng.bool() {
                text.push_str(&format!("\nSeen in `{}` at line {}:\n\n```\n{}\n```\n", f.path, f.line, f.error));
            }
            text.push_str("\n## Follow-up\n\n");
            text.push_str(&sentences.collect::<Vec<_>>().join(" "));
            text
        }
    }
}

/// `count` different supporting sentences about the memory's facts, so that no memory says the
/// same thing twice.
fn details(rng: &mut Rng, f: &Facts, count: usize) -> Vec<String> {
    let mut variants: Vec<usize> = (0..DETAIL_VARIANTS).collect();
    rng.shuffle(&mut variants);
    variants.into_iter().take(count).map(|variant| detail(rng, f, variant)).collect()
}

const DETAIL_VARIANTS: usize = 16;

fn detail(rng: &mut Rng, f: &Facts, variant: usize) -> String {
    match variant {
        0 => format!("The root cause was {}.", f.cause),
        1 => format!("We {} in commit {}.", f.fix, f.commit),
        2 => format!("{} reviewed the change and asked for a regression test.", f.person),
        3 => format!("The relevant code is in `{}` around line {}.", f.path, f.line),
        4 => format!("Under load the {} logged `{}` a few times an hour.", f.component, f.error),
        5 => format!("This also affects the {}, which shares the {} client.", f.other_component, f.tech),
        6 => format!("Latency went from {} ms to {} ms at p95.", f.before_ms, f.after_ms),
        7 => format!("Tracked in {}; {} owns the follow-up.", f.ticket, f.person),
        8 => format!("The `{}` table needs an index on `{}` before the next release.", f.table, f.column),
        9 => format!("{} was considered and rejected because {}.", f.other_tech, pick(rng, REASONS)),
        10 => format!("Do not revert this without talking to {} first.", f.person),
        11 => format!("The same approach should apply to the {} once it moves to {}.", f.other_component, f.tech),
        12 => format!("Set `{}` in the deploy config to override it per environment.", pick(rng, ENV_VARS)),
        13 => format!("Use {} here, as elsewhere in the codebase.", pick(rng, PATTERNS)),
        14 => format!("Reproduce with `make test` after pointing the {} at a local {}.", f.component, f.tech),
        _ => format!("{} confirmed the fix on staging on day {} of the sprint.", f.person, f.line % 10 + 1),
    }
}

fn tags(rng: &mut Rng, namespace: &str, f: &Facts) -> Vec<String> {
    let mut tags = vec![slug(f.component)];
    if rng.bool() {
        tags.push(slug(f.tech));
    }
    if rng.usize(0..3) == 0 {
        tags.push(namespace.to_owned());
    }
    for _ in 0..rng.usize(0..3) {
        tags.push(pick(rng, EXTRA_TAGS).to_owned());
    }
    tags
}

/// Weighted towards what agents mostly capture: their own conclusions and tool output.
fn source(rng: &mut Rng) -> &'static str {
    match rng.usize(0..100) {
        0..30 => "model-generated",
        30..50 => "inference",
        50..70 => "tool-result",
        70..85 => "direct-observation",
        _ => "told-by-user",
    }
}

fn metadata(rng: &mut Rng, f: &Facts) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    if rng.usize(0..10) < 3 {
        metadata.insert("ticket".to_owned(), f.ticket.clone());
    }
    if rng.usize(0..5) == 0 {
        metadata.insert("branch".to_owned(), format!("{}/{}", pick(rng, &["feat", "fix", "chore"]), slug(f.component)));
    }
    if rng.usize(0..7) == 0 {
        metadata.insert("commit".to_owned(), f.commit.clone());
    }
    metadata
}

/// The most lines a person wants in a pull request, always the same for the same person.
fn person_limit(person: &str) -> u32 {
    person.bytes().map(u32::from).sum::<u32>() % 300 + 100
}

/// A stored key phrase as a user might retype it: as is, lower-cased, or missing a word.
fn paraphrase(rng: &mut Rng, phrase: &str) -> String {
    match rng.usize(0..3) {
        0 => phrase.to_owned(),
        1 => phrase.to_lowercase(),
        _ => {
            let words: Vec<&str> = phrase.split_whitespace().collect();
            if words.len() < 3 {
                return phrase.to_owned();
            }
            let dropped = rng.usize(0..words.len());
            words.iter().enumerate().filter(|(i, _)| *i != dropped).map(|(_, word)| *word).collect::<Vec<_>>().join(" ")
        }
    }
}

fn question(rng: &mut Rng) -> String {
    let component = pick(rng, COMPONENTS);
    let tech = pick(rng, TECHNOLOGIES);
    match rng.usize(0..10) {
        0 => format!("why did we choose {tech} for the {component}?"),
        1 => format!("how do I fix {} in the {component}?", pick(rng, ERRORS)),
        2 => format!("who owns the {component}?"),
        3 => format!("what is blocking the {component} deploy?"),
        4 => format!("how fast is the {component} after the last change?"),
        5 => format!("what are the conventions for {} code?", pick(rng, LANGUAGES).0),
        6 => format!("which environment variables does the {component} need?"),
        7 => format!("is the {component} test flaky?"),
        8 => format!("what did {} say about {tech}?", pick(rng, PEOPLE)),
        _ => format!("how should the {component} call {tech}?"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use chrono::Utc;
    use kenning_core::input::build_memory;
    use kenning_core::{Domain, MemoryId};

    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_corpus_and_another_seed_another() {
        let (a, b, c) = (Corpus::new(7), Corpus::new(7), Corpus::new(8));
        for index in [0, 1, 500, 99_999] {
            assert_eq!(a.memory(index), b.memory(index));
            assert_ne!(a.memory(index), c.memory(index));
            assert_eq!(a.query(index, 1000), b.query(index, 1000));
        }
    }

    #[test]
    fn memories_are_valid_and_varied() {
        let corpus = Corpus::new(42);
        let inputs: Vec<CaptureInput> = (0..2000).map(|index| corpus.memory(index)).collect();
        let id = MemoryId::parse("bench").unwrap();
        for input in &inputs {
            build_memory(input.clone(), Domain::User, id.clone(), Utc::now()).expect("a generated memory is valid");
        }
        let namespaces: HashSet<_> = inputs.iter().filter_map(|input| input.namespace.clone()).collect();
        assert_eq!(namespaces.len(), BUILT_IN_NAMESPACES.len());
        let contents: HashSet<_> = inputs.iter().map(|input| (&input.namespace, &input.content)).collect();
        assert!(contents.len() >= inputs.len() * 99 / 100, "only {} distinct memories", contents.len());
        let lengths: Vec<usize> = inputs.iter().map(|input| input.content.len()).collect();
        assert!(lengths.iter().any(|&length| length < 200), "no one-liners");
        assert!(lengths.iter().any(|&length| length > 800), "no long memories");
        assert!(inputs.iter().any(|input| input.title.is_none()) && inputs.iter().any(|input| input.title.is_some()));
        let queries: HashSet<String> = (0..200).map(|index| corpus.query(index, inputs.len())).collect();
        assert!(queries.len() > 150, "only {} distinct queries", queries.len());
    }

    #[test]
    fn slugs_are_valid_tags() {
        assert_eq!(slug("GitHub Actions"), "github-actions");
        assert_eq!(slug("Node.js"), "node-js");
        assert_eq!(slug("feature-flag client"), "feature-flag-client");
    }
}

#[cfg(test)]
mod contradiction_precision {
    /// The synthetic corpus writes many notes from the same templates with different values,
    /// components and tickets ("latency went from 851 ms to 207 ms", "moving to X is tracked in
    /// KEN-1"): look-alike sentences that do not conflict, which is what contradiction detection
    /// must leave alone. Among every pair of 250 memories (31,125 pairs) at most two may be
    /// reported.
    #[test]
    fn look_alike_notes_are_not_contradictions() {
        let corpus = super::Corpus::new(42);
        let memories: Vec<String> = (0..250).map(|index| corpus.memory(index).content).collect();
        let mut reported = Vec::new();
        for (index, newer) in memories.iter().enumerate() {
            for older in &memories[..index] {
                if let Some(detection) = kenning_core::contradiction::detect(older, newer, None) {
                    reported.push(format!("{:?}: {:?} / {:?}\n   OLD {older}\n   NEW {newer}", detection.kind, detection.older, detection.newer));
                }
            }
        }
        assert!(reported.len() <= 2, "{} pairs reported:\n{}", reported.len(), reported.join("\n"));
    }
}
