"""The transfer of one GGUF file into the hub cache: resumable, pausable, verified before it gets its name.

The transfer is ours, for a measured reason: huggingface_hub 2.x downloads into a process-unique temporary file
that it deletes when the transfer stops, so a cancelled or killed download starts again from zero, and it moves
the file into the cache before any checksum is compared. Here the partial file is ``blobs/<sha256>.incomplete``
(huggingface_hub's own name for it) and survives cancel and kill; the next attempt continues with an HTTP Range
request; the sha256 is checked before the file gets its final name; only then does ``snapshots/<commit>/<file>``
point at it, which is where model discovery (and every other hub-aware tool) finds it.

Over 400 lines because ``Downloader`` is one state machine (resume, pause, cancel, verify, publish) around one
connection and one partial file; split across modules, those states would have to share both through more state.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import re
import shutil
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fara_desktop.models.hub import (
    COMMIT_RE,
    REPO_ID_RE,
    AccessDeniedError,
    DownloadError,
    DownloadInterruptedError,
    RemoteFile,
    RemoteNotFoundError,
    auth_headers,
    host_of,
    hub_cache_dir,
    listing_problem,
    network_reason,
    origin,
    user_agent,
)
from fara_desktop.text.format import format_size

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
DISK_MARGIN_BYTES = 64 << 20  # keep some room free beyond the file itself
PROGRESS_INTERVAL_S = 0.1


class ChecksumMismatchError(DownloadError):
    """The downloaded bytes do not match the hub's sha256; the partial file was deleted."""


class NotEnoughDiskSpaceError(DownloadError):
    """The disk has too little room for the file; nothing was downloaded."""


class DownloadCancelled(DownloadError):
    """Stopped on request; ``kept_partial`` says whether a later attempt can resume."""

    def __init__(self, message: str, kept_partial: bool) -> None:
        super().__init__(message)
        self.kept_partial = kept_partial


@dataclass(frozen=True)
class Progress:
    """Bytes so far, the file size, the recent speed and the time left (None while unknown)."""

    done: int
    total: int
    bytes_per_s: float
    eta_s: float | None


class _Speed:
    def __init__(self, window_s: float = 3.0) -> None:
        self.samples: deque[tuple[float, int]] = deque()
        self.window_s = window_s

    def add(self, now: float, done: int) -> float:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window_s:
            self.samples.popleft()
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0


class Downloader:
    """Downloads one ``RemoteFile`` into the hub cache. ``run`` blocks (call it off the GUI thread); ``pause`` and
    ``cancel`` may be called from any thread."""

    def __init__(
        self,
        remote: RemoteFile,
        cache_dir: Path | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        timeout_s: float = 30.0,
        publish_as: Path | None = None,
    ) -> None:
        from huggingface_hub.file_download import repo_folder_name

        self.remote = remote
        cache = cache_dir or hub_cache_dir()
        folder = repo_folder_name(repo_id=remote.repo_id, repo_type="model")
        self.repo_dir = cache / folder
        # huggingface_hub's own lock for this blob: a download here and one by another hub tool never overlap.
        self.lock_file = cache / ".locks" / folder / f"{remote.sha256}.lock"
        self.blob = self.repo_dir / "blobs" / remote.sha256
        self.partial = self.blob.with_name(remote.sha256 + ".incomplete")
        problem = listing_problem(remote.filename, remote.sha256, remote.size)
        if problem or not COMMIT_RE.fullmatch(remote.commit) or not REPO_ID_RE.fullmatch(remote.repo_id):
            name = f"{remote.repo_id}/{remote.filename[:80]!r}"
            raise DownloadError(f"refusing to download {name}: {problem or 'the repository or commit id is invalid'}")
        self.target = self.repo_dir / "snapshots" / remote.commit / remote.filename
        if not self.target.resolve().is_relative_to(self.repo_dir.resolve()):
            raise DownloadError(f"refusing to download {remote.filename[:80]!r}: it would land outside the cache")
        if publish_as is not None:  # beside a model installed elsewhere, named after it (two sizes' projectors
            self.target = publish_as  # share a name on the hub and would otherwise land on one file)
        self.on_progress = on_progress
        self.timeout_s = timeout_s
        self._stop = threading.Event()
        self._keep_partial = True
        self._response: http.client.HTTPResponse | None = None
        self._connection: http.client.HTTPConnection | None = None

    def pause(self) -> None:
        """Stop now and keep the partial file: after ``resume``, the next ``run`` continues from it. A pause that
        comes before ``run`` begins holds too (a download's next file, paused as it was about to start)."""
        self._keep_partial = True
        self._interrupt()

    def resume(self) -> None:
        """A paused download may run again."""
        self._stop.clear()

    def cancel(self) -> None:
        """Stop now and delete the partial file."""
        self._keep_partial = False
        self._interrupt()

    def _interrupt(self) -> None:
        self._stop.set()
        response = self._response
        # Shutting the socket down wakes a read that waits on a stalled server (closing it would not, on Linux):
        # the body's socket while the file streams, the connection's while we still wait for the headers.
        sockets = [
            getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None),
            getattr(self._connection, "sock", None),
        ]
        for sock in sockets:
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def partial_bytes(self) -> int:
        try:
            return self.partial.stat().st_size
        except FileNotFoundError:
            return 0

    def run(self) -> Path:
        """Download (or resume), verify, publish; returns the model's path in the snapshot folder."""
        if self.blob.is_file() and self.blob.stat().st_size == self.remote.size:
            if _file_sha256(self.blob) == self.remote.sha256:  # a blob from another tool, or ours: check, then trust
                return self._publish()
            log.warning("cached blob of %s does not match its sha256; downloading it again", self.remote.filename)
            self.blob.unlink()
        self.blob.parent.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock, Timeout

        try:
            self.lock_file.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.lock_file), timeout=0):
                self._transfer()
        except Timeout as exc:
            raise DownloadError(f"{self.remote.filename} is already being downloaded by another window") from exc
        return self._publish()

    def _check_disk_space(self, needed: int) -> None:
        free = free_bytes(self.blob.parent)
        if free < needed + DISK_MARGIN_BYTES:
            raise NotEnoughDiskSpaceError(
                f"{self.remote.filename} needs {format_size(needed)} more on {self.blob.parent} "
                f"but only {format_size(free)} is free (keeping {format_size(DISK_MARGIN_BYTES)} spare)"
            )

    def _hash_partial(self) -> tuple[hashlib._Hash, int]:
        digest = hashlib.sha256()
        done = 0
        if self.partial.exists():
            if self.partial.stat().st_size > self.remote.size:
                self.partial.unlink()  # longer than the file: not ours to resume
            else:
                with open(self.partial, "rb") as handle:
                    while block := handle.read(CHUNK_BYTES):
                        digest.update(block)
                        done += len(block)
        return digest, done

    def _request(self, offset: int) -> http.client.HTTPResponse:
        headers = {"User-Agent": user_agent(), "Accept-Encoding": "identity"}  # offsets must be those of the file
        headers.update(auth_headers(self.remote.url))
        if offset:
            headers["Range"] = f"bytes={offset}-"
        request = urllib.request.Request(self.remote.url, headers=headers)
        # build_opener() honours HTTP(S)_PROXY / NO_PROXY from the environment; our handlers replace its defaults.
        opener = urllib.request.build_opener(
            _SameOriginCredentials(), _TrackedHTTPHandler(self._track), _TrackedHTTPSHandler(self._track)
        )
        response: http.client.HTTPResponse = opener.open(request, timeout=self.timeout_s)
        if self._stop.is_set():
            response.close()
            raise self._stopped(None, offset)
        return response

    def _track(self, connection: http.client.HTTPConnection) -> None:
        self._connection = connection
        if self._stop.is_set():  # paused before the connection existed
            raise OSError("stopped")

    def _transfer(self) -> None:
        digest, done = self._hash_partial()
        total = self.remote.size
        self._check_disk_space(total - done)
        if done < total:
            try:
                try:
                    response = self._request(done)
                except urllib.error.HTTPError as exc:
                    if exc.code == 416 and done:  # the server has nothing past our end: start over
                        self.partial.unlink(missing_ok=True)
                        digest, done = hashlib.sha256(), 0
                        response = self._request(0)
                    else:
                        raise self._http_error(exc) from exc
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                if self._stop.is_set():  # pause or cancel shut the connection while we waited for the server
                    raise self._stopped(None, done) from exc
                if isinstance(exc, urllib.error.HTTPError):
                    raise self._http_error(exc) from exc
                raise DownloadInterruptedError(network_reason(exc, host_of(self.remote.url))) from exc
            self._response = response
            with response:
                if done and (response.status != 206 or not self._range_matches(response, done)):
                    # The server ignored Range (the body is the whole file) or answered another range than asked.
                    if response.status == 206:
                        raise DownloadInterruptedError(
                            f"{host_of(self.remote.url)} answered with bytes other than those asked for; try again"
                        )
                    log.info("server ignored the Range request; downloading %s from the start", self.remote.filename)
                    digest, done = hashlib.sha256(), 0
                    self.partial.unlink(missing_ok=True)
                try:
                    digest, done = self._copy(response, digest, done)
                finally:
                    self._response = None
        if done != total:
            raise DownloadInterruptedError(
                f"the connection closed after {format_size(done)} of {format_size(total)}; "
                "the part already downloaded is kept and the next attempt continues from it"
            )
        if digest.hexdigest() != self.remote.sha256:
            self.partial.unlink(missing_ok=True)
            raise ChecksumMismatchError(
                f"{self.remote.filename} arrived damaged: its sha256 is {digest.hexdigest()[:16]}…, the hub "
                f"publishes {self.remote.sha256[:16]}…. The file was deleted; try again."
            )
        os.replace(self.partial, self.blob)

    def _range_matches(self, response: http.client.HTTPResponse, offset: int) -> bool:
        """A 206 must carry ``Content-Range: bytes <offset>-<size-1>/<size>``: anything else would splice foreign
        bytes into the file (the sha256 would catch it, but only after the whole download)."""
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", (response.headers.get("Content-Range") or "").strip())
        if match is None:
            return False
        start, end, total = match.groups()
        return int(start) == offset and int(end) == self.remote.size - 1 and total in ("*", str(self.remote.size))

    def _copy(self, response: http.client.HTTPResponse, digest: hashlib._Hash, done: int) -> tuple[hashlib._Hash, int]:
        total = self.remote.size
        speed = _Speed()
        last_report = 0.0
        with open(self.partial, "ab") as out:
            while True:
                if self._stop.is_set():
                    raise self._stopped(out, done)
                try:
                    # read1: whatever has arrived (up to a chunk), so progress and cancel stay responsive
                    block = response.read1(min(CHUNK_BYTES, total - done)) if done < total else b""
                except (OSError, ValueError, AttributeError, http.client.HTTPException) as exc:
                    if self._stop.is_set():  # the response was closed under us by pause/cancel
                        raise self._stopped(out, done) from exc
                    out.flush()
                    raise DownloadInterruptedError(
                        f"the connection broke after {format_size(done)} of {format_size(total)} ({_reason(exc)}); "
                        "the part already downloaded is kept and the next attempt continues from it"
                    ) from exc
                if self._stop.is_set():
                    raise self._stopped(out, done)
                if not block:
                    break
                out.write(block)
                digest.update(block)
                done += len(block)
                now = time.monotonic()
                rate = speed.add(now, done)
                if self.on_progress and (now - last_report >= PROGRESS_INTERVAL_S or done == total):
                    last_report = now
                    eta = (total - done) / rate if rate > 0 else None
                    self.on_progress(Progress(done, total, rate, eta))
            out.flush()
            os.fsync(out.fileno())
        return digest, done

    def _stopped(self, out: BinaryIO | None, done: int) -> DownloadCancelled:
        if out is not None:
            out.close()
        if not self._keep_partial:
            self.partial.unlink(missing_ok=True)
        verb = "paused" if self._keep_partial else "cancelled"
        return DownloadCancelled(
            f"{verb} after {format_size(done)} of {format_size(self.remote.size)}", self._keep_partial
        )

    def _http_error(self, exc: urllib.error.HTTPError) -> DownloadError:
        name = f"{self.remote.repo_id}/{self.remote.filename}"
        if exc.code == 404:
            return RemoteNotFoundError(f"{name} is not on the server (HTTP 404)")
        if exc.code in (401, 403):
            return AccessDeniedError(f"access to {name} was refused (HTTP {exc.code}): a gated model needs HF_TOKEN")
        return DownloadInterruptedError(f"the server answered HTTP {exc.code} for {name}; try again later")

    def _publish(self) -> Path:
        """Point ``snapshots/<commit>/<file>`` at the verified blob (a relative symlink, as huggingface_hub does;
        where symlinks are not allowed, the blob itself moves there) and record the commit under ``refs/main``."""
        self.target.parent.mkdir(parents=True, exist_ok=True)
        if not self.target.exists():
            relative = os.path.relpath(self.blob, self.target.parent)
            try:
                self.target.symlink_to(relative)
            except OSError:
                os.replace(self.blob, self.target)
        refs = self.repo_dir / "refs" / "main"
        if not refs.exists():
            refs.parent.mkdir(parents=True, exist_ok=True)
            refs.write_text(self.remote.commit)
        return self.target


class _SameOriginCredentials(urllib.request.HTTPRedirectHandler):
    """Follows redirects like urllib does, but credentials stay with their origin: a redirect to another host,
    port or scheme (https → http included) drops the Authorization header. urllib's own handler copies it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(newurl) != origin(req.full_url):
            new.remove_header("Authorization")
        return new


def _tracking(
    connection_class: type[http.client.HTTPConnection], track: Callable[[http.client.HTTPConnection], None]
) -> Callable[..., http.client.HTTPConnection]:
    def connect(host: str, **kwargs: object) -> http.client.HTTPConnection:
        connection = connection_class(host, **kwargs)  # type: ignore[arg-type]
        track(connection)
        return connection

    return connect


class _TrackedHTTPHandler(urllib.request.HTTPHandler):
    """Hands each connection to the downloader, so pause can shut it while the server has not answered yet."""

    def __init__(self, track: Callable[[http.client.HTTPConnection], None]) -> None:
        super().__init__()
        self._track = track

    def http_open(self, req):  # type: ignore[no-untyped-def]
        return self.do_open(_tracking(http.client.HTTPConnection, self._track), req)


class _TrackedHTTPSHandler(urllib.request.HTTPSHandler):
    """The same for https (certificates checked by http.client's default context, as urllib does)."""

    def __init__(self, track: Callable[[http.client.HTTPConnection], None]) -> None:
        super().__init__()
        self._track = track
        self._ssl_context: ssl.SSLContext | None = None

    def https_open(self, req):  # type: ignore[no-untyped-def]
        return self.do_open(_tracking(http.client.HTTPSConnection, self._track), req, context=self._ssl_context)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or exc) or type(exc).__name__
