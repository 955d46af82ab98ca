"""A local language model server speaking the Anthropic Messages and OpenAI Chat Completions wire
formats, answering from a scripted queue. Standard library only.

In a test:

    with FakeLLM(anthropic_key="test-key", openai_key="test-key") as llm:
        llm.say('{"winner": "b", "reason": "newer"}')        # the next completion, either format
        llm.fail(429, retry_after=1)                           # or an error, in the asker's format
        ... run kenning with base_url = llm.url ...
        assert llm.requests[0].path == "/v1/messages"

Each POST to `/v1/messages` or `/v1/chat/completions` takes the next scripted answer; with none
left it answers 500 in that API's error format, so a test that asks more than it scripted fails
visibly. `GET /v1/models` lists one model. A configured key is checked (`x-api-key` and
`anthropic-version: 2023-06-01` for Anthropic, `Authorization: Bearer` for OpenAI) and a wrong
one answered 401 as each API does.

From a shell: `python3 tests/e2e/fake_llm.py --port 8765 --say 'text' --say 'more'` serves
until interrupted and prints its URL.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_VERSION = "2023-06-01"


def anthropic_provider(url: str, key_env: str = "E2E_ANTHROPIC_KEY", extra: str = "") -> str:
    """The `[[llm.providers]]` entry of kenning.toml for this server in the Anthropic format,
    with its key in the environment variable `key_env` and any further settings in `extra`."""
    return (
        "[[llm.providers]]\n"
        'provider = "anthropic"\n'
        'model = "claude-sonnet-4-5"\n'
        f'base_url = "{url}"\n'
        f'api_key_env = "{key_env}"\n'
        "timeout_secs = 10\n" + extra
    )


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Scripted:
    """A text to answer with, or an error status (with its message and retry-after)."""

    text: str | None = None
    status: int = 200
    message: str = ""
    retry_after: float | None = None
    delay: float = 0.0


@dataclass
class FakeLLM:
    anthropic_key: str | None = None
    openai_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    model: str = "fake-model-1"
    requests: list[Request] = field(default_factory=list)
    _queue: deque[Scripted] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def say(self, text: str, delay: float = 0.0) -> None:
        """Queues a completion answering `text`."""
        with self._lock:
            self._queue.append(Scripted(text=text, delay=delay))

    def fail(self, status: int, message: str = "scripted failure", retry_after: float | None = None) -> None:
        """Queues an error answer (429, 500, 529, 401, ...) in the format of whoever asks."""
        with self._lock:
            self._queue.append(Scripted(status=status, message=message, retry_after=retry_after))

    def completions(self) -> list[Request]:
        return [request for request in self.requests if request.method == "POST"]

    def start(self) -> "FakeLLM":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def do_GET(self) -> None:
                fake._record(self, None)
                api = "anthropic" if "x-api-key" in self.headers or "anthropic-version" in self.headers else "openai"
                if self.path != "/v1/models":
                    return self._send(404, _error(api, 404, f"no route {self.path}"))
                if (denied := fake._denied(api, self.headers)) is not None:
                    return self._send(*denied)
                if api == "anthropic":
                    body = {"data": [{"type": "model", "id": fake.model, "display_name": fake.model,
                                      "created_at": "2025-09-29T00:00:00Z"}],
                            "has_more": False, "first_id": fake.model, "last_id": fake.model}
                else:
                    body = {"object": "list", "data": [{"id": fake.model, "object": "model", "created": 1700000000,
                                                        "owned_by": "fake"}]}
                self._send(200, body)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode(errors="replace")
                fake._record(self, body)
                routes = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai"}
                api = routes.get(self.path)
                if api is None:
                    return self._send(404, _error("openai", 404, f"no route {self.path}"))
                if (denied := fake._denied(api, self.headers)) is not None:
                    return self._send(*denied)
                if not isinstance(body, dict) or "model" not in body or "messages" not in body:
                    return self._send(400, _error(api, 400, "the body needs model and messages"))
                with fake._lock:
                    scripted = fake._queue.popleft() if fake._queue else Scripted(status=500, message="no scripted answer left")
                time.sleep(scripted.delay)
                if scripted.text is None:
                    headers = {} if scripted.retry_after is None else {"retry-after": f"{scripted.retry_after:g}"}
                    return self._send(scripted.status, _error(api, scripted.status, scripted.message), headers)
                self._send(200, _answer(api, body["model"], scripted.text, body))

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeLLM":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        headers = {name.lower(): value for name, value in handler.headers.items()}
        with self._lock:
            self.requests.append(Request(handler.command, handler.path, headers, body))

    def _denied(self, api: str, headers: Any) -> tuple[int, dict[str, Any]] | None:
        """The status and error body when the request's key (or Anthropic's version header) is not right."""
        if api == "anthropic":
            if headers.get("anthropic-version") != ANTHROPIC_VERSION:
                return 400, _error(api, 400, f"anthropic-version must be {ANTHROPIC_VERSION}")
            if self.anthropic_key is not None and headers.get("x-api-key") != self.anthropic_key:
                return 401, _error(api, 401, "invalid x-api-key")
        elif self.openai_key is not None and headers.get("authorization") != f"Bearer {self.openai_key}":
            return 401, _error(api, 401, "Incorrect API key provided")
        return None


ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
OPENAI_ERROR_TYPES = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
                      404: ("invalid_request_error", "model_not_found"), 429: ("requests", "rate_limit_exceeded")}


def _error(api: str, status: int, message: str) -> dict[str, Any]:
    """An error body as each API documents it."""
    if api == "anthropic":
        kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}
    kind, code = OPENAI_ERROR_TYPES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _answer(api: str, model: str, text: str, request: dict[str, Any]) -> dict[str, Any]:
    """A completion as each API documents it, with rough token counts."""
    prompt_tokens = max(1, len(json.dumps(request.get("messages", []))) // 4)
    output_tokens = max(1, len(text) // 4)
    if api == "anthropic":
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": output_tokens}}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens,
                      "total_tokens": prompt_tokens + output_tokens}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--anthropic-key")
    parser.add_argument("--openai-key")
    parser.add_argument("--say", action="append", default=[], help="a scripted answer, in order (repeatable)")
    args = parser.parse_args()
    fake = FakeLLM(anthropic_key=args.anthropic_key, openai_key=args.openai_key, port=args.port)
    for text in args.say:
        fake.say(text)
    with fake:
        print(fake.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
