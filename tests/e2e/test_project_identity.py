"""A project keeps the id its memories were first stored under when its remotes change, URNs under
any id it had keep resolving, and `kenning doctor` says when the remote names the project otherwise
and how to rename it on purpose.

Regression: the project id came from the `origin` remote at every start, so adding a remote renamed
the domain from `project:{folder}` to `project:{remote}`, and every URN handed out before failed
("no memory at kenning://project:{folder}/…") while the memories still said `project:{folder}`.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from harness import PROJECT_ID, Workspace, connect

pytestmark = pytest.mark.anyio


def git(ws: Workspace, *args: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    subprocess.run(["git", "-C", str(ws.repo), *args], check=True, env=env, capture_output=True)


def doctor(ws: Workspace, env: dict[str, str] | None = None) -> dict[str, str]:
    result = ws.run("--json", "doctor", env=env)
    return next(check for check in json.loads(result.stdout) if check["name"] == "project")


async def test_the_project_id_outlasts_remotes_and_old_urns_keep_resolving(ws: Workspace) -> None:
    args = ("--toolsets", "memory,decisions")
    # The first memories are stored while the repository has no remote: under its folder's name.
    git(ws, "remote", "remove", "origin")
    async with connect(ws, "stdio", args) as conn:
        first = (await conn.ok("memory_capture", {"content": "Builds run on the self-hosted runners."}))["urn"]
        decision = await conn.ok("decision_capture", {"statement": "Cache dependencies between CI runs", "alternatives": ["No cache"],
                                                      "confidence": 0.8, "module": "infra"})
    assert first.startswith(f"kenning://project:{PROJECT_ID}/"), first
    assert doctor(ws)["status"] == "ok"

    # A remote is added (and another one): the project keeps its id.
    git(ws, "remote", "add", "origin", "https://github.com/acme/build-tools.git")
    git(ws, "remote", "add", "fork", "https://github.com/ada/build-tools-fork.git")
    async with connect(ws, "stdio", args) as conn:
        second = (await conn.ok("memory_capture", {"content": "Release tags are signed."}))["urn"]
        assert second.startswith(f"kenning://project:{PROJECT_ID}/"), second
        assert (await conn.ok("memory_get", {"urn": first}))["urn"] == first
        # The id the remote gives the project reaches the same memories, tools and resources alike.
        as_remote_names_it = first.replace(f"project:{PROJECT_ID}", "project:build-tools")
        assert (await conn.ok("memory_get", {"urn": as_remote_names_it}))["urn"] == first
        assert (await conn.read_json(as_remote_names_it))["urn"] == first
        assert (await conn.ok("decision_get", {"decision_id": decision["urn"].replace(f"project:{PROJECT_ID}", "project:build-tools")}))[
            "decision_id"] == decision["decision_id"]
        page = await conn.ok("memory_recall", {"query": "runners release tags"})
        assert {first, second} <= {hit["urn"] for hit in page["results"]}, page
        # Another project's URN finds nothing here.
        missing = await conn.failure("memory_get", {"urn": first.replace(f"project:{PROJECT_ID}", "project:other").rsplit("/", 1)[0]
                                                    + "/01jzzzzzzzzzzzzzzzzzzzzzzz"})
        assert missing["error"] == "not_found"
    check = doctor(ws)
    assert check["status"] == "warn" and f"project:{PROJECT_ID}" in check["message"] and "`build-tools`" in check["message"], check
    assert "KENNING_PROJECT_ID=build-tools" in check["fix"] and "[project]" in check["fix"], check

    # The remote is renamed away, then origin removed: still the same project.
    git(ws, "remote", "rename", "origin", "upstream")
    git(ws, "remote", "remove", "fork")
    async with connect(ws, "stdio", args) as conn:
        assert (await conn.ok("memory_capture", {"content": "Caches expire after a week."}))["urn"].startswith(f"kenning://project:{PROJECT_ID}/")

    # A rename on purpose: new memories go under the new id, the old URNs still resolve.
    renamed = {"KENNING_PROJECT_ID": "build-tools"}
    async with connect(ws, "stdio", args, env=renamed) as conn:
        third = (await conn.ok("memory_capture", {"content": "Nightly builds publish to the staging bucket."}))["urn"]
        assert third.startswith("kenning://project:build-tools/"), third
        assert (await conn.ok("memory_get", {"urn": first}))["urn"] == first
    check = doctor(ws, renamed)
    assert check["status"] == "ok" and "configured" in check["message"] and f"`{PROJECT_ID}`" in check["message"], check
