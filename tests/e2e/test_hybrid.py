"""Hybrid recall finds a memory by meaning: with the built-in static model (the default, no
configuration) and with the local MiniLM transformer (KENNING_MODEL_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import Workspace, connect, missing

pytestmark = pytest.mark.anyio

# The evaluation models live in `shared/` beside the repository, never inside it; scripts/test finds
# the model (there or from its PyPI package) and sets KENNING_TEST_MODEL_DIR.
DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[3] / "shared" / "models" / "all-MiniLM-L6-v2"
MODEL_DIR = Path(os.environ.get("KENNING_TEST_MODEL_DIR", str(DEFAULT_MODEL_DIR)))

UNRELATED = [
    "Makefiles must be indented with tabs, not spaces.",
    "The billing service stores invoices in Postgres.",
    "Release notes are written in Markdown and published on Fridays.",
    "The CI pipeline caches cargo builds between runs.",
    "Our office coffee machine is descaled every month.",
]
TARGET = "The login page times out after thirty seconds."


async def recalls_by_meaning(ws: Workspace, env: dict[str, str]) -> dict:
    """Captures the target among unrelated memories, finds it by a query sharing no word with
    it, and returns the server's status."""
    async with connect(ws, "stdio", env=env) as conn:
        for text in UNRELATED[:3]:
            assert (await conn.ok("memory_capture", {"content": text}))["embedded"] is True
        target = await conn.ok("memory_capture", {"content": TARGET, "namespace": "learnings"})
        assert target["embedded"] is True
        for text in UNRELATED[3:]:
            await conn.ok("memory_capture", {"content": text})

        # No word in common with the target memory.
        page = await conn.ok("memory_recall", {"query": "authentication screen slow"})
        assert page["mode"] == "hybrid"
        assert page["results"], page
        assert page["results"][0]["urn"] == target["urn"], [hit["title"] for hit in page["results"]]

        status = await conn.ok("memory_status", {})
        assert status["search_mode"] == "hybrid"
        project = next(d for d in status["domains"] if d["domain"].startswith("project:"))
        assert project["index"]["missing_vectors"] == 0
        assert sum(project["vectors_by_model"].values()) == len(UNRELATED) + 1
        return status


async def test_builtin_model_recalls_by_meaning_with_no_configuration(ws: Workspace) -> None:
    status = await recalls_by_meaning(ws, env={})
    assert status["embedder"]["model"].startswith("all-MiniLM-L6-v2-static-"), status["embedder"]


async def test_transformer_recalls_by_meaning(ws: Workspace) -> None:
    if not (MODEL_DIR / "model.safetensors").is_file():
        missing("KENNING_TEST_MODEL_DIR", f"there is no all-MiniLM-L6-v2 model at {MODEL_DIR}")
    status = await recalls_by_meaning(ws, env={"KENNING_MODEL_DIR": str(MODEL_DIR)})
    assert status["embedder"]["model"] == "all-MiniLM-L6-v2", status["embedder"]
    assert status["embedder"]["dimensions"] == 384
