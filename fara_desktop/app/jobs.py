"""Every job the app runs in the background, in one place (Vorta's ``JobsManager`` is the model): each has an owner
that begins it, a stop that is honoured, and a stage in the order of quitting.

Quitting stops the stages in order — first what takes work in from outside (the local API, downloads), then what
feeds the engine or the chats (documents, imports, a reply's tool calls), the tool servers, the engine (replies,
read-ahead, the thread calibration, the saved readings' writer), and the embedder last. The stops of one stage start
together, each on a thread of its own (a close that blocks holds nobody else's), and each stage is waited for with
what is left of one limit for the whole quit: quitting takes at most that long, and a job that has not ended by
then is named (in the log and to the caller), never waited for without end. Qt-free; any thread may begin, end or
list jobs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from enum import IntEnum

log = logging.getLogger(__name__)


class Stage(IntEnum):
    """A job's place in the order of quitting (lowest first)."""

    INTAKE = 0  # takes work in from outside: the local API, downloads
    PRODUCERS = 1  # feeds the engine or the chats: documents, imports and exports, a reply's tool calls
    TOOLS = 2  # the MCP servers
    ENGINE = 3  # the inference thread: replies, read-ahead, calibration, the saved readings' writer
    EMBEDDER = 4  # the documents' embedding model


class Job:
    """One job: ``stop`` asks it to end (it may wait for it); its owner calls ``end`` once it has ended."""

    def __init__(self, jobs: Jobs, name: str, stage: Stage, stop: Callable[[], None]) -> None:
        self.name = name
        self.stage = stage
        self._stop = stop
        self._jobs = jobs
        self._ended = threading.Event()
        self._stop_asked = threading.Event()

    def stop(self) -> None:
        """Ask the job to end (once; a second call does nothing)."""
        if self._stop_asked.is_set():
            return
        self._stop_asked.set()
        try:
            self._stop()
        except Exception:  # one job's failing stop must not keep the others running
            log.exception("Stopping %s failed", self.name)

    def stop_soon(self) -> None:
        """``stop`` on a thread of its own: a stop that waits (a thread joined, a server closed) holds no caller."""
        threading.Thread(target=self.stop, name="fara-quit-stop", daemon=True).start()

    def end(self) -> None:
        """The job has ended (on every path: done, stopped, failed)."""
        self._ended.set()
        self._jobs._forget(self)

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout: float) -> bool:
        return self._ended.wait(max(0.0, timeout))

    def __repr__(self) -> str:
        return f"Job({self.name!r}, {self.stage.name})"


class Jobs:
    """The running jobs, and quitting them in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: list[Job] = []

    def begin(self, name: str, stage: Stage, stop: Callable[[], None]) -> Job:
        job = Job(self, name, stage, stop)
        with self._lock:
            self._running.append(job)
        return job

    def service(self, name: str, stage: Stage, close: Callable[[], bool | None]) -> Job:
        """A job that lasts until ``close`` (which waits for it to end) returns: a thread or a server as long-lived
        as its owner. A ``close`` that returns False (what it closes is still running) or raises leaves the job
        running, to be named late."""
        job: Job

        def stop() -> None:
            if close() is not False:
                job.end()

        job = self.begin(name, stage, stop)
        return job

    def running(self) -> list[Job]:
        with self._lock:
            return list(self._running)

    def _forget(self, job: Job) -> None:
        with self._lock:
            if job in self._running:
                self._running.remove(job)

    def stop_all(self, timeout: float = 30.0) -> list[str]:
        """Stop every job, stage after stage: a stage's stops start together, and the next stage once they have
        ended or the time is up; returns within about ``timeout`` in all, with the names of the jobs that had not
        ended (they are left to end on their own)."""
        started = time.monotonic()
        deadline = started + timeout
        late: list[str] = []
        for stage in Stage:
            jobs = [job for job in self.running() if job.stage == stage]
            for job in jobs:
                job.stop_soon()
            for job in jobs:
                if not job.wait(deadline - time.monotonic()):
                    late.append(job.name)
                    waited = time.monotonic() - started
                    log.warning("%s had not ended %.1f s after quitting began", job.name, waited)
        return late
