"""Fixtures for the end-to-end tests: the binary under test and a fresh workspace per test.

Run with:  KENNING_BIN=target/debug/kenning python3 -m pytest tests/e2e -q
(`cargo test -p kenning` does this in its `python_mcp_sdk_end_to_end` test.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import Workspace, make_workspace

TRANSPORTS = ["stdio", "http"]


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("KENNING_BIN")
    if not path:
        raise pytest.UsageError(
            "KENNING_BIN is not set: point it at the kenning binary, e.g.\n"
            "  cargo build -p kenning && KENNING_BIN=target/debug/kenning python3 -m pytest tests/e2e"
        )
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise pytest.UsageError(f"KENNING_BIN={path} is not an executable file")


@pytest.fixture(scope="session")
def kenning_bin() -> str:
    return str(Path(os.environ["KENNING_BIN"]).resolve())


@pytest.fixture
def ws(kenning_bin: str, tmp_path: Path) -> Workspace:
    return make_workspace(kenning_bin, tmp_path)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param
