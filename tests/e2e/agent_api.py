"""A local model server for driving real agent clients (Claude Code, Codex CLI) offline: it speaks
the Anthropic Messages API (streamed and not, with `count_tokens`) and the OpenAI Responses API
(streamed), and answers from a script instead of a model. Standard library only.

A script is a list of turns. Each turn is matched by a phrase of the user's prompt and holds the
steps the "model" takes in it: tool calls and a closing text. The step to answer is worked out
from the conversation the client sends (the number of replies since the user's prompt), so the
server keeps no state between requests and a retried request gets the same answer.

    with AgentAPI() as api:
        api.turn("run the tests", Tool("Bash", {"command": "false"}), Text("The fix was to pin the clock."))
        ... run the client with ANTHROPIC_BASE_URL=api.url ...
        assert api.main_requests()           # the requests of the agent's own loop

Requests the script does not cover (a client's side questions: a title, a topic check, a
conversation summary when compacting) are answered with a short text; a compaction request gets
a `<summary>` reply. Every request is recorded with its body.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Tool:
    """A tool call: the tool's name and its input."""

    name: str
    input: dict[str, Any]


@dataclass
class Text:
    """A closing reply that ends the turn."""

    text: str


@dataclass
class Turn:
    phrase: str
    steps: list[Tool | Text]


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any


COMPACT_SUMMARY = "<summary>The user and the assistant worked on the widget service's tests.</summary>"
SIDE_ANSWER = "OK"


@dataclass
class AgentAPI:
    host: str = "127.0.0.1"
    port: int = 0
    model: str = "claude-sonnet-4-5"
    turns: list[Turn] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Any = field(default_factory=itertools.count)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def turn(self, phrase: str, *steps: Tool | Text) -> None:
        """Scripts the turn whose prompt contains `phrase` (the latest such turn wins)."""
        with self._lock:
            self.turns.insert(0, Turn(phrase, list(steps)))

    def main_requests(self) -> list[Request]:
        """The requests of the agent's own loop: those that offered tools and matched a turn."""
        with self._lock:
            recorded = list(self.requests)
        return [request for request in recorded if isinstance(request.body, dict) and self._turn_of(request.body)]

    # --- the script --------------------------------------------------------------------------

    def _turn_of(self, body: dict[str, Any]) -> tuple[Turn, int] | None:
        """The scripted turn a conversation is in and the index of its next step."""
        if not body.get("tools") and not body.get("input"):
            return None
        messages = _messages(body)
        for position in range(len(messages) - 1, -1, -1):
            role, texts = messages[position]
            if role != "user" or not texts:
                continue
            prompt = "\n".join(texts)
            with self._lock:
                turn = next((turn for turn in self.turns if turn.phrase in prompt), None)
            if turn is None:
                return None
            replies = sum(1 for role, _ in messages[position + 1 :] if role == "assistant")
            return turn, min(replies, len(turn.steps) - 1)
        return None

    def _answer(self, body: dict[str, Any]) -> Tool | Text:
        found = self._turn_of(body)
        if found is not None:
            turn, step = found
            return turn.steps[step]
        last = _messages(body)[-1][1] if _messages(body) else []
        if any("summary" in text.lower() for text in last):
            return Text(COMPACT_SUMMARY)
        return Text(SIDE_ANSWER)

    # --- the server --------------------------------------------------------------------------

    def start(self) -> "AgentAPI":
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                api._record(self, None)
                if self.path.split("?")[0] == "/v1/models":
                    return self._json(200, {"data": [{"type": "model", "id": api.model, "display_name": api.model,
                                                      "created_at": "2025-09-29T00:00:00Z"}],
                                            "has_more": False, "first_id": api.model, "last_id": api.model})
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    body = {}
                api._record(self, body)
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    return self._json(200, {"input_tokens": _tokens(body)})
                if path == "/v1/messages":
                    answer = api._answer(body)
                    if body.get("stream"):
                        return self._stream(_anthropic_events(api, body, answer))
                    return self._json(200, _anthropic_message(api, body, answer))
                if path in ("/v1/responses", "/responses"):
                    return self._stream(_responses_events(api, body, api._answer(body)))
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {self.path}"}})

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, events: list[tuple[str, dict[str, Any]]]) -> None:
                data = "".join(f"event: {name}\ndata: {json.dumps(event)}\n\n" for name, event in events).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("content-length", str(len(data)))
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

    def __enter__(self) -> "AgentAPI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        headers = {name.lower(): value for name, value in handler.headers.items()}
        with self._lock:
            self.requests.append(Request(handler.path, headers, body))

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(self._ids):06d}"


def _messages(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The conversation as (role, the texts it typed): tool results and tool calls carry no text.
    Anthropic's `messages` and the Responses API's `input` items are both read."""
    found: list[tuple[str, list[str]]] = []
    for message in body.get("messages") or body.get("input") or []:
        if not isinstance(message, dict):
            continue
        kind = message.get("type", "message")
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            found.append(("assistant", []))
            continue
        if kind != "message":
            continue
        role = message.get("role", "")
        if role == "developer" or role == "system":
            continue
        content = message.get("content")
        texts: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") in ("text", "input_text", "output_text"):
                    texts.append(block.get("text", ""))
        found.append(("assistant" if role == "assistant" else "user", texts))
    return found


def _tokens(body: dict[str, Any]) -> int:
    return max(1, len(json.dumps(body)) // 4)


def _anthropic_message(api: AgentAPI, body: dict[str, Any], answer: Tool | Text) -> dict[str, Any]:
    if isinstance(answer, Tool):
        content = [{"type": "tool_use", "id": api._next_id("toolu"), "name": answer.name, "input": answer.input}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": answer.text}]
        stop = "end_turn"
    return {"id": api._next_id("msg"), "type": "message", "role": "assistant", "model": body.get("model", api.model),
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": _tokens(body), "output_tokens": 10}}


def _anthropic_events(api: AgentAPI, body: dict[str, Any], answer: Tool | Text) -> list[tuple[str, dict[str, Any]]]:
    """A streamed reply, event by event, as the Messages API sends it."""
    message = _anthropic_message(api, body, answer)
    start = dict(message, content=[], stop_reason=None, usage={"input_tokens": _tokens(body), "output_tokens": 1})
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    block = message["content"][0]
    if block["type"] == "tool_use":
        events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": dict(block, input={})}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
    else:
        events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": block["text"]}}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": 10}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _responses_events(api: AgentAPI, body: dict[str, Any], answer: Tool | Text) -> list[tuple[str, dict[str, Any]]]:
    """A streamed reply as the OpenAI Responses API sends it."""
    response_id = api._next_id("resp")
    if isinstance(answer, Tool):
        item = {"type": "function_call", "id": api._next_id("fc"), "call_id": api._next_id("call"),
                "name": answer.name, "arguments": json.dumps(answer.input), "status": "completed"}
    else:
        item = {"type": "message", "id": api._next_id("msg"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": answer.text, "annotations": []}]}
    response = {"id": response_id, "object": "response", "created_at": 1700000000, "status": "in_progress",
                "model": body.get("model", api.model), "output": []}
    events: list[tuple[str, dict[str, Any]]] = [("response.created", {"type": "response.created", "response": response})]
    events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}))
    if isinstance(answer, Text):
        events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                      "output_index": 0, "content_index": 0, "delta": answer.text}))
    events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}))
    tokens = _tokens(body)
    done = dict(response, status="completed", output=[item],
                usage={"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
                       "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens + 10})
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events
