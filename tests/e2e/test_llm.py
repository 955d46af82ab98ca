"""Language model providers configured in kenning.toml, against the local fake server in
fake_llm.py: `kenning doctor` asks each provider whether it answers, with the key from the
environment; a missing key stops startup naming its variable; no [llm] section means no model.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from fake_llm import ANTHROPIC_VERSION, FakeLLM, anthropic_provider
from harness import Workspace

KEY = "sk-ant-e2e-0123456789abcdef"


def write_config(ws: Workspace, llm: FakeLLM) -> None:
    (ws.config / "kenning.toml").write_text(
        anthropic_provider(llm.url) +
        "[[llm.providers]]\n"
        'provider = "openai"\n'
        'model = "gpt-4o-mini"\n'
        f'base_url = "{llm.url}/v1"\n'
        'api_key_env = "E2E_OPENAI_KEY"\n'
    )


def llm_check(ws: Workspace, env: dict[str, str]) -> dict[str, str]:
    result = ws.run("doctor", "--json", env=env)
    checks = json.loads(result.stdout)
    return next(check for check in checks if check["name"] == "llm")


def test_doctor_reports_each_configured_provider_healthy(ws: Workspace) -> None:
    with FakeLLM(anthropic_key=KEY, openai_key="sk-openai-e2e") as llm:
        write_config(ws, llm)
        check = llm_check(ws, {"E2E_ANTHROPIC_KEY": KEY, "E2E_OPENAI_KEY": "sk-openai-e2e"})
        assert check["status"] == "ok", check
        assert "anthropic/claude-sonnet-4-5 answers" in check["message"], check
        assert "openai/gpt-4o-mini answers" in check["message"], check
        anthropic, openai = llm.requests
        assert (anthropic.method, anthropic.path) == ("GET", "/v1/models")
        assert anthropic.headers["x-api-key"] == KEY and anthropic.headers["anthropic-version"] == ANTHROPIC_VERSION
        assert (openai.path, openai.headers["authorization"]) == ("/v1/models", "Bearer sk-openai-e2e")

        # A wrong key: the provider answers 401, doctor says so and never prints the key.
        check = llm_check(ws, {"E2E_ANTHROPIC_KEY": "sk-ant-wrong-key-42", "E2E_OPENAI_KEY": "sk-openai-e2e"})
        assert check["status"] == "warn", check
        assert "anthropic/claude-sonnet-4-5 does not" in check["message"] and "unauthorized" in check["message"], check
        assert "sk-ant-wrong-key-42" not in json.dumps(check)


def test_a_missing_key_variable_is_named_at_startup(ws: Workspace) -> None:
    with FakeLLM() as llm:
        write_config(ws, llm)
        result = ws.run("status", env={"E2E_OPENAI_KEY": "sk-openai-e2e"})
        assert result.returncode != 0
        assert "E2E_ANTHROPIC_KEY" in result.stderr, result.stderr
        check = llm_check(ws, {"E2E_OPENAI_KEY": "sk-openai-e2e"})
        assert check["status"] == "fail" and "E2E_ANTHROPIC_KEY" in check["message"], check
        assert llm.requests == [], "nothing is sent while the configuration is incomplete"


def test_without_an_llm_section_there_is_no_model(ws: Workspace) -> None:
    check = llm_check(ws, {})
    assert check["status"] == "ok" and "no language model configured" in check["message"], check
    assert ws.run("status").returncode == 0


def _post(url: str, body: dict, headers: dict[str, str]) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_the_fake_answers_each_format_from_its_queue() -> None:
    """The fake the engine's end-to-end tests rely on: scripted answers in order, in the format of
    whoever asks, errors as each API documents them, keys checked."""
    anthropic_headers = {"x-api-key": KEY, "anthropic-version": ANTHROPIC_VERSION}
    openai_headers = {"authorization": "Bearer sk-openai-e2e"}
    question = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "?"}]}
    with FakeLLM(anthropic_key=KEY, openai_key="sk-openai-e2e") as llm:
        llm.say('{"winner": "a"}')
        llm.fail(429, "slow down", retry_after=1)
        llm.say("second")
        status, _, body = _post(f"{llm.url}/v1/messages", question, anthropic_headers)
        assert (status, body["content"][0]["text"], body["stop_reason"]) == (200, '{"winner": "a"}', "end_turn")
        status, headers, body = _post(f"{llm.url}/v1/chat/completions", question, openai_headers)
        assert (status, headers.get("retry-after"), body["error"]["code"]) == (429, "1", "rate_limit_exceeded")
        status, _, body = _post(f"{llm.url}/v1/chat/completions", question, openai_headers)
        assert (status, body["choices"][0]["message"]["content"]) == (200, "second")
        status, _, body = _post(f"{llm.url}/v1/messages", question, anthropic_headers)
        assert (status, body["error"]["type"]) == (500, "api_error"), "an empty queue fails visibly"
        status, _, body = _post(f"{llm.url}/v1/messages", question, {**anthropic_headers, "x-api-key": "wrong"})
        assert (status, body["type"], body["error"]["type"]) == (401, "error", "authentication_error")
        assert [request.path for request in llm.completions()] == ["/v1/messages", "/v1/chat/completions", "/v1/chat/completions", "/v1/messages", "/v1/messages"]
