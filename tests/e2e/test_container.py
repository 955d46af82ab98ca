"""The container image's runtime stage (the Dockerfile at the repository's root), checked without a
container runtime: its command started from the same binary with the same arguments and
environment (the volume's folder and the port made local to the test), its HEALTHCHECK command run
against it, and its user, volume and keys file as the README promises."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from harness import SERVING, Workspace, announced_server

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"


def runtime_stage() -> dict[str, list[str]]:
    """The last stage's instructions, continuation lines joined: {"ENV": [...], "CMD": [...], ...}."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages = re.split(r"^FROM .*$", text, flags=re.MULTILINE)
    instructions: dict[str, list[str]] = {}
    for line in stages[-1].splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            instructions.setdefault(keyword, []).append(rest.strip())
    return instructions


def exec_form(value: str) -> list[str]:
    """An instruction's JSON array (exec form), which is what the image runs without a shell."""
    command = json.loads(value)
    assert isinstance(command, list) and all(isinstance(part, str) for part in command), value
    return command


def image_env(stage: dict[str, list[str]], data: Path) -> dict[str, str]:
    """The image's ENV, with its volume /data moved to `data`."""
    env = {}
    for line in stage["ENV"]:
        for pair in line.split():
            name, _, value = pair.partition("=")
            env[name] = value.replace("/data", str(data))
    return env


def test_the_runtime_stage_runs_unprivileged_with_its_data_in_the_volume() -> None:
    stage = runtime_stage()
    assert stage["USER"] and stage["USER"][0].split(":")[0] not in ("root", "0")
    assert exec_form(stage["VOLUME"][0]) == ["/data"]
    assert image_env(stage, Path("/data"))["KENNING_DATA_DIR"] == "/data"


def test_the_image_command_needs_a_key_serves_with_one_and_passes_its_healthcheck(ws: Workspace) -> None:
    stage = runtime_stage()
    entrypoint = exec_form(stage["ENTRYPOINT"][0])
    assert entrypoint == ["kenning"]
    port = stage["EXPOSE"][0]
    # The same arguments on a free port: the image binds every interface, which needs a key.
    args = tuple(arg.replace(f":{port}", ":0") for arg in exec_form(stage["CMD"][0]))
    volume = ws.root / "volume"
    volume.mkdir()
    env = image_env(stage, volume)

    refused = subprocess.run([ws.bin, *args], env=ws.env(env), cwd=volume, capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "kenning keys create" in refused.stderr, refused.stderr

    # A keys file of its own, as a secret mounted into the container would be.
    secret = ws.root / "secrets" / "kenning-keys.json"
    env["KENNING_KEYS_FILE"] = str(secret)
    created = ws.run("--json", "keys", "create", "--name", "alice", env=env)
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["key"]
    assert secret.is_file() and not (volume / "keys.json").exists()

    with announced_server(ws, args, SERVING, "container", env) as server:
        local_port = server.url.split(":")[-1].split("/")[0]
        health = exec_form(stage["HEALTHCHECK"][0].split(" CMD ", 1)[1])
        health = [part.replace(f"/{port}", f"/{local_port}") for part in health]
        assert subprocess.run(health, timeout=10).returncode == 0, "the HEALTHCHECK command failed"

        metrics = server.url.replace("0.0.0.0", "127.0.0.1").removesuffix("/mcp") + "/metrics"
        try:
            urllib.request.urlopen(metrics, timeout=10)
            raise AssertionError("/metrics answered without a key")
        except urllib.error.HTTPError as error:
            assert error.code == 401
        with_key = urllib.request.Request(metrics, headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(with_key, timeout=10) as response:
            assert response.status == 200
