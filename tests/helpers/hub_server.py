"""A small stand-in for the Hugging Face hub on 127.0.0.1, for download tests (no test touches the internet).

It serves the hub's URL layout: ``/api/models/<repo>[/revision/<rev>]?blobs=true`` (file listing with LFS size and
sha256), ``/api/models?search=`` (search), and ``/<repo>/resolve/<rev>/<file>``, which redirects to ``/cdn/<sha>``
like the real hub redirects to its CDN. The CDN honours Range requests. Faults are switched on per test.
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFile:
    data: bytes
    published_sha256: str | None = None  # None: the true sha256; set it to simulate a corrupt transfer

    @property
    def sha256(self) -> str:
        return self.published_sha256 or hashlib.sha256(self.data).hexdigest()


@dataclass
class HubState:
    repos: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    drop_after_bytes: int | None = None  # close the connection after sending this many body bytes (once)
    throttle_bytes: int | None = None  # send in pieces of this size, waiting for ``gate`` between pieces
    gate: threading.Semaphore | None = None
    ignore_range: bool = False
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    headers: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (path, headers by lower-case name)
    cdn_base: str = ""  # where /resolve/ redirects to: "" for this server, or another server's URL
    listing_override: dict | None = None  # served as the file listing instead of the real one
    content_range_shift: int = 0  # a 206 that claims (and serves) a range starting this far from the asked one
    stall_headers: threading.Event | None = None  # hold every file response until this is set


class HubServer:
    """Runs the stand-in hub in a thread; ``url`` is the endpoint to pass as HF_ENDPOINT."""

    def __init__(self) -> None:
        self.state = HubState()
        handler = _make_handler(self.state)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def add(self, repo: str, name: str, data: bytes, published_sha256: str | None = None) -> HubFile:
        file = HubFile(data, published_sha256)
        self.state.repos.setdefault(repo, {})[name] = file
        return file

    def open_gate(self) -> None:
        """Let every throttled transfer run to the end, including those already waiting on the gate."""
        gate, self.state.gate = self.state.gate, None
        self.state.throttle_bytes = None
        if gate is not None:
            for _ in range(10_000):
                gate.release()

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.open_gate()
        self.httpd.shutdown()
        self.httpd.server_close()


def _make_handler(state: HubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def _json(self, payload: object, status: int = 200) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _not_found(self, what: str) -> None:
            body = json.dumps({"error": f"{what} not found"}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Error-Code", "RepoNotFound" if "Repository" in what else "EntryNotFound")
            self.send_header("X-Error-Message", f"{what} not found")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parsed = urllib.parse.urlparse(self.path)
            path = urllib.parse.unquote(parsed.path)
            query = urllib.parse.parse_qs(parsed.query)
            state.requests.append((path, self.headers.get("Range")))
            state.headers.append((path, {k.lower(): v for k, v in self.headers.items()}))
            parts = [p for p in path.split("/") if p]
            if parts[:2] == ["api", "models"] and len(parts) == 2:
                return self._search(query.get("search", [""])[0])
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                return self._listing(f"{parts[2]}/{parts[3]}")
            if len(parts) == 2 and parts[0] == "cdn":
                return self._cdn(parts[1], query.get("repo", [""])[0], query.get("file", [""])[0])
            if len(parts) >= 5 and parts[2] == "resolve":
                repo, name = f"{parts[0]}/{parts[1]}", "/".join(parts[4:])
                file = state.repos.get(repo, {}).get(name)
                if file is None:
                    return self._not_found(f"Entry {name}")
                self.send_response(302)
                location = f"{state.cdn_base}/cdn/{file.sha256}?" + urllib.parse.urlencode({"repo": repo, "file": name})
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            return self._not_found(f"Path {path}")

        def _search(self, text: str) -> None:
            found = [
                {"id": repo, "modelId": repo, "downloads": 10 * (i + 1), "likes": i, "tags": ["gguf"]}
                for i, repo in enumerate(sorted(state.repos))
                if text.lower() in repo.lower()
            ]
            self._json(found)

        def _listing(self, repo: str) -> None:
            if state.listing_override is not None:
                return self._json(state.listing_override)
            files = state.repos.get(repo)
            if files is None:
                return self._not_found(f"Repository {repo}")
            siblings = [
                {
                    "rfilename": name,
                    "size": len(file.data),
                    "blobId": hashlib.sha1(file.data).hexdigest(),
                    "lfs": {"sha256": file.sha256, "size": len(file.data), "pointerSize": 134},
                }
                for name, file in files.items()
            ]
            siblings.append({"rfilename": "README.md", "size": 12, "blobId": "0" * 40})
            return self._json({"id": repo, "modelId": repo, "sha": COMMIT, "siblings": siblings, "tags": ["gguf"]})

        def _cdn(self, sha: str, repo: str, name: str) -> None:
            if state.stall_headers is not None:
                state.stall_headers.wait(30)
            file = next((f for r in state.repos.values() for f in r.values() if f.sha256 == sha), None)
            if file is None:
                return self._not_found(f"Blob {sha}")
            data = file.data
            start = 0
            header = self.headers.get("Range")
            if header and not state.ignore_range:
                start = int(header.removeprefix("bytes=").split("-")[0]) + state.content_range_shift
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            limit = state.drop_after_bytes
            if limit is not None:
                state.drop_after_bytes = None
                self.wfile.write(body[:limit])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return None
            piece = state.throttle_bytes or len(body) or 1
            for offset in range(0, len(body), piece):
                gate = state.gate
                if gate is not None:
                    gate.acquire()
                try:
                    self.wfile.write(body[offset : offset + piece])
                    self.wfile.flush()
                except OSError:
                    return None
            return None

    return Handler
