"""Streamable HTTP only: the Origin and Host guards, and the SDK's high-level `mcp.Client`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from mcp import Client

from harness import PROJECT_DOMAIN, Workspace, http_server

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "urllib", "version": "0"}},
}


def post(url: str, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(
        url,
        data=json.dumps(INITIALIZE).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def test_foreign_origins_and_hosts_are_refused(ws: Workspace) -> None:
    with http_server(ws) as server:
        status, _ = post(server.url, {"Origin": "http://evil.example"})
        assert status == 403

        status, _ = post(server.url, {"Origin": "null"})
        assert status == 403

        status, _ = post(server.url, {"Host": "evil.example"})
        assert status == 403

        for origin in ("http://localhost:1234", "http://127.0.0.1:5173"):
            status, body = post(server.url, {"Origin": origin})
            assert status == 200, (origin, body)
            assert '"name":"kenning"' in body.replace(" ", ""), body

        status, body = post(server.url, {})  # no Origin at all: a non-browser client
        assert status == 200, body

        status, _ = post(server.url.rsplit("/", 1)[0] + "/elsewhere", {})
        assert status == 404


@pytest.mark.anyio
async def test_high_level_client_over_http(ws: Workspace) -> None:
    with http_server(ws) as server:
        async with Client(server.url) as client:
            assert client.protocol_version == "2026-07-28"
            assert client.server_info is not None and client.server_info.name == "kenning"
            assert len((await client.list_tools()).tools) == 8

            captured = await client.call_tool("memory_capture", {"content": "Feature flags live in LaunchDarkly."})
            urn = captured.structured_content["urn"]
            assert urn.startswith(f"kenning://{PROJECT_DOMAIN}/")
            recalled = await client.call_tool("memory_recall", {"query": "feature flags"})
            assert recalled.structured_content["results"][0]["urn"] == urn

            refused = await client.call_tool("memory_recall", {"query": "x", "limit": "ten"})
            assert refused.is_error and refused.structured_content["field"] == "limit"

            missing = await client.call_tool("memory_get", {"urn": urn[:-4] + "zzzz"})
            assert missing.is_error and missing.structured_content["error"] == "not_found"

            resources = await client.list_resources()
            assert urn in {str(resource.uri) for resource in resources.resources}
