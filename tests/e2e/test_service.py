"""HTTP as a service: API keys (401 without one or with a revoked one), per-key rate limits (429
with Retry-After), the refusal to bind off loopback without keys, /healthz, /metrics and the audit
log, against the real binary over real HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from harness import SERVING, Workspace, http_server

PROTOCOL = "2025-11-25"


class RawClient:
    """JSON-RPC over streamable HTTP with urllib, so that every status and header is visible."""

    def __init__(self, url: str, key: str | None = None) -> None:
        self.url = url
        self.key = key
        self.session: str | None = None
        self.next_id = 1

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
            headers["Mcp-Protocol-Version"] = PROTOCOL
        return headers

    def post(self, message: dict[str, Any], key: str | None = ...) -> tuple[int, Any, Any]:  # type: ignore[assignment]
        """Returns the status, the headers and the JSON-RPC response (or the error body)."""
        key = self.key if key is ... else key
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(), method="POST", headers=self.headers(key))
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                body = response.read().decode()
                if response.headers.get("Mcp-Session-Id"):
                    self.session = response.headers["Mcp-Session-Id"]
                return response.status, response.headers, parse_body(body, response.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            return error.code, error.headers, json.loads(text) if text.startswith("{") else text

    def request(self, method: str, params: dict[str, Any], key: str | None = ...) -> tuple[int, Any, Any]:  # type: ignore[assignment]
        self.next_id += 1
        return self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}, key)

    def initialize(self) -> None:
        status, _, body = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "urllib", "version": "0"}},
        )
        assert status == 200, body
        status, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert status == 202

    def call(self, tool: str, arguments: dict[str, Any], key: str | None = ...) -> tuple[int, Any, Any]:  # type: ignore[assignment]
        return self.request("tools/call", {"name": tool, "arguments": arguments}, key)


def parse_body(body: str, content_type: str) -> Any:
    if "text/event-stream" in content_type:
        messages = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]
        return messages[-1] if messages else None
    return json.loads(body) if body else None


def get(url: str, key: str | None = None, origin: str | None = None) -> tuple[int, Any, str]:
    headers = {}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if origin is not None:
        headers["Origin"] = origin
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode(errors="replace")


def create_key(ws: Workspace, name: str, identity: str | None = None) -> dict[str, Any]:
    args = ["--json", "keys", "create", "--name", name]
    if identity is not None:
        args += ["--identity", identity]
    done = ws.run(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def audit_lines(ws: Workspace) -> list[dict[str, Any]]:
    path = ws.data / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def base(url: str) -> str:
    return url.rsplit("/", 1)[0]


def test_keys_are_created_listed_and_revoked_and_only_their_hash_is_kept(ws: Workspace) -> None:
    created = create_key(ws, "ci", "ci-bot")
    assert created["key"].startswith("kenning_") and created["identity"] == "ci-bot"
    stored = (ws.data / "keys.json").read_text()
    assert created["key"] not in stored and created["key"][len("kenning_"):] not in stored
    listed = json.loads(ws.run("--json", "keys", "list").stdout)
    assert [(key["name"], key["id"]) for key in listed] == [("ci", created["id"])]
    assert "key" not in listed[0] and "sha256" not in listed[0]

    duplicate = ws.run("keys", "create", "--name", "ci")
    assert duplicate.returncode != 0 and "already the name of an active key" in duplicate.stderr
    missing = ws.run("keys", "revoke", "cj")
    assert missing.returncode != 0 and "did you mean `ci`" in missing.stderr

    revoked = ws.run("--json", "keys", "revoke", created["id"])
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["revoked_at"]


def test_no_key_an_unknown_key_and_a_revoked_key_get_401(ws: Workspace) -> None:
    key = create_key(ws, "ci", "ci-bot")["key"]
    other = create_key(ws, "laptop")["key"]
    with http_server(ws) as server:
        client = RawClient(server.url, key)
        status, headers, body = client.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}, key=None)
        assert status == 401, body
        assert headers["WWW-Authenticate"] == 'Bearer realm="kenning"'
        assert "kenning keys create" in body["suggestion"]

        status, headers, body = client.request("ping", {}, key="kenning_" + "0" * 64)
        assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]

        client.initialize()
        status, _, body = client.call("memory_status", {})
        assert status == 200 and "result" in body, body

        revoked = ws.run("keys", "revoke", "ci")
        assert revoked.returncode == 0, revoked.stderr
        status, _, body = client.call("memory_status", {})
        assert status == 401 and "revoked" in body["message"], body
        second = RawClient(server.url, other)
        second.initialize()
        status, _, body = second.call("memory_status", {})
        assert status == 200 and "result" in body, "another key still works, in a session of its own"


def test_non_loopback_bind_without_keys_is_refused(ws: Workspace) -> None:
    refused = ws.run("serve", "--http", "0.0.0.0:0", timeout=30)
    assert refused.returncode != 0
    assert "refusing to serve on 0.0.0.0:0 without authentication" in refused.stderr, refused.stderr
    assert "kenning keys create" in refused.stderr

    create_key(ws, "ci")
    assert ws.run("keys", "revoke", "ci").returncode == 0
    still_refused = ws.run("serve", "--http", "0.0.0.0:0", timeout=30)
    assert still_refused.returncode != 0 and "no active one" in still_refused.stderr, "revoked keys do not count"

    key = create_key(ws, "ci")["key"]
    process = subprocess.Popen(
        [ws.bin, "serve", "--http", "0.0.0.0:0"], cwd=ws.repo, env=ws.env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stderr is not None
        url = None
        for line in process.stderr:
            match = SERVING.search(line)
            if match:
                url = match.group(1).replace("0.0.0.0", "127.0.0.1")
                break
        assert url, "the server announced no address"
        client = RawClient(url, key)
        assert client.call("memory_status", {}, key=None)[0] == 401
        client.initialize()
        assert client.call("memory_status", {})[0] == 200
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(10)


def test_over_the_rate_a_key_gets_429_with_retry_after(ws: Workspace) -> None:
    (ws.config / "kenning.toml").write_text("[server.rate_limits]\ncapture = 3\nqueries = 1000\n")
    key = create_key(ws, "ci")["key"]
    other = create_key(ws, "other")["key"]
    with http_server(ws) as server:
        client = RawClient(server.url, key)
        client.initialize()
        for number in range(3):
            status, _, body = client.call("memory_capture", {"content": f"Rate limited capture number {number}."})
            assert status == 200 and not body["result"].get("isError"), body
        status, headers, body = client.call("memory_capture", {"content": "One too many."})
        assert status == 429, body
        assert 1 <= int(headers["Retry-After"]) <= 20, "3 a minute refills one call every 20 s"
        assert body["retry_after_seconds"] == int(headers["Retry-After"])
        assert "3 capture calls a minute" in body["message"]
        status, _, _ = client.call("memory_recall", {"query": "rate limited"})
        assert status == 200, "queries have their own allowance"
        second = RawClient(server.url, other)
        second.initialize()
        status, _, _ = second.call("memory_capture", {"content": "Another key has its own bucket."})
        assert status == 200


def test_health_and_metrics_answer_with_per_tool_histograms_and_errors(ws: Workspace) -> None:
    with http_server(ws) as server:
        status, headers, body = get(base(server.url) + "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        assert get(base(server.url) + "/healthz", origin="http://evil.example")[0] == 403

        client = RawClient(server.url)
        client.initialize()
        client.call("memory_capture", {"content": "Metrics are scraped every 15 seconds."})
        client.call("memory_recall", {"query": "metrics"})
        client.call("memory_recall", {"query": "metrics again"})
        client.call("memory_get", {"urn": "kenning://user/context/nope"})
        status, headers, text = get(base(server.url) + "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        lines = text.splitlines()
        assert "# TYPE kenning_tool_call_duration_seconds histogram" in lines
        assert 'kenning_tool_call_duration_seconds_count{tool="memory_recall"} 2' in lines
        assert 'kenning_tool_call_duration_seconds_bucket{tool="memory_recall",le="+Inf"} 2' in lines
        assert 'kenning_tool_call_errors_total{tool="memory_get"} 1' in lines
        assert 'kenning_tool_call_errors_total{tool="memory_recall"} 0' in lines

    key = create_key(ws, "prometheus")["key"]
    with http_server(ws) as server:
        assert get(base(server.url) + "/metrics")[0] == 401, "with keys, metrics need one too"
        assert get(base(server.url) + "/metrics", key=key)[0] == 200
        assert get(base(server.url) + "/healthz")[0] == 200, "health needs no key"


def test_the_audit_log_has_every_call_and_no_content(ws: Workspace) -> None:
    (ws.config / "kenning.toml").write_text("[server.rate_limits]\ncapture = 2\n")
    key = create_key(ws, "ci", "ci-bot")["key"]
    secret_content = "The staging database password rotates every Tuesday."
    with http_server(ws) as server:
        client = RawClient(server.url, key)
        client.initialize()
        expected = []
        client.call("memory_capture", {"content": secret_content})
        expected.append(("memory_capture", "ok", "ci-bot"))
        client.call("memory_recall", {"query": "staging password"})
        expected.append(("memory_recall", "ok", "ci-bot"))
        client.call("memory_get", {"urn": "kenning://user/context/nope"})
        expected.append(("memory_get", "tool_error", "ci-bot"))
        client.call("memory_recall", {"query": "x", "limit": "ten"})
        expected.append(("memory_recall", "invalid", "ci-bot"))
        client.call("memory_capture", {"content": "Second capture."})
        expected.append(("memory_capture", "ok", "ci-bot"))
        assert client.call("memory_capture", {"content": "Third capture, over the limit."})[0] == 429
        expected.append(("memory_capture", "rate_limited", "ci-bot"))
        assert client.call("memory_status", {}, key=None)[0] == 401
        expected.append(("memory_status", "unauthorized", None))
    lines = audit_lines(ws)
    assert [(line["tool"], line["outcome"], line.get("identity")) for line in lines] == expected
    for line in lines:
        assert set(line) <= {"time", "identity", "key", "method", "tool", "outcome", "duration_ms", "session"}, line
        assert line["method"] == "tools/call"
        assert line["time"].endswith("Z") and line["duration_ms"] >= 0
    text = (ws.data / "audit.jsonl").read_text()
    assert "staging" not in text and "password" not in text, "the audit log holds no content"


@pytest.mark.anyio
async def test_a_key_is_the_author_of_what_it_writes_through_the_sdk_client(ws: Workspace) -> None:
    key = create_key(ws, "ci", "ci-bot")["key"]
    with http_server(ws) as server:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            async with streamable_http_client(server.url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    captured = await session.call_tool("memory_capture", {"content": "Deploys go out on Thursdays."})
                    urn = captured.structured_content["urn"]
                    fetched = await session.call_tool("memory_get", {"urn": urn})
                    assert fetched.structured_content["author"] == "ci-bot"
    shown = json.loads(ws.run("--json", "get", urn).stdout)
    assert shown["author"] == "ci-bot"
    local = json.loads(ws.run("--json", "capture", "Written at the command line.").stdout)
    assert "author" not in json.loads(ws.run("--json", "get", local["urn"]).stdout)
