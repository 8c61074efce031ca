"""The MCP servers the user enabled, run and spoken to with the official ``mcp`` SDK on one background thread.

Each enabled server gets a task on the hub's own asyncio loop ("fara-mcp" thread): it starts the server (a
process over stdio, or a session with a streamable-HTTP address on this computer), lists its tools and keeps the
session until the server is turned off. A server's stderr goes to the log, line by line, never to the chat.

A call is bounded: a time limit (a server that never answers is stopped waiting for), and a size limit on what
goes back to the model (a 50 MB result is cut, and says so). A server that exits mid-call gives an error result,
not a hang. Results are untrusted text (``tool_results``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import itertools
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from fara_desktop.text.untrusted import one_line
from fara_desktop.tools.bounded_lines import OVERSIZE_CODE, bound_the_sdks_stdio_reader
from fara_desktop.tools.mcp_config import McpServerConfig
from fara_desktop.tools.server_output import LogBudget, StderrToLog, bounded_http_client, server_log_callback
from fara_desktop.tools.tool_results import ToolResult, error_result, result_of
from fara_desktop.vocabulary.tools import ToolSpec

T = TypeVar("T")
log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0  # a server's start, handshake and tool list (uvx/npx may fetch a package the first time)
CALL_TIMEOUT_S = 60.0
CONNECTION_CLOSED = -32000  # the SDK's code for a session whose server is gone
MAX_TOOLS_PER_SERVER = 128

State = Literal["starting", "ready", "failed", "stopped"]


@dataclass(frozen=True)
class McpTool:
    """A tool of a server: ``name`` is the server's own; ``spec.name`` is the one the model sees (unique among the
    enabled servers' tools: the server's name is put in front when two servers have a tool of the same name).
    ``identity`` is the server's whole definition (``McpServerConfig.identity``) and ``run`` the start of the server
    that listed it: a call runs only on that very run (a restart in between makes it an error, not another
    program's tool)."""

    server: str
    name: str
    spec: ToolSpec
    identity: str = ""
    run: int = 0


@dataclass(frozen=True)
class ServerState:
    """Where a server is: starting, ready (with its tools), failed (``message`` says why) or stopped."""

    state: State
    message: str = ""
    tools: tuple[McpTool, ...] = field(default=())


class McpHub:
    """Runs the enabled MCP servers and their calls; ``on_change`` is called (on the hub's thread) whenever a
    server's state changes. Thread-safe: ``configure``, ``restart``, ``call`` and ``close`` may be called from any
    thread but the hub's own (the app calls the first two and the last from one thread, which starts and ends the
    hub's loop).

    One owner per piece of state: the servers' definitions, runs, stop events, sessions and tasks belong to the
    hub's loop thread — a change asked from elsewhere is posted to it and waited for — so a call failing on the
    loop and a restart asked from the window cannot interleave (a failing call once read the *new* run's stop
    event and stopped the server just restarted). Only the states shown to the app are shared, under a lock."""

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._on_change = on_change or (lambda: None)
        self._lock = threading.Lock()
        self._states: dict[str, ServerState] = {}
        self._sessions: dict[int, Any] = {}  # by run (each start of a server is a new run)
        self._runs: dict[str, int] = {}
        self._run_stops: dict[int, asyncio.Event] = {}
        self._run_numbers = itertools.count(1)
        self._stops: dict[str, asyncio.Event] = {}
        # every run not yet ended, by run (a restarted server's earlier run may still be ending): what close waits on
        self._tasks: dict[int, concurrent.futures.Future[None]] = {}
        self._serving: set[asyncio.Task[None]] = set()
        self._configs: dict[str, McpServerConfig] = {}
        # the servers as the user listed them: an earlier one's tools keep their names when a later one's clash
        self._listed: dict[str, McpServerConfig] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ what the app asks

    def states(self) -> dict[str, ServerState]:
        with self._lock:
            return dict(self._states)

    def tools(self) -> list[McpTool]:
        """The ready servers' tools, with names unique for the model: where two clash, the server the user listed
        earlier keeps the name (a stranger's server pasted later, listing a tool named as the user's own tool is
        offered, gets the visible suffix)."""
        with self._lock:
            order = {name: n for n, name in enumerate(self._listed)}
            ready = [n for n, s in self._states.items() if s.state == "ready"]
            ready.sort(key=lambda n: order.get(n, len(order)))
            listed = [t for n in ready for t in self._states[n].tools]
        counts: dict[str, int] = {}
        for tool in listed:
            counts[tool.spec.name] = counts.get(tool.spec.name, 0) + 1
        unique = []
        taken: set[str] = set()
        for tool in listed:
            name = tool.spec.name if counts[tool.spec.name] == 1 else _model_name(f"{tool.server}_{tool.name}")
            base, number = name, 2
            while name in taken:  # the name of a tool of a server listed earlier: a visible suffix
                name, number = _model_name(f"{base[:60]}_{number}"), number + 1
            taken.add(name)
            if name != tool.spec.name:
                tool = dataclasses.replace(tool, spec=ToolSpec(name, tool.spec.description, tool.spec.parameters))
            unique.append(tool)
        return unique

    def configure(self, servers: Sequence[McpServerConfig], enabled: Iterable[str]) -> None:
        """Run exactly the enabled ``servers`` (``enabled``: their identities, so a definition pasted under the name
        of one switched on is not): new ones start, turned-off, changed or removed ones stop."""
        switched_on = set(enabled)
        wanted = {s.name: s for s in servers if s.identity in switched_on}
        with self._lock:
            self._listed = dict(wanted)
        if wanted or self._loop is not None:
            self._on_loop(lambda: self._configure(wanted), None)
        with self._lock:
            for name in [n for n in self._states if n not in wanted]:
                del self._states[name]
        self._on_change()

    def runs(self, server: str) -> str:
        """What a server runs, as the user listed it (its command line or address): the approval bar names a
        server by it as well as by its name, which another server's can resemble."""
        with self._lock:
            config = self._listed.get(server)
        return config.summary if config is not None else ""

    def restart(self, name: str) -> None:
        """Start a failed or stopped server again (the user's *Restart*)."""
        if self._loop is not None and self._on_loop(lambda: self._restart(name), False):
            self._on_change()

    def start_call(
        self, tool: McpTool, arguments: dict[str, Any], timeout: float = CALL_TIMEOUT_S
    ) -> concurrent.futures.Future[ToolResult]:
        """Run a call; the future's result is always a ``ToolResult`` (errors included). Cancelling it stops
        waiting for the server."""
        if self._loop is None:
            future: concurrent.futures.Future[ToolResult] = concurrent.futures.Future()
            future.set_result(error_result(f"The server {tool.server} is not running."))
            return future
        return asyncio.run_coroutine_threadsafe(self._call(tool, arguments, timeout), self._loop)

    def call(self, tool: McpTool, arguments: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> ToolResult:
        """``start_call`` and wait (not on the GUI thread)."""
        return self.start_call(tool, arguments, timeout).result(timeout + 10)

    def close(self, timeout: float = 15.0) -> bool:
        """Stop every server (each process is ended) and the hub's thread; False when the thread still runs."""
        if self._loop is None:
            return True
        none: list[concurrent.futures.Future[None]] = []
        tasks = self._on_loop(self._stop_all, none)
        concurrent.futures.wait(tasks, timeout=timeout)
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            ended = not self._thread.is_alive()
            if ended:
                self._loop.close()
            self._loop, self._thread = None, None
            return ended
        return True

    # ------------------------------------------------------------------ the hub's thread

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="fara-mcp", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    def _on_loop(self, change: Callable[[], T], otherwise: T, timeout: float = 10.0) -> T:
        """Run ``change`` on the hub's thread (the owner of the servers' state) and wait for its answer;
        ``otherwise`` when the thread does not answer in time (the change still happens there, later)."""
        loop = self._ensure_loop()

        async def run() -> T:
            return change()

        try:
            return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)
        except concurrent.futures.TimeoutError:
            log.warning("The tool servers' thread did not answer within %s s", timeout)
            return otherwise

    # Below: on the hub's thread only.

    def _configure(self, wanted: dict[str, McpServerConfig]) -> None:
        for name in [n for n in self._configs if n not in wanted or wanted[n] != self._configs[n]]:
            self._stop(name)
        for name, config in wanted.items():
            if name not in self._configs:
                self._start(config)

    def _restart(self, name: str) -> bool:
        config = self._configs.get(name)
        if config is None:
            return False
        self._stop(name)
        self._start(config)
        return True

    def _stop_all(self) -> list[concurrent.futures.Future[None]]:
        for name in list(self._configs):
            self._stop(name)
        return list(self._tasks.values())

    def _set(self, name: str, state: ServerState, run: int | None = None) -> None:
        """``run``: the run of the server that says so (an earlier run that ends late changes nothing)."""
        with self._lock:
            if name in self._configs and (run is None or self._runs.get(name) == run):
                self._states[name] = state
        self._on_change()

    def _start(self, config: McpServerConfig) -> None:
        loop = asyncio.get_running_loop()
        self._configs[config.name] = config
        with self._lock:
            self._states[config.name] = ServerState("starting")
        stop = asyncio.Event()
        self._stops[config.name] = stop
        run = self._runs[config.name] = next(self._run_numbers)
        self._run_stops[run] = stop
        task = loop.create_task(self._serve(config, stop, run))
        self._serving.add(task)  # the loop keeps only a weak reference to its tasks
        done: concurrent.futures.Future[None] = concurrent.futures.Future()  # what ``close`` waits on, elsewhere

        def ended(finished: asyncio.Task[None]) -> None:
            self._serving.discard(finished)
            self._tasks.pop(run, None)
            done.set_result(None)

        task.add_done_callback(ended)
        self._tasks[run] = done

    def _stop(self, name: str) -> None:
        self._configs.pop(name, None)
        stop = self._stops.pop(name, None)
        if stop is not None:
            stop.set()

    async def _serve(self, config: McpServerConfig, stop: asyncio.Event, run: int) -> None:
        from mcp import ClientSession

        stderr = StderrToLog(config.name) if config.command else None
        budget = stderr.budget if stderr is not None else LogBudget(config.name)
        logged = server_log_callback(budget)
        try:
            async with (
                self._transport(config, stderr) as streams,
                ClientSession(streams[0], streams[1], logging_callback=logged) as session,
            ):
                await asyncio.wait_for(session.initialize(), START_TIMEOUT_S)
                listed = await asyncio.wait_for(session.list_tools(), START_TIMEOUT_S)
                tools = tuple(_tool(config, run, t) for t in listed.tools[:MAX_TOOLS_PER_SERVER])
                self._sessions[run] = session
                self._set(config.name, ServerState("ready", tools=tools), run)
                await stop.wait()
        except asyncio.TimeoutError:
            self._set(config.name, ServerState("failed", f"It did not answer within {START_TIMEOUT_S:.0f} s."), run)
        except Exception as exc:  # any failure of a stranger's program is said, not raised on the hub's thread
            log.info("MCP server %s stopped: %s", one_line(config.name, 64), _describe(exc), exc_info=True)
            self._set(config.name, ServerState("failed", _describe(exc)), run)
        else:
            if self.states().get(config.name, ServerState("stopped")).state != "failed":
                self._set(config.name, ServerState("stopped"), run)
        finally:
            self._sessions.pop(run, None)
            self._run_stops.pop(run, None)
            if stderr is not None:
                stderr.close()

    @staticmethod
    def _transport(config: McpServerConfig, stderr: StderrToLog | None) -> Any:
        if config.url:
            return _http_transport(config.url)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        bound_the_sdks_stdio_reader()
        parameters = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env))
        assert stderr is not None
        return stdio_client(parameters, errlog=stderr.file)

    async def _call(self, tool: McpTool, arguments: dict[str, Any], timeout: float) -> ToolResult:
        run = self._runs.get(tool.server)
        if tool.run and tool.run != run:
            return error_result(
                f"The server {tool.server} was started again after the call was shown to you; "
                f"{tool.name} did not run. Ask again."
            )
        session = self._sessions.get(run) if run is not None else None
        if session is None or self.states().get(tool.server, ServerState("stopped")).state != "ready":
            return error_result(f"The server {tool.server} is not running.")
        try:
            result = await asyncio.wait_for(session.call_tool(tool.name, arguments), timeout)
        except asyncio.TimeoutError:
            return error_result(f"The tool {tool.name} did not answer within {timeout:.0f} s and was stopped.")
        except Exception as exc:
            code = getattr(exc, "code", None)
            if isinstance(code, int) and code != CONNECTION_CLOSED:  # the server answered with an error
                if code == OVERSIZE_CODE or "this app reads" in str(exc):
                    return error_result(f"The tool {tool.name}'s result was too large: {_describe(exc)}")
                return error_result(f"The server {tool.server} refused {tool.name}: {_describe(exc)}")
            # The session is broken (the server exited or closed its end): the server is said to have failed.
            message = f"The server {tool.server} failed while running {tool.name}: {_describe(exc)}"
            self._set(tool.server, ServerState("failed", message), run)
            stop = self._run_stops.get(run) if run is not None else None  # this run's: never a restarted one's
            if stop is not None:
                stop.set()
            return error_result(message)
        return result_of(result)


@contextlib.asynccontextmanager
async def _http_transport(url: str) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP transport through an HTTP client whose answers are bounded (closed with it)."""
    from mcp.client.streamable_http import streamable_http_client

    async with bounded_http_client() as client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def _model_name(text: str) -> str:
    """A name a model can write back exactly: ASCII letters, digits, '_', '.', '-' (a lookalike letter of another
    script becomes '_', so two names that look alike are never two tools of one name)."""
    cleaned = "".join(c if (c.isascii() and c.isalnum()) or c in "_.-" else "_" for c in text)
    return cleaned[:64] or "tool"


def _tool(config: McpServerConfig, run: int, tool: Any) -> McpTool:
    import json

    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {"type": "object"}
    description = one_line(getattr(tool, "description", "") or "", 2000)
    name = str(tool.name)
    spec = ToolSpec(_model_name(name), description, json.dumps(schema)[: 64 * 1024])
    return McpTool(config.name, name, spec, config.identity, run)


def _describe(exc: BaseException) -> str:
    grouped = getattr(exc, "exceptions", None)  # an ExceptionGroup from anyio's task groups
    if isinstance(grouped, (list, tuple)) and grouped:
        return "; ".join(_describe(e) for e in grouped[:3])
    if isinstance(exc, FileNotFoundError):
        return f"Its command was not found ({one_line(exc.filename or exc, 200)})."
    return one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 300)
