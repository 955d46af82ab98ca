"""Contradictions over MCP: a capture that contradicts an earlier memory says so in its answer
(default toolset), and the opt-in `dynamics` toolset lists contradictions and settles one: by the
rule without a language model, by the model when one is configured (the fake in fake_llm.py), and
by the rule again when the model's answer cannot be read."""

from __future__ import annotations

import json

import pytest

from fake_llm import FakeLLM, anthropic_provider
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
        marked = await conn.ok("memory_get", {"urn": old["urn"]})
        assert marked["version"] == 2, "recall prefers the newer value while the contradiction is open"
        assert {"target": new["urn"], "relation": "superseded-by"} in marked["links"], marked["links"]

        listed = await conn.ok("memory_contradictions", {"state": "open"})
        assert listed["total"] == 1 and listed["contradictions"][0]["id"] == note["id"]
        assert listed["contradictions"][0]["evidence"] == {"a": ["timeout", "30s"], "b": ["timeout", "45s"]}

        resolved = await conn.ok("memory_resolve_truth", {"contradiction_id": note["id"]})
        assert resolved["resolution"] == "b_wins"
        assert resolved["decided_by"] == "rule:recency"
        assert resolved["llm"] == {"status": "not_configured", "fallback": "rule"}
        assert resolved["penalised"] == old["urn"]
        loser = await conn.ok("memory_get", {"urn": old["urn"]})
        assert loser["version"] == 3 and loser["metadata"]["evidence_contradicting"] == "1"

        error = await conn.refused("memory_resolve_truth", {"contradiction_id": note["id"]})
        assert error["field"] == "contradiction_id"
        assert "reopened" in error["suggestion"]
        error = await conn.refused("memory_contradictions", {"state": "closed"})
        assert error["field"] == "state"
        assert (await conn.ok("memory_contradictions", {"state": "resolved"}))["total"] == 1


KEY = "sk-ant-e2e-contradictions-0123456789"


def with_model(ws: Workspace, llm: FakeLLM) -> dict[str, str]:
    """Configures the fake as the one provider and returns the environment holding its key."""
    (ws.config / "kenning.toml").write_text(anthropic_provider(llm.url))
    return {"E2E_ANTHROPIC_KEY": KEY}


async def capture(conn, content: str) -> dict:
    return await conn.ok("memory_capture", {"content": content, "namespace": "config", "source": "told-by-user"})


async def test_with_a_model_it_judges_each_conflict_and_settles_it(ws: Workspace, transport: str) -> None:
    with FakeLLM(anthropic_key=KEY) as llm:
        env = with_model(ws, llm)
        async with connect(ws, transport, ARGS, env=env) as conn:
            await capture(conn, "The payments API request timeout is 30s.")
            llm.say('{"conflict": false, "explanation": "The notes are about different environments."}')
            dismissed = await capture(conn, "The payments API request timeout is 45s.")
            assert "contradictions" not in dismissed, dismissed
            assert len(llm.completions()) == 1
            judged = llm.completions()[0].body
            assert "The payments API request timeout is 30s." in json.dumps(judged["messages"])
            assert '"conflict"' in judged["system"]

            await capture(conn, "The search cluster heap size is 4GB.")
            llm.say('{"conflict": true, "kind": "changed_value", "explanation": "Two heap sizes for one cluster."}')
            heap = await capture(conn, "The search cluster heap size is 8GB.")
            [note] = heap["contradictions"]
            assert note["kind"] == "changed_value" and note["state"] == "open"

            llm.say('{"resolution": "context_dependent", "conditions": "4GB on staging, 8GB in production", '
                    '"explanation": "Both sizes are in use."}')
            settled = await conn.ok("memory_resolve_truth", {"contradiction_id": note["id"]})
            assert settled["resolution"] == "context_dependent" and settled["state"] == "context_dependent"
            assert settled["conditions"] == "4GB on staging, 8GB in production"
            assert settled["decided_by"].startswith("llm:") and settled["llm"]["status"] == "used"
            assert "penalised" not in settled, "context_dependent penalises neither"


async def test_when_the_model_fails_the_rule_decides_and_says_so(ws: Workspace, transport: str) -> None:
    with FakeLLM(anthropic_key=KEY) as llm:
        env = with_model(ws, llm)
        async with connect(ws, transport, ARGS, env=env) as conn:
            old = await capture(conn, "The CI cache TTL is 7 days.")
            llm.say("Yes, these two notes conflict.")
            new = await capture(conn, "The CI cache TTL is 14 days.")
            [note] = new["contradictions"]
            assert any("could not judge" in warning for warning in new["warnings"]), new
            llm.say("B wins.")
            settled = await conn.ok("memory_resolve_truth", {"contradiction_id": note["id"]})
            assert (settled["resolution"], settled["decided_by"]) == ("b_wins", "rule:recency")
            assert settled["llm"]["status"] == "failed" and settled["llm"]["fallback"] == "rule"
            assert settled["penalised"] == old["urn"]
