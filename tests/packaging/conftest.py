"""Fixtures for the packaging tests: the folder of packages `cargo xtask dist` wrote.

Run with:  cargo xtask dist --profile dev --out target/dist-test &&
           KENNING_TEST_DIST=target/dist-test python3 -m pytest tests/packaging -q
(`scripts/test` does this after the workspace's tests, packaging the binary they built.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("KENNING_TEST_DIST")
    if not path:
        raise pytest.UsageError(
            "KENNING_TEST_DIST is not set: point it at the folder `cargo xtask dist` wrote, e.g.\n"
            "  cargo xtask dist --profile dev --out target/dist-test && "
            "KENNING_TEST_DIST=target/dist-test python3 -m pytest tests/packaging"
        )
    if not (Path(path) / "SHA256SUMS").is_file():
        raise pytest.UsageError(f"KENNING_TEST_DIST={path} holds no SHA256SUMS: run cargo xtask dist first")


@pytest.fixture(scope="session")
def dist() -> Path:
    return Path(os.environ["KENNING_TEST_DIST"]).resolve()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
