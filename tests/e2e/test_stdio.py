"""stdio only: the raw byte stream on stdout, and the SDK's high-level `mcp.Client`."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from harness import PROJECT_DOMAIN, Workspace

READ_TIMEOUT = 20.0


class RawStdioServer:
    """`kenning serve` driven by hand, recording every byte it writes to stdout and stderr."""

    def __init__(self, ws: Workspace, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [ws.bin, "serve"], cwd=ws.repo, env=ws.env(env),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.stdout_lines: list[bytes] = []
        self.stderr = bytearray()
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._pump_stdout, daemon=True),
                         threading.Thread(target=self._pump_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()
        self._next_id = 0

    def _pump_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.stdout_lines.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        for chunk in iter(lambda: self.process.stderr.read(4096), b""):
            self.stderr.extend(chunk)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            line = self._lines.get(timeout=READ_TIMEOUT)
            assert line is not None, f"server closed stdout; stderr:\n{self.stderr.decode(errors='replace')}"
            reply = json.loads(line)
            if reply.get("id") == self._next_id:
                return reply

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(10)
        for thread in self._threads:
            thread.join(5)
        return code


def test_stdout_carries_only_json_rpc_and_logs_go_to_stderr(ws: Workspace) -> None:
    server = RawStdioServer(ws, {"KENNING_LOG": "debug"})
    init = server.request("initialize", {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-e2e", "version": "0"},
    })
    assert init["result"]["serverInfo"]["name"] == "kenning"
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert len(server.request("tools/list")["result"]["tools"]) == 8

    multiline = "First line of a note.\nSecond line with unicode: naïve café ✓\n\n```rust\nfn main() {}\n```"
    captured = server.request("tools/call", {"name": "memory_capture", "arguments": {"content": multiline}})
    urn = captured["result"]["structuredContent"]["urn"]
    assert urn.startswith(f"kenning://{PROJECT_DOMAIN}/")
    got = server.request("tools/call", {"name": "memory_get", "arguments": {"urn": urn}})
    assert got["result"]["structuredContent"]["content"] == multiline

    invalid = server.request("tools/call", {"name": "memory_capture", "arguments": {"content": "x", "salience": 7}})
    assert invalid["result"]["isError"] is True
    assert invalid["result"]["structuredContent"]["field"] == "salience"
    assert "result" in server.request("resources/list")
    assert "result" in server.request("resources/read", {"uri": urn})
    assert "error" in server.request("no/such/method")

    assert server.close() == 0, server.stderr.decode(errors="replace")

    assert server.stdout_lines, "no output on stdout"
    for raw in server.stdout_lines:
        assert raw.endswith(b"\n")
        message = json.loads(raw)  # every line is one JSON document ...
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", raw  # ... and a JSON-RPC message
        assert ("id" in message and ("result" in message or "error" in message)) or "method" in message, raw
    stderr = server.stderr.decode(errors="replace")
    assert "DEBUG" in stderr and "rmcp" in stderr, f"expected debug logs on stderr, got:\n{stderr[:2000]}"


@pytest.mark.anyio
async def test_high_level_client_over_stdio(ws: Workspace) -> None:
    params = StdioServerParameters(command=ws.bin, args=["serve"], env=ws.env(), cwd=str(ws.repo))
    async with Client(params) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None and client.server_info.name == "kenning"
        tools = await client.list_tools()
        assert len(tools.tools) == 8

        captured = await client.call_tool("memory_capture", {"content": "The staging database is reset nightly."})
        assert not captured.is_error
        urn = captured.structured_content["urn"]
        assert urn.startswith(f"kenning://{PROJECT_DOMAIN}/")
        recalled = await client.call_tool("memory_recall", {"query": "staging database reset"})
        assert recalled.structured_content["results"][0]["urn"] == urn

        refused = await client.call_tool("memory_capture", {"content": "x", "confidence": 1.5})
        assert refused.is_error and refused.structured_content["field"] == "confidence"

        read = await client.read_resource(urn)
        assert json.loads(read.contents[0].text)["urn"] == urn
        templates = await client.list_resource_templates()
        assert len(templates.resource_templates) == 4
