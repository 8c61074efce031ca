"""A real browser tab next to the local API: a page from another loopback origin tries what any web page can.

Headless Chromium (Debian's, installed by .ci/run) loads an attacker's page served from 127.0.0.1 on another port;
its script sends a simple ``text/plain`` POST (no preflight needed), a preflighted JSON POST and a GET to the API.
Then the browser opens the API under a foreign name that resolves to 127.0.0.1 (what DNS rebinding achieves). The
page must learn nothing, and no request may reach the model."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fara_desktop.engine.types import ModelInfo
from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from tests.helpers.scripted_queue import ScriptedQueue

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)"),
]

INFO = ModelInfo(Path("/models/model.gguf"), "Model", "llama", 2048, 8192, 2, 2, "f16", False, "gguf template", 0.1, 1)

ATTACK = """<!doctype html><html><body><pre id="out">running</pre><script>
const api = "http://127.0.0.1:%(port)d/v1";
const body = JSON.stringify({messages: [{role: "user", content: "spend the user's model"}]});
async function attempt(name, url, options) {
  try {
    const reply = await fetch(url, options);
    return name + ": read " + reply.status + " " + (await reply.text()).slice(0, 80);
  } catch (error) {
    return name + ": blocked";
  }
}
(async () => {
  const results = [
    await attempt("simple", api + "/chat/completions", {method: "POST", headers: {"Content-Type": "text/plain"}, body}),
    await attempt("no-cors", api + "/chat/completions", {method: "POST", mode: "no-cors", body}),
    await attempt("json", api + "/chat/completions",
                  {method: "POST", headers: {"Content-Type": "application/json"}, body}),
    await attempt("models", api + "/models", {}),
  ];
  document.getElementById("out").textContent = "done\\n" + results.join("\\n");
})();
</script></body></html>"""


@pytest.fixture
def api() -> Iterator[tuple[ApiServer, ScriptedQueue]]:
    queue = ScriptedQueue()
    server = ApiServer(LocalApi(queue, lambda: INFO))
    server.start()
    yield server, queue
    server.stop()


@pytest.fixture
def attacker_page(api: tuple[ApiServer, ScriptedQueue]) -> Iterator[str]:
    page = (ATTACK % {"port": api[0].port}).encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *_args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def dump_dom(url: str, profile: Path, *extra: str) -> str:
    """The page's DOM after its scripts ran, as headless Chromium sees it."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--virtual-time-budget=10000", *extra, "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_page_from_another_origin_gets_nothing_and_never_reaches_the_model(api, attacker_page, tmp_path):
    _server, queue = api
    dom = dump_dom(attacker_page, tmp_path / "profile")
    assert "done" in dom, dom[-2000:]
    results = dict(line.split(": ", 1) for line in dom.split("done", 1)[1].split("</pre>")[0].strip().splitlines())
    # Whatever the browser shows the page (a 403 it may not read, or an opaque failure), it reads no answer …
    assert all(not outcome.startswith("read 200") for outcome in results.values()), results
    assert "Hi" not in dom
    # … and, what matters most, nothing ran: a text/plain POST used to reach the model without any preflight.
    assert queue.requests == []


def test_a_rebinding_name_for_127_0_0_1_gets_no_answer(api, tmp_path):
    server, queue = api
    dom = dump_dom(f"http://rebound.example:{server.port}/v1/models", tmp_path / "profile",
                   "--host-resolver-rules=MAP rebound.example 127.0.0.1")  # fmt: skip
    assert "127.0.0.1 or localhost" in dom and '"data"' not in dom, dom[-2000:]
    assert queue.requests == []
