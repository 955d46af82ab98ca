"""MCP scenarios run over both transports (stdio and streamable HTTP) with the official SDK's
`ClientSession` against the real `kenning serve`."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

import mcp.types as types
from harness import PROJECT_DOMAIN, Connection, Workspace, connect

pytestmark = pytest.mark.anyio

TOOLS = {
    "memory_capture",
    "memory_recall",
    "memory_get",
    "memory_update",
    "memory_forget",
    "memory_restore",
    "memory_history",
    "memory_status",
}
READ_ONLY_TOOLS = {"memory_recall", "memory_get", "memory_history", "memory_status"}
PROJECT_PREFIX = f"kenning://{PROJECT_DOMAIN}/"



def urns(page: dict[str, Any]) -> list[str]:
    return [hit["urn"] for hit in page["results"]]


async def test_initialize_and_tool_catalogue(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        assert conn.init.server_info.name == "kenning"
        assert conn.init.server_info.version
        assert conn.init.capabilities.tools is not None
        assert conn.init.capabilities.resources is not None
        assert conn.init.instructions and "memory_recall" in conn.init.instructions

        listed = await conn.session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) == TOOLS
        assert listed.next_cursor is None
        for name, tool in tools.items():
            assert tool.title, f"{name} has no title"
            assert tool.description and len(tool.description) > 20, f"{name} has no real description"
            assert tool.input_schema.get("type") == "object", name
            assert tool.output_schema is not None and tool.output_schema.get("type") == "object", name
            assert tool.annotations is not None, f"{name} has no annotations"
            assert tool.annotations.read_only_hint is (name in READ_ONLY_TOOLS), name
            assert tool.annotations.open_world_hint is False, name
        assert tools["memory_forget"].annotations.destructive_hint is True
        for name in READ_ONLY_TOOLS:
            assert tools[name].annotations.destructive_hint is False, name
        assert "content" in tools["memory_capture"].input_schema["required"]
        assert "query" in tools["memory_recall"].input_schema["required"]
        assert {"urn", "reason"} <= set(tools["memory_update"].input_schema["required"])


async def test_memory_lifecycle(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        content = "We chose SQLite with WAL mode because the store must work offline."
        first = await conn.ok("memory_capture", {"content": content, "namespace": "decisions", "tags": ["storage"]})
        assert first["urn"].startswith(PROJECT_PREFIX + "decisions/"), first
        assert first["created"] is True
        assert first["embedded"] is True
        urn = first["urn"]

        again = await conn.ok("memory_capture", {"content": content, "namespace": "decisions", "tags": ["storage"]})
        assert again["created"] is False
        assert again["urn"] == urn

        user = await conn.ok(
            "memory_capture",
            {"content": "The user prefers small pull requests with focused commits.", "domain": "user",
             "namespace": "preferences"},
        )
        assert user["urn"].startswith("kenning://user/preferences/"), user
        assert user["created"] is True

        for text in ("Deploys run from the release branch every Tuesday.",
                     "The frontend is written in TypeScript with React.",
                     "Flaky integration tests are retried once in CI."):
            await conn.ok("memory_capture", {"content": text, "namespace": "context"})

        page = await conn.ok("memory_recall", {"query": "why SQLite WAL offline store"})
        assert page["mode"] == "hybrid"
        assert urns(page)[0] == urn, page
        assert page["results"][0]["namespace"] == "decisions"
        assert page["results"][0]["domain"] == PROJECT_DOMAIN

        got = await conn.ok("memory_get", {"urn": urn})
        assert got["content"] == content
        assert got["urn"] == urn and got["status"] == "active" and got["version"] == 1
        assert got["tags"] == ["storage"]
        count = got["access_count"]
        got = await conn.ok("memory_get", {"urn": urn})
        assert got["access_count"] == count + 1

        new_content = "We chose SQLite with WAL mode; backups use the online backup API."
        changed = await conn.ok("memory_update", {"urn": urn, "content": new_content,
                                                  "reason": "added the backup approach"})
        assert changed == {"urn": urn, "status": "active", "version": 2, "changed": True}
        got = await conn.ok("memory_get", {"urn": urn})
        assert got["content"] == new_content and got["version"] == 2

        history = await conn.ok("memory_history", {"urn": urn})
        assert history["urn"] == urn
        assert history["current"]["version"] == 2
        assert [v["version"] for v in history["versions"]] == [1]
        assert history["versions"][0]["reason"] == "added the backup approach"
        assert history["versions"][0]["memory"]["content"] == content

        forgotten = await conn.ok("memory_forget", {"urn": urn, "reason": "moved to the wiki"})
        assert forgotten["status"] == "forgotten" and forgotten["changed"] is True
        assert urn not in urns(await conn.ok("memory_recall", {"query": "SQLite WAL backup"}))
        got = await conn.ok("memory_get", {"urn": urn})
        assert got["status"] == "forgotten"

        restored = await conn.ok("memory_restore", {"urn": urn, "reason": "the wiki page was deleted"})
        assert restored["status"] == "active" and restored["changed"] is True
        assert urns(await conn.ok("memory_recall", {"query": "SQLite WAL backup"}))[0] == urn

        status = await conn.ok("memory_status", {})
        assert status["total_memories"] == 5
        assert status["default_domain"] == PROJECT_DOMAIN
        assert status["search_mode"] == "hybrid"
        assert status["embedder"]["model"].startswith("all-MiniLM-L6-v2-static-"), status["embedder"]
        domains = {entry["domain"]: entry for entry in status["domains"]}
        assert set(domains) == {PROJECT_DOMAIN, "user"}
        assert domains[PROJECT_DOMAIN]["total"] == 4
        assert domains[PROJECT_DOMAIN]["by_namespace"] == {"context": 3, "decisions": 1}
        assert domains[PROJECT_DOMAIN]["uri"] == f"kenning://{PROJECT_DOMAIN}"
        assert domains["user"]["by_namespace"] == {"preferences": 1}
        assert domains["user"]["total"] == 1


async def test_recall_filters_paging_and_budget(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        captured: dict[str, str] = {}
        specs = [
            ("a", {"content": "The cache layer uses Redis for session data.", "namespace": "decisions",
                   "kind": "semantic", "tags": ["redis", "cache"]}),
            ("b", {"content": "Cache invalidation broke checkout once; purge keys by prefix.", "namespace": "learnings",
                   "kind": "episodic", "tags": ["cache"]}),
            ("c", {"content": "To warm the cache run make warm-cache before load tests.", "namespace": "patterns",
                   "kind": "procedural", "tags": ["cache", "ops"]}),
            ("d", {"content": "Cache entries expire after ten minutes by default.", "namespace": "config",
                   "kind": "semantic", "tags": ["cache"]}),
            ("e", {"content": "The user likes cache hit ratios reported in dashboards.", "namespace": "preferences",
                   "domain": "user", "tags": ["cache"]}),
            ("f", {"content": "Cache metrics are exported to Prometheus.", "namespace": "learnings",
                   "kind": "semantic", "tags": ["metrics"]}),
        ]
        for key, arguments in specs:
            captured[key] = (await conn.ok("memory_capture", arguments))["urn"]
        every = set(captured.values())

        everything = await conn.ok("memory_recall", {"query": "cache", "limit": 20})
        assert set(urns(everything)) == every

        only_learnings = await conn.ok("memory_recall", {"query": "cache", "namespaces": ["learnings"]})
        assert set(urns(only_learnings)) == {captured["b"], captured["f"]}
        assert all(hit["namespace"] == "learnings" for hit in only_learnings["results"])

        procedural = await conn.ok("memory_recall", {"query": "cache", "kinds": ["procedural"]})
        assert urns(procedural) == [captured["c"]]

        tagged = await conn.ok("memory_recall", {"query": "cache", "tags": ["cache", "redis"]})
        assert urns(tagged) == [captured["a"]]

        user_only = await conn.ok("memory_recall", {"query": "cache", "domains": ["user"]})
        assert urns(user_only) == [captured["e"]]
        project_only = await conn.ok("memory_recall", {"query": "cache", "domains": ["project"]})
        assert set(urns(project_only)) == every - {captured["e"]}

        pages: list[list[str]] = []
        cursor = None
        while True:
            arguments: dict[str, Any] = {"query": "cache", "limit": 2}
            if cursor:
                arguments["cursor"] = cursor
            page = await conn.ok("memory_recall", arguments)
            assert len(page["results"]) <= 2
            pages.append(urns(page))
            cursor = page.get("next_cursor")
            if not cursor:
                break
            assert len(pages) < 10, "pagination does not terminate"
        assert len(pages) == 3
        flat = [urn for page in pages for urn in page]
        assert len(flat) == len(set(flat)), f"pages overlap: {pages}"
        assert set(flat) == every

        # A budget that fits the best hit but not the second one.
        best = await conn.ok("memory_recall", {"query": "cache", "limit": 1, "detail": "full"})
        limit = max(50, best["estimated_tokens"] + 10)
        budget = await conn.ok("memory_recall", {"query": "cache", "limit": 20, "max_tokens": limit, "detail": "full"})
        assert budget["truncated"] is True
        assert urns(budget) == urns(best)
        assert budget["estimated_tokens"] <= limit
        assert budget["results"][0]["content"] == best["results"][0]["content"]
        assert budget["next_cursor"], "a truncated page should let the caller continue"
        # At the smallest budget the best hit still comes back (its text cut), flagged as truncated.
        tiny = await conn.ok("memory_recall", {"query": "cache", "limit": 20, "max_tokens": 50})
        assert tiny["truncated"] is True
        assert len(tiny["results"]) == 1
        roomy = await conn.ok("memory_recall", {"query": "cache", "limit": 20})
        assert roomy["truncated"] is False


async def test_resources(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        decision = (await conn.ok("memory_capture", {"content": "Use UTC timestamps everywhere in the API.",
                                                      "namespace": "decisions", "kind": "semantic"}))["urn"]
        lesson = (await conn.ok("memory_capture", {"content": "Timezone bugs came from local-time parsing.",
                                                    "namespace": "learnings", "kind": "episodic"}))["urn"]
        user = (await conn.ok("memory_capture", {"content": "The user reads dates as YYYY-MM-DD.",
                                                  "domain": "user", "namespace": "preferences"}))["urn"]

        listed = await conn.session.list_resources()
        assert listed.next_cursor is None
        by_uri = {str(resource.uri): resource for resource in listed.resources}
        project = f"kenning://{PROJECT_DOMAIN}"
        for uri in ("kenning://stats", project, f"{project}/decisions", f"{project}/learnings", "kenning://user",
                    "kenning://user/preferences", decision, lesson, user):
            assert uri in by_uri, f"{uri} missing from resources/list: {sorted(by_uri)}"
        assert all(resource.mime_type == "application/json" for resource in listed.resources)
        assert by_uri[decision].name

        memory = await conn.read_json(decision)
        assert memory["urn"] == decision
        assert memory["content"] == "Use UTC timestamps everywhere in the API."
        assert memory["namespace"] == "decisions" and memory["domain"] == PROJECT_DOMAIN

        stats = await conn.read_json("kenning://stats")
        assert stats["total_memories"] == 3

        namespace = await conn.read_json(f"{project}/learnings")
        assert [entry["urn"] for entry in namespace["memories"]] == [lesson]
        assert namespace["total"] == 1

        domain = await conn.read_json(project)
        assert {entry["urn"] for entry in domain["memories"]} == {decision, lesson}
        assert {entry["name"] for entry in domain["namespaces"]} == {"decisions", "learnings"}

        semantic = await conn.read_json(f"{project}?kind=semantic")
        assert [entry["urn"] for entry in semantic["memories"]] == [decision]
        episodic = await conn.read_json(f"{project}?kind=episodic")
        assert [entry["urn"] for entry in episodic["memories"]] == [lesson]

        missing = decision.rsplit("/", 1)[0] + "/01jzzzzzzzzzzzzzzzzzzzzzzz"
        with pytest.raises(MCPError) as caught:
            await conn.session.read_resource(missing)
        assert caught.value.code in (-32002, -32602), caught.value
        assert caught.value.data["uri"] == missing

        with pytest.raises(MCPError) as caught:
            await conn.session.read_resource(f"{project}?kind=mythical")
        assert caught.value.code == -32602

        templates = await conn.session.list_resource_templates()
        uri_templates = [template.uri_template for template in templates.resource_templates]
        assert len(uri_templates) == 4 and "kenning://{kind}{?cursor}" in uri_templates, uri_templates
        assert "kenning://{domain}/{namespace}/{id}" in uri_templates
        assert all(template.mime_type == "application/json" for template in templates.resource_templates)


async def test_resource_list_paginates(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        # 110 project memories, then 10 user ones: the catalogue (stats, domains, namespaces,
        # kinds) comes first, the 100-entry boundary falls among the project memories and the
        # second page runs on into the user domain.
        project: set[str] = set()
        user: set[str] = set()
        for number in range(120):
            arguments = {"content": f"Fact number {number} about module {number % 7}.", "namespace": "context"}
            if number >= 110:
                arguments["domain"] = "user"
            outcome = await conn.ok("memory_capture", arguments)
            (user if number >= 110 else project).add(outcome["urn"])
        assert len(project) == 110 and len(user) == 10

        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await conn.session.list_resources(params=params)
            pages += 1
            assert len(page.resources) <= 100
            if page.next_cursor:
                assert len(page.resources) == 100
            seen.extend(str(resource.uri) for resource in page.resources)
            cursor = page.next_cursor
            if not cursor:
                break
            assert pages < 10, "resources/list pagination does not terminate"
        assert pages == 2
        assert len(seen) == len(set(seen)), "resources/list pages overlap"
        assert project | user <= set(seen)
        assert "kenning://stats" in seen and "kenning://user" in seen
        assert max(seen.index(urn) for urn in project) >= 100, "the first page should end among project memories"

        with pytest.raises(MCPError) as caught:
            await conn.session.list_resources(params=types.PaginatedRequestParams(cursor="not a cursor"))
        assert caught.value.code == -32602

        # Listings page with `?cursor=` too.
        namespace = f"kenning://{PROJECT_DOMAIN}/context"
        first = await conn.read_json(namespace)
        assert first["total"] == 110 and len(first["memories"]) == 100 and first["next_cursor"]
        second = await conn.read_json(f"{namespace}?cursor={first['next_cursor']}")
        assert len(second["memories"]) == 10 and "next_cursor" not in second
        listed = [entry["urn"] for entry in first["memories"] + second["memories"]]
        assert set(listed) == project and len(listed) == 110
        by_kind = await conn.read_json(f"kenning://{PROJECT_DOMAIN}?kind=episodic&cursor={first['next_cursor']}")
        assert len(by_kind["memories"]) == 10


async def test_concurrent_calls(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        results: dict[int, dict[str, Any]] = {}

        async def capture(number: int) -> None:
            arguments = {"content": f"Parallel note {number}: shard {number} owns keys {number}00-{number}99."}
            if number % 2:
                arguments["domain"] = "user"
            results[number] = await conn.ok("memory_capture", arguments)

        async with anyio.create_task_group() as group:
            for number in range(30):
                group.start_soon(capture, number)
        assert len({outcome["urn"] for outcome in results.values()}) == 30

        pages: list[dict[str, Any]] = []

        async def recall_and_get(number: int) -> None:
            pages.append(await conn.ok("memory_recall", {"query": f"shard {number} owns keys"}))
            await conn.ok("memory_get", {"urn": results[number]["urn"]})

        async with anyio.create_task_group() as group:
            for number in range(30):
                group.start_soon(recall_and_get, number)
        assert len(pages) == 30 and all(page["results"] for page in pages)
        status = await conn.ok("memory_status", {})
        assert status["total_memories"] == 30


async def test_server_and_cli_share_the_stores(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport) as conn:
        served = (await conn.ok("memory_capture", {"content": "Kafka topics are created by Terraform."}))["urn"]
        cli = ws.run("--json", "capture", "Kafka partitions are keyed by tenant id.")
        assert cli.returncode == 0, cli.stderr
        written = json.loads(cli.stdout)["urn"]
        assert written.startswith(PROJECT_PREFIX)

        page = await conn.ok("memory_recall", {"query": "kafka"})
        assert set(urns(page)) == {served, written}
        got = await conn.ok("memory_get", {"urn": written})
        assert got["source"] == "told-by-user"

        cli = ws.run("--json", "recall", "kafka terraform")
        assert cli.returncode == 0, cli.stderr
        assert json.loads(cli.stdout)["results"][0]["urn"] == served


async def test_invalid_arguments_are_tool_errors_the_model_can_read(ws: Workspace, transport: str) -> None:
    """SEP-1303 (MCP 2025-11-25): a refused argument is a result with `isError: true`, so the
    client hands it to the model, whose next call can fix it; the body is seed 000's error
    format. A request that is not a well-formed call stays a JSON-RPC error."""
    async with connect(ws, transport) as conn:
        assert conn.init.protocol_version == "2025-11-25"
        error = await conn.refused("memory_capture", {"content": "Confidence is too high here.", "confidence": 1.5})
        assert error["field"] == "confidence" and error["received"] == 1.5, error
        assert "confidence" in error["message"]

        error = await conn.refused("memory_recall", {"query": "anything", "limit": "ten"})
        assert (error["field"], error["received"]) == ("limit", "ten"), error

        error = await conn.refused("memory_recall", {"query": "anything", "limit": 0})
        assert error["field"] == "limit"

        error = await conn.refused("memory_get", {"urn": "not-a-urn"})
        assert (error["field"], error["received"]) == ("urn", "not-a-urn"), error
        assert "kenning://" in error["suggestion"]

        error = await conn.refused("memory_capture", {"content": "x", "colour": "blue"})
        assert "colour" in error["problem"], error

        error = await conn.refused("memory_capture", {})
        assert "content" in error["problem"], error

        # The model corrects its call from what the refusal said, and the call goes through.
        corrected = await conn.ok("memory_capture", {"content": "Confidence is too high here.", "confidence": 0.75})
        assert corrected["urn"].startswith(f"kenning://{PROJECT_DOMAIN}/")

        missing = f"kenning://{PROJECT_DOMAIN}/decisions/01jzzzzzzzzzzzzzzzzzzzzzzz"
        for tool, arguments in (("memory_get", {"urn": missing}),
                                ("memory_forget", {"urn": missing, "reason": "cleanup"}),
                                ("memory_history", {"urn": missing})):
            result = await conn.call(tool, arguments)
            assert result.is_error is True, (tool, result)
            assert result.structured_content is not None
            assert result.structured_content["error"] == "not_found"
            assert result.structured_content["urn"] == missing
            assert result.structured_content["suggestion"]

        # An unknown tool is not a call that could run: it stays a JSON-RPC error.
        with pytest.raises(MCPError) as caught:
            await conn.call("memory_nonexistent", {})
        assert caught.value.code == -32602


async def test_bad_kinds_entry_names_the_kinds_argument(ws: Workspace) -> None:
    async with connect(ws, "stdio") as conn:
        error = await conn.refused("memory_recall", {"query": "anything", "kinds": ["mythical"]})
        assert (error["field"], error["received"]) == ("kinds", "mythical"), error


async def test_read_only_server(ws: Workspace, transport: str) -> None:
    async with connect(ws, transport, args=("--read-only",)) as conn:
        listed = await conn.session.list_tools()
        assert {tool.name for tool in listed.tools} == READ_ONLY_TOOLS
        assert all(tool.annotations.read_only_hint for tool in listed.tools)
        with pytest.raises(MCPError):
            await conn.call("memory_capture", {"content": "should not be stored"})
        status = await conn.ok("memory_status", {})
        assert status["total_memories"] == 0


def test_unknown_toolset_fails_to_start(ws: Workspace, transport: str) -> None:
    args = ["serve", "--toolsets", "bogus"]
    if transport == "http":
        args += ["--http", "127.0.0.1:0"]
    result = ws.run(*args, timeout=30)
    assert result.returncode != 0
    assert "toolsets" in result.stderr, result.stderr
    assert "bogus" in result.stderr, result.stderr
    assert "memory" in result.stderr, "the error should name the known toolsets: " + result.stderr
    assert result.stdout == ""


def test_unknown_toolset_in_environment_fails_too(ws: Workspace) -> None:
    result = ws.run("serve", env={"KENNING_TOOLSETS": "memroy"}, timeout=30)
    assert result.returncode != 0
    assert "toolsets" in result.stderr and "memory" in result.stderr, result.stderr


async def test_captures_record_their_session(ws: Workspace, transport: str) -> None:
    """Each MCP session stamps its own `session_id` on what it captures (recall lends score only
    between memories of one session), unless the caller names a session or a conversation."""
    sessions = []
    for text in ("The staging database listens on 5433.", "The billing queue was renamed to invoices."):
        async with connect(ws, transport) as conn:
            urn = (await conn.ok("memory_capture", {"content": text, "namespace": "context"}))["urn"]
            sessions.append((await conn.ok("memory_get", {"urn": urn}))["metadata"]["session_id"])
    assert all(session.startswith("mcp-") for session in sessions), sessions
    assert sessions[0] != sessions[1], "two connections are two sessions"

    async with connect(ws, transport) as conn:
        named = await conn.ok("memory_capture", {"content": "Caches expire after ten minutes.", "namespace": "context",
                                                 "metadata": {"session_id": "build-42"}})
        conversation = await conn.ok("memory_capture", {"content": "Alice asked about the cache.", "namespace": "context",
                                                        "metadata": {"conversation_id": "chat-7"}})
        named = (await conn.ok("memory_get", {"urn": named["urn"]}))["metadata"]
        assert named["session_id"] == "build-42", named
        conversation = (await conn.ok("memory_get", {"urn": conversation["urn"]}))["metadata"]
        assert conversation["conversation_id"] == "chat-7" and "session_id" not in conversation, conversation
