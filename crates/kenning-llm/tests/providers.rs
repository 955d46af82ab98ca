//! Every provider against a local HTTP server speaking its wire format: the request each sends
//! (path, headers, body) and how each reads documented answers, errors and rate limits.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kenning_llm::{
    CompletionRequest, Error, Fallback, LanguageModel, LlmErrorKind, Message, ProviderKind, ProviderSettings, Role, connect,
};
use serde_json::{Value, json};

const KEY: &str = "sk-test-0123456789abcdefSECRET";

/// One scripted answer.
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn answer(status: u16, body: Value) -> Answer {
    Answer { status, headers: Vec::new(), body: body.to_string(), delay: Duration::ZERO }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Value,
}

/// An HTTP/1.1 server on 127.0.0.1 that answers from a queue and records every request.
struct FakeServer {
    url: String,
    script: Arc<Mutex<VecDeque<Answer>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl FakeServer {
    fn start(answers: Vec<Answer>) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(VecDeque::from(answers)));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (thread_script, thread_received) = (script.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (script, received) = (thread_script.clone(), thread_received.clone());
                std::thread::spawn(move || serve(stream, &script, &received));
            }
        });
        FakeServer { url, script, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    fn unanswered(&self) -> usize {
        self.script.lock().unwrap().len()
    }
}

fn serve(stream: TcpStream, script: &Mutex<VecDeque<Answer>>, received: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap();
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let length: usize = headers.get("content-length").map_or(0, |length| length.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let body = if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).expect("the request body is JSON") };
    received.lock().unwrap().push(Received { method, path, headers, body });
    let answer = script.lock().unwrap().pop_front().unwrap_or_else(|| answer(599, json!({"error": "no scripted answer left"})));
    std::thread::sleep(answer.delay);
    let mut stream = stream;
    let mut head = format!("HTTP/1.1 {} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n", answer.status, answer.body.len());
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    // The client may have given up (the timeout test); a failed write is its business.
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(answer.body.as_bytes()));
}

fn settings(kind: ProviderKind, model: &str, server: &FakeServer) -> ProviderSettings {
    let mut settings = ProviderSettings::new(kind, model);
    settings.base_url = server.url.clone();
    settings.api_key_env = Some("TEST_LLM_KEY".to_owned());
    settings.timeout = Duration::from_secs(5);
    settings.backoff_base = Duration::from_millis(5);
    settings.max_backoff = Duration::from_secs(2);
    settings
}

fn environment(name: &str) -> Option<String> {
    (name == "TEST_LLM_KEY").then(|| KEY.to_owned())
}

fn provider(settings: &ProviderSettings) -> kenning_llm::Provider {
    connect(settings, &environment).unwrap()
}

fn request() -> CompletionRequest {
    CompletionRequest {
        system: Some("You settle contradictions between memories.".to_owned()),
        messages: vec![Message::user("Which holds: MySQL or PostgreSQL?"), Message { role: Role::Assistant, content: "{".to_owned() }],
        max_tokens: 256,
        temperature: Some(0.25),
        json: true,
    }
}

/// Anthropic's documented Messages API response.
fn anthropic_message(text: &str) -> Value {
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 42, "output_tokens": 7}
    })
}

fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
}

/// OpenAI's documented chat completion object.
fn openai_completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
        "service_tier": "default"
    })
}

fn openai_error(status_type: &str, code: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": status_type, "param": null, "code": code}})
}

#[test]
fn anthropic_sends_the_messages_api_request_and_reads_its_answer() {
    let server = FakeServer::start(vec![
        answer(200, anthropic_message(r#"{"winner": "b"}"#)),
        answer(200, json!({"data": [{"type": "model", "id": "claude-sonnet-4-5-20250929"}], "has_more": false, "first_id": null, "last_id": null})),
    ]);
    let model = provider(&settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server));
    let completion = model.complete(&request()).unwrap();
    assert_eq!(completion.text, r#"{"winner": "b"}"#);
    assert_eq!((completion.provider.as_str(), completion.model.as_str()), ("anthropic", "claude-sonnet-4-5-20250929"));
    assert_eq!((completion.input_tokens, completion.output_tokens), (Some(42), Some(7)));
    model.health_check().unwrap();

    let received = server.received();
    let sent = &received[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(sent.headers["x-api-key"], KEY);
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert_eq!(sent.headers["content-type"], "application/json");
    assert!(!sent.headers.contains_key("authorization"), "Anthropic takes the key in x-api-key only");
    assert_eq!(
        sent.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 256,
            "system": "You settle contradictions between memories.",
            "messages": [{"role": "user", "content": "Which holds: MySQL or PostgreSQL?"}, {"role": "assistant", "content": "{"}],
            "temperature": 0.25
        })
    );
    let health = &received[1];
    assert_eq!((health.method.as_str(), health.path.as_str()), ("GET", "/v1/models"));
    assert_eq!((health.headers["x-api-key"].as_str(), health.headers["anthropic-version"].as_str()), (KEY, "2023-06-01"));
    assert_eq!(model.name(), "anthropic/claude-sonnet-4-5");
    let capabilities = model.capabilities();
    assert!(!capabilities.streaming && !capabilities.json_mode, "no streaming, and the Messages API has no JSON mode");
    assert_eq!(capabilities.max_context, 200_000);
}

#[test]
fn openai_sends_a_chat_completion_request_and_reads_its_answer() {
    let server = FakeServer::start(vec![
        answer(200, openai_completion(r#"{"winner": "a"}"#)),
        answer(200, json!({"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model", "created": 1686935002, "owned_by": "openai"}]})),
    ]);
    let mut configured = settings(ProviderKind::OpenAi, "gpt-4o-mini", &server);
    configured.max_context = 64_000;
    let model = provider(&configured);
    let completion = model.complete(&request()).unwrap();
    assert_eq!(completion.text, r#"{"winner": "a"}"#);
    assert_eq!((completion.provider.as_str(), completion.model.as_str()), ("openai", "gpt-4o-mini-2024-07-18"));
    assert_eq!((completion.input_tokens, completion.output_tokens), (Some(19), Some(10)));
    model.health_check().unwrap();

    let received = server.received();
    let sent = &received[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(sent.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(sent.headers["content-type"], "application/json");
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You settle contradictions between memories."},
                {"role": "user", "content": "Which holds: MySQL or PostgreSQL?"},
                {"role": "assistant", "content": "{"}
            ],
            "max_completion_tokens": 256,
            "temperature": 0.25,
            "response_format": {"type": "json_object"}
        })
    );
    let health = &received[1];
    assert_eq!((health.method.as_str(), health.path.as_str(), health.headers["authorization"].as_str()), ("GET", "/v1/models", format!("Bearer {KEY}").as_str()));
    let capabilities = model.capabilities();
    assert!(capabilities.json_mode && !capabilities.streaming);
    assert_eq!(capabilities.max_context, 64_000, "max_context is configurable");
}

#[test]
fn lmstudio_speaks_the_openai_format_without_a_key_under_its_own_name() {
    let server = FakeServer::start(vec![
        answer(200, json!({
            "id": "chatcmpl-3c4q1m2v0x",
            "object": "chat.completion",
            "created": 1731000000,
            "model": "qwen2.5-7b-instruct",
            "choices": [{"index": 0, "logprobs": null, "finish_reason": "stop", "message": {"role": "assistant", "content": "PostgreSQL"}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33},
            "system_fingerprint": "qwen2.5-7b-instruct"
        })),
        answer(200, json!({"data": [{"id": "qwen2.5-7b-instruct", "object": "model", "owned_by": "organization_owner"}], "object": "list"})),
    ]);
    let mut configured = settings(ProviderKind::LmStudio, "qwen2.5-7b-instruct", &server);
    configured.api_key_env = None;
    assert_eq!(ProviderSettings::new(ProviderKind::LmStudio, "m").base_url, "http://localhost:1234");
    let model = provider(&configured);
    let completion = model.complete(&request()).unwrap();
    assert_eq!((completion.text.as_str(), completion.provider.as_str()), ("PostgreSQL", "lmstudio"));
    assert_eq!(model.name(), "lmstudio/qwen2.5-7b-instruct");
    model.health_check().unwrap();

    let received = server.received();
    let sent = &received[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert!(!sent.headers.contains_key("authorization"), "LM Studio needs no key");
    assert_eq!(sent.body["max_tokens"], 256);
    assert!(sent.body.get("max_completion_tokens").is_none() && sent.body.get("response_format").is_none(), "{}", sent.body);
    assert_eq!(sent.body["messages"][0], json!({"role": "system", "content": "You settle contradictions between memories."}));
    assert_eq!((received[1].method.as_str(), received[1].path.as_str()), ("GET", "/v1/models"));
    assert!(!model.capabilities().json_mode);
}

#[test]
fn ollama_sends_a_chat_request_without_streaming_and_reads_its_answer() {
    let server = FakeServer::start(vec![
        answer(200, json!({
            "model": "llama3.2",
            "created_at": "2023-12-12T14:13:43.416799Z",
            "message": {"role": "assistant", "content": "{\"winner\": \"b\"}"},
            "done": true,
            "done_reason": "stop",
            "total_duration": 5191566416u64,
            "load_duration": 2154458,
            "prompt_eval_count": 26,
            "prompt_eval_duration": 383809000,
            "eval_count": 298,
            "eval_duration": 4799921000u64
        })),
        answer(200, json!({"models": [{"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 2019393189u64, "digest": "a80c4f17acd5"}]})),
    ]);
    let mut configured = settings(ProviderKind::Ollama, "llama3.2", &server);
    configured.api_key_env = None;
    assert_eq!(ProviderSettings::new(ProviderKind::Ollama, "m").base_url, "http://localhost:11434");
    let model = provider(&configured);
    let completion = model.complete(&request()).unwrap();
    assert_eq!(completion.text, r#"{"winner": "b"}"#);
    assert_eq!((completion.provider.as_str(), completion.model.as_str()), ("ollama", "llama3.2"));
    assert_eq!((completion.input_tokens, completion.output_tokens), (Some(26), Some(298)));
    model.health_check().unwrap();

    let received = server.received();
    let sent = &received[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/api/chat"));
    assert!(!sent.headers.contains_key("authorization"));
    assert_eq!(
        sent.body,
        json!({
            "model": "llama3.2",
            "messages": [
                {"role": "system", "content": "You settle contradictions between memories."},
                {"role": "user", "content": "Which holds: MySQL or PostgreSQL?"},
                {"role": "assistant", "content": "{"}
            ],
            "stream": false,
            "options": {"temperature": 0.25, "num_predict": 256},
            "format": "json"
        })
    );
    assert_eq!((received[1].method.as_str(), received[1].path.as_str()), ("GET", "/api/tags"));
    assert_eq!(model.capabilities().max_context, 4_096);
}

#[test]
fn ollama_errors_are_read_and_an_unfinished_answer_is_malformed() {
    let server = FakeServer::start(vec![
        answer(404, json!({"error": "model 'llama9' not found"})),
        answer(200, json!({"model": "llama3.2", "message": {"role": "assistant", "content": "half"}, "done": false})),
    ]);
    let mut configured = settings(ProviderKind::Ollama, "llama9", &server);
    configured.api_key_env = None;
    let model = provider(&configured);
    let error = model.complete(&request()).unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Rejected, "{error}");
    assert!(error.message.contains("model 'llama9' not found") && error.message.contains("404"), "{error}");
    let error = model.complete(&request()).unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Malformed, "{error}");
    assert_eq!(server.received().len(), 2, "neither a 404 nor a malformed answer is retried");
}

#[test]
fn a_429_with_retry_after_is_waited_out_then_retried() {
    let mut limited = answer(429, anthropic_error("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"));
    limited.headers.push(("retry-after", "1".to_owned()));
    let server = FakeServer::start(vec![limited, answer(200, anthropic_message("after the wait"))]);
    let model = provider(&settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server));
    let started = Instant::now();
    let completion = model.complete(&request()).unwrap();
    let waited = started.elapsed();
    assert_eq!(completion.text, "after the wait");
    assert!(waited >= Duration::from_millis(950), "retry-after: 1 is honoured, not the 5 ms backoff: {waited:?}");
    assert_eq!(server.received().len(), 2);
}

#[test]
fn openai_429_with_retry_after_is_retried_and_gives_up_when_asked_to_wait_too_long() {
    let mut limited = answer(429, openai_error("requests", "rate_limit_exceeded", "Rate limit reached for gpt-4o-mini"));
    limited.headers.push(("retry-after", "0".to_owned()));
    let mut too_long = answer(429, openai_error("requests", "rate_limit_exceeded", "Rate limit reached for gpt-4o-mini"));
    too_long.headers.push(("retry-after", "120".to_owned()));
    let server = FakeServer::start(vec![limited, answer(200, openai_completion("through")), too_long]);
    let model = provider(&settings(ProviderKind::OpenAi, "gpt-4o-mini", &server));
    assert_eq!(model.complete(&request()).unwrap().text, "through");
    let started = Instant::now();
    let error = model.complete(&request()).unwrap_err();
    // Sleeping the 120 s asked for would take two minutes; no busy machine makes one request to
    // a local server take one.
    assert!(started.elapsed() < Duration::from_secs(60), "a wait beyond the bound is not slept: {:?}", started.elapsed());
    assert_eq!(error.kind, LlmErrorKind::RateLimited);
    assert!(error.message.contains("Rate limit reached") && error.message.contains("retry after 120 s"), "{error}");
    assert_eq!(server.received().len(), 3);
}

#[test]
fn a_529_overloaded_and_a_500_are_retried_until_an_answer() {
    let server = FakeServer::start(vec![
        answer(529, anthropic_error("overloaded_error", "Overloaded")),
        answer(500, anthropic_error("api_error", "Internal server error")),
        answer(200, anthropic_message("third time")),
    ]);
    let model = provider(&settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server));
    assert_eq!(model.complete(&request()).unwrap().text, "third time");
    let received = server.received();
    assert_eq!(received.len(), 3);
    assert!(received.iter().all(|sent| sent.body == received[0].body), "a retry sends the same request");
}

#[test]
fn server_errors_until_retries_are_exhausted_give_one_error_with_the_last_message() {
    let server = FakeServer::start(vec![
        answer(503, openai_error("server_error", "overloaded", "The engine is currently overloaded")),
        answer(502, json!({"error": {"message": "Bad gateway.", "type": "server_error", "code": null}})),
        answer(500, openai_error("server_error", "internal", "The server had an error while processing your request")),
        answer(200, openai_completion("never read")),
    ]);
    let model = provider(&settings(ProviderKind::OpenAi, "gpt-4o-mini", &server));
    let error = model.complete(&request()).unwrap_err();
    assert_eq!((error.provider.as_str(), error.kind), ("openai", LlmErrorKind::Unavailable));
    assert!(error.message.contains("HTTP 500") && error.message.contains("processing your request") && error.message.contains("after 2 retries"), "{error}");
    assert_eq!(server.received().len(), 3, "the first attempt and max_retries = 2");
    assert_eq!(server.unanswered(), 1);
}

#[test]
fn a_401_is_not_retried_and_the_key_never_shows() {
    // A provider may quote the key it refused; the error must not repeat it.
    let server = FakeServer::start(vec![
        answer(401, anthropic_error("authentication_error", &format!("invalid x-api-key {KEY}"))),
        answer(401, openai_error("invalid_request_error", "invalid_api_key", &format!("Incorrect API key provided: {KEY}."))),
    ]);
    let anthropic = provider(&settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server));
    let openai = provider(&settings(ProviderKind::OpenAi, "gpt-4o-mini", &server));
    for model in [&anthropic, &openai] {
        let error = model.complete(&request()).unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Unauthorized, "{error}");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains(KEY) && shown.contains("[REDACTED]"), "{shown}");
        let debug = format!("{model:?}");
        assert!(!debug.contains(KEY) && debug.contains("hidden"), "{debug}");
    }
    assert_eq!(server.received().len(), 2, "one attempt each");
}

#[test]
fn a_400_is_rejected_at_once() {
    let server = FakeServer::start(vec![answer(400, anthropic_error("invalid_request_error", "max_tokens: Field required"))]);
    let model = provider(&settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server));
    let error = model.complete(&request()).unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Rejected);
    assert!(error.message.contains("invalid_request_error: max_tokens: Field required"), "{error}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn a_malformed_body_is_reported_not_retried() {
    let mut not_json = answer(200, Value::Null);
    not_json.body = "<html>upstream proxy</html>".to_owned();
    let server = FakeServer::start(vec![
        not_json,
        answer(200, json!({"type": "message", "content": "not a list"})),
        answer(200, json!({"object": "chat.completion", "choices": []})),
    ]);
    let anthropic = provider(&settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server));
    for _ in 0..2 {
        let error = anthropic.complete(&request()).unwrap_err();
        assert_eq!(error.kind, LlmErrorKind::Malformed, "{error}");
    }
    let openai = provider(&settings(ProviderKind::OpenAi, "gpt-4o-mini", &server));
    let error = openai.complete(&request()).unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Malformed);
    assert!(error.message.contains("no choices"), "{error}");
    assert_eq!(server.received().len(), 3);
}

#[test]
fn a_slow_answer_times_out_without_a_retry() {
    let mut slow = answer(200, anthropic_message("too late"));
    slow.delay = Duration::from_secs(3);
    let server = FakeServer::start(vec![slow]);
    let mut configured = settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server);
    configured.timeout = Duration::from_millis(400);
    let model = provider(&configured);
    let error = model.complete(&request()).unwrap_err();
    // A timeout, not the answer that arrives after 3 s: the 400 ms bound was applied.
    assert_eq!(error.kind, LlmErrorKind::Timeout, "{error}");
    assert_eq!(server.received().len(), 1);
}

#[test]
fn the_client_side_rate_limit_refuses_a_request_that_would_wait_past_its_timeout() {
    let server = FakeServer::start(vec![answer(200, openai_completion("one")), answer(200, openai_completion("two"))]);
    let mut configured = settings(ProviderKind::OpenAi, "gpt-4o-mini", &server);
    configured.requests_per_minute = 1;
    configured.timeout = Duration::from_secs(2);
    let model = provider(&configured);
    assert_eq!(model.complete(&request()).unwrap().text, "one");
    let error = model.complete(&request()).unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::RateLimited);
    assert!(error.message.contains("requests_per_minute"), "{error}");
    assert_eq!(server.received().len(), 1, "the limit holds the request back before it is sent");
}

/// A port on 127.0.0.1 with nothing listening.
fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

#[test]
fn the_fallback_tries_providers_in_order_and_reports_every_failure() {
    let mut down = ProviderSettings::new(ProviderKind::Anthropic, "claude-sonnet-4-5");
    down.base_url = closed_port();
    down.api_key_env = Some("TEST_LLM_KEY".to_owned());
    down.backoff_base = Duration::from_millis(5);
    down.max_retries = 1;
    let server = FakeServer::start(vec![answer(200, openai_completion("second answers")), answer(401, openai_error("invalid_request_error", "invalid_api_key", "Incorrect API key provided"))]);
    let second = settings(ProviderKind::OpenAi, "gpt-4o-mini", &server);
    let chain = kenning_llm::chain(&[down.clone(), second], &environment).unwrap();
    assert_eq!(chain.name(), "anthropic/claude-sonnet-4-5 > openai/gpt-4o-mini");
    let completion = chain.complete(&request()).unwrap();
    assert_eq!((completion.text.as_str(), completion.provider.as_str()), ("second answers", "openai"));
    assert_eq!(chain.capabilities().max_context, 128_000, "the smallest window of the chain");
    assert!(!chain.capabilities().json_mode, "only what every provider can do");

    // Both fail: the error names each provider and its own failure, in order.
    let error = chain.complete(&request()).unwrap_err();
    assert_eq!((error.provider.as_str(), error.kind), ("fallback", LlmErrorKind::Unavailable));
    let anthropic_at = error.message.find("anthropic: unavailable: no answer").unwrap_or_else(|| panic!("{error}"));
    let openai_at = error.message.find("openai: unauthorized: HTTP 401: Incorrect API key provided").unwrap_or_else(|| panic!("{error}"));
    assert!(anthropic_at < openai_at, "{error}");
    assert!(error.message.contains("after 1 retry"), "a refused connection is retried: {error}");
    assert!(!format!("{error} {chain:?}").contains(KEY));

    // The health of the chain is that of any member; each member has its own.
    let healthy = FakeServer::start(vec![answer(200, json!({"object": "list", "data": []}))]);
    let chain = kenning_llm::chain(&[down, settings(ProviderKind::OpenAi, "gpt-4o-mini", &healthy)], &environment).unwrap();
    assert!(chain.providers()[0].health_check().is_err());
    chain.health_check().unwrap();
}

#[test]
fn an_empty_chain_fails_plainly() {
    let chain = Fallback::new(Vec::new());
    let error = chain.complete(&request()).unwrap_err();
    assert!(error.message.contains("no provider is configured"), "{error}");
}

#[test]
fn a_missing_key_names_the_variable() {
    let configured = ProviderSettings::new(ProviderKind::Anthropic, "claude-sonnet-4-5");
    let error = connect(&configured, &|_| None).unwrap_err();
    assert!(matches!(&error, Error::MissingKey { variable, .. } if variable == "ANTHROPIC_API_KEY"), "{error:?}");
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
    let error = connect(&configured, &|_| Some("  ".to_owned())).unwrap_err();
    assert!(matches!(error, Error::MissingKey { .. }), "an empty variable is a missing key");
    let mut local = ProviderSettings::new(ProviderKind::Ollama, "llama3.2");
    assert!(connect(&local, &|_| None).is_ok(), "a local server needs no key");
    local.api_key_env = Some("OLLAMA_KEY".to_owned());
    assert!(connect(&local, &|_| None).is_err(), "unless one is configured");
}

#[test]
fn provider_entries_are_checked_field_by_field() {
    let entry = json!({
        "provider": "openai", "model": "gpt-4o-mini", "base_url": "https://proxy.example.com/v1/",
        "api_key_env": "WORK_OPENAI_KEY", "timeout_secs": 20, "max_retries": 4, "requests_per_minute": 30, "max_context": 32000
    });
    let parsed = ProviderSettings::from_json("llm.providers[0]", &entry).unwrap();
    assert_eq!(parsed.kind, ProviderKind::OpenAi);
    assert_eq!(parsed.base_url, "https://proxy.example.com", "a trailing /v1 is the provider's own path");
    assert_eq!(parsed.api_key_env.as_deref(), Some("WORK_OPENAI_KEY"));
    assert_eq!((parsed.timeout, parsed.max_retries, parsed.requests_per_minute, parsed.max_context), (Duration::from_secs(20), 4, 30, 32000));
    let defaults = ProviderSettings::from_json("llm.providers[1]", &json!({"provider": "anthropic", "model": "claude-sonnet-4-5"})).unwrap();
    assert_eq!(defaults.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    assert_eq!(defaults.base_url, "https://api.anthropic.com");
    let unnamed = ProviderSettings::from_json("llm.providers[2]", &json!({"provider": "openai"})).unwrap();
    assert_eq!(unnamed.label(), "openai/gpt-4o-mini", "a provider named without a model gets its default");

    for (entry, field, received, hint) in [
        (json!({"provider": "antropic", "model": "m"}), "llm.providers[0].provider", json!("antropic"), "anthropic"),
        (json!({"provider": "openai", "temperature": 5}), "llm.providers[0].temperature", json!(5), "temperature = 0.3"),
        (json!({"provider": "openai", "port": 8080}), "llm.providers[0].port", json!(8080), "base_url"),
        (json!({"provider": "openai", "model": "m", "api_key": "sk-live"}), "llm.providers[0].api_key", json!("sk-live"), "api_key_env"),
        (json!({"provider": "openai", "model": "m", "timeout_secs": 0}), "llm.providers[0].timeout_secs", json!(0), "from 1 to 600"),
        (json!({"provider": "openai", "model": "m", "max_retries": -1}), "llm.providers[0].max_retries", json!(-1), "from 0 to 10"),
        (json!({"provider": "openai", "model": "m", "requests_per_minute": "fast"}), "llm.providers[0].requests_per_minute", json!("fast"), "whole number"),
        (json!({"provider": "openai", "model": "m", "base_url": "localhost:1234"}), "llm.providers[0].base_url", json!("localhost:1234"), "http://"),
        (json!({"provider": "openai", "model": "m", "api_key_env": "sk-abc-123"}), "llm.providers[0].api_key_env", json!("sk-abc-123"), "never the key"),
    ] {
        let error = ProviderSettings::from_json("llm.providers[0]", &entry).unwrap_err();
        assert_eq!((error.field.as_str(), &error.received), (field, &received), "{error}");
        assert!(error.suggestion.contains(hint), "{error}");
    }
}

/// An entry's `temperature` is sent with every request, its `max_tokens` caps the answer,
/// and its `tokens_per_minute` holds back a request that would use more than a minute's worth.
#[test]
fn an_entrys_request_options_shape_what_is_sent() {
    let server = FakeServer::start((0..5).map(|_| answer(200, anthropic_message("ok"))).collect());
    let mut shaped = settings(ProviderKind::Anthropic, "claude-sonnet-4-5", &server);
    shaped.temperature = Some(0.3);
    shaped.max_tokens = Some(100);
    let chain = kenning_llm::chain(&[shaped.clone()], &environment).unwrap();
    chain.complete(&CompletionRequest { temperature: None, ..request() }).unwrap();
    chain.complete(&request()).unwrap();
    let received = server.received();
    assert_eq!((received[0].body["temperature"].as_f64().map(|t| (t * 100.0).round()), received[0].body["max_tokens"].as_u64()), (Some(30.0), Some(100)));
    assert_eq!(received[1].body["temperature"].as_f64().map(|t| (t * 100.0).round()), Some(30.0), "the configured temperature wins");

    let mut limited = shaped;
    limited.tokens_per_minute = Some(400);
    limited.timeout = Duration::from_millis(200);
    let chain = kenning_llm::chain(&[limited], &environment).unwrap();
    // The request can use about 130 tokens (its prompt and the 100-token cap): three go in at
    // once, the fourth would wait past the timeout and is refused without reaching the server.
    let server_calls_before = server.received().len();
    let error = (0..4).map(|_| chain.complete(&request())).find_map(Result::err).expect("the limit is reached");
    assert_eq!(error.kind, LlmErrorKind::RateLimited, "{error}");
    assert!(error.to_string().contains("tokens_per_minute"), "{error}");
    assert_eq!(server.received().len(), server_calls_before + 3, "the refused request was not sent");
}
