"""Memory dynamics with a language model, end to end: the local fake provider (fake_llm.py)
answers in the Anthropic wire format, and the real binary uses it to write a consolidated
principle, to widen a recall's query, and to read a session's transcript at a stop hook. When the
provider fails, each falls back to its rule and says so.
"""

from __future__ import annotations

import json
import subprocess

from fake_llm import FakeLLM, anthropic_provider
from harness import Workspace

KEY = "sk-ant-e2e-dynamics-0123456789abcdef"
ENV = {"E2E_ANTHROPIC_KEY": KEY}


def configure(ws: Workspace, llm: FakeLLM, extra: str = "") -> None:
    (ws.config / "kenning.toml").write_text(anthropic_provider(llm.url, extra="max_retries = 0\n" + extra))


def cli_json(ws: Workspace, *args: str) -> dict:
    result = ws.run("--json", *args, env=ENV)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def completions(llm: FakeLLM) -> list:
    return [request for request in llm.requests if request.path == "/v1/messages"]


def test_consolidation_writes_the_models_principle_and_falls_back_when_it_fails(ws: Workspace) -> None:
    with FakeLLM(anthropic_key=KEY) as llm:
        configure(ws, llm)
        for n in range(1, 4):
            cli_json(ws, "capture", f"The login test failed on CI because the session cookie was not set before the redirect (run {n}).",
                     "--kind", "episodic", "--namespace", "testing")
        llm.say(json.dumps({
            "title": "Set the session cookie before any redirect in login tests",
            "principle": "Login tests fail on CI when the session cookie is set after the redirect; set it first.",
        }))
        run = cli_json(ws, "consolidate")
        assert run["status"] == "completed" and run["principlesExtracted"] == 1, run
        assert run["llm"]["status"] == "used", run
        principle = cli_json(ws, "get", run["created"][0])
        assert principle["title"] == "Set the session cookie before any redirect in login tests", principle
        assert "set it first" in principle["content"] and principle["source"] == "model-generated", principle
        (asked,) = completions(llm)
        assert asked.headers["x-api-key"] == KEY
        assert "session cookie" in json.dumps(asked.body["messages"]), asked.body

        # Another cluster, and the provider down: the principle is extractive and the run says why.
        for n in range(1, 4):
            cli_json(ws, "capture", f"The nightly export job ran out of memory while compressing the audit log (night {n}).",
                     "--kind", "episodic", "--namespace", "performance")
        llm.fail(500)
        run = cli_json(ws, "consolidate")
        assert run["principlesExtracted"] == 1 and run["llm"]["status"] == "failed", run
        assert "extractive" in run["llm"]["fallback"], run
        assert cli_json(ws, "get", run["created"][0])["source"] == "inference"


def test_recall_adds_the_models_terms_to_the_query(ws: Workspace) -> None:
    with FakeLLM(anthropic_key=KEY) as llm:
        configure(ws, llm, "[recall]\nrewrite_with_llm = true\n")
        memory = cli_json(ws, "capture", "The statement timeout on the orders database is 30 seconds.")
        llm.say(json.dumps({"terms": ["statement timeout"]}))
        page = cli_json(ws, "recall", "why are db calls cut off")
        assert "statement timeout" in page["expanded_with"] and "database" in page["expanded_with"], page
        assert "added 1 term" in page["query_rewrite"], page
        assert page["results"][0]["urn"] == memory["urn"], page
        (asked,) = completions(llm)
        assert asked.body["messages"][0]["content"] == "Query: why are db calls cut off", asked.body

        llm.fail(500)
        page = cli_json(ws, "recall", "why are db calls cut off")
        assert page["query_rewrite"].startswith("failed") and page["expanded_with"] == ["database"], page
        assert page["results"][0]["urn"] == memory["urn"]


def run_stop_hook(ws: Workspace, transcript_lines: list[dict]) -> subprocess.CompletedProcess[str]:
    transcript = ws.transcript("s-e2e")
    transcript.write_text("".join(json.dumps(line) + "\n" for line in transcript_lines))
    payload = {"session_id": "s-e2e", "transcript_path": str(transcript), "hook_event_name": "Stop", "cwd": str(ws.repo)}
    return subprocess.run([ws.bin, "hook", "stop"], cwd=ws.repo, env=ws.hook_env(ENV), input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60)


def test_the_stop_hook_captures_what_the_model_found_in_the_transcript(ws: Workspace) -> None:
    turns = [
        {"type": "user", "message": {"role": "user", "content": "Why does the checkout test fail only on CI?"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "The fixtures build dates in local time while the CI machines run in UTC, so midnight shifts a day."}]}},
    ]
    finding = "The checkout test fails on CI because its fixtures use local time while CI runs in UTC."
    with FakeLLM(anthropic_key=KEY) as llm:
        configure(ws, llm)
        llm.say(json.dumps({"memories": [{"namespace": "learnings", "speaker": "assistant", "content": finding}]}))
        result = run_stop_hook(ws, turns)
        assert result.returncode == 0, result.stderr
        (asked,) = completions(llm)
        assert "CI machines run in UTC" in asked.body["messages"][0]["content"]
        page = cli_json(ws, "recall", "checkout test fails on CI local time UTC", "--detail", "full")
        hit = page["results"][0]
        assert hit["content"] == finding, page
        assert hit["metadata"]["extracted_by"].startswith("anthropic"), hit
