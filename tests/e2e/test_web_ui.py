"""The web view in a real browser: Debian's headless Chromium driven over the W3C WebDriver
protocol by Debian's chromedriver (both at /usr/bin; `.ci/run` and `scripts/test` install them).
The client is the few WebDriver calls the test needs, over urllib, so nothing is downloaded.

The test seeds a project with memories, decisions and outcomes, starts `kenning ui --port 0`,
searches, opens a memory, forgets and restores it through the confirmation forms, watches a
capture by another process appear through the live updates, and screenshots the search and
calibration pages; the calibration screenshot must show the reliability diagram (many colours,
much that is not background). Set KENNING_UI_SCREENSHOTS to a folder to keep the screenshots.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness import Workspace, announced_server, missing

CHROMIUM = os.environ.get("KENNING_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KENNING_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
SERVING = re.compile(r"kenning: serving the web view at (http://\S+/)")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
WINDOW = (1100, 1000)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class WebDriver:
    """A W3C WebDriver session with the handful of commands the test uses."""

    def __init__(self, url: str, profile: Path) -> None:
        self.url = url
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--user-data-dir={profile}",
                    "--force-device-scale-factor=1", "--hide-scrollbars",
                ],
            },
        }
        self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})["sessionId"]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.load(response)["value"]
        except urllib.error.HTTPError as error:
            raise AssertionError(f"WebDriver {method} {path}: {error.code} {error.read().decode(errors='replace')[:800]}") from None

    def _session(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def get(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    # Generous waits: on a loaded CI machine one navigation has taken over 15 s, and a wait only
    # lasts that long when something is wrong anyway.
    def find(self, css: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            found = self._session("POST", "/elements", {"using": "css selector", "value": css})
            if found:
                return found[0][ELEMENT]
            if time.monotonic() > deadline:
                raise AssertionError(f"no element matches {css!r} on {self.current_url()}:\n{self.source()[:3000]}")
            time.sleep(0.1)

    def click(self, element: str) -> None:
        self._session("POST", f"/element/{element}/click", {})

    def on_element(self, css: str, act: Callable[[str], None], retry_when: tuple[str, ...], timeout: float = 60.0) -> None:
        """Finds the element `css` names and does `act` to it, finding it again while the
        WebDriver's error names one of `retry_when`: the page was redrawn or left between the two."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                act(self.find(css, timeout))
                return
            except AssertionError as error:
                if not any(reason in str(error) for reason in retry_when) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def click_css(self, css: str, timeout: float = 60.0) -> None:
        """Finds and clicks the element `css` names, finding it again when the page was redrawn
        between the two (a live update replaces the list the element was in)."""
        self.on_element(css, self.click, ("stale element",), timeout)

    def type(self, element: str, text: str) -> None:
        self._session("POST", f"/element/{element}/value", {"text": text})

    def type_css(self, css: str, text: str, timeout: float = 60.0) -> None:
        """Finds the field `css` names and types `text` into it, finding it again when the page
        was left or redrawn between the two (the field found was of the page being left)."""
        self.on_element(css, lambda element: self.type(element, text), ("stale element", "not interactable"), timeout)

    def text(self, element: str) -> str:
        return self._session("GET", f"/element/{element}/text")

    def text_css(self, css: str, timeout: float = 60.0) -> str:
        """The text of the element `css` names, found again when the page was redrawn between
        finding and reading it (a live update after a change redraws the page's main part)."""
        read: list[str] = []
        self.on_element(css, lambda element: read.append(self.text(element)), ("stale element",), timeout)
        return read[-1]

    def script(self, script: str, *args: Any) -> Any:
        return self._session("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait(self, script: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.script(script)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for `{script}` on {self.current_url()}:\n{self.source()[:3000]}")

    def current_url(self) -> str:
        return self._session("GET", "/url")

    def source(self) -> str:
        return self._session("GET", "/source")

    def screenshot(self) -> bytes:
        return base64.b64decode(self._session("GET", "/screenshot"))

    def quit(self) -> None:
        with contextlib.suppress(Exception):
            self._session("DELETE", "")


@contextlib.contextmanager
def chromedriver(root: Path) -> Iterator[WebDriver]:
    for variable, path in (("KENNING_TEST_CHROMIUM", CHROMIUM), ("KENNING_TEST_CHROMEDRIVER", CHROMEDRIVER)):
        if not os.access(path, os.X_OK):
            missing(
                variable,
                f"{path} is missing: this test needs Debian's chromium and chromium-driver "
                "(`apt-get install chromium chromium-driver`; .ci/run and scripts/test do it)",
            )
    port = free_port()
    log = (root / "chromedriver.log").open("wb")
    process = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/status", timeout=2) as response:
                    if json.load(response)["value"]["ready"]:
                        break
            except (OSError, ValueError):
                pass
            assert time.monotonic() < deadline, (root / "chromedriver.log").read_text(errors="replace")
            time.sleep(0.1)
        driver = WebDriver(url, root / "chromium-profile")
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


@contextlib.contextmanager
def web_view(ws: Workspace) -> Iterator[str]:
    """Runs `kenning ui --port 0`, yields its URL, stops it with SIGINT and checks it stopped cleanly."""
    with announced_server(ws, ("ui", "--port", "0"), SERVING, "ui") as server:
        yield server.url


def decode_png(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Width, height and pixels of an 8-bit RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, width = 8, b"", 0
    height = channels = 0
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        chunk = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        filter_type, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            upper_left = previous[x - channels] if x >= channels else 0
            if filter_type == 1:
                line[x] = (line[x] + left) & 0xFF
            elif filter_type == 2:
                line[x] = (line[x] + up) & 0xFF
            elif filter_type == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                estimate = left + up - upper_left
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - upper_left)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else upper_left
                line[x] = (line[x] + predictor) & 0xFF
        rows.append(line)
        previous = line
    pixels = [tuple(row[x:x + 3]) for row in rows for x in range(0, stride, channels)]
    return width, height, pixels


def region(width: int, pixels: list[tuple[int, ...]], box: dict[str, float]) -> list[tuple[int, ...]]:
    x0, y0 = int(box["x"]), int(box["y"])
    x1, y1 = x0 + int(box["width"]), y0 + int(box["height"])
    height = len(pixels) // width
    return [pixels[y * width + x] for y in range(max(y0, 0), min(y1, height)) for x in range(max(x0, 0), min(x1, width))]


def keep(name: str, data: bytes) -> None:
    folder = os.environ.get("KENNING_UI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_bytes(data)


def seed(ws: Workspace) -> None:
    def kenning(*args: str) -> dict[str, Any]:
        result = ws.run("--json", *args)
        assert result.returncode == 0, f"kenning {' '.join(args)}: {result.stderr}"
        return json.loads(result.stdout)

    for title, content, namespace, tag in (
        ("Connection pool size", "The orders service keeps 20 connections per pod in its PostgreSQL pool, behind pgbouncer.", "config", "database"),
        ("Pool exhaustion during the sale", "Checkout ran out of pooled connections under load; retries made it worse.", "learnings", "incident"),
        ("Prefer small commits", "Commits are small, with imperative messages.", "preferences", "git"),
        ("Session cache in Redis", "Sessions live in Redis with a 30 minute expiry.", "decisions", "cache"),
    ):
        kenning("capture", content, "--title", title, "--namespace", namespace, "--tag", tag)
    plans = (
        ("Use PostgreSQL advisory locks for the job queue", "database", "0.9", "success"),
        ("Use PostgreSQL partial indexes for active orders", "database", "0.8", "success"),
        ("Use PostgreSQL listen notify for cache invalidation", "database", "0.9", "failure"),
        ("Use a read replica for the reporting queries", "database", "0.7", "partial"),
        ("Use PostgreSQL row level security for tenants", "database", "0.6", "success"),
        ("Use JWT access tokens with a short expiry", "auth", "0.95", "failure"),
        ("Use JWT refresh tokens stored on the server", "auth", "0.9", "failure"),
        ("Use JWT audience checks in every service", "auth", "0.85", "success"),
        ("Use the OAuth device flow for the CLI", "auth", "0.3", "success"),
        ("Use a CDN for the static assets", "frontend", "0.5", "partial"),
        ("Use server rendering for the order pages", "frontend", "0.75", "success"),
        ("Use feature flags for the checkout redesign", "frontend", "0.65", "failure"),
    )
    for statement, module, confidence, status in plans:
        decision = kenning("decisions", "capture", statement, "--module", module, "--confidence", confidence, "-a", "leave it as it is")
        kenning("decisions", "signal", decision["decision_id"], "ci_passed", "positive")
        kenning("decisions", "outcome", decision["decision_id"], status, "--lesson", f"{status}: {statement.lower()}")
    kenning("decisions", "capture", "Use Redis for the rate limiting counters", "--module", "infra", "--confidence", "0.7", "-a", "in memory")


def notice_after_submit(browser: WebDriver, starting: str) -> None:
    """Waits for the page a form's submission leads to and its notice. Reading the notice as soon
    as the submit button was clicked could find the element of the page being left, which the
    navigation then removed ("stale element reference")."""
    browser.wait(f"const notice = document.querySelector('p.notice'); return notice !== null && notice.textContent.trim().startsWith({json.dumps(starting)})")


def test_browser_searches_forgets_restores_and_draws_calibration(ws: Workspace, tmp_path: Path) -> None:
    seed(ws)
    with web_view(ws) as base, chromedriver(tmp_path) as browser:
        # Search: type into the search field and submit the form, as a person would.
        browser.get(base + "memories")
        browser.type_css("input[name=q]", "pool connections")
        browser.click_css("form.search button[type=submit]")
        browser.wait("return location.search.includes('q=pool')")
        assert browser.text_css("ol.results article h3 a") in ("Connection pool size", "Pool exhaustion during the sale"), browser.source()[:2000]
        browser.wait("return document.documentElement.dataset.live === 'on'")
        keep("memories.png", browser.screenshot())

        # Live update: a capture by another process shows up without a reload.
        captured = ws.run("capture", "The payments service pool holds 10 connections.", "--title", "Payments pool", "--namespace", "config")
        assert captured.returncode == 0, captured.stderr
        browser.wait("return document.getElementById('live').textContent.includes('Updated')")
        browser.wait("return document.getElementById('main').textContent.includes('Payments pool')")

        # Open the memory, forget it through the confirmation form, then restore it.
        browser.click_css("ol.results article h3 a")
        title = browser.text_css("main h1")
        urn = browser.script("return document.querySelector('dl.fields dd code').textContent")
        assert urn.startswith("kenning://project:widget-service/"), urn
        browser.click_css("a.button[href^='/memory/forget']")
        browser.type_css("input[name=reason]", "replaced by the new sizing")
        browser.click_css("form.confirm button[type=submit]")
        notice_after_submit(browser, "Forgotten")
        assert "forgotten" in browser.text_css("main h1 .badge"), title
        shown = json.loads(ws.run("--json", "get", urn).stdout)
        assert shown["status"] == "forgotten"
        assert "replaced by the new sizing" in browser.source()
        browser.click_css("a.button[href^='/memory/restore']")
        browser.type_css("input[name=reason]", "still how it is")
        browser.click_css("form.confirm button[type=submit]")
        notice_after_submit(browser, "Restored")
        assert json.loads(ws.run("--json", "get", urn).stdout)["status"] == "active"

        # Keyboard: "/" puts the cursor in the search field.
        browser.get(base + "memories?q=pool")
        browser.find("ol.results")
        browser.script("document.activeElement.blur(); document.body.dispatchEvent(new KeyboardEvent('keydown', {key: '/', bubbles: true}))")
        assert browser.script("return document.activeElement.name") == "q"

        # Regression: a live update whose fetch was under way when the reader went into the
        # search field swapped the page's main part, field included, from under the cursor.
        browser.wait("return document.documentElement.dataset.live === 'on'")
        browser.script(
            "document.activeElement.blur(); window.heldPage = null; var realFetch = window.fetch;"
            " window.fetch = function () { var call = arguments;"
            " return new Promise(function (resolve) { window.heldPage = function () { resolve(realFetch.apply(window, call)); }; }); };"
        )
        captured = ws.run("capture", "The search pool holds 4 connections.", "--title", "Search pool", "--namespace", "config")
        assert captured.returncode == 0, captured.stderr
        browser.wait("return window.heldPage !== null")
        browser.script("document.querySelector(\"[data-shortcut='/']\").focus(); window.heldPage();")
        browser.wait("return document.getElementById('live').textContent.includes('Reload the page')")
        assert browser.script("return document.activeElement.name") == "q"
        assert "Search pool" not in browser.text_css("main")

        # Calibration: the page and its diagram.
        browser.get(base + "calibration")
        browser.find("figure.diagram img")
        browser.wait("var i = document.querySelector('figure.diagram img'); return i.complete && i.naturalWidth > 0")
        browser.script("document.querySelector('figure.diagram').scrollIntoView({block: 'start'})")
        time.sleep(0.3)
        box = browser.script("var r = document.querySelector('figure.diagram img').getBoundingClientRect();"
                             " return {x: r.left, y: r.top, width: r.width, height: r.height}")
        shot = browser.screenshot()
        keep("calibration.png", shot)
        page_text = browser.text_css("main")
        assert "overall" in page_text and "database" in page_text and "auth" in page_text, page_text
        assert "Skills" in page_text and "Warnings" in page_text

    width, height, pixels = decode_png(shot)
    assert width == WINDOW[0] and height > 600, (width, height)
    background, count = Counter(pixels).most_common(1)[0]
    assert count < 0.9 * len(pixels), "the page is nearly all one colour"
    assert len(set(pixels)) > 200, f"only {len(set(pixels))} colours"
    diagram = region(width, pixels, box)
    assert len(diagram) > 100_000, f"the diagram shows too small ({box})"
    plotted = sum(1 for pixel in diagram if pixel != (255, 255, 255))
    assert plotted > 0.05 * len(diagram), f"the diagram is blank: {plotted} of {len(diagram)} pixels drawn"
    colours = Counter(diagram)
    strong = [colour for colour, n in colours.items() if n >= 20 and max(colour) - min(colour) > 60]
    assert len(strong) >= 3, f"the diagram has no coloured series: {colours.most_common(12)}"
    shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)


def test_serve_http_with_ui_answers_mcp_and_the_web_view_on_one_port(ws: Workspace) -> None:
    from harness import http_server

    kenning_capture = ws.run("capture", "The orders service keeps 20 pooled connections.", "--title", "Connection pool size")
    assert kenning_capture.returncode == 0, kenning_capture.stderr
    with http_server(ws, ("--ui",)) as server:
        base = server.url.removesuffix("mcp")
        with urllib.request.urlopen(base + "memories?q=pooled+connections", timeout=30) as response:
            page = response.read().decode()
        assert response.status == 200 and "Connection pool size" in page
        with urllib.request.urlopen(base + "healthz", timeout=30) as response:
            assert json.load(response)["status"] == "ok"
        # The MCP endpoint is still there, behind its own checks.
        request = urllib.request.Request(
            server.url, method="POST",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200 and b"kenning" in response.read()
        # The web view's own rules apply on the shared port.
        foreign = urllib.request.Request(base + "memories", headers={"Origin": "http://evil.example"})
        try:
            urllib.request.urlopen(foreign, timeout=30)
            raise AssertionError("a foreign Origin was served")
        except urllib.error.HTTPError as error:
            assert error.code == 403
    refused = ws.run("serve", "--ui")
    assert refused.returncode != 0 and "--http" in refused.stderr
