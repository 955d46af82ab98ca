"""Promotion into the organisation's memory: `memory_promote` (toolset `org`) over both
transports, and `kenning promote URN --to org`, against the real PostgreSQL test server.

The server comes from KENNING_TEST_PG_URL, which `scripts/test` sets after starting one; every
test writes into a PostgreSQL schema of its own. Without the variable a test is skipped, saying
how to get a server, except under `scripts/test`, where it fails: there an org test never passes
without having run (`harness.service`).
"""

from __future__ import annotations

import json
import socket
import uuid
from typing import Any

import pytest

from harness import PROJECT_DOMAIN, Connection, Workspace, connect, service

pytestmark = pytest.mark.anyio

ARGS = ("--toolsets", "memory,org")
ORG_ID = "acme"
AUTHOR = "ada"
# A well-formed memory id that no store holds.
UNKNOWN_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def pg_url() -> str:
    return service(
        "KENNING_TEST_PG_URL",
        "a PostgreSQL server with pgvector (`scripts/pg-server start /tmp/kenning-pg` starts one)",
    )


def org_env(url: str | None = None) -> dict[str, str]:
    """A server's org settings: the test server (or `url`), a fresh schema, and the user id."""
    return {
        "KENNING_ORG_ID": ORG_ID,
        "KENNING_ORG_URL": url or pg_url(),
        "KENNING_ORG_SCHEMA": f"t_promote_{uuid.uuid4().hex[:16]}",
        "KENNING_USER_ID": AUTHOR,
    }


def closed_port_url() -> str:
    """A URL of 127.0.0.1 on a port where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable&connect_timeout=2"



async def test_memory_promote_copies_into_org_with_a_link_back(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport, ARGS, env=org_env()) as conn:
        tools = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert "memory_promote" in tools

        original = await conn.ok("memory_capture", {
            "content": "Retry idempotent HTTP calls with jittered backoff; never retry a POST without an idempotency key.",
            "namespace": "learnings",
            "tags": ["http", "retries"],
        })
        assert original["urn"].startswith(f"kenning://{PROJECT_DOMAIN}/learnings/")

        promoted = await conn.ok("memory_promote", {"urn": original["urn"]})
        assert promoted["created"] is True
        copy_urn = promoted["urn"]
        assert copy_urn.startswith(f"kenning://org:{ORG_ID}/learnings/"), copy_urn
        assert copy_urn.rsplit("/", 1)[1] != original["urn"].rsplit("/", 1)[1]

        copy = await conn.ok("memory_get", {"urn": copy_urn})
        source = await conn.ok("memory_get", {"urn": original["urn"]})
        assert copy["domain"] == f"org:{ORG_ID}"
        assert copy["content"] == source["content"]
        assert sorted(copy["tags"]) == sorted(source["tags"])
        assert copy["version"] == 1
        assert copy["author"] == AUTHOR
        assert {"target": original["urn"], "relation": "promoted-from"} in copy["links"]
        # The original stays where it was, unchanged.
        assert source["domain"] == PROJECT_DOMAIN and source["version"] == 1
        assert not any(link["relation"] == "promoted-from" for link in source["links"])

        # Promoting it again finds the copy instead of making a second one.
        again = await conn.ok("memory_promote", {"urn": original["urn"], "to": f"org:{ORG_ID}"})
        assert again["created"] is False and again["urn"] == copy_urn, again
        assert again["warnings"], again

        # The org copy is found by a recall limited to the org domain.
        page = await conn.ok("memory_recall", {"query": "idempotency key backoff", "domains": ["org"]})
        assert [hit["urn"] for hit in page["results"]] == [copy_urn], page

        # A URN no store holds is not found; an org memory promoted into the org domain is
        # refused as bad input, naming the field.
        missing = f"kenning://{PROJECT_DOMAIN}/learnings/{UNKNOWN_ID}"
        body = await conn.failure("memory_promote", {"urn": missing})
        assert body["error"] == "not_found" and body["urn"] == missing, body
        refused = await conn.refused("memory_promote", {"urn": copy_urn})
        assert refused["field"] == "to", refused


async def test_memory_promote_to_an_unreachable_org_fails_and_writes_nothing(ws: Workspace) -> None:
    async with connect(ws, "stdio", ARGS, env=org_env(closed_port_url())) as conn:
        original = await conn.ok("memory_capture", {"content": "Pin the base image by digest, not by tag.", "namespace": "learnings"})
        body = await conn.failure("memory_promote", {"urn": original["urn"]})
        assert body["error"] == "domain_unavailable", body
        assert "unreachable" in body["message"], body
        # Nothing was written anywhere else in its place: a recall over every domain finds only
        # the original, and says that the org could not be searched.
        page = await conn.ok("memory_recall", {"query": "base image digest"})
        assert [hit["urn"] for hit in page["results"]] == [original["urn"]], page
        assert [entry["domain"] for entry in page["unavailable"]] == [f"org:{ORG_ID}"], page


def cli(ws: Workspace, env: dict[str, str], *args: str) -> Any:
    result = ws.run("--json", *args, env=env)
    assert result.returncode == 0, f"kenning {args} failed: {result.stderr}"
    return json.loads(result.stdout)


def test_kenning_promote_to_org(ws: Workspace) -> None:
    env = org_env()
    original = cli(ws, env, "capture", "Run database migrations before the new code starts serving.", "--namespace", "learnings")
    promoted = cli(ws, env, "promote", original["urn"], "--to", "org")
    assert promoted["created"] is True
    assert promoted["urn"].startswith(f"kenning://org:{ORG_ID}/learnings/"), promoted
    copy = cli(ws, env, "get", promoted["urn"])
    assert copy["author"] == AUTHOR
    assert copy["content"] == "Run database migrations before the new code starts serving."
    assert {"target": original["urn"], "relation": "promoted-from"} in copy["links"]

    missing = ws.run("promote", f"kenning://{PROJECT_DOMAIN}/learnings/{UNKNOWN_ID}", "--to", "org", env=env)
    assert missing.returncode != 0
    assert UNKNOWN_ID in missing.stderr and "no memory" in missing.stderr.lower(), missing.stderr


def test_kenning_promote_fails_clearly_when_the_org_is_unreachable_or_not_configured(ws: Workspace) -> None:
    env = org_env(closed_port_url())
    original = cli(ws, env, "capture", "Keep feature flags out of the hot path.", "--namespace", "learnings")
    unreachable = ws.run("promote", original["urn"], "--to", "org", env=env)
    assert unreachable.returncode != 0
    assert "unreachable" in unreachable.stderr, unreachable.stderr

    # Without an org domain configured, the target itself is refused, naming the field.
    bare = {"KENNING_USER_ID": AUTHOR}
    own = cli(ws, bare, "capture", "Name every background job after what it does.", "--namespace", "learnings")
    unconfigured = ws.run("promote", own["urn"], "--to", "org", env=bare)
    assert unconfigured.returncode != 0
    assert "org" in unconfigured.stderr, unconfigured.stderr
