"""The workflows toolset against the real `kenning serve --toolsets memory,workflows` with the
official SDK: a plan with dependencies, refused plans, a server restart in the middle of the
work, the resources, the closing memory linked to what the steps produced, and the CLI.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness import PROJECT_DOMAIN, Connection, Workspace, connect

pytestmark = pytest.mark.anyio

ARGS = ("--toolsets", "memory,workflows")
WORKFLOW_TOOLS = {"workflow_create", "workflow_status", "workflow_update_step", "workflow_abandon", "workflow_list"}

PLAN = {
    "name": "Add response caching",
    "goal": "Cache user lookups so the profile page stays under 100 ms",
    "steps": [
        {"id": "design", "description": "Choose the cache and its expiry"},
        {"id": "build", "description": "Implement the cache", "dependencies": ["design"], "verification": "cargo test passes"},
        {"id": "docs", "description": "Document the expiry", "dependencies": ["design"]},
        {"id": "ship", "description": "Release it", "dependencies": ["build", "docs"]},
    ],
}


async def invalid_params(conn: Connection, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments refused, naming the field, the problem and a suggestion."""
    return await conn.refused(tool, arguments)


async def step(conn: Connection, workflow_id: str, step_id: str, status: str, **extra: Any) -> dict[str, Any]:
    return await conn.ok("workflow_update_step", {"workflow_id": workflow_id, "step_id": step_id, "status": status, **extra})


async def test_a_workflow_survives_a_restart_and_ends_as_a_linked_memory(ws: Workspace) -> None:
    async with connect(ws, "stdio", args=ARGS) as conn:
        names = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert WORKFLOW_TOOLS <= names

        cyclic = {**PLAN, "steps": [{"id": "a", "description": "a", "dependencies": ["b"]}, {"id": "b", "description": "b", "dependencies": ["a"]}]}
        error = await invalid_params(conn, "workflow_create", cyclic)
        assert "a -> b -> a" in error["problem"], error
        unknown = {**PLAN, "steps": [{"id": "a", "description": "a", "dependencies": ["desing"]}]}
        error = await invalid_params(conn, "workflow_create", unknown)
        assert error["field"] == "steps[0].dependencies[0]" and error["received"] == "desing", error
        assert (await conn.ok("workflow_list"))["workflows"] == [], "nothing is kept of a refused plan"

        created = await conn.ok("workflow_create", PLAN)
        workflow_id = created["workflow_id"]
        assert created["domain"] == PROJECT_DOMAIN
        assert (created["ready"], created["blocked"]) == (["design"], ["build", "docs", "ship"])
        assert created["next_step"]["id"] == "design"

        decision = await conn.ok("memory_capture", {"content": "User lookups are cached for 60 seconds in process.", "namespace": "decisions"})
        await step(conn, workflow_id, "design", "completed", notes="in-process cache, 60 s", produced=[decision["urn"]])
        error = await invalid_params(conn, "workflow_update_step", {"workflow_id": workflow_id, "step_id": "ship", "status": "in_progress"})
        assert "before its dependencies are done" in error["problem"], error
        started = await step(conn, workflow_id, "build", "in_progress")
        assert (started["in_progress"], started["ready"], started["done"]) == (["build"], ["docs"], ["design"])

    # A new server process: the agent resumes from the store.
    async with connect(ws, "stdio", args=ARGS) as conn:
        resumed = await conn.ok("workflow_status")
        assert resumed["workflow_id"] == workflow_id
        assert resumed["next_step"]["id"] == "build", "the step in progress comes first"
        assert resumed["in_progress"] == ["build"] and resumed["blocked"] == ["ship"]

        listing = await conn.read_json("kenning://workflows")
        assert [w["workflow_id"] for w in listing["workflows"]] == [workflow_id]
        assert (await conn.read_json(f"kenning://workflows/{workflow_id}"))["steps"][0]["notes"]
        templates = {t.uri_template for t in (await conn.session.list_resource_templates()).resource_templates}
        assert "kenning://workflows/{workflow_id}" in templates

        await step(conn, workflow_id, "build", "completed")
        await step(conn, workflow_id, "docs", "skipped", notes="covered by the code comments")
        done = await step(conn, workflow_id, "ship", "completed")
        assert done["status"] == "completed" and "next_step" not in done, done
        memory = await conn.ok("memory_get", {"urn": done["memory"]})
        assert memory["namespace"] == "progress" and memory["kind"] == "episodic"
        assert "[skipped] `docs`" in memory["content"]
        assert {"target": decision["urn"], "relation": "produced"} in memory["links"]
        completed = await conn.ok("workflow_list", {"status": "completed"})
        assert [w["workflow_id"] for w in completed["workflows"]] == [workflow_id]

    shown = ws.run("--json", "workflow", "show", workflow_id)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["memory"] == memory["urn"]
    listed = ws.run("workflow", "list")
    assert listed.returncode == 0 and workflow_id in listed.stdout and "completed" in listed.stdout, listed


async def test_abandoning_writes_the_workflow_up(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport, args=ARGS) as conn:
        created = await conn.ok("workflow_create", PLAN)
        abandoned = await conn.ok("workflow_abandon", {"workflow_id": created["workflow_id"], "reason": "the cache moved to the gateway"})
        assert abandoned["status"] == "abandoned"
        memory = await conn.ok("memory_get", {"urn": abandoned["memory"]})
        assert "the cache moved to the gateway" in memory["content"]
        error = await invalid_params(conn, "workflow_update_step", {"workflow_id": created["workflow_id"], "step_id": "design", "status": "completed"})
        assert error["field"] == "workflow_id", error


async def test_workflow_tools_are_off_by_default_and_read_only_keeps_the_readers(ws: Workspace) -> None:
    async with connect(ws, "stdio") as conn:
        names = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert not names & WORKFLOW_TOOLS
    async with connect(ws, "stdio", args=(*ARGS, "--read-only")) as conn:
        names = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert names & WORKFLOW_TOOLS == {"workflow_status", "workflow_list"}
