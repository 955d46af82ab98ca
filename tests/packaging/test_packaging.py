"""The packages `cargo xtask dist` writes, installed the way a user installs them (offline, from
the files) and driven through the installed command: `--version`, then an MCP session over stdio
with the Python SDK that captures a memory and recalls it."""

from __future__ import annotations

import base64
import hashlib
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from channels import CHANNELS, INSTALLERS, VERSION_PREFIX, capture_then_recall, package, run, workspace_for

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("channel", CHANNELS)
async def test_installed_command_reports_its_version_and_recalls_what_it_captured(
    channel: str, dist: Path, tmp_path: Path
) -> None:
    command = INSTALLERS[channel](dist, tmp_path)
    ws = workspace_for(channel, command, tmp_path)
    version = run([*command, "--version"], cwd=ws.repo, env=ws.env())
    assert version.startswith(VERSION_PREFIX), version
    await capture_then_recall(ws, command)


def test_checksums_cover_every_package(dist: Path) -> None:
    lines = (dist / "SHA256SUMS").read_text().splitlines()
    listed = {}
    for line in lines:
        digest, name = line.split("  ", 1)
        listed[name] = digest
    packages = {path.name for path in dist.iterdir() if path.name != "SHA256SUMS"}
    assert set(listed) == packages
    for name, digest in listed.items():
        assert hashlib.sha256((dist / name).read_bytes()).hexdigest() == digest, name


def test_archive_holds_the_binary_readme_and_licence(dist: Path) -> None:
    archive = package(dist, "kenning-*.tar.gz")
    stem = archive.name.removesuffix(".tar.gz")
    with tarfile.open(archive) as tar:
        members = {member.name: member for member in tar.getmembers()}
    assert set(members) == {f"{stem}/{name}" for name in ("kenning", "README.md", "LICENSE", "NOTICE")}
    assert members[f"{stem}/kenning"].mode == 0o755


def test_wheel_record_lists_every_file_with_its_hash(dist: Path) -> None:
    wheel = package(dist, "kenning-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        record_name = next(name for name in names if name.endswith(".dist-info/RECORD"))
        record = archive.read(record_name).decode().splitlines()
        recorded = {line.split(",")[0] for line in record}
        assert recorded == names
        for line in record:
            name, digest, size = line.split(",")
            if name == record_name:
                continue
            data = archive.read(name)
            assert digest == "sha256=" + _urlsafe_b64(hashlib.sha256(data).digest()) and int(size) == len(data), name
        tags = [line for line in archive.read(record_name.replace("RECORD", "WHEEL")).decode().splitlines()
                if line.startswith("Tag: ")]
    platform = wheel.name.removesuffix(".whl").split("-")[-1]
    assert tags == [f"Tag: py3-none-{tag}" for tag in platform.split(".")]


def test_npm_launcher_lists_every_platform_at_its_own_version(dist: Path) -> None:
    with tarfile.open(package(dist, "kenning-[0-9]*.tgz")) as tar:
        manifest = json.load(tar.extractfile("package/package.json"))
    assert manifest["optionalDependencies"] == {
        f"kenning-{platform}": manifest["version"]
        for platform in ("linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64")
    }


def _urlsafe_b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
