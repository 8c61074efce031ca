"""The local API's server: ``LocalApi`` served by uvicorn on its own listening socket, on a background thread (the
window) or the calling one (``fara-desktop serve``), and stopped with every request under way."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from typing import Any

from fara_desktop.serving.admission import loopback_hosts
from fara_desktop.serving.http_protocol import HEADER_TIMEOUT_S, HeaderDeadlineProtocol
from fara_desktop.serving.local_api import LOCAL_HOSTS, LocalApi
from fara_desktop.serving.principals import split_keys
from fara_desktop.vocabulary.errors import FaraError

MAX_CONNECTIONS = 512  # beyond this uvicorn answers 503; half-sent headers are closed after HEADER_TIMEOUT_S
MAX_HEADER_BYTES = 64 * 1024


class ApiKeyRequired(FaraError):
    """The API was asked to listen beyond this computer without an API key."""


def raise_open_file_limit() -> None:
    """The soft limit of open files up to the hard one (1,024 is common): a burst of connections is answered
    with 503s, rather than accept() failing in a loop."""
    try:
        import resource
    except ImportError:  # not on Windows
        return
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _stopping_everything_on_signals(server_class: type[Any], api: LocalApi) -> type[Any]:
    """uvicorn's server, whose SIGTERM and Ctrl+C also end every request under way at once. Served on the main
    thread (``fara-desktop serve``) uvicorn takes those signals for itself and waits for every request to finish
    (SIGTERM waited 8 s for eight requests' pictures, 120 s under a flood): the handler set before never ran.

    A signal's handler runs between two bytecodes of whatever the main thread was doing, locks held included (the
    picture decoders' pool, inside ``submit``: ``serve`` hung one run in three). So it takes no lock: it only asks
    the event loop, on which the server runs, to end the requests once the interrupted code has gone on."""

    class StoppingServer(server_class):  # type: ignore[misc]
        loop: asyncio.AbstractEventLoop | None = None

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            self.loop = asyncio.get_running_loop()
            try:
                await super().serve(sockets=sockets)
            finally:
                self.loop = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            self.end_requests()

        def end_requests(self) -> None:
            """Every request under way ended on the event loop, soon (lock-free: a signal's handler may call it)."""
            loop = self.loop
            if loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: no request is under way
                    loop.call_soon_threadsafe(api.stop_everything)

    return StoppingServer


class ApiServer:
    """Runs ``LocalApi`` with uvicorn on a background thread (or the calling one, for ``fara-desktop serve``)."""

    def __init__(
        self, api: LocalApi, host: str = "127.0.0.1", port: int = 0, header_timeout_s: float = HEADER_TIMEOUT_S
    ) -> None:
        if host not in LOCAL_HOSTS and not api.principals.keys:
            raise ApiKeyRequired(f"Listening on {host} makes the model reachable from the network: set an API key.")
        import uvicorn

        self.api = api
        self.host = host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise FaraError(f"The local API cannot listen on {host}:{port}: {exc.strerror or exc}.") from exc
        self._socket.listen(64)
        self.port = int(self._socket.getsockname()[1])
        api.allowed_hosts = loopback_hosts(self.port) if host in LOCAL_HOSTS else None
        raise_open_file_limit()
        protocol = type("Protocol", (HeaderDeadlineProtocol,), {"header_timeout_s": header_timeout_s})
        config = uvicorn.Config(
            api.app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            http=protocol,
            limit_concurrency=MAX_CONNECTIONS,  # beyond this, 503 at once instead of file descriptors running out
            timeout_keep_alive=5,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        )
        self._server = _stopping_everything_on_signals(uvicorn.Server, api)(config)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def reachable_from_network(self) -> bool:
        return self.host not in LOCAL_HOSTS

    def start(self) -> str:
        """Serve on a background thread; connections are accepted from now on (the socket already listens)."""
        self._thread = threading.Thread(target=self.run, name="fara-local-api", daemon=True)
        self._thread.start()
        return self.address

    def set_keys(self, keys: str | None) -> None:
        """New keys for the running API (``LocalApi.set_keys``); listening beyond this computer, none is refused
        (``ApiKeyRequired``) and the keys stay as they were."""
        if self.host not in LOCAL_HOSTS and not split_keys(keys):
            raise ApiKeyRequired(
                f"Listening on {self.host} makes the model reachable from the network: set an API key."
            )
        self.api.set_keys(keys)

    def run(self) -> None:
        """Serve on the calling thread until ``stop``."""
        self._server.run(sockets=[self._socket])

    def request_stop(self) -> None:
        """Ask ``run`` to end (any thread, a signal handler too: it takes no lock; before ``run`` began as well):
        every request under way is ended by the event loop, and ``run`` returns once uvicorn has seen it. The
        socket stays for ``stop`` to close."""
        self._server.should_exit = True
        self._server.end_requests()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and end every request under way now (not from a signal's handler: use ``request_stop``)."""
        self.request_stop()
        self.api.stop_everything()
        if self._thread is not None:
            self._thread.join(timeout)
        self._socket.close()
