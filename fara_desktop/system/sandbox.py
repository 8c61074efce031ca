"""Read files from outside in a child process that has a budget, so a parser's worst case costs one file.

Every parser we use has had inputs that take minutes or gigabytes (a zip bomb inside a DOCX, a PDF whose pages
share one huge content stream, HTML that nests without end), and the next one is a bug nobody has found yet. Here
a *job* (a function of this package) runs in a child process, one at a time, within a ``Budget``:

- memory: the child's address space is capped (``RLIMIT_AS``, Linux) and its resident size is watched (every
  system), so a parser that wants more gets ``MemoryError`` or is stopped;
- processor time: the parent watches the child's CPU time (not the wall clock: a child that waits behind a reply
  being generated is not over budget) and a generous wall deadline catches a child that hangs without working;
- output: what the child sends back is counted, and one message may not exceed what is left.

The file is opened by the parent (once, without following a link, refusing what is not a regular file) and its
descriptor handed to the child, which reads at most the size the caller states. What the child sends back is
unpickled with an allow-list of classes: a child that a hostile file took over still cannot run code here. Nor can
it hang the app or inflate what it sends: a watchdog thread ends the child when the caller stops or a budget breaks,
even while a message is half sent (a read waited forever, and Stop did nothing), and what is counted against the
output budget is the text a message holds once unpickled (pickle's memo let 1 MB stand for 904 MB of passages).
The child is started on first use and reused for the next job; after a job that broke its budget it is replaced.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_until_ready
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

import psutil

from fara_desktop.system.process_end import release_child
from fara_desktop.vocabulary.errors import FaraError

log = logging.getLogger(__name__)

MB = 1024 * 1024
POLL_SECONDS = 0.05
MAX_OBJECTS = 2_000_000  # in one message from the child (a file's passages are thousands)


@dataclass(frozen=True)
class Budget:
    """What one job may use: processor seconds, memory (bytes) and bytes sent back."""

    cpu_seconds: float = 60.0
    memory_bytes: int = 1024 * MB
    output_bytes: int = 1024 * MB

    @property
    def wall_seconds(self) -> float:
        """A child that neither works nor answers for this long is hung (a busy machine slows a child, it does
        not stop it)."""
        return max(120.0, 10 * self.cpu_seconds)


class BudgetExceededError(FaraError):
    """A job needed more than its budget; ``resource`` is "memory", "cpu", "output" or "time"."""

    def __init__(self, message: str, resource: str) -> None:
        super().__init__(message)
        self.resource = resource


class SandboxFailedError(FaraError):
    """The job failed in a way it does not report itself (a bug of a parser, or the child stopped)."""


class SandboxStoppedError(FaraError):
    """The caller asked to stop while a job ran; the child was ended."""


def _describe(resource: str, budget: Budget) -> str:
    if resource == "memory":
        return f"needs more than {budget.memory_bytes // MB:,} MB of memory"
    if resource == "cpu":
        return f"takes more than {budget.cpu_seconds:g} s of processor time"
    if resource == "output":
        return f"gives more than {budget.output_bytes // MB:,} MB of text"
    return f"did not finish within {budget.wall_seconds:g} s"


# --- the child ------------------------------------------------------------------------------------------------


def _to_handle(fd: int) -> int:
    """What crosses to the child: the descriptor itself, or on Windows the OS handle behind the C runtime's fd."""
    if sys.platform == "win32":
        import msvcrt

        return int(msvcrt.get_osfhandle(fd))
    return fd


def _from_handle(handle: int) -> int:
    if sys.platform == "win32":
        import msvcrt

        return msvcrt.open_osfhandle(handle, os.O_RDONLY)
    return handle


def _set_memory_limit(limit: int) -> None:
    try:
        import resource
    except ImportError:  # Windows: the parent's watch of the resident size is the limit
        return
    with contextlib.suppress(ValueError, OSError, AttributeError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _send(conn: Connection, kind: str, value: Any) -> None:
    conn.send_bytes(pickle.dumps((kind, value), protocol=pickle.HIGHEST_PROTOCOL))


def _serve(conn: Connection, nice: int) -> None:
    """The child's loop: one job at a time until the parent closes the connection. The child leads a process group
    of its own: anything a library starts from it (a converter, an interpreter) ends with it (``_end_group``)."""
    if hasattr(os, "setpgid"):
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    if nice:
        with contextlib.suppress(AttributeError, OSError):
            os.nice(nice)
    while True:
        try:
            module_name, function_name, args, memory_bytes, has_fd = conn.recv()
            fd = _from_handle(recv_handle(conn)) if has_fd else None
        except (EOFError, OSError):
            return
        _set_memory_limit(memory_bytes)
        try:
            job = getattr(importlib.import_module(module_name), function_name)
            result = job(fd, *args, emit=lambda item: _send(conn, "item", item))
            _send(conn, "done", result)
        except MemoryError:
            with contextlib.suppress(Exception):
                _send(conn, "memory", None)
            return  # a process that ran out of memory is not trusted with the next file
        except FaraError as exc:
            _send(conn, "refused", (type(exc).__module__, type(exc).__qualname__, str(exc)))
        except RecursionError:
            _send(conn, "refused", (None, None, "is nested too deeply to be read"))
        except Exception as exc:  # a parser's bug on a hostile file: reported, not raised into the app
            _send(conn, "failed", type(exc).__name__)
        finally:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


# --- the parent -----------------------------------------------------------------------------------------------


class _AllowedUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, allowed: frozenset[tuple[str, str]]) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._allowed:
            raise pickle.UnpicklingError(f"the reader sent a {module}.{name}, which is not allowed")
        return super().find_class(module, name)


def allowed_classes(*classes: type) -> frozenset[tuple[str, str]]:
    return frozenset((c.__module__, c.__qualname__) for c in classes)


class Sandbox:
    """A child process that runs jobs on files from outside within a ``Budget`` (see the module's notes).

    ``nice``: the child's lower priority (indexing must not take the CPU from the window or a reply). Use it as a
    context manager, or call ``close``; it is not shared between threads."""

    def __init__(self, nice: int = 0) -> None:
        self._nice = nice
        self._process: Any = None
        self._conn: Connection | None = None
        self.children_started = 0  # one reused for many files; another only after one that broke its budget

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> tuple[Any, Connection]:
        if self._process is not None and self._conn is not None and self._process.is_alive():
            return self._process, self._conn
        self._end()
        context = multiprocessing.get_context("spawn")  # fork would copy the window's threads and Qt state
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(target=_serve, args=(child_end, self._nice), name="fara-reader", daemon=True)
        process.start()
        self.children_started += 1
        child_end.close()
        self._process, self._conn = process, parent_end
        return process, parent_end

    def run(
        self,
        job: Callable[..., Any],
        fd: int | None,
        args: tuple[Any, ...],
        budget: Budget,
        allowed: frozenset[tuple[str, str]] = frozenset(),
        on_item: Callable[[Any], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        refusal: type[FaraError] = FaraError,
    ) -> Any:
        """``job(fd, *args, emit=...)`` in the child; each ``emit(item)`` reaches ``on_item``; returns what the job
        returns. The descriptor stays the caller's to close. A ``FaraError`` the job raises comes back as
        ``refusal`` (with its message); a broken budget as ``BudgetExceededError``."""
        if should_stop is not None and should_stop():
            raise SandboxStoppedError("stopped")
        process, conn = self._start()
        conn.send((job.__module__, job.__name__, args, budget.memory_bytes, fd is not None))
        if fd is not None:
            send_handle(conn, _to_handle(fd), process.pid)
        watchdog = _Watchdog(process, budget, should_stop)
        try:
            return self._receive(conn, watchdog, budget, allowed, on_item, refusal)
        finally:
            watchdog.stop()

    def _receive(
        self,
        conn: Connection,
        watchdog: _Watchdog,
        budget: Budget,
        allowed: frozenset[tuple[str, str]],
        on_item: Callable[[Any], None] | None,
        refusal: type[FaraError],
    ) -> Any:
        received = 0
        while True:
            try:
                data = conn.recv_bytes(max(1, budget.output_bytes - received))
            except (EOFError, OSError) as exc:
                self._end()
                if watchdog.stopped:
                    raise SandboxStoppedError("stopped") from exc
                if watchdog.broken is not None:
                    raise BudgetExceededError(_describe(watchdog.broken, budget), watchdog.broken) from exc
                if isinstance(exc, OSError) and "message length" in str(exc):  # longer than what is left
                    raise BudgetExceededError(_describe("output", budget), "output") from exc
                raise SandboxFailedError("the reader stopped while reading it (the file may be damaged)") from exc
            try:
                kind, value = _AllowedUnpickler(data, allowed).load()
            except (pickle.UnpicklingError, ValueError, TypeError, EOFError, RecursionError) as exc:
                self._end()
                raise SandboxFailedError("the reader sent back something it should not have") from exc
            received += max(len(data), _text_size(value, budget.output_bytes - received + 1))
            if received > budget.output_bytes:
                self._end()
                raise BudgetExceededError(_describe("output", budget), "output")
            if kind == "item":
                if on_item is not None:
                    try:
                        on_item(value)  # the caller checks what it gets: a refusal ends this job, not the app
                    except BaseException:
                        self._end()
                        raise
                continue
            return self._finish(kind, value, budget, refusal)

    def _finish(self, kind: str, value: Any, budget: Budget, refusal: type[FaraError]) -> Any:
        if kind == "done":
            return value
        if kind == "memory":
            self._end()
            raise BudgetExceededError(_describe("memory", budget), "memory")
        if kind == "refused":
            _module, _name, message = value
            raise refusal(str(message))
        raise SandboxFailedError(f"could not be read ({str(value)[:80]})")

    def _end(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            _end_group(self._process)  # before it is reaped: its number cannot have been given to another
            if self._process.is_alive():
                self._process.kill()
            release_child(self._process)
            self._process = None

    def close(self) -> None:
        """Let the child finish (it returns when its connection closes), or end it; whatever it started ends."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            wait_until_ready([self._process.sentinel], timeout=5)  # ended, not yet reaped
            self._end()


class _Watchdog:
    """A thread that watches one job's child and ends it when the caller stops (``stopped``) or a budget breaks
    (``broken``: "cpu", "memory" or "time"); the parent's read then ends, whatever state the message was in."""

    def __init__(self, process: Any, budget: Budget, should_stop: Callable[[], bool] | None) -> None:
        self._process = process
        self._budget = budget
        self._should_stop = should_stop
        self._done = threading.Event()
        self.stopped = False
        self.broken: str | None = None
        self._watched = psutil.Process(process.pid)
        self._started_cpu = _cpu_seconds(self._watched)
        self._deadline = time.monotonic() + budget.wall_seconds
        self._thread = threading.Thread(target=self._watch, name="fara-reader-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(POLL_SECONDS):
            if self._should_stop is not None and self._should_stop():
                self.stopped = True
            else:
                self.broken = self._over_budget()
            if self.stopped or self.broken is not None:
                _end_group(self._process)
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    self._process.kill()
                return

    def _over_budget(self) -> str | None:
        try:
            if _cpu_seconds(self._watched) - self._started_cpu > self._budget.cpu_seconds:
                return "cpu"
            if self._watched.memory_info().rss > self._budget.memory_bytes:
                return "memory"
        except psutil.Error:
            return None  # it just ended: the connection tells why
        if time.monotonic() > self._deadline:
            return "time"
        return None


def _end_group(process: Any) -> None:
    """Kill the child's process group (the child and anything it started: a grandchild would otherwise go on under
    init, beyond every budget). Nothing when the child has not made its group yet: it is killed by itself then."""
    pid = getattr(process, "pid", None)
    if pid and hasattr(os, "killpg"):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def _text_size(value: Any, limit: int) -> int:
    """The characters and bytes a message holds once unpickled, every reference counted (pickle's memo can make one
    string stand for a million); stops counting past ``limit``."""
    total, stack, seen = 0, [value], 0
    while stack and total <= limit:
        item = stack.pop()
        seen += 1
        if seen > MAX_OBJECTS:  # a structure that refers to itself, or millions of empty objects
            return limit + 1
        if isinstance(item, (str, bytes, bytearray)):
            total += len(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif hasattr(item, "__dict__"):
            stack.extend(vars(item).values())
        elif hasattr(item, "__slots__"):
            stack.extend(getattr(item, name, None) for name in item.__slots__)
    return total


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)
