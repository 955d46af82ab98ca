"""Installing kenning the way a user does, from the files `cargo xtask dist` writes, and the first
MCP session through the installed command: shared by the tests and by `install_timing.py`.

Every install is offline: pip with `--no-index`, npm with `--offline` and a cache of its own, so a
package that reached for a registry would fail here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
from harness import PROJECT_DOMAIN, Workspace, make_workspace  # noqa: E402

VERSION_PREFIX = "kenning "
CHANNELS = ["archive", "wheel", "npm"]


def package(dist: Path, pattern: str) -> Path:
    """The one file in `dist` matching `pattern`."""
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {dist}, found {[p.name for p in found]}"
    return found[0]


def run(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def unpack_archive(dist: Path, into: Path) -> list[str]:
    """Unpacks the release archive; returns the command that runs its binary."""
    archive = package(dist, "kenning-*.tar.gz")
    with tarfile.open(archive) as tar:
        # The "tar" filter keeps the files' modes (the binary's execute bit) and refuses paths
        # that leave `into`; Pythons before 3.10.12 have no filters.
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(into, filter="tar")
        else:
            tar.extractall(into)
    folder = into / archive.name.removesuffix(".tar.gz")
    return [str(folder / "kenning")]


def install_wheel(dist: Path, into: Path) -> list[str]:
    """Installs the wheel into a fresh virtual environment; returns its `kenning` entry point."""
    venv = into / "venv"
    # The environment gets no pip of its own: the test environment's pip installs into it
    # (`--python`), which saves the seconds ensurepip takes and installs the same way.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index",
         "--disable-pip-version-check", str(package(dist, "kenning-*.whl"))])
    return [str(venv / "bin" / "kenning")]


def install_npm(dist: Path, into: Path) -> list[str]:
    """Installs the launcher and this platform's package from their tarballs into a fresh folder;
    returns `npx --offline kenning`, which is to run inside that folder."""
    folder = into / "npm"
    folder.mkdir()
    launcher = package(dist, "kenning-[0-9]*.tgz")
    platform = package(dist, "kenning-*-*-[0-9]*.tgz")
    run(["npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error",
         "--cache", str(into / "npm-cache"), str(launcher), str(platform)], cwd=folder, env=npm_env())
    return ["npx", "--offline", "kenning"]


def npm_env() -> dict[str, str]:
    """The environment npm runs in: the caller's, without the npm settings (npm_config_*) of a
    calling npm, which would point it at another project."""
    return {key: value for key, value in os.environ.items() if not key.lower().startswith("npm_config_")}


INSTALLERS = {"archive": unpack_archive, "wheel": install_wheel, "npm": install_npm}


def workspace_for(channel: str, command: list[str], root: Path) -> Workspace:
    """A fresh workspace whose repository sits where `command` runs: npx finds the installed
    `kenning` by walking up from its working directory, so npm's workspace lives in its folder."""
    base = root / "npm" if channel == "npm" else root
    return make_workspace(command[0], base / "workspace")


async def capture_then_recall(ws: Workspace, command: list[str]) -> None:
    """An MCP session over stdio through `command serve`: a capture, then a recall that finds it."""
    # npm settings of a calling npm (npm_config_*) would point npx at another project.
    env = {key: value for key, value in ws.env().items() if not key.lower().startswith("npm_config_")}
    params = StdioServerParameters(command=command[0], args=[*command[1:], "serve"], env=env, cwd=str(ws.repo))
    async with Client(params) as client:
        assert client.server_info is not None and client.server_info.name == "kenning"
        captured = await client.call_tool("memory_capture", {"content": "Release builds are signed on the CI runner."})
        assert not captured.is_error, captured.content
        urn = captured.structured_content["urn"]
        assert urn.startswith(f"kenning://{PROJECT_DOMAIN}/")
        recalled = await client.call_tool("memory_recall", {"query": "where are release builds signed"})
        assert recalled.structured_content["results"][0]["urn"] == urn
