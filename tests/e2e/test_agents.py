"""The real agent clients, installed from the npm registry at pinned versions by scripts/test
(tests/agents/package.json), driving kenning offline.

Claude Code runs headless (`claude -p`) against `agent_api.AgentAPI`, a local server speaking
the Anthropic Messages API with scripted tool calls and replies, in a git repository set up by
`kenning init`. What the hooks add reaches the model in the next request, so each test reads the
requests the client sent; what the hooks capture is read back with the kenning CLI.

Gemini CLI and Codex CLI are driven as far as they go offline: Gemini's `mcp list` connects to
the server kenning registered; Codex runs `codex exec` against the same local server speaking
the OpenAI Responses API.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_api import AgentAPI, Text, Tool
from harness import Workspace, service

CLAUDE = os.environ.get("KENNING_TEST_CLAUDE", "")
GEMINI = os.environ.get("KENNING_TEST_GEMINI", "")
CODEX = os.environ.get("KENNING_TEST_CODEX", "")
NODE = os.environ.get("KENNING_TEST_NODE", "node")
REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120

LESSON = "The billing webhook test fails when the clock is not UTC; run it with TZ=UTC."
PREFERENCE = "Always run the integration suite before merging."

@dataclass
class Claude:
    """Claude Code in a workspace set up by `kenning init`, talking to a scripted model."""

    ws: Workspace
    api: AgentAPI
    home: Path

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = self.ws.env(
            {
                "HOME": str(self.home),
                "ANTHROPIC_BASE_URL": self.api.url,
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                # Headless runs of this client send the first request without waiting for MCP
                # servers to connect, so whether kenning's tools are in it would be a race
                # against the machine's load: the tests that look for them make it wait.
                "MCP_CONNECTION_NONBLOCKING": "false",
                "KENNING_LOG": "warn",
            }
        )
        env.update(extra or {})
        return env

    def run(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
        """`claude -p ...` to completion; its JSON result."""
        done = subprocess.run(
            [CLAUDE, *args, "--output-format", "json", "--allowedTools", "Bash"],
            cwd=cwd or self.ws.repo, env=self.env(env), capture_output=True, text=True, timeout=TIMEOUT,
        )
        assert done.returncode == 0, f"claude {args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        result = json.loads(done.stdout)
        assert result.get("is_error") is False, result
        return result

    def requests_since(self, mark: int) -> list[str]:
        """The bodies (as JSON text) of the agent loop's requests after the first `mark` requests."""
        return [json.dumps(request.body) for request in self.api.requests[mark:] if isinstance(request.body, dict) and request.body.get("tools")]

    def memories(self) -> list[dict[str, Any]]:
        """Every memory kenning holds, as `kenning export` writes them."""
        done = self.ws.run("export", "--no-vectors")
        assert done.returncode == 0, done.stderr
        return [json.loads(line)["memory"] for line in done.stdout.splitlines() if line.strip()]

    def hook_log(self) -> str:
        path = self.ws.data / "hooks.log"
        return path.read_text() if path.exists() else ""


@pytest.fixture
def claude(ws: Workspace, tmp_path: Path) -> Iterator[Claude]:
    service("KENNING_TEST_CLAUDE", "Claude Code (scripts/test installs it from npm)")
    home = tmp_path / "home"
    home.mkdir()
    init = ws.run("init")
    assert init.returncode == 0, init.stderr
    approve(home, ws.repo)
    with AgentAPI() as api:
        yield Claude(ws, api, home)


def approve(home: Path, repo: Path) -> None:
    """What a person's answers to Claude Code's first start leave in ~/.claude.json: the folder
    trusted and the project's MCP server approved."""
    entry = {"hasTrustDialogAccepted": True, "enabledMcpjsonServers": ["kenning"]}
    (home / ".claude.json").write_text(json.dumps({"projects": {str(repo.resolve()): entry}}))


def capture(claude: Claude, content: str, namespace: str, domain: str = "project") -> None:
    capture_in(claude.ws, content, namespace, domain)


def test_a_failing_command_brings_back_its_lesson_and_a_passing_one_nothing(claude: Claude) -> None:
    capture(claude, LESSON, "learnings")
    claude.api.turn("run the billing tests", Tool("Bash", {"command": "echo 'test billing::webhook ... FAILED' >&2; exit 1", "description": "Run the billing tests"}), Text("It failed."))
    claude.api.turn("grep the billing errors", Tool("Bash", {"command": "echo 'billing/webhook.rs:88: Error: clock is not UTC'", "description": "Grep the errors"}), Text("Found one."))

    mark = len(claude.api.requests)
    claude.run("-p", "run the billing tests")
    after_failure = claude.requests_since(mark)
    assert len(after_failure) == 2, "the tool call and the reply after it"
    assert not any("failed (exit code 1)" in body for body in after_failure[:1])
    assert "failed (exit code 1)" in after_failure[1] and "run it with TZ=UTC" in after_failure[1], "the lesson reaches the model after the failure"
    # kenning's tools reached the model (offered for loading on demand): the server connected.
    assert "mcp__kenning__memory_recall" in after_failure[0]

    mark = len(claude.api.requests)
    claude.run("-p", "grep the billing errors")
    assert not any("failed (exit code" in body for body in claude.requests_since(mark)), "a command that exited 0 is no failure"
    assert claude.hook_log() == ""


def test_the_client_connects_the_server_init_registered_and_doctor_agrees(claude: Claude) -> None:
    listed = subprocess.run([CLAUDE, "mcp", "list"], cwd=claude.ws.repo, env=claude.env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert listed.returncode == 0 and "kenning:" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr
    doctor = claude.ws.run("doctor", env={"HOME": str(claude.home)})
    assert "ok   mcp      registered in" in doctor.stdout and "and approved" in doctor.stdout, doctor.stdout
    assert "ok   hooks" in doctor.stdout, doctor.stdout


def test_a_prompt_gets_relevant_memories_and_an_unrelated_one_gets_none(claude: Claude) -> None:
    capture(claude, LESSON, "learnings")
    claude.api.turn("billing webhook test", Text("Use TZ=UTC."))
    claude.api.turn("haiku", Text("Leaves fall on the stream."))
    mark = len(claude.api.requests)
    claude.run("-p", "Why does the billing webhook test fail on CI?")
    relevant = claude.requests_since(mark)
    assert "Memories kenning found relevant" in relevant[0] and "run it with TZ=UTC" in relevant[0], relevant[0][-3000:]
    mark = len(claude.api.requests)
    claude.run("-p", "Write a haiku about autumn leaves and rivers")
    assert not any("Memories kenning found relevant" in body for body in claude.requests_since(mark))


def test_every_stop_captures_the_final_answer_of_its_turn(claude: Claude) -> None:
    turns = 20
    for n in range(turns):
        claude.api.turn(f"question {n}:", Text(f"The root cause of incident {n} was a stale cache entry in shard {n}."))
    process = subprocess.Popen(
        [CLAUDE, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"],
        cwd=claude.ws.repo, env=claude.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdin and process.stdout
    try:
        # One prompt at a time: a prompt sent while a turn runs joins that turn.
        for n in range(turns):
            message = {"type": "user", "message": {"role": "user", "content": f"question {n}: what broke the deploy?"}}
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            while True:
                line = process.stdout.readline()
                assert line, f"claude ended before turn {n} finished: {process.stderr.read() if process.stderr else ''}"
                if json.loads(line).get("type") == "result":
                    break
        process.stdin.close()
        process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    captured = {memory["content"] for memory in claude.memories()}
    missing = [n for n in range(turns) if f"The root cause of incident {n} was a stale cache entry in shard {n}." not in captured]
    assert not missing, f"stops that missed their turn's answer: {missing}; log: {claude.hook_log()}"
    sources = {memory["source"] for memory in claude.memories()}
    assert sources == {"model-generated"}, sources


def test_a_resumed_and_a_compacted_session_get_their_context_back(claude: Claude) -> None:
    capture(claude, "Blocked: staging deploys need the new TLS certificate from ops.", "blockers")
    claude.api.turn("start the release", Text("We decided to ship the release from the main branch only."))
    claude.api.turn("and then", Text("Done."))
    first = claude.run("-p", "start the release")
    session = first["session_id"]

    mark = len(claude.api.requests)
    claude.run("-p", "and then?", "--resume", session)
    resumed = claude.requests_since(mark)
    assert "staging deploys need the new TLS certificate" in resumed[-1], "session-start on resume"

    claude.run("-p", "/compact", "--resume", session)
    assert any("ship the release from the main branch" in memory["content"] for memory in claude.memories()), "the stop captured the decision"
    mark = len(claude.api.requests)
    claude.run("-p", "and then, after the compaction?", "--resume", session)
    after = claude.requests_since(mark)[-1]
    assert "captured earlier in this session" in after and "ship the release from the main branch" in after, after[-4000:]
    assert claude.hook_log() == ""


def test_a_hook_argument_error_does_not_block_the_prompt(claude: Claude) -> None:
    settings_path = claude.ws.repo / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_text())
    hook = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    hook["command"] += " --flag-from-a-newer-kenning"
    settings_path.write_text(json.dumps(settings, indent=2))
    capture(claude, LESSON, "learnings")
    claude.api.turn("billing webhook test", Text("Use TZ=UTC."))
    mark = len(claude.api.requests)
    result = claude.run("-p", "Why does the billing webhook test fail on CI?")
    assert result["result"] == "Use TZ=UTC.", result
    assert "run it with TZ=UTC" in claude.requests_since(mark)[0], "the hook still answered"
    assert "--flag-from-a-newer-kenning" in claude.hook_log()


def test_the_plugin_installs_the_server_and_the_hooks_in_one_step(claude: Claude, tmp_path: Path) -> None:
    home = tmp_path / "plugin-home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kenning").symlink_to(claude.ws.bin)
    env = {"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    repo = tmp_path / "plain-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for args in (["plugin", "marketplace", "add", str(REPO_ROOT)], ["plugin", "install", "kenning@kenning"]):
        done = subprocess.run([CLAUDE, *args], cwd=repo, env=claude.env(env), capture_output=True, text=True, timeout=TIMEOUT)
        assert done.returncode == 0, f"claude {args}: {done.stdout}\n{done.stderr}"
    # The user's domain: the plain repository is another project than the workspace's.
    capture(claude, "Blocked: staging deploys need the new TLS certificate from ops.", "blockers", domain="user")
    claude.api.turn("hello there", Text("Hello."))
    mark = len(claude.api.requests)
    claude.run("-p", "hello there", cwd=repo, env=env)
    request = claude.requests_since(mark)[0]
    assert "mcp__plugin_kenning_kenning__memory_recall" in request or "mcp__kenning__memory_recall" in request, "the plugin's MCP server"
    assert "staging deploys need the new TLS certificate" in request, "the plugin's session-start hook"


def test_gemini_cli_connects_to_the_server_init_registered(ws: Workspace, tmp_path: Path) -> None:
    service("KENNING_TEST_GEMINI", "Gemini CLI (scripts/test installs it from npm)")
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    init = ws.run("init", "--client", "gemini")
    assert init.returncode == 0, init.stderr
    settings = json.loads((ws.repo / ".gemini" / "settings.json").read_text())
    assert settings["hooks"]["BeforeAgent"][0]["hooks"][0]["command"].endswith("hook user-prompt")
    # The user's answer to Gemini CLI's question whether to trust the folder.
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(ws.repo.resolve()): "TRUST_FOLDER"}))
    env = ws.env({"HOME": str(home), "GEMINI_CLI_NO_RELAUNCH": "true"})
    listed = subprocess.run([NODE, GEMINI, "mcp", "list"], cwd=ws.repo, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    output = listed.stdout + listed.stderr
    assert listed.returncode == 0, output
    assert "kenning" in output and "Connected" in output, output


def test_codex_runs_with_the_server_and_the_hooks_init_registered(ws: Workspace, tmp_path: Path) -> None:
    service("KENNING_TEST_CODEX", "Codex CLI (scripts/test installs it from npm)")
    init = ws.run("init", "--client", "codex")
    assert init.returncode == 0, init.stderr
    capture_in(ws, "Blocked: staging deploys need the new TLS certificate from ops.", "blockers")
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    with AgentAPI() as api:
        api.turn("run the release check", Tool("exec_command", {"cmd": "echo 'release check FAILED' >&2; exit 3"}),
                 Text("The root cause was a stale release cache; the fix was to clear it before the check."))
        # A provider speaking the Responses API at the local server, and the project trusted
        # (which lets Codex read the project's .codex/ files).
        (codex_home / "config.toml").write_text(
            'model = "gpt-5-codex"\nmodel_provider = "local"\n\n'
            f'[model_providers.local]\nname = "local"\nbase_url = "{api.url}/v1"\nwire_api = "responses"\nenv_key = "LOCAL_API_KEY"\n\n'
            f'[projects."{ws.repo.resolve()}"]\ntrust_level = "trusted"\n'
        )
        env = ws.env({"HOME": str(tmp_path), "CODEX_HOME": str(codex_home), "LOCAL_API_KEY": "sk-test"})
        listed = subprocess.run([CODEX, "mcp", "list"], cwd=ws.repo, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        assert listed.returncode == 0 and "kenning" in listed.stdout, listed.stdout + listed.stderr
        # The hooks are kenning's own, vetted here; Codex otherwise asks the user to trust them in /hooks.
        done = subprocess.run(
            [CODEX, "exec", "--json", "--dangerously-bypass-hook-trust", "run the release check"],
            cwd=ws.repo, env=env, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        bodies = [json.dumps(request.body) for request in api.requests if request.path.endswith("/responses")]
        assert bodies and "mcp__kenning" in bodies[0], "kenning's tools reached the model"
        assert "staging deploys need the new TLS certificate" in bodies[0], "session-start's context reached the model"
    contents = [json.loads(line)["memory"]["content"] for line in ws.run("export", "--no-vectors").stdout.splitlines() if line.strip()]
    assert "The root cause was a stale release cache; the fix was to clear it before the check." in contents, contents
    assert not (ws.data / "hooks.log").exists(), (ws.data / "hooks.log").read_text()


def capture_in(ws: Workspace, content: str, namespace: str, domain: str = "project") -> None:
    done = ws.run("capture", content, "--namespace", namespace, "--domain", domain)
    assert done.returncode == 0, done.stderr
