"""The `prompts` and `logging` capabilities over both transports."""

from __future__ import annotations

import warnings

import anyio
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from harness import Connection, Workspace, connect

pytestmark = pytest.mark.anyio

PROMPTS = ["session_start", "capture_decision", "summarise_learnings"]
MISSING_URN = "kenning://user/context/01jzzzzzzzzzzzzzzzzzzzzzzz"


def text_of(result: types.GetPromptResult) -> str:
    assert len(result.messages) == 1 and result.messages[0].role == "user", result
    content = result.messages[0].content
    assert isinstance(content, types.TextContent), content
    return content.text


async def test_prompts_are_listed_and_rendered(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        assert conn.init.capabilities.prompts is not None
        listed = await conn.session.list_prompts()
        assert [prompt.name for prompt in listed.prompts] == PROMPTS
        assert all(prompt.title and prompt.description and prompt.arguments for prompt in listed.prompts)

        empty = text_of(await conn.session.get_prompt("session_start", {"task": "kubernetes ingress", "limit": "3"}))
        assert "no memories about this yet" in empty, empty
        captured = await conn.ok("memory_capture", {
            "content": "Invoices are rendered to PDF by a nightly job in the billing service.",
            "title": "Invoice rendering", "namespace": "context",
        })
        start = text_of(await conn.session.get_prompt("session_start", {"task": "change how invoices are rendered"}))
        assert "Invoice rendering" in start and captured["urn"] in start, start

        decision = text_of(await conn.session.get_prompt(
            "capture_decision", {"decision": "Use PostgreSQL 16", "reason": "we need transactions"}))
        assert "Use PostgreSQL 16" in decision and "we need transactions" in decision and "memory_capture" in decision
        summary = text_of(await conn.session.get_prompt("summarise_learnings", {"topic": "the billing migration"}))
        assert "the billing migration" in summary and "memory_recall" in summary


@pytest.mark.parametrize(("name", "arguments", "field", "hint"), [
    ("session_start", {}, "task", "What you are about to work on"),
    ("session_start", {"task": "   "}, "task", "What you are about to work on"),
    ("session_start", {"task": "x", "limit": "many"}, "limit", "leave it out"),
    ("session_start", {"task": "x", "limt": "3"}, "limt", "did you mean `limit`"),
    ("sesion_start", {"task": "x"}, "name", "did you mean `session_start`"),
])
async def test_prompt_arguments_are_checked(ws: Workspace, name: str, arguments: dict[str, str], field: str,
                                            hint: str) -> None:
    async with connect(ws, "stdio") as conn:
        with pytest.raises(MCPError) as caught:
            await conn.session.get_prompt(name, arguments)
        assert caught.value.code == -32602
        assert caught.value.data["field"] == field and hint in caught.value.data["suggestion"], caught.value.data


async def test_read_only_lists_only_the_prompt_that_does_not_write(ws: Workspace) -> None:
    async with connect(ws, "stdio", ("--read-only",)) as conn:
        listed = await conn.session.list_prompts()
        assert [prompt.name for prompt in listed.prompts] == ["session_start"]
        with pytest.raises(MCPError) as caught:
            await conn.session.get_prompt("capture_decision", {"decision": "x"})
        assert caught.value.code == -32602 and caught.value.data["field"] == "name"


def log_messages(conn: Connection) -> list[types.LoggingMessageNotificationParams]:
    return [n.params for n in conn.notifications if isinstance(n, types.LoggingMessageNotification)]


async def wait_for_logs(conn: Connection, count: int) -> list[types.LoggingMessageNotificationParams]:
    with anyio.move_on_after(5):
        while len(log_messages(conn)) < count:
            await anyio.sleep(0.02)
    return log_messages(conn)


async def set_level(conn: Connection, level: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated from protocol 2026-07-28 on; this session is older
        await conn.session.set_logging_level(level)


async def test_tool_calls_are_logged_at_the_level_the_client_sets(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        assert conn.init.capabilities.logging is not None
        assert (await conn.call("memory_get", {"urn": MISSING_URN})).is_error
        # The server sends a call's log message before its response; the last check of this
        # test, once a later message has arrived, also shows that none was sent for this call.
        assert log_messages(conn) == [], "nothing is logged before the client sets a level"

        await set_level(conn, "warning")
        assert (await conn.call("memory_get", {"urn": MISSING_URN})).is_error
        await conn.ok("memory_status")  # a debug message, below the level
        assert (await conn.session.call_tool("memory_recall", {"query": "x", "limit": "ten"})).is_error
        logs = await wait_for_logs(conn, 2)
        assert [(log.level, log.data["tool"]) for log in logs] == [("warning", "memory_get"), ("warning", "memory_recall")]
        assert logs[0].logger == "kenning" and logs[0].data["error"]["error"] == "not_found", logs[0]
        assert logs[1].data["error"]["error"] == "invalid_argument" and logs[1].data["error"]["field"] == "limit", logs[1]

        await set_level(conn, "debug")
        await conn.ok("memory_status")
        logs = await wait_for_logs(conn, 3)
        assert (logs[2].level, logs[2].data["tool"]) == ("debug", "memory_status") and logs[2].data["elapsed_ms"] >= 0
        assert len(logs) == 3, "only the calls after a level was set are logged"
