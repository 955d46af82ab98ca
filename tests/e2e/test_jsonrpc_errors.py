"""JSON-RPC errors by the specification on both transports, byte for byte against the real binary.

Regression tests for messages rmcp used to mishandle: text that is not JSON got no answer over
stdio and 415 over HTTP (the specification says -32700 with id null, and HTTP 400); an invalid
request was answered without its id over stdio, so the client waited for its timeout; `arguments`
given as an array got -32601 "method not found" instead of -32602. A well-formed call whose
arguments the tool refuses is no JSON-RPC error but a tool error result (SEP-1303).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from harness import Workspace, http_server
from test_stdio import READ_TIMEOUT, RawStdioServer

INITIALIZE_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "raw-jsonrpc", "version": "0"},
}


@dataclass(frozen=True)
class Case:
    name: str
    line: str
    code: int
    id: Any
    field: str | None


# One line each, as a client would send it; `id` is what the error must carry.
UNREADABLE = [
    Case("not_json", '{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, None, None),
    Case("not_json_at_all", "hello", -32700, None, None),
    Case("batch", '[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]', -32600, None, "message"),
    Case("scalar", "42", -32600, None, "message"),
    Case("wrong_version", '{"jsonrpc": "1.0", "id": "v", "method": "ping"}', -32600, "v", "jsonrpc"),
    Case("method_not_a_string", '{"jsonrpc": "2.0", "id": 7, "method": 42}', -32600, 7, "method"),
    Case("no_method", '{"jsonrpc": "2.0", "id": 8}', -32600, 8, "method"),
    Case("id_an_object", '{"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"}', -32600, None, "id"),
]

# Requests that reach the server but whose method or params do not fit.
MISFITS = [
    Case("arguments_an_array",
         '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "memory_recall", "arguments": ["x"]}}',
         -32602, 9, "arguments"),
    Case("tool_name_a_number",
         '{"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": 5, "arguments": {}}}',
         -32602, 10, "name"),
    Case("params_not_an_object",
         '{"jsonrpc": "2.0", "id": 11, "method": "resources/read", "params": "kenning://x"}',
         -32602, 11, "params"),
    Case("unknown_method", '{"jsonrpc": "2.0", "id": 12, "method": "no/such/method"}', -32601, 12, None),
    Case("unknown_tool",
         '{"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": {"name": "memory_nonexistent", "arguments": {}}}',
         -32602, 15, None),
]


@dataclass(frozen=True)
class Refusal:
    name: str
    line: str
    id: Any
    field: str


# Well-formed calls whose arguments the tool refuses: tool execution errors, answered as a result
# with `isError: true` that names the field (SEP-1303), not as JSON-RPC errors.
REFUSED_ARGUMENTS = [
    # A 1 MB query is refused at once, naming it (it used to keep a core busy for minutes).
    Refusal("query_of_a_megabyte",
         json.dumps({"jsonrpc": "2.0", "id": 13, "method": "tools/call",
                     "params": {"name": "memory_recall", "arguments": {"query": "word " * 200_000}}}),
         13, "query"),
    # A crafted cursor used to overflow recall's page arithmetic.
    Refusal("crafted_cursor",
         '{"jsonrpc": "2.0", "id": 14, "method": "tools/call", "params": '
         '{"name": "memory_recall", "arguments": {"query": "pool", "cursor": "offffffffffffffff"}}}',
         14, "cursor"),
]


def check_error(reply: dict[str, Any], case: Case) -> None:
    assert reply.get("jsonrpc") == "2.0", reply
    assert "id" in reply and reply["id"] == case.id, reply
    assert reply["error"]["code"] == case.code, reply
    if case.field is not None:
        assert reply["error"]["data"]["field"] == case.field, reply


def check_refusal(reply: dict[str, Any], case: Refusal) -> None:
    """A result marked `isError` whose body and model-visible text name the refused field."""
    assert reply.get("jsonrpc") == "2.0" and reply.get("id") == case.id, reply
    result = reply["result"]
    assert result["isError"] is True, reply
    body = result["structuredContent"]
    assert (body["error"], body["field"]) == ("invalid_argument", case.field), body
    assert f"`{case.field}`" in result["content"][0]["text"], result


def check_answer(reply: dict[str, Any], case: Case | Refusal) -> None:
    if isinstance(case, Refusal):
        check_refusal(reply, case)
    else:
        check_error(reply, case)


class StdioLines(RawStdioServer):
    def send_line(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def next_message(self) -> dict[str, Any]:
        line = self._lines.get(timeout=READ_TIMEOUT)
        assert line is not None, f"server closed stdout; stderr:\n{self.stderr.decode(errors='replace')}"
        return json.loads(line)


@pytest.mark.parametrize("case", UNREADABLE + MISFITS + REFUSED_ARGUMENTS, ids=lambda case: case.name)
def test_stdio_answers_by_the_spec(ws: Workspace, case: Case | Refusal) -> None:
    server = StdioLines(ws, {})
    server.request("initialize", INITIALIZE_PARAMS)
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    server.send_line(case.line)
    check_answer(server.next_message(), case)
    # The session goes on: the next request is answered as usual.
    assert server.request("ping") == {"jsonrpc": "2.0", "id": server._next_id, "result": {}}
    assert server.close() == 0, server.stderr.decode(errors="replace")


def test_stdio_ignores_notifications_and_responses_it_cannot_read(ws: Workspace) -> None:
    server = StdioLines(ws, {})
    server.request("initialize", INITIALIZE_PARAMS)
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    server.send_line('{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "soon"}')
    server.send_line('{"jsonrpc": "2.0", "id": 99, "result": 5, "error": {}}')
    server.send_line("")
    reply = server.request("ping")
    assert reply["result"] == {}
    assert server.close() == 0, server.stderr.decode(errors="replace")
    assert len(server.stdout_lines) == 2, server.stdout_lines  # initialize and ping, nothing else


def http_post(url: str, body: str, session: str | None = None) -> tuple[int, dict[str, str], str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = INITIALIZE_PARAMS["protocolVersion"]
    request = urllib.request.Request(url, data=body.encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode(errors="replace")


def json_rpc_messages(content_type: str, body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: a JSON body, or the data lines of an event stream."""
    if content_type.startswith("application/json"):
        return [json.loads(body)]
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]


@pytest.mark.parametrize("case", UNREADABLE, ids=lambda case: case.name)
def test_http_refuses_unreadable_bodies_with_400_and_the_json_rpc_error(ws: Workspace, case: Case) -> None:
    with http_server(ws) as server:
        status, headers, body = http_post(server.url, case.line)
        assert status == 400, (status, body)
        assert headers.get("content-type", headers.get("Content-Type", "")).startswith("application/json"), headers
        check_error(json.loads(body), case)


@pytest.mark.parametrize("case", MISFITS + REFUSED_ARGUMENTS, ids=lambda case: case.name)
def test_http_answers_misfit_requests_with_their_error(ws: Workspace, case: Case | Refusal) -> None:
    with http_server(ws) as server:
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS})
        status, headers, body = http_post(server.url, initialize)
        assert status == 200, body
        session = {key.lower(): value for key, value in headers.items()}.get("mcp-session-id")
        status, _, _ = http_post(server.url, '{"jsonrpc": "2.0", "method": "notifications/initialized"}', session)
        assert status == 202
        status, headers, body = http_post(server.url, case.line, session)
        # rmcp answers a request it read on the request's event stream (200); one whose params are
        # not even an object it cannot read, and the transport answers that with 400.
        assert status in (200, 400), (status, body)
        content_type = {key.lower(): value for key, value in headers.items()}.get("content-type", "")
        replies = [message for message in json_rpc_messages(content_type, body) if "id" in message]
        assert len(replies) == 1, body
        check_answer(replies[0], case)


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_refused_arguments_are_tool_errors_on_every_protocol_version(ws: Workspace, version: str) -> None:
    """SEP-1303 entered the specification with 2025-11-25 as a clarification; the official SDKs
    (TypeScript, Python, Go) answer a refused argument as a tool error whatever version was
    negotiated, and so does kenning."""
    server = StdioLines(ws, {})
    init = server.request("initialize", {**INITIALIZE_PARAMS, "protocolVersion": version})
    assert init["result"]["protocolVersion"] == version, init
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    reply = server.request("tools/call", {"name": "memory_capture", "arguments": {"content": "x", "salience": 7}})
    check_refusal(reply, Refusal("salience", "", server._next_id, "salience"))
    assert server.close() == 0, server.stderr.decode(errors="replace")


def test_http_refuses_an_unreadable_notification_with_400_and_no_id(ws: Workspace) -> None:
    # Over stdio such a notification is dropped (JSON-RPC never answers one); over HTTP the client
    # waits for a status, and the specification asks for 400 with an error that has no id.
    with http_server(ws) as server:
        status, _, body = http_post(server.url, '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "soon"}')
        assert status == 400, (status, body)
        check_error(json.loads(body), Case("notification", "", -32600, None, "message"))
