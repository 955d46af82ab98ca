//! Every page and action of the web view against a real server on a loopback port, over real
//! SQLite stores, with a minimal HTTP/1.1 client: the pages, pagination, forget and restore,
//! and each refusal (CSRF, Origin, Host, read-only, keys, bad input naming the field); the
//! sign-in session, redirects, response headers, scoped keys and the audit log.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kenning_core::decision::{CaptureDecision, DecisionStore, ModuleList, OutcomeInput, SignalInput};
use kenning_core::{CaptureInput, Domain, MemoryStore};
use kenning_engine::{DecisionDomain, DecisionService, DomainStore, MemoryService};
use kenning_gateway::{Access, AuditLog, Authenticator, KeyStore, RateLimiter, RateLimits, Scope};
use kenning_sqlite::SqliteStore;
use kenning_web::{Web, WebOptions};

struct Server {
    dir: tempfile::TempDir,
    address: SocketAddr,
    memory: Arc<MemoryService>,
    decisions: Arc<DecisionService>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn start(options: WebOptions, limits: RateLimits, with_key: bool) -> (Server, Option<String>) {
    start_with_domains(options, limits, with_key, &[Domain::User])
}

/// A server over one SQLite store per domain, the first the default.
fn start_with_domains(options: WebOptions, limits: RateLimits, with_key: bool, domains: &[Domain]) -> (Server, Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<(Domain, Arc<SqliteStore>)> = domains
        .iter()
        .map(|domain| {
            let file = if *domain == Domain::User { "user.db".to_owned() } else { format!("{}.db", domain.scope()) };
            (domain.clone(), Arc::new(SqliteStore::open(&dir.path().join(file)).unwrap()))
        })
        .collect();
    let memory = Arc::new(MemoryService::new(
        stores.iter().map(|(domain, store)| DomainStore { domain: domain.clone(), store: store.clone() as Arc<dyn MemoryStore> }).collect(),
        None,
    ));
    let decisions = Arc::new(DecisionService::new(
        memory.clone(),
        stores.into_iter().map(|(domain, store)| DecisionDomain { domain, store: store as Arc<dyn DecisionStore> }).collect(),
        ModuleList::default(),
    ));
    let keys = KeyStore::new(dir.path().join("keys.json"));
    let secret = with_key.then(|| keys.create("browser", Some("ada"), Scope::default(), chrono::Utc::now()).unwrap().secret);
    let access = Access {
        authenticator: Arc::new(Authenticator::new(keys, false).unwrap()),
        limiter: Arc::new(RateLimiter::new(limits)),
        audit: Some(Arc::new(AuditLog::open(dir.path().join("audit.jsonl")).unwrap())),
    };
    let web = Web::new(memory.clone(), decisions.clone(), access, options).unwrap();
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            address_tx.send(listener.local_addr().unwrap()).unwrap();
            kenning_web::serve(web, listener, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
    });
    let address = address_rx.recv().unwrap();
    (Server { dir, address, memory, decisions, stop: Some(stop), thread: Some(thread) }, secret)
}

fn server() -> Server {
    start(WebOptions::default(), RateLimits::default(), false).0
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// The `name=value` of the session cookie the response sets.
    fn session_cookie(&self) -> String {
        self.headers
            .iter()
            .filter(|(key, _)| key.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, value)| value.split(';').next().unwrap_or_default())
            .find(|cookie| cookie.starts_with("kenning_session="))
            .expect("a session cookie")
            .to_owned()
    }

    fn has(&self, text: &str) -> bool {
        self.body.contains(text)
    }
}

impl Server {
    fn send(&self, method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut stream = TcpStream::connect(self.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut request = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: {}\r\n", self.address));
        }
        if method == "POST" {
            request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        parse(&raw)
    }

    fn get(&self, target: &str) -> Reply {
        self.send("GET", target, &[], "")
    }

    fn post(&self, target: &str, form: &[(&str, &str)]) -> Reply {
        self.send("POST", target, &[], &encode(form))
    }

    /// Creates a key with `scope` in the server's key file; the server sees it at once.
    fn key(&self, name: &str, scope: Scope) -> String {
        KeyStore::new(self.dir.path().join("keys.json")).create(name, None, scope, chrono::Utc::now()).unwrap().secret
    }

    /// Signs in with `secret` and returns the session cookie.
    fn sign_in(&self, secret: &str) -> String {
        let form = self.get("/login");
        let signed = self.post("/login", &[("csrf_token", &token(&form)), ("key", secret)]);
        assert_eq!(signed.status, 303, "{}", signed.body);
        signed.session_cookie()
    }

    fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn capture(&self, title: &str, content: &str, namespace: &str, tags: &[&str]) -> String {
        let input = CaptureInput {
            content: content.to_owned(),
            title: Some(title.to_owned()),
            namespace: Some(namespace.to_owned()),
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            ..CaptureInput::default()
        };
        self.memory.capture(input, None).unwrap().urn
    }
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> =
        lines.filter_map(|line| line.split_once(':')).map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned())).collect();
    let chunked = headers.iter().any(|(name, value)| name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked"));
    let body = if chunked { dechunk(body) } else { body.to_owned() };
    Reply { status, headers, body }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size..].trim_start_matches("\r\n");
    }
    out
}

fn encode(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

fn query(path: &str, pairs: &[(&str, &str)]) -> String {
    format!("{path}?{}", encode(pairs))
}

/// The value of the hidden CSRF field of the page's own form (in `<main>`, after the sign-out
/// form of the header).
fn token(page: &Reply) -> String {
    let main = &page.body[page.body.find("<main").expect("a page")..];
    let start = main.find("name=\"csrf_token\" value=\"").expect("a form with a token") + "name=\"csrf_token\" value=\"".len();
    main[start..].split('"').next().unwrap().to_owned()
}

#[test]
fn overview_shows_counts_index_health_and_decisions() {
    let server = server();
    server.capture("Pool size", "The connection pool holds 20 connections.", "config", &["database"]);
    let page = server.get("/");
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.has("<strong>1</strong> memories"), "{}", page.body);
    // Both forms of the health report are headed "Index health"; the domain's line says
    // whether its full-text index is in step, which a fresh capture leaves it.
    assert!(page.has("Index health") && page.has("Full-text index in step;"), "{}", page.body);
    assert!(page.has("href=\"/memories?domain=user&amp;namespace=config\""), "namespace counts link to the search");
    assert!(page.has("href=\"/decisions?status=pending\""));
    for asset in ["/assets/app.css", "/assets/app.js", "/favicon.svg"] {
        let reply = server.get(asset);
        assert_eq!(reply.status, 200, "{asset}");
        assert!(!reply.body.is_empty());
    }
    assert!(server.get("/assets/app.css").has("prefers-color-scheme: dark"));
    assert!(server.get("/healthz").has("\"status\":\"ok\""));
    assert_eq!(server.get("/nothing-here").status, 404);
}

#[test]
fn search_recalls_with_filters_and_pages_by_cursor() {
    let server = server();
    for n in 0..25 {
        server.capture(&format!("Retry policy {n}"), &format!("Network retries use exponential backoff, attempt {n}."), "learnings", &["network"]);
    }
    server.capture("Cache choice", "Redis holds the session cache.", "decisions", &["cache"]);
    let page = server.get(&query("/memories", &[("q", "exponential backoff retries")]));
    assert_eq!(page.status, 200);
    assert_eq!(page.body.matches("<article>").count(), 20, "a page holds 20 results");
    assert!(page.has("rel=\"next\""));
    let next = page.body.split("href=\"").filter_map(|rest| rest.split('"').next()).find(|href| href.contains("cursor=")).unwrap().replace("&amp;", "&");
    let second = server.get(&next);
    assert_eq!(second.status, 200);
    assert_eq!(second.body.matches("<article>").count(), 5);
    assert!(second.has("rel=\"first\"") && !second.has("rel=\"next\""));

    let filtered = server.get(&query("/memories", &[("q", "cache backoff"), ("namespace", "decisions")]));
    assert!(filtered.has("Cache choice") && !filtered.has("Retry policy"), "{}", filtered.body);
    let tagged = server.get(&query("/memories", &[("q", "cache backoff"), ("tag", "network")]));
    assert!(!tagged.has("Cache choice") && tagged.has("Retry policy"));
    let later = server.get(&query("/memories", &[("q", "backoff"), ("since", "2999-01-01")]));
    assert!(later.has("Nothing found"));

    let browse = server.get(&query("/memories", &[("namespace", "decisions")]));
    assert!(browse.has("Cache choice") && browse.has("1 of 1 memories"), "{}", browse.body);
}

#[test]
fn bad_search_input_names_the_field() {
    let server = server();
    for (pairs, field) in [
        (vec![("q", "pool"), ("limit", "many")], "limit"),
        (vec![("q", "pool"), ("kind", "dream")], "kinds"),
        (vec![("q", "pool"), ("since", "yesterday-ish")], "since"),
        (vec![("q", "pool"), ("domain", "org:nowhere")], "domains"),
        (vec![("q", "pool"), ("cursor", "forged")], "cursor"),
    ] {
        let reply = server.get(&query("/memories", &pairs));
        assert_eq!(reply.status, 400, "{pairs:?}");
        assert!(reply.has(&format!("<code class=\"field\">{field}</code>")), "{field}: {}", reply.body);
        assert!(reply.has("class=\"suggestion\""));
    }
    let reply = server.get("/memory");
    assert_eq!(reply.status, 400);
    assert!(reply.has("<code class=\"field\">urn</code>"));
    let reply = server.get(&query("/memory", &[("urn", "kenning://user/context/01zzzzzzzzzzzzzzzzzzzzzzzz")]));
    assert_eq!(reply.status, 404);
    let reply = server.get(&query("/memory", &[("urn", "not a urn")]));
    assert_eq!(reply.status, 400);
}

#[test]
fn a_memory_shows_content_links_and_paged_history() {
    let server = server();
    let target = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    let input = CaptureInput {
        content: "Raise the pool when <load> grows & say why.".to_owned(),
        title: Some("Pool tuning".to_owned()),
        links: vec![kenning_core::LinkInput { target: target.clone(), relation: Some("refines".to_owned()) }],
        ..CaptureInput::default()
    };
    let urn = server.memory.capture(input, None).unwrap().urn;
    for n in 0..12 {
        let update = kenning_core::UpdateInput { reason: format!("edit {n}"), content: Some(format!("Version {n} of the advice.")), ..Default::default() };
        server.memory.update(&urn, update).unwrap();
    }
    let page = server.get(&query("/memory", &[("urn", &urn)]));
    assert_eq!(page.status, 200);
    assert!(page.has("Pool tuning") && page.has("Version 11 of the advice."));
    assert!(page.has("refines") && page.has(&urn.replace("://", "://")));
    assert!(page.has(&format!("href=\"/memory?urn={}\"", encode(&[("", &target)]).trim_start_matches('='))), "links open the linked memory");
    assert_eq!(page.body.matches("<details><summary>version").count(), 10, "ten versions a page");
    assert!(page.has("versions 1-10 of 12") && page.has("rel=\"next\""));
    let older = server.get(&query("/memory", &[("urn", &urn), ("versions", "10")]));
    assert_eq!(older.body.matches("<details><summary>version").count(), 2);
    assert!(older.has("Raise the pool when &lt;load&gt; grows &amp; say why."), "content is escaped: {}", older.body);
    assert!(page.has("href=\"/memory/forget?urn="));
}

#[test]
fn forget_and_restore_go_through_a_confirmation_with_a_token() {
    let server = server();
    let urn = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    let confirm = server.get(&query("/memory/forget", &[("urn", &urn)]));
    assert_eq!(confirm.status, 200);
    assert!(confirm.has("Forget this memory?") && confirm.has("name=\"reason\""));
    let csrf = token(&confirm);

    // No reason: the form comes back naming the field, nothing changes.
    let refused = server.post("/memory/forget", &[("urn", &urn), ("csrf_token", &csrf), ("reason", " ")]);
    assert_eq!(refused.status, 400);
    assert!(refused.has("<code class=\"field\">reason</code>"), "{}", refused.body);
    assert_eq!(server.memory.get(&urn).unwrap().status, "active");

    let done = server.post("/memory/forget", &[("urn", &urn), ("csrf_token", &csrf), ("reason", "superseded by the new pool")]);
    assert_eq!(done.status, 303, "{}", done.body);
    assert!(done.header("location").unwrap().contains("done=forgotten"));
    assert_eq!(server.memory.get(&urn).unwrap().status, "forgotten");
    let shown = server.get(done.header("location").unwrap());
    assert!(shown.has("Forgotten: recall no longer finds it") && shown.has("superseded by the new pool"));
    assert!(!server.get(&query("/memories", &[("q", "pool connections")])).has("Pool size"));
    assert!(server.get(&query("/memories", &[("forgotten", "1")])).has("Pool size"), "browsing can include forgotten memories");

    let confirm = server.get(&query("/memory/restore", &[("urn", &urn)]));
    let csrf_restore = token(&confirm);
    // A token made for forgetting does not restore.
    let wrong = server.post("/memory/restore", &[("urn", &urn), ("csrf_token", &csrf), ("reason", "back")]);
    assert_eq!(wrong.status, 403);
    let done = server.post("/memory/restore", &[("urn", &urn), ("csrf_token", &csrf_restore), ("reason", "still true")]);
    assert_eq!(done.status, 303);
    assert_eq!(server.memory.get(&urn).unwrap().status, "active");
    let audit = std::fs::read_to_string(server.dir.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"tool\":\"POST /memory/forget\"") && audit.contains("\"tool\":\"POST /memory/restore\""), "{audit}");
}

#[test]
fn writes_without_a_valid_token_are_refused() {
    let server = server();
    let urn = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    let other = server.capture("Cache", "Redis holds sessions.", "config", &[]);
    let token_for_other = token(&server.get(&query("/memory/forget", &[("urn", &other)])));
    for csrf in ["", "12345.abcdef", token_for_other.as_str(), "1.0000000000000000000000000000000000000000000000000000000000000000"] {
        let reply = server.post("/memory/forget", &[("urn", &urn), ("csrf_token", csrf), ("reason", "attack")]);
        assert_eq!(reply.status, 403, "{csrf}");
        assert!(reply.has("security token"), "{}", reply.body);
    }
    assert_eq!(server.memory.get(&urn).unwrap().status, "active");
}

#[test]
fn foreign_origins_and_hosts_are_refused() {
    let server = server();
    let urn = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    let csrf = token(&server.get(&query("/memory/forget", &[("urn", &urn)])));
    let body = encode(&[("urn", &urn), ("csrf_token", &csrf), ("reason", "from elsewhere")]);
    let reply = server.send("POST", "/memory/forget", &[("Origin", "http://evil.example")], &body);
    assert_eq!(reply.status, 403);
    assert!(reply.has("Origin is not allowed"));
    assert_eq!(server.memory.get(&urn).unwrap().status, "active");
    assert_eq!(server.send("GET", "/", &[("Origin", "https://localhost:1")], "").status, 403);
    // A page reached through DNS rebinding names its own host.
    let rebound = server.send("GET", "/memories?q=pool", &[("Host", "attacker.example:7777")], "");
    assert_eq!(rebound.status, 403);
    assert!(!rebound.has("Pool size"));
    let local = server.send("POST", "/memory/forget", &[("Origin", &format!("http://{}", server.address))], &body);
    assert_eq!(local.status, 303, "the page's own origin passes");
}

#[test]
fn a_read_only_server_refuses_every_change() {
    let (server, _) = start(WebOptions { read_only: true }, RateLimits::default(), false);
    let urn = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    let page = server.get(&query("/memory", &[("urn", &urn)]));
    assert!(page.has("read-only") && !page.has("/memory/forget?"), "no forget button");
    assert_eq!(server.get(&query("/memory/forget", &[("urn", &urn)])).status, 403);
    let reply = server.post("/memory/forget", &[("urn", &urn), ("csrf_token", "x"), ("reason", "r")]);
    assert_eq!(reply.status, 403);
    assert!(reply.has("read-only"));
    assert_eq!(server.post("/memory/restore", &[("urn", &urn), ("reason", "r")]).status, 403);
    assert_eq!(server.memory.get(&urn).unwrap().status, "active");
}

#[test]
fn with_keys_every_page_needs_one_and_the_key_is_rate_limited() {
    let limits = RateLimits { queries: 5, ..RateLimits::default() };
    let (server, secret) = start(WebOptions::default(), limits, true);
    let secret = secret.unwrap();
    let urn = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    for path in ["/", "/memories?q=pool", "/decisions", "/calibration", "/events"] {
        let reply = server.get(path);
        assert_eq!(reply.status, 401, "{path}");
        assert!(reply.has("href=\"/login\""));
    }
    assert_eq!(server.send("GET", "/", &[("Cookie", "kenning_session=0000")], "").status, 401);
    assert_eq!(server.send("GET", "/", &[("Cookie", &format!("kenning_key={secret}"))], "").status, 401, "the key is never a cookie");
    assert_eq!(server.get("/healthz").status, 200);
    assert_eq!(server.get("/assets/app.css").status, 200);

    // Sign in: a wrong key is refused naming the field, the right one sets the cookie.
    let form = server.get("/login");
    assert_eq!(form.status, 200);
    let wrong = server.post("/login", &[("csrf_token", &token(&form)), ("key", "kenning_nope"), ("next", "/memories")]);
    assert_eq!(wrong.status, 401);
    assert!(wrong.has("<code class=\"field\">key</code>"));
    assert_eq!(server.post("/login", &[("key", &secret)]).status, 403, "sign-in forms carry a token too");
    let signed = server.post("/login", &[("csrf_token", &token(&form)), ("key", &secret), ("next", "//evil.example/")]);
    assert_eq!(signed.status, 303);
    assert_eq!(signed.header("location"), Some("/"), "never redirected off the site");
    let cookie = signed.session_cookie();
    assert!(signed.header("set-cookie").unwrap().contains("HttpOnly") && signed.header("set-cookie").unwrap().contains("SameSite=Strict"));
    let page = server.send("GET", &query("/memory", &[("urn", &urn)]), &[("Cookie", &cookie)], "");
    assert_eq!(page.status, 200);
    assert!(page.has("ada") && page.has("Sign out"), "the key's identity is shown");
    let bearer = format!("Bearer {secret}");
    assert_eq!(server.send("GET", "/", &[("Authorization", &bearer)], "").status, 200);

    // Forms are bound to the key that was served them.
    let confirm = server.send("GET", &query("/memory/forget", &[("urn", &urn)]), &[("Cookie", &cookie)], "");
    let body = encode(&[("urn", &urn), ("csrf_token", &token(&confirm)), ("reason", "old")]);
    assert_eq!(server.send("POST", "/memory/forget", &[("Cookie", &cookie)], &body).status, 303);

    let mut limited = None;
    for _ in 0..10 {
        let reply = server.send("GET", "/decisions", &[("Cookie", &cookie)], "");
        if reply.status == 429 {
            limited = Some(reply);
            break;
        }
    }
    let limited = limited.expect("the query limit of 5 a minute is enforced");
    assert!(limited.header("retry-after").is_some());
    assert!(limited.has("browser"), "names the key: {}", limited.body);

    // Signing out (a form of the header, with its own token) forgets the cookie.
    let header_token = {
        let start = page.body.find("name=\"csrf_token\" value=\"").unwrap() + "name=\"csrf_token\" value=\"".len();
        page.body[start..].split('"').next().unwrap().to_owned()
    };
    assert_eq!(server.send("POST", "/logout", &[("Cookie", &cookie)], "").status, 403, "signing out needs the token too");
    let out = server.send("POST", "/logout", &[("Cookie", &cookie)], &encode(&[("csrf_token", &header_token)]));
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
}

fn seed_decisions(server: &Server) -> String {
    let mut first = String::new();
    let plans: [(&str, &str, f64, &str, f64); 8] = [
        ("Use PostgreSQL advisory locks for the job queue", "database", 0.9, "success", 1.0),
        ("Use PostgreSQL partial indexes for active rows", "database", 0.8, "success", 1.0),
        ("Use PostgreSQL listen notify for cache invalidation", "database", 0.9, "failure", 0.0),
        ("Use a read replica for reporting queries", "database", 0.7, "partial", 0.5),
        ("Use JWT access tokens with short expiry", "auth", 0.95, "failure", 0.0),
        ("Use JWT refresh tokens stored server side", "auth", 0.9, "failure", 0.0),
        ("Use JWT audience checks on every service", "auth", 0.85, "success", 1.0),
        ("Use OAuth device flow for the CLI", "auth", 0.6, "success", 1.0),
    ];
    for (statement, module, confidence, status, score) in plans {
        let captured = server
            .decisions
            .capture(
                CaptureDecision {
                    statement: statement.to_owned(),
                    alternatives: Some(vec!["do nothing".to_owned()]),
                    confidence: Some(confidence),
                    module: Some(module.to_owned()),
                    ..CaptureDecision::default()
                },
                None,
            )
            .unwrap();
        let id = captured.decision_id.clone();
        if first.is_empty() {
            first = id.clone();
        }
        server
            .decisions
            .record_signal(&id, SignalInput { signal_type: "ci_passed".to_owned(), valence: "positive".to_owned(), description: Some("green build".to_owned()), ..SignalInput::default() })
            .unwrap();
        server
            .decisions
            .record_outcome(
                &id,
                OutcomeInput { final_status: status.to_owned(), final_score: Some(score), lessons_learned: vec![format!("lesson of {statement}")], ..OutcomeInput::default() },
            )
            .unwrap();
    }
    server
        .decisions
        .capture(
            CaptureDecision {
                statement: "Use Redis for rate limiting counters".to_owned(),
                alternatives: Some(vec!["in memory".to_owned()]),
                confidence: Some(0.7),
                module: Some("infra".to_owned()),
                ..CaptureDecision::default()
            },
            None,
        )
        .unwrap();
    first
}

#[test]
fn decisions_list_by_status_and_module_and_one_decision_in_full() {
    let server = server();
    let first = seed_decisions(&server);
    let all = server.get("/decisions");
    assert_eq!(all.status, 200);
    assert!(all.has("9 of 9 decisions"), "{}", all.body);
    let pending = server.get("/decisions?status=pending");
    assert!(pending.has("Use Redis for rate limiting counters") && pending.has("1 of 1 decisions"));
    let auth = server.get("/decisions?module=auth");
    assert!(auth.has("4 of 4 decisions") && !auth.has("PostgreSQL"));
    let text = server.get(&query("/decisions", &[("q", "JWT tokens")]));
    assert!(text.has("JWT") && !text.has("read replica"));
    let paged = server.get("/decisions?limit=5");
    assert!(paged.has("5 of 9 decisions") && paged.has("rel=\"next\""));
    let bad = server.get("/decisions?status=done");
    assert_eq!(bad.status, 400);
    assert!(bad.has("<code class=\"field\">status</code>"));
    assert!(server.get("/decisions?module=payments").has("<code class=\"field\">module</code>"));

    let detail = server.get(&query("/decision", &[("id", &first)]));
    assert_eq!(detail.status, 200);
    assert!(detail.has("Use PostgreSQL advisory locks for the job queue"));
    assert!(detail.has("ci_passed") && detail.has("green build"), "signals");
    assert!(detail.has("lesson of Use PostgreSQL advisory locks"), "outcome and lessons");
    assert!(detail.has("Similar decisions"));
    assert_eq!(server.get("/decision?id=dec_doesnotexist").status, 404);
    assert_eq!(server.get("/decision?id=nonsense").status, 400);
}

#[test]
fn calibration_shows_the_diagram_table_skills_and_warnings() {
    let server = server();
    seed_decisions(&server);
    let page = server.get("/calibration");
    assert_eq!(page.status, 200);
    assert!(page.has("src=\"/calibration/diagram.svg\""));
    assert!(page.has(">overall<") && page.has(">auth</a>") && page.has(">database</a>"), "{}", page.body);
    assert!(page.has("Warnings") && page.has("Skills") && page.has("Antipatterns"));
    let svg = server.get("/calibration/diagram.svg");
    assert_eq!(svg.status, 200);
    assert_eq!(svg.header("content-type"), Some("image/svg+xml"));
    assert!(svg.has("<svg") && svg.has("overall"));
    let png = {
        let mut stream = TcpStream::connect(server.address).unwrap();
        write!(stream, "GET /calibration/diagram.png HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.address).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        raw
    };
    let start = png.windows(4).position(|window| window == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(&png[start..start + 8], b"\x89PNG\r\n\x1a\n");
    let module = server.get("/calibration?module=auth");
    assert!(module.has("Calibration of auth decisions") && module.has("src=\"/calibration/diagram.svg?module=auth\""));
    let checked = server.get(&query("/calibration", &[("statement", "Use JWT access tokens for the admin API"), ("confidence", "0.95"), ("module", "auth")]));
    assert!(checked.has("Firewall"), "{}", checked.body);
    let bad = server.get("/calibration?module=payments");
    assert_eq!(bad.status, 400);
    assert!(bad.has("<code class=\"field\">module</code>"));
    assert!(server.get("/calibration?confidence=2").has("<code class=\"field\">confidence</code>"));
}

#[test]
fn events_announce_changes_from_the_store() {
    let server = server();
    let listen = || {
        let mut stream = TcpStream::connect(server.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        write!(stream, "GET /events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n", server.address).unwrap();
        stream
    };
    let read_until = |stream: &mut TcpStream, needle: &str, seen: &mut String| {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buffer = [0u8; 4096];
        while !seen.contains(needle) && Instant::now() < deadline {
            if let Ok(count) = stream.read(&mut buffer) {
                seen.push_str(&String::from_utf8_lossy(&buffer[..count]));
            }
        }
        seen.contains(needle)
    };
    let mut stream = listen();
    let mut seen = String::new();
    // `ready` comes once the poller has read the marks with this stream listening.
    assert!(read_until(&mut stream, "event: ready", &mut seen), "{seen}");
    assert!(seen.contains("text/event-stream"));
    // Reads, then a second stream's `ready`: the poller has looked at the store after them, and
    // announced to the first stream whatever that look found.
    assert_eq!(server.get("/").status, 200);
    assert_eq!(server.get("/memories?q=pool").status, 200);
    let mut probe = listen();
    let mut probed = String::new();
    assert!(read_until(&mut probe, "event: ready", &mut probed), "{probed}");
    // What the first stream was sent, read until it goes quiet for one read timeout.
    let mut buffer = [0u8; 4096];
    while let Ok(count @ 1..) = stream.read(&mut buffer) {
        seen.push_str(&String::from_utf8_lossy(&buffer[..count]));
    }
    assert!(!seen.contains("event: change"), "reads alone announce nothing: {seen}");
    // A change from outside the web view, as a hook or another process would make.
    let other = SqliteStore::open(&server.dir.path().join("user.db")).unwrap();
    let memory = MemoryService::new(vec![DomainStore { domain: Domain::User, store: Arc::new(other) }], None);
    memory.capture(CaptureInput { content: "Captured by another process.".to_owned(), ..CaptureInput::default() }, None).unwrap();
    assert!(read_until(&mut stream, "event: change", &mut seen), "a capture is announced: {seen}");
}

#[test]
fn the_sign_in_cookie_is_an_opaque_session_that_sign_out_and_revocation_end() {
    let (server, secret) = start(WebOptions::default(), RateLimits::default(), true);
    let secret = secret.unwrap();
    let form = server.get("/login");
    let signed = server.post("/login", &[("csrf_token", &token(&form)), ("key", &secret)]);
    let cookie = signed.session_cookie();
    let digits = &secret["kenning_".len()..];
    for (name, value) in signed.headers.iter().filter(|(name, _)| name.eq_ignore_ascii_case("set-cookie")) {
        assert!(!value.contains(digits), "{name}: {value} holds the key");
    }
    assert!(signed.header("set-cookie").unwrap().contains("Max-Age="), "the session expires");
    assert!(
        signed.headers.iter().any(|(name, value)| name.eq_ignore_ascii_case("set-cookie") && value.starts_with("kenning_key=;")),
        "the cookie earlier versions kept the key in is removed"
    );
    assert_eq!(server.send("GET", "/", &[("Cookie", &cookie)], "").status, 200);
    let token_only = cookie.split_once('=').unwrap().1;
    assert_eq!(server.send("GET", "/", &[("Authorization", &format!("Bearer {token_only}"))], "").status, 401, "a session is no API key");

    // Signing out ends the session on the server, not only in the browser.
    let page = server.send("GET", "/", &[("Cookie", &cookie)], "");
    let header_token = {
        let start = page.body.find("name=\"csrf_token\" value=\"").unwrap() + "name=\"csrf_token\" value=\"".len();
        page.body[start..].split('"').next().unwrap().to_owned()
    };
    assert_eq!(server.send("POST", "/logout", &[("Cookie", &cookie)], &encode(&[("csrf_token", &header_token)])).status, 303);
    assert_eq!(server.send("GET", "/", &[("Cookie", &cookie)], "").status, 401, "a session signed out of is over");

    // Revoking the key ends every session opened with it.
    let again = server.sign_in(&secret);
    assert_eq!(server.send("GET", "/", &[("Cookie", &again)], "").status, 200);
    KeyStore::new(server.dir.path().join("keys.json")).revoke("browser", chrono::Utc::now()).unwrap();
    let revoked = server.send("GET", "/", &[("Cookie", &again)], "");
    assert_eq!(revoked.status, 401);
    assert!(revoked.has("revoked"), "{}", revoked.body);
}

#[test]
fn sign_in_redirects_stay_on_this_site() {
    let (server, secret) = start(WebOptions::default(), RateLimits::default(), true);
    let secret = secret.unwrap();
    for next in [
        "//evil.example/",
        "/\t/evil.example",
        "/\n/evil.example",
        "/\\evil.example",
        "\\/evil.example",
        "/\r\n/evil.example",
        "https://evil.example",
        "http:evil.example",
        "javascript:alert(1)",
        "%2F%2Fevil.example",
        " //evil.example",
    ] {
        let form = server.get(&query("/login", &[("next", next)]));
        assert_eq!(form.status, 200);
        assert!(form.has("name=\"next\" value=\"/\""), "{next:?} is not offered back: {}", form.body);
        let signed = server.post("/login", &[("csrf_token", &token(&form)), ("key", &secret), ("next", next)]);
        assert_eq!(signed.status, 303, "{next:?}");
        assert_eq!(signed.header("location"), Some("/"), "{next:?}");
    }
    // The raw query string the finding named: `%2F%09%2Fevil` is `/`, a tab, `/evil`.
    let form = server.get("/login?next=%2F%09%2Fevil");
    assert!(form.has("name=\"next\" value=\"/\""), "{}", form.body);
    let form = server.get("/login");
    let kept = server.post("/login", &[("csrf_token", &token(&form)), ("key", &secret), ("next", "/memories?q=pool&tag=a")]);
    assert_eq!(kept.header("location"), Some("/memories?q=pool&tag=a"), "a path of this site is followed");

    // Without keys the sign-in page sends the browser straight on, by the same rule.
    let (open, _) = start(WebOptions::default(), RateLimits::default(), false);
    assert_eq!(open.get("/login?next=%2F%09%2Fevil").header("location"), Some("/"));
    assert_eq!(open.get("/login?next=%2F%2Fevil").header("location"), Some("/"));
    assert_eq!(open.get("/login?next=%2Fdecisions").header("location"), Some("/decisions"));
}

#[test]
fn every_response_carries_the_content_policy_and_refuses_framing_and_sniffing() {
    let (server, _) = start(WebOptions::default(), RateLimits::default(), true);
    let urn = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    let cookie = server.sign_in(&server.key("reader", Scope::default()));
    let signed_in = |path: &str| server.send("GET", path, &[("Cookie", &cookie)], "");
    let replies = [
        ("/", signed_in("/")),
        ("/memory", signed_in(&query("/memory", &[("urn", &urn)]))),
        ("/calibration/diagram.svg", signed_in("/calibration/diagram.svg")),
        ("/login", server.get("/login")),
        ("/assets/app.js", server.get("/assets/app.js")),
        ("/healthz", server.get("/healthz")),
        ("401", server.get("/memories")),
        ("404", signed_in("/nothing-here")),
        ("403 Host", server.send("GET", "/", &[("Host", "attacker.example")], "")),
    ];
    for (what, reply) in replies {
        let policy = reply.header("content-security-policy").unwrap_or_else(|| panic!("{what}: no content policy"));
        assert!(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'") && policy.contains("script-src 'self'"), "{what}: {policy}");
        assert!(!policy.contains("unsafe-inline"), "{what}: {policy}");
        assert_eq!(reply.header("x-frame-options"), Some("DENY"), "{what}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"), "{what}");
        assert_eq!(reply.header("referrer-policy"), Some("same-origin"), "{what}");
    }
}

#[test]
fn healthz_answers_only_requests_addressed_to_loopback() {
    let server = server();
    assert_eq!(server.get("/healthz").status, 200);
    let rebound = server.send("GET", "/healthz", &[("Host", "attacker.example:7777")], "");
    assert_eq!(rebound.status, 403, "a page reached through DNS rebinding names its own host");
    assert_eq!(server.send("GET", "/healthz", &[("Origin", "http://evil.example")], "").status, 403);
}

#[test]
fn a_flood_of_repeated_parameters_is_refused_with_400_naming_it() {
    let server = server();
    server.capture("Pool size", "The pool holds 20 connections.", "config", &["database"]);
    let flood = format!("/memories?q=pool&{}", vec!["tag=x"; 1000].join("&"));
    let reply = server.get(&flood);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.has("<code class=\"field\">tag</code>"), "{}", reply.body);
    assert!(!reply.body.to_lowercase().contains("sqlite") && !reply.body.contains("SQL"), "{}", reply.body);
    // Within the parameter limit, a list of more tags than a filter takes is the engine's 400.
    let many = format!("/memories?q=pool&tag={}", (0..40).map(|n| format!("t{n}")).collect::<Vec<_>>().join(","));
    let reply = server.get(&many);
    assert_eq!(reply.status, 400);
    assert!(reply.has("<code class=\"field\">tags</code>"), "{}", reply.body);
    let browse = server.get(&format!("/memories?{}", vec!["namespace=config"; 40].join("&")));
    assert_eq!(browse.status, 400);
    assert!(browse.has("<code class=\"field\">namespaces</code>"), "{}", browse.body);
    let form = format!("{}&reason=flood", vec!["urn=x"; 100].join("&"));
    assert_eq!(server.send("POST", "/memory/forget", &[], &form).status, 400);
}

#[test]
fn every_page_action_and_sign_in_is_audited_without_content() {
    let (server, secret) = start(WebOptions::default(), RateLimits::default(), true);
    let secret = secret.unwrap();
    let urn = server.capture("Pool size", "The pool holds 20 connections.", "config", &[]);
    let form = server.get("/login");
    assert_eq!(server.post("/login", &[("csrf_token", &token(&form)), ("key", "kenning_wrong")]).status, 401);
    let cookie = server.sign_in(&secret);
    let signed_in = |method: &str, path: &str, body: &str| server.send(method, path, &[("Cookie", &cookie)], body);
    assert_eq!(signed_in("GET", &query("/memories", &[("q", "pool connections")]), "").status, 200);
    assert_eq!(signed_in("GET", &query("/memory", &[("urn", &urn)]), "").status, 200);
    let confirm = signed_in("GET", &query("/memory/forget", &[("urn", &urn)]), "");
    let body = encode(&[("urn", &urn), ("csrf_token", &token(&confirm)), ("reason", "replaced")]);
    assert_eq!(signed_in("POST", "/memory/forget", &body).status, 303);
    assert_eq!(server.get("/decisions").status, 401);

    let lines = server.audit();
    let seen: Vec<(&str, &str, &str, Option<&str>)> = lines
        .iter()
        .map(|line| (line["method"].as_str().unwrap(), line["tool"].as_str().unwrap(), line["outcome"].as_str().unwrap(), line["identity"].as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("sign_in", "POST /login", "unauthorized", None),
            ("sign_in", "POST /login", "ok", Some("ada")),
            ("web", "GET /memories", "ok", Some("ada")),
            ("web", "GET /memory", "ok", Some("ada")),
            ("web", "GET /memory/forget", "ok", Some("ada")),
            ("web", "POST /memory/forget", "ok", Some("ada")),
            ("web", "GET /decisions", "unauthorized", None),
        ]
    );
    let text = std::fs::read_to_string(server.dir.path().join("audit.jsonl")).unwrap();
    assert!(!text.contains("pool") && !text.contains("replaced") && !text.contains(&urn), "no content, query or target: {text}");
}

#[test]
fn a_read_only_key_changes_nothing_and_a_domain_key_sees_only_its_domains() {
    let project = Domain::parse("domain", "project:widget").unwrap();
    let (server, _) = start_with_domains(WebOptions::default(), RateLimits::default(), true, &[project.clone(), Domain::User]);
    let user_urn = server.memory.capture(
        CaptureInput { content: "The user prefers tabs to spaces.".to_owned(), title: Some("Tabs".to_owned()), ..CaptureInput::default() },
        Some("user"),
    ).unwrap().urn;
    let project_urn = server.memory.capture(
        CaptureInput { content: "The widget service pools 20 connections.".to_owned(), title: Some("Widget pool".to_owned()), ..CaptureInput::default() },
        Some("project"),
    ).unwrap().urn;

    let reader = server.sign_in(&server.key("reader", Scope { read_only: true, domains: None }));
    let as_reader = |method: &str, path: &str, body: &str| server.send(method, path, &[("Cookie", &reader)], body);
    let page = as_reader("GET", &query("/memory", &[("urn", &project_urn)]), "");
    assert_eq!(page.status, 200);
    assert!(page.has("read-only") && !page.has("/memory/forget?"), "no forget button for a read-only key");
    assert_eq!(as_reader("GET", &query("/memory/forget", &[("urn", &project_urn)]), "").status, 403);
    let refused = as_reader("POST", "/memory/forget", &encode(&[("urn", &project_urn), ("csrf_token", "x"), ("reason", "r")]));
    assert_eq!(refused.status, 403);
    assert!(refused.has("read-only"), "{}", refused.body);
    assert_eq!(server.memory.get(&project_urn).unwrap().status, "active");

    let user_only = server.sign_in(&server.key("personal", Scope::parse_domains("user").map(|domains| Scope { read_only: false, domains: Some(domains) }).unwrap()));
    let as_user = |path: &str| server.send("GET", path, &[("Cookie", &user_only)], "");
    let found = as_user(&query("/memories", &[("q", "tabs spaces widget pool connections")]));
    assert!(found.has("Tabs") && !found.has("Widget pool"), "{}", found.body);
    let browsed = as_user(&query("/memories", &[("domain", &project.to_string())]));
    assert_eq!(browsed.status, 400, "another domain cannot be named");
    assert!(as_user(&query("/memory", &[("urn", &user_urn)])).has("Tabs"));
    let other = as_user(&query("/memory", &[("urn", &project_urn)]));
    assert_eq!(other.status, 404, "a memory of another domain is not found");
    assert!(!other.has("Widget pool"));
    let overview = as_user("/");
    assert!(overview.has("<strong>1</strong> memories") && !overview.has("project:widget"), "{}", overview.body);
    let confirm = as_user(&query("/memory/forget", &[("urn", &project_urn)]));
    assert_eq!(confirm.status, 404, "nor can it be forgotten");

    let elsewhere = server.sign_in(&server.key("acme", Scope { read_only: false, domains: Some(Scope::parse_domains("org:acme").unwrap()) }));
    let refused = server.send("GET", "/", &[("Cookie", &elsewhere)], "");
    assert_eq!(refused.status, 403);
    assert!(refused.has("none of which this server keeps"), "{}", refused.body);
    let outcomes: Vec<String> = server.audit().iter().filter(|line| line["method"] == "web").map(|line| line["outcome"].as_str().unwrap().to_owned()).collect();
    assert!(outcomes.iter().filter(|outcome| *outcome == "forbidden").count() >= 3, "{outcomes:?}");
}
