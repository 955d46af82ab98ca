"""Contradictions over MCP: a capture that contradicts an earlier memory says so in its answer
(default toolset), and the opt-in `dynamics` toolset lists contradictions and settles one by the
rule when no language model is configured."""

from __future__ import annotations

import pytest

from harness import Workspace, connect

pytestmark = pytest.mark.anyio

ARGS = ("--toolsets", "memory,dynamics")


async def test_dynamics_is_not_in_the_default_toolset(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        tools = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert "memory_capture" in tools
        assert not {"memory_resolve_truth", "memory_contradictions"} & tools


async def test_a_contradiction_is_reported_listed_and_resolved(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport, ARGS) as conn:
        old = await conn.ok("memory_capture", {"content": "The payments API request timeout is 30s.", "namespace": "config",
                                                "source": "inference"})
        assert "contradictions" not in old
        new = await conn.ok("memory_capture", {"content": "The payments API request timeout is 45s.", "namespace": "config",
                                                "source": "tool-result"})
        [note] = new["contradictions"]
        assert note["kind"] == "changed_value" and note["state"] == "open" and note["with"] == old["urn"]

        listed = await conn.ok("memory_contradictions", {"state": "open"})
        assert listed["total"] == 1 and listed["contradictions"][0]["id"] == note["id"]
        assert listed["contradictions"][0]["evidence"] == {"a": ["timeout", "30s"], "b": ["timeout", "45s"]}

        resolved = await conn.ok("memory_resolve_truth", {"contradiction_id": note["id"]})
        assert resolved["resolution"] == "b_wins"
        assert resolved["decided_by"] == "rule:recency"
        assert resolved["llm"] == {"status": "not_configured", "fallback": "rule"}
        assert resolved["penalised"] == old["urn"]
        loser = await conn.ok("memory_get", {"urn": old["urn"]})
        assert loser["version"] == 2 and loser["metadata"]["evidence_contradicting"] == "1"

        error = await conn.rpc_error("memory_resolve_truth", {"contradiction_id": note["id"]})
        assert error.code == -32602 and error.data["field"] == "contradiction_id"
        assert "reopened" in error.data["suggestion"]
        error = await conn.rpc_error("memory_contradictions", {"state": "closed"})
        assert error.code == -32602 and error.data["field"] == "state"
        assert (await conn.ok("memory_contradictions", {"state": "resolved"}))["total"] == 1
