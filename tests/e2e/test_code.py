"""The coding toolsets against the real `kenning serve --toolsets memory,repo,test,docs` inside a
git repository holding the Rust fixture of kenning-code's tests, over both transports, with the
official SDK: repository answers, confinement errors, resources, and read-only mode."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness import Workspace, connect

pytestmark = pytest.mark.anyio

ARGS = ("--toolsets", "memory,repo,test,docs")
FIXTURE = Path(__file__).resolve().parents[2] / "crates/kenning-code/tests/fixtures/rust"
CODE_TOOLS = {
    "repo_understand", "repo_search_patterns", "repo_find_similar", "repo_dependencies",
    "test_run", "test_lint", "test_typecheck", "test_suggest", "docs_search", "docs_get_api",
}


def shop(ws: Workspace) -> None:
    """The fixture in the workspace's repository, committed."""
    shutil.copytree(FIXTURE, ws.repo, dirs_exist_ok=True)
    git = ["git", "-C", str(ws.repo), "-c", "user.name=Ada Lovelace", "-c", "user.email=ada@example.com"]
    subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "Open the shop"], check=True, capture_output=True)


async def test_code_tools_answer_about_the_repository(ws: Workspace, transport: str) -> None:
    shop(ws)
    async with connect(ws, transport, ARGS) as conn:
        tools = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert CODE_TOOLS <= tools, tools

        cart = await conn.ok("repo_understand", {"path": "src/cart.rs"})
        assert cart["purpose"] == "The shopping cart: items, totals and checkout."
        assert cart["imports_from"] == ["src/price.rs"]
        assert cart["test_files"] == ["tests/checkout.rs"]
        assert cart["last_modified"]["author"] == "Ada Lovelace"

        found = await conn.ok("repo_search_patterns", {"pattern_query": "how does checkout handle errors"})
        assert found["hits"][0]["name"] == "Cart::checkout", found["hits"]

        deps = await conn.ok("repo_dependencies", {"file_path": "src/price.rs", "direction": "imported_by", "depth": 2})
        assert {"path": "tests/checkout.rs", "distance": 2} in deps["imported_by"], deps

        suggested = await conn.ok("test_suggest", {"changed_files": ["src/price.rs"]})
        assert suggested["files"][0]["untested"] == ["discounted"], suggested

        docs = await conn.ok("docs_search", {"query": "how are discounts rounded", "scope": "project"})
        assert docs["hits"][0]["name"] == "Discounts", docs["hits"]

        structure = await conn.read_json("repo://structure")
        assert structure["languages"] == {"rust": 4}, structure

        for hostile in ("../outside.rs", "/etc/passwd", ".git/config", "src/../../x"):
            data = await conn.refused("repo_understand", {"path": hostile})
            assert data["field"] == "path" and data["received"] == hostile, data


async def test_read_only_keeps_only_the_code_tools_that_run_nothing(ws: Workspace) -> None:
    shop(ws)
    async with connect(ws, "stdio", ("--read-only", *ARGS)) as conn:
        tools = {tool.name for tool in (await conn.session.list_tools()).tools}
        assert {"test_run", "test_lint", "test_typecheck"}.isdisjoint(tools), tools
        assert {"repo_understand", "test_suggest", "docs_search"} <= tools, tools


async def test_an_empty_repository_is_answered_too(ws: Workspace) -> None:
    async with connect(ws, "stdio", ARGS) as conn:
        # The workspace's repository has no commits and no source files; the tools still answer.
        understood = await conn.ok("repo_understand", {"path": "."})
        assert understood["kind"] == "directory" and understood["outline"] == []
        assert "last_modified" not in understood
        body = await conn.failure("test_run", {"scope": "all"})
        assert body["error"] == "not_available", body
