"""The HTTP service's trust boundaries against the real binary over a real loopback port: an MCP
session answers only the key that opened it; /healthz and /metrics follow the Host rule; every
method that reads memory is rate limited and audited; scoped keys (read-only, limited to some
domains) are enforced on tools, resources and prompts through the SDK's HTTP client; and the
files kenning creates are readable by their owner alone."""

from __future__ import annotations

import http.client
import json
import logging
import stat
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from harness import PROJECT_DOMAIN, Workspace, http_server
from test_service import PROTOCOL, RawClient, audit_lines, base, create_key, get


def scoped_key(ws: Workspace, name: str, *flags: str) -> dict[str, Any]:
    done = ws.run("--json", "keys", "create", "--name", name, *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def raw(url: str, method: str, headers: dict[str, str], body: str = "") -> tuple[int, dict[str, str], str]:
    parsed = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    connection.request(method, parsed.path, body=body.encode() or None, headers=headers)
    response = connection.getresponse()
    text = response.read().decode(errors="replace")
    connection.close()
    return response.status, {name.lower(): value for name, value in response.getheaders()}, text


class Stream:
    """A session's GET stream, read in a thread: every `data:` line it carried."""

    def __init__(self, url: str, key: str, session: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=15)
        self.connection.request("GET", parsed.path, headers={
            "Accept": "text/event-stream", "Authorization": f"Bearer {key}",
            "Mcp-Session-Id": session, "Mcp-Protocol-Version": PROTOCOL,
        })
        self.response = self.connection.getresponse()
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self.read, daemon=True)
        if self.response.status == 200:
            self.thread.start()

    def read(self) -> None:
        try:
            for line in self.response:
                self.lines.append(line.decode(errors="replace"))
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            # The test closed the connection under the reader.
            pass

    def saw(self, text: str, seconds: float = 10.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            time.sleep(0.1)
        return False

    def close(self) -> None:
        self.connection.close()


def test_an_mcp_session_answers_only_the_key_that_opened_it(ws: Workspace) -> None:
    first = create_key(ws, "first")["key"]
    second = create_key(ws, "second")["key"]
    with http_server(ws) as server:
        owner = RawClient(server.url, first)
        owner.initialize()
        session = owner.session
        assert session
        assert owner.request("logging/setLevel", {"level": "debug"})[0] == 200

        # Another key naming the session is answered as if there were no such session.
        intruder = RawClient(server.url, second)
        intruder.session = session
        status, _, body = intruder.call("memory_status", {})
        assert status == 404, body
        assert "initialize" in body["suggestion"]
        stolen = Stream(server.url, second, session)
        assert stolen.response.status == 404, "another key's GET stream is refused"
        stolen.close()
        headers = {"Authorization": f"Bearer {second}", "Mcp-Session-Id": session, "Mcp-Protocol-Version": PROTOCOL}
        assert raw(server.url, "DELETE", headers)[0] == 404, "nor may it end the session"

        # The owner's own stream receives the session's log notifications.
        own = Stream(server.url, first, session)
        assert own.response.status == 200
        status, _, body = owner.call("memory_capture", {"content": "Sessions are bound to the key that opened them."})
        assert status == 200 and "result" in body, body
        assert own.saw("notifications/message"), own.lines
        own.close()

        # A request without a key names no session of a key either.
        status, _, _ = owner.call("memory_status", {}, key=None)
        assert status == 401
        headers = {"Authorization": f"Bearer {first}", "Mcp-Session-Id": session, "Mcp-Protocol-Version": PROTOCOL}
        assert raw(server.url, "DELETE", headers)[0] == 204
        assert owner.call("memory_status", {})[0] == 404, "a closed session is gone"


@pytest.mark.anyio
async def test_closing_a_session_is_no_failure_to_the_sdk_client(ws: Workspace, caplog: pytest.LogCaptureFixture) -> None:
    # The SDK ends its session with a DELETE when the client closes, and logs a warning for any
    # answer but 200 or 204: a 202 read as "Session termination failed" after every session.
    with http_server(ws) as server, caplog.at_level(logging.WARNING):
        async with streamable_http_client(server.url) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                status = await session.call_tool("memory_status", {})
                assert not status.is_error
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert not warnings, warnings


def test_health_and_metrics_refuse_a_host_that_is_not_loopback(ws: Workspace) -> None:
    with http_server(ws) as server:
        for path in ("/healthz", "/metrics"):
            status, headers, _ = raw(base(server.url) + path, "GET", {"Host": "attacker.example:8080"})
            assert status == 403, path
            status, headers, _ = raw(base(server.url) + path, "GET", {})
            assert status == 200, path
            assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY", headers
        status, headers, _ = raw(server.url, "POST", {"Host": "attacker.example", "Content-Type": "application/json",
                                                      "Accept": "application/json, text/event-stream"}, "{}")
        assert status == 403
        client = RawClient(server.url)
        client.initialize()
        status, headers, _ = client.call("memory_status", {})
        assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"


def test_resources_and_prompts_are_rate_limited_and_audited(ws: Workspace) -> None:
    (ws.config / "kenning.toml").write_text("[server.rate_limits]\nqueries = 3\n")
    key = create_key(ws, "ci", "ci-bot")["key"]
    with http_server(ws) as server:
        client = RawClient(server.url, key)
        client.initialize()
        status, _, body = client.call("memory_capture", {"content": "Invoices render nightly in the billing service."})
        urn = body["result"]["structuredContent"]["urn"]
        assert client.request("resources/read", {"uri": urn})[0] == 200
        assert client.request("prompts/get", {"name": "session_start", "arguments": {"task": "invoices"}})[0] == 200
        assert client.request("resources/list", {})[0] == 200
        status, headers, body = client.request("prompts/get", {"name": "session_start", "arguments": {"task": "billing"}})
        assert status == 429, "session_start runs a recall: it takes a query from the key's allowance"
        assert int(headers["Retry-After"]) >= 1
        status, _, _ = client.request("resources/read", {"uri": urn}, key=None)
        assert status == 401
    seen = [(line["method"], line["tool"], line["outcome"], line.get("identity")) for line in audit_lines(ws)]
    assert seen == [
        ("tools/call", "memory_capture", "ok", "ci-bot"),
        ("resources/read", urn, "ok", "ci-bot"),
        ("prompts/get", "session_start", "ok", "ci-bot"),
        ("resources/list", "resources/list", "ok", "ci-bot"),
        ("prompts/get", "session_start", "rate_limited", "ci-bot"),
        ("resources/read", urn, "unauthorized", None),
    ], seen
    text = (ws.data / "audit.jsonl").read_text()
    assert "Invoices" not in text and "billing" not in text, "no content and no prompt arguments"


@asynccontextmanager
async def sdk_session(url: str, key: str) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def test_scoped_keys_are_created_listed_and_checked(ws: Workspace) -> None:
    created = scoped_key(ws, "reader", "--read-only", "--domains", "user,org:acme")
    assert created["read_only"] is True and created["domains"] == ["user", "org:acme"]
    assert created["access"] == "read-only, domains user, org:acme"
    full = scoped_key(ws, "full")
    assert "read_only" not in full and "domains" not in full and full["access"] == "full access"
    listed = {key["name"]: key["access"] for key in json.loads(ws.run("--json", "keys", "list").stdout)}
    assert listed == {"reader": "read-only, domains user, org:acme", "full": "full access"}
    assert "read-only, domains user, org:acme" in ws.run("keys", "list").stdout
    refused = ws.run("keys", "create", "--name", "bad", "--domains", "user,team:x")
    assert refused.returncode != 0 and "invalid `domains`" in refused.stderr and "team:x" in refused.stderr, refused.stderr


@pytest.mark.anyio
async def test_a_read_only_key_sees_and_calls_no_tool_or_prompt_that_writes(ws: Workspace) -> None:
    key = scoped_key(ws, "reader", "--read-only")["key"]
    writer = create_key(ws, "writer")["key"]
    with http_server(ws) as server:
        async with sdk_session(server.url, writer) as session:
            written = await session.call_tool("memory_capture", {"content": "Deploys go out on Thursdays."})
            urn = written.structured_content["urn"]
        async with sdk_session(server.url, key) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert "memory_recall" in names and "memory_get" in names
            assert not names & {"memory_capture", "memory_update", "memory_forget", "memory_restore"}, names
            refused = await session.call_tool("memory_forget", {"urn": urn, "reason": "read-only keys cannot"})
            assert refused.is_error and refused.structured_content["error"] == "forbidden", refused
            assert "read-only" in refused.structured_content["message"]
            prompts = [prompt.name for prompt in (await session.list_prompts()).prompts]
            assert prompts == ["session_start"]
            with pytest.raises(MCPError):
                await session.get_prompt("capture_decision", {"decision": "x"})
            recalled = await session.call_tool("memory_recall", {"query": "deploys thursdays"})
            assert recalled.structured_content["results"][0]["urn"] == urn
    got = json.loads(ws.run("--json", "get", urn).stdout)
    assert got["status"] == "active"
    outcomes = [(line["tool"], line["outcome"]) for line in audit_lines(ws) if line.get("identity") == "reader"]
    assert ("memory_forget", "forbidden") in outcomes, outcomes


@pytest.mark.anyio
async def test_a_domain_key_neither_reads_nor_writes_memories_of_other_domains(ws: Workspace) -> None:
    full = create_key(ws, "full")["key"]
    personal = scoped_key(ws, "personal", "--domains", "user")["key"]
    elsewhere = scoped_key(ws, "acme", "--domains", "org:acme")["key"]
    with http_server(ws) as server:
        async with sdk_session(server.url, full) as session:
            project = (await session.call_tool("memory_capture", {
                "content": "The widget service keeps 20 pooled connections.", "title": "Widget pool"})).structured_content["urn"]
            user = (await session.call_tool("memory_capture", {
                "content": "I prefer pooled connections to be named after their service.", "title": "Pool naming",
                "domain": "user"})).structured_content["urn"]
        assert project.startswith(f"kenning://{PROJECT_DOMAIN}/") and user.startswith("kenning://user/")

        async with sdk_session(server.url, personal) as session:
            recalled = await session.call_tool("memory_recall", {"query": "pooled connections"})
            assert [hit["urn"] for hit in recalled.structured_content["results"]] == [user]
            missing = await session.call_tool("memory_get", {"urn": project})
            assert missing.is_error and missing.structured_content["error"] == "not_found"
            forget = await session.call_tool("memory_forget", {"urn": project, "reason": "not mine to forget"})
            assert forget.is_error and forget.structured_content["error"] == "not_found"
            outside = await session.call_tool("memory_capture", {"content": "Into the project.", "domain": "project"})
            assert outside.is_error and outside.structured_content["field"] == "domain", outside
            captured = await session.call_tool("memory_capture", {"content": "My editor uses tabs."})
            assert captured.structured_content["urn"].startswith("kenning://user/"), "a capture goes to the key's domain"
            status = await session.call_tool("memory_status", {})
            assert [domain["domain"] for domain in status.structured_content["domains"]] == ["user"]
            listed = {str(resource.uri) for resource in (await session.list_resources()).resources}
            assert user in listed and project not in listed and not any(PROJECT_DOMAIN in uri for uri in listed), listed
            with pytest.raises(MCPError):
                await session.read_resource(project)
            assert "Pool naming" in (await session.read_resource(user)).contents[0].text
            start = await session.get_prompt("session_start", {"task": "pooled connections"})
            text = start.messages[0].content.text
            assert "Pool naming" in text and "Widget pool" not in text, text

        async with sdk_session(server.url, elsewhere) as session:
            refused = await session.call_tool("memory_recall", {"query": "pooled connections"})
            assert refused.is_error and refused.structured_content["error"] == "forbidden"
            assert "none of which this server keeps" in refused.structured_content["message"]
            with pytest.raises(MCPError):
                await session.read_resource(user)
    got = json.loads(ws.run("--json", "get", project).stdout)
    assert got["status"] == "active", "the project memory was not forgotten"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_folders_kenning_creates_are_its_owners_alone(ws: Workspace) -> None:
    data = ws.root / "fresh" / "kenning"
    env = {"KENNING_DATA_DIR": str(data)}
    done = ws.run("--json", "capture", "The user prefers dark themes.", "--domain", "user", env=env)
    assert done.returncode == 0, done.stderr
    assert ws.run("--json", "capture", "The build uses cargo nextest.", env=env).returncode == 0
    assert ws.run("keys", "create", "--name", "ci", env=env).returncode == 0
    export = ws.root / "everything.jsonl"
    assert ws.run("export", "--output", str(export), env=env).returncode == 0
    with http_server(ws, env=env):
        pass
    kenning_dir = ws.repo / ".git" / "kenning"
    for folder in (ws.root / "fresh", data, kenning_dir):
        assert mode(folder) == 0o700, (folder, oct(mode(folder)))
    files = [data / "user.db", data / "keys.json", data / "audit.jsonl", kenning_dir / "project.db", export]
    files += [path for path in (data / "user.db.index", kenning_dir / "project.db.index") if path.exists()]
    for file in files:
        assert mode(file) == 0o600, (file, oct(mode(file)))
