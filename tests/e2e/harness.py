"""Spawning the real `kenning` binary and connecting the official Python MCP SDK to it.

Every server runs in a fresh workspace: a user data folder, an empty config folder and a
real git repository (with an `origin` remote) as its working directory, so captures default
to the `project:widget-service` domain.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import mcp.types as types

PROJECT_ID = "widget-service"
PROJECT_DOMAIN = f"project:{PROJECT_ID}"
REMOTE_URL = f"https://github.com/acme/{PROJECT_ID}.git"
SERVING = re.compile(r"kenning: serving MCP at (http://\S+/mcp)")
STARTUP_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 10.0
# Set by scripts/test (to anything but 0): a test whose service is missing fails instead of being
# skipped. The Rust tests follow the same rule (kenning_conformance::services).
SERVICES_REQUIRED = "KENNING_TEST_SERVICES_REQUIRED"


def missing(variable: str, problem: str) -> None:
    """Says that what `variable` names is missing (`problem` says how): fails the test when
    KENNING_TEST_SERVICES_REQUIRED is set, as scripts/test sets it, else skips it with a reason
    naming the variable."""
    if os.environ.get(SERVICES_REQUIRED, "") not in ("", "0"):
        pytest.fail(
            f"{problem}. {SERVICES_REQUIRED} is set, so a test whose service is missing fails rather "
            f"than being skipped: run `scripts/test`, which sets up every service, or set {variable}"
        )
    pytest.skip(f"{problem}; set {variable} to run it, or run the whole suite with `scripts/test`")


def service(variable: str, what: str) -> str:
    """The value of `variable`, which names `what` a test needs (a server, a client); when it is
    not set, the decision of `missing`."""
    value = os.environ.get(variable, "").strip()
    if not value:
        missing(variable, f"{variable} is not set: this test needs {what}")
    return value


@dataclass
class Workspace:
    bin: str
    root: Path
    repo: Path
    data: Path
    config: Path
    _logs: int = 0

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a server process: this workspace's folders, nothing from the caller's KENNING_* or GIT_*."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("KENNING_", "GIT_")) and key not in ("RUST_LOG",)
        }
        env.update(
            KENNING_DATA_DIR=str(self.data),
            KENNING_CONFIG_DIR=str(self.config),
            KENNING_LOG="info",
        )
        env.update(extra or {})
        return env

    @property
    def claude(self) -> Path:
        """A Claude Code folder of this workspace's own: a hook run with `hook_env` reads
        transcripts from it (and never from the caller's)."""
        return self.root / "claude"

    def hook_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a `kenning hook` run by hand, as Claude Code with this workspace's folder runs it."""
        return self.env({"CLAUDE_CONFIG_DIR": str(self.claude), **(extra or {})})

    def transcript(self, name: str) -> Path:
        """Where Claude Code keeps a session's transcript, in this workspace's Claude folder."""
        folder = self.claude / "projects" / "-workspace"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{name}.jsonl"

    def stderr_path(self, label: str) -> Path:
        self._logs += 1
        return self.root / f"server-{self._logs}-{label}.stderr.log"

    def run(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Runs the CLI to completion."""
        return subprocess.run(
            [self.bin, *args], cwd=cwd or self.repo, env=self.env(env), capture_output=True, text=True, timeout=timeout
        )


def make_workspace(bin_path: str, root: Path) -> Workspace:
    repo = root / PROJECT_ID
    data = root / "data"
    config = root / "config"
    for folder in (repo, data, config):
        folder.mkdir(parents=True)
    git_env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=git_env)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", REMOTE_URL], check=True, env=git_env)
    return Workspace(bin=bin_path, root=root, repo=repo, data=data, config=config)


@dataclass
class Connection:
    """An initialized `ClientSession` plus what the harness observed about the server."""

    session: ClientSession
    init: types.InitializeResult
    transport: str
    stderr_path: Path
    stream_errors: list[Exception] = field(default_factory=list)
    # Every notification the server sent, in arrival order.
    notifications: list[types.ServerNotification] = field(default_factory=list)

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return await self.session.call_tool(tool, arguments or {})

    async def ok(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Calls a tool that must succeed and returns its structured content."""
        result = await self.call(tool, arguments)
        assert not result.is_error, f"{tool}({arguments}) failed: {result.content}"
        assert result.structured_content is not None, f"{tool} returned no structuredContent"
        # The text block carries the same JSON, for clients that ignore structuredContent.
        texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
        assert texts and json.loads(texts[0]) == result.structured_content
        return result.structured_content

    async def failure(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Calls a tool that must run and fail: an isError result with a structured body naming
        the error, what went wrong and a suggestion."""
        result = await self.call(tool, arguments)
        assert result.is_error is True, (tool, result)
        body = result.structured_content
        assert body is not None and body["error"] and body["message"] and body["suggestion"], body
        return body

    async def refused(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Calls a tool with arguments it must refuse, and returns the refusal's body.

        A refused argument is a tool execution error (SEP-1303, MCP 2025-11-25), not a JSON-RPC
        error: a result with `isError: true` whose body names the `field`, the `problem`, the
        value `received` and a `suggestion`, and whose text block, which is what a model reads,
        names the field too.
        """
        result = await self.call(tool, arguments)
        assert result.is_error is True, (tool, arguments, result)
        body = result.structured_content
        assert body is not None and body["error"] == "invalid_argument", body
        assert body["field"] and body["problem"] and body["suggestion"] and "received" in body, body
        texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
        assert texts and json.loads(texts[0]) == body and body["field"] in texts[0], result.content
        assert body["field"] in body["message"], body
        return body

    async def read_json(self, uri: str) -> Any:
        result = await self.session.read_resource(uri)
        assert len(result.contents) == 1
        contents = result.contents[0]
        assert isinstance(contents, types.TextResourceContents), contents
        assert contents.mime_type == "application/json"
        assert str(contents.uri) == uri
        return json.loads(contents.text)


def _check_stream(errors: list[Exception], stderr: Path) -> None:
    assert not errors, (
        f"the client saw non-JSON-RPC traffic or transport errors: {errors!r}\n"
        f"server stderr:\n{stderr.read_text(errors='replace')}"
    )


@contextlib.asynccontextmanager
async def connect(ws: Workspace, transport: str, args: tuple[str, ...] = (),
                  env: dict[str, str] | None = None) -> AsyncIterator[Connection]:
    """Starts `kenning serve` on `transport` ("stdio" or "http") and yields an initialized session."""
    errors: list[Exception] = []
    notifications: list[types.ServerNotification] = []

    async def on_message(message: Any) -> None:
        # The SDK routes unparseable lines and transport failures here as exceptions.
        if isinstance(message, Exception):
            errors.append(message)
        else:
            notifications.append(message)

    if transport == "stdio":
        stderr_path = ws.stderr_path("stdio")
        params = StdioServerParameters(
            command=ws.bin, args=["serve", *args], env=ws.env(env), cwd=str(ws.repo)
        )
        with stderr_path.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as session:
                    init = await session.initialize()
                    yield Connection(session, init, transport, stderr_path, errors, notifications)
        _check_stream(errors, stderr_path)
    elif transport == "http":
        with http_server(ws, args, env) as server:
            async with streamable_http_client(server.url) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as session:
                    init = await session.initialize()
                    yield Connection(session, init, transport, server.stderr_path, errors, notifications)
        _check_stream(errors, server.stderr_path)
    else:
        raise ValueError(f"unknown transport {transport!r}")


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path


@contextlib.contextmanager
def http_server(ws: Workspace, args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Iterator[HttpServer]:
    """Runs `kenning serve --http 127.0.0.1:0`, yields its URL, then stops it with SIGINT.

    On exit asserts the server shut down cleanly and wrote nothing at all to stdout.
    """
    with announced_server(ws, ("serve", "--http", "127.0.0.1:0", *args), SERVING, "http", env) as server:
        yield server


@contextlib.contextmanager
def announced_server(
    ws: Workspace, args: tuple[str, ...], announcement: re.Pattern[str], label: str, env: dict[str, str] | None = None
) -> Iterator[HttpServer]:
    """Runs `kenning ARGS`, waits for the line on stderr matching `announcement` (its first group
    is the URL), yields the server, then stops it with SIGINT.

    On exit asserts the server shut down cleanly and wrote nothing at all to stdout.
    """
    command = " ".join(("kenning", *args))
    stderr_path = ws.stderr_path(label)
    process = subprocess.Popen(
        [ws.bin, *args],
        cwd=ws.repo, env=ws.env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    found = threading.Event()
    url: list[str] = []
    stdout_chunks: list[bytes] = []

    def pump_stderr() -> None:
        assert process.stderr is not None
        with stderr_path.open("wb") as log:
            for line in process.stderr:
                log.write(line)
                log.flush()
                match = announcement.search(line.decode(errors="replace"))
                if match and not found.is_set():
                    url.append(match.group(1))
                    found.set()
        found.set()

    def pump_stdout() -> None:
        assert process.stdout is not None
        stdout_chunks.append(process.stdout.read())

    threads = [threading.Thread(target=pump_stderr, daemon=True), threading.Thread(target=pump_stdout, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        if not found.wait(STARTUP_TIMEOUT) or not url:
            process.kill()
            process.wait()
            raise AssertionError(
                f"{command} did not announce its address (exit {process.returncode}):\n"
                f"{stderr_path.read_text(errors='replace')}"
            )
        yield HttpServer(url[0], process, stderr_path)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(SHUTDOWN_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise AssertionError(f"{command} did not stop within 10 s of SIGINT")
        for thread in threads:
            thread.join(5)
    assert process.returncode == 0, f"{command} exited with {process.returncode}:\n{stderr_path.read_text(errors='replace')}"
    stdout = b"".join(stdout_chunks)
    assert stdout == b"", f"{command} wrote to stdout: {stdout[:500]!r}"
