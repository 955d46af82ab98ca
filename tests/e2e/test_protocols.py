"""The protocols toolset against the real `kenning serve --toolsets memory,decisions,protocols`
with the official SDK: each shipped protocol run end to end, a wrong answer asked again, a
session that survives a server restart, abort leaving nothing behind, a project protocol
replacing a shipped one, and the CLI.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from harness import PROJECT_DOMAIN, Connection, Workspace, connect

pytestmark = pytest.mark.anyio

ARGS = ("--toolsets", "memory,decisions,protocols")
PROTOCOL_TOOLS = {"protocol_list", "protocol_start", "protocol_continue", "protocol_abort"}
SHIPPED = {
    "capture_decision", "record_work", "investigate", "resolve_blocker", "add_invariant", "explore_space",
    "add_objectives", "add_health_coverage", "add_implementation",
}


async def run(conn: Connection, view: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """Answers each step by its id from `answers` until the protocol completes."""
    for _ in range(40):
        if view["status"] == "complete":
            return view
        step = view["step"]
        key = f"{step['protocol']}.{step['step']}" if f"{step['protocol']}.{step['step']}" in answers else step["step"]
        assert key in answers, f"no answer for {step}"
        view = await conn.ok("protocol_continue", {"session_id": view["session_id"], "answer": answers[key]})
        assert "problem" not in view, view
    raise AssertionError("the protocol did not complete")


async def memory_count(conn: Connection) -> int:
    return (await conn.ok("memory_status"))["total_memories"]


async def test_every_shipped_protocol_runs_end_to_end(ws: Workspace) -> None:
    async with connect(ws, "stdio", args=ARGS) as conn:
        names = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert PROTOCOL_TOOLS <= names
        listed = await conn.ok("protocol_list")
        assert {p["name"] for p in listed["protocols"]} == SHIPPED
        assert "problems" not in listed

        # capture_decision ends in the decisions toolset's capture.
        start = await conn.ok("protocol_start", {"protocol": "capture_decision"})
        assert "Capturing a decision" in start["skill"]
        wrong = await conn.ok("protocol_continue", {"session_id": start["session_id"], "answer": "db"})
        assert wrong["step"]["step"] == "statement" and "shorter than the 10" in wrong["problem"], wrong
        done = await run(conn, start, {
            "statement": "Use PostgreSQL advisory locks for the refund scheduler",
            "alternatives": ["Redis locks", "A cron job on one node"],
            "rationale": "Advisory locks need no new infrastructure and are released when the session ends.",
            "confidence": 0.7,
            "module": "database",
        })
        assert [w["kind"] for w in done["written"]] == ["decision"]
        decisions = await conn.ok("decision_query", {})
        assert decisions["decisions"][0]["statement"].startswith("Use PostgreSQL advisory locks")

        # record_work writes a progress memory and a lesson linked to it.
        start = await conn.ok("protocol_start", {"protocol": "record_work"})
        done = await run(conn, start, {
            "summary": "Moved refund retries to the job queue with exponential backoff and a limit of five attempts.",
            "files": "src/refunds/retry.rs\nsrc/jobs/queue.rs",
            "learned": "The job queue drops jobs whose payload exceeds 64 KB without an error.",
            "remaining": "",
        })
        progress, lesson = done["written"]
        lesson_memory = await conn.ok("memory_get", {"urn": lesson["urn"]})
        assert lesson_memory["namespace"] == "learnings"
        assert {"target": progress["urn"], "relation": "derived-from"} in lesson_memory["links"]
        assert (await conn.ok("memory_get", {"urn": progress["urn"]}))["domain"] == PROJECT_DOMAIN

        # investigate: high severity records a blocker as well as the finding.
        start = await conn.ok("protocol_start", {"protocol": "investigate"})
        done = await run(conn, start, {
            "symptom": "The checkout API returns 502 for about 3% of requests since Monday's deploy",
            "prior": "",
            "hypotheses": ["Connection pool exhaustion", "A slow downstream tax service"],
            "evidence": "Pool metrics hit the maximum of 20 at every 502; tax latency is flat.",
            "severity": "high",
            "root_cause": "The pool size was cut from 50 to 20 by the deploy",
            "fix": "Restore the pool size to 50 and alert on pool saturation",
        })
        blocker, finding = done["written"]
        assert (await conn.ok("memory_get", {"urn": blocker["urn"]}))["namespace"] == "blockers"
        assert (await conn.ok("memory_get", {"urn": finding["urn"]}))["namespace"] == "learnings"

        # resolve_blocker with an unknown cause calls investigate, then updates the blocker.
        start = await conn.ok("protocol_start", {"protocol": "resolve_blocker"})
        wrong = await conn.ok("protocol_continue", {"session_id": start["session_id"], "answer": finding["urn"]})
        assert "rather than `blockers`" in wrong["problem"], wrong
        view = await conn.ok("protocol_continue", {"session_id": start["session_id"], "answer": blocker["urn"]})
        view = await conn.ok("protocol_continue", {"session_id": start["session_id"], "answer": "no"})
        assert view["step"]["protocol"] == "investigate" and view["step"]["depth"] == 2, view
        done = await run(conn, view, {
            "symptom": "Checkout still returns 502 after the pool size was restored",
            "prior": finding["urn"],
            "hypotheses": ["A second pool in the payment client"],
            "evidence": "The payment client has its own pool of 5 connections, saturated at every 502.",
            "severity": "medium",
            "root_cause": "The payment client's own pool is too small",
            "fix": "Share the main pool with the payment client",
        })
        kinds = [w["kind"] for w in done["written"]]
        assert kinds == ["memory", "update"], done
        updated = await conn.ok("memory_get", {"urn": blocker["urn"]})
        assert "payment client's own pool is too small" in updated["content"] and "resolved" in updated["tags"]

        # add_invariant without a check records technical debt.
        start = await conn.ok("protocol_start", {"protocol": "add_invariant"})
        done = await run(conn, start, {
            "statement": "Every write to the ledger happens in a transaction that also writes the audit row",
            "scope": "src/ledger",
            "check": "",
        })
        assert (await conn.ok("memory_get", {"urn": done["written"][0]["urn"]}))["namespace"] == "tech-debt"

        # explore_space links what memory already knew.
        start = await conn.ok("protocol_start", {"protocol": "explore_space"})
        done = await run(conn, start, {
            "area": "checkout pool",
            "purpose": "The checkout service's database and payment connection pools and their limits.",
            "parts": ["src/db/pool.rs", "src/payment/client.rs"],
            "questions": "Why does the payment client keep its own pool?",
        })
        explored = await conn.ok("memory_get", {"urn": done["written"][0]["urn"]})
        assert explored["namespace"] == "context" and explored["links"], explored


async def test_a_session_survives_a_restart_and_abort_writes_nothing(ws: Workspace) -> None:
    async with connect(ws, "stdio", args=ARGS) as conn:
        start = await conn.ok("protocol_start", {"protocol": "add_invariant"})
        await conn.ok("protocol_continue", {"session_id": start["session_id"], "answer": "Every public API handler checks the caller's tenant"})
        before = await memory_count(conn)
    async with connect(ws, "stdio", args=ARGS) as conn:
        resumed = await conn.ok("protocol_continue", {"session_id": start["session_id"]})
        assert resumed["step"]["step"] == "scope", resumed
        done = await run(conn, resumed, {"scope": "src/api", "check": "tests/api/tenant_test.rs"})
        assert (await conn.ok("memory_get", {"urn": done["written"][0]["urn"]}))["namespace"] == "standards"
        assert await memory_count(conn) == before + 1

        start = await conn.ok("protocol_start", {"protocol": "record_work"})
        await conn.ok("protocol_continue", {"session_id": start["session_id"], "answer": "Wrote half of the retry logic for refunds, tests still missing."})
        aborted = await conn.ok("protocol_abort", {"session_id": start["session_id"]})
        assert aborted["aborted"] is True
        assert await memory_count(conn) == before + 1, "an aborted session leaves no memory behind"
        gone = await conn.refused("protocol_continue", {"session_id": start["session_id"], "answer": "x"})
        assert gone["field"] == "session_id", gone


async def test_a_project_protocol_replaces_a_shipped_one_and_the_cli_runs_it(ws: Workspace) -> None:
    folder = ws.repo / ".kenning" / "protocols"
    folder.mkdir(parents=True)
    (folder / "record_work.yaml").write_text(
        "name: record_work\n"
        "description: The team's short work log.\n"
        "steps:\n"
        "  - id: done\n"
        "    type: ask\n"
        "    question: What did you finish?\n"
        "    expects: {type: string, min_length: 5}\n"
        "  - id: write\n"
        "    type: create\n"
        "    memories:\n"
        "      - {namespace: progress, title: \"{done | truncate(40)}\", content: \"{done}\"}\n"
    )
    (folder / "broken.yaml").write_text("name: broken\ndescription: d\nsteps:\n  - id: a\n    type: asks\n")
    async with connect(ws, "stdio", args=ARGS) as conn:
        listed = await conn.ok("protocol_list")
        mine = next(p for p in listed["protocols"] if p["name"] == "record_work")
        assert mine["description"] == "The team's short work log." and mine["source"].endswith("record_work.yaml")
        assert any("broken.yaml:4:" in problem and "steps[0].type" in problem for problem in listed["problems"]), listed
    ran = subprocess.run(
        [ws.bin, "protocol", "run", "record_work"], input="no\nShipped the retry backoff\n",
        cwd=ws.repo, env=ws.env(), capture_output=True, text=True, timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert "Not accepted" in ran.stderr and "1 records were written" in ran.stdout, (ran.stdout, ran.stderr)
    listed = ws.run("protocol", "list")
    assert listed.returncode == 0 and "capture_decision" in listed.stdout and "refused:" in listed.stdout
