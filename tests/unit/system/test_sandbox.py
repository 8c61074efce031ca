"""The sandbox that reads files from outside: each budget is kept (memory, processor time, output), a crash or a
bug costs one job and the next job runs, Stop ends a job at once, and what comes back is only what is allowed."""

from __future__ import annotations

import os
import threading

import pytest

from fara_desktop.system.sandbox import (
    Budget,
    BudgetExceededError,
    Sandbox,
    SandboxFailedError,
    SandboxStoppedError,
)
from fara_desktop.vocabulary.errors import FaraError
from tests.helpers import sandbox_jobs as jobs

MB = 1024 * 1024
SMALL = Budget(cpu_seconds=2.0, memory_bytes=300 * MB, output_bytes=4 * MB)


class Refused(FaraError):
    pass


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox() as box:
        yield box


def test_a_job_runs_in_the_child_and_sends_items_back(sandbox):
    items: list[str] = []
    assert sandbox.run(jobs.echo, None, ("hello",), SMALL, on_item=items.append) == "hello"
    assert items == ["HELLO"]


def test_the_descriptor_reaches_the_child(sandbox, tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert sandbox.run(jobs.read_descriptor, fd, (4,), SMALL) == b"0123"
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("job", "resource"), [(jobs.hoard_memory, "memory"), (jobs.spin, "cpu"), (jobs.flood, "output")]
)
def test_each_budget_is_kept_and_the_next_job_runs(sandbox, job, resource):
    with pytest.raises(BudgetExceededError) as caught:
        sandbox.run(job, None, (), SMALL, on_item=lambda item: None)
    assert caught.value.resource == resource
    assert sandbox.run(jobs.echo, None, ("next",), SMALL) == "next"


def test_a_crash_a_bug_and_a_refusal_cost_one_job(sandbox):
    with pytest.raises(SandboxFailedError):
        sandbox.run(jobs.crash, None, (), SMALL)
    with pytest.raises(SandboxFailedError, match="ZeroDivisionError"):
        sandbox.run(jobs.buggy, None, (), SMALL)
    with pytest.raises(Refused, match="not welcome"):
        sandbox.run(jobs.refuse, None, (), SMALL, refusal=Refused)
    assert sandbox.run(jobs.echo, None, ("after",), SMALL) == "after"


def test_only_allowed_classes_come_back(sandbox, capfd):
    with pytest.raises(SandboxFailedError):
        sandbox.run(jobs.smuggle, None, (), SMALL)
    assert "pwned" not in capfd.readouterr().out


def test_stop_ends_a_job_that_waits(sandbox):
    asked = threading.Event()

    def should_stop() -> bool:
        asked.set()
        return True

    with pytest.raises(SandboxStoppedError):
        sandbox.run(jobs.wait_forever, None, (), SMALL, should_stop=should_stop)
    assert asked.is_set()
    assert sandbox.run(jobs.echo, None, ("again",), SMALL) == "again"


def test_stop_ends_a_job_whose_message_is_half_sent(sandbox, tmp_path):
    """A child that sent half a message hung the scan (the read waited for the rest forever) and Stop did nothing."""
    marker = tmp_path / "sent"
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            sandbox.run(jobs.half_a_message, None, (str(marker),), SMALL, should_stop=marker.exists)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(timeout=60)  # a bound, not a wait: it hung forever before
    assert not reader.is_alive(), "the read of a half-sent message never ended"
    assert isinstance(outcome[0], SandboxStoppedError)
    assert sandbox.run(jobs.echo, None, ("again",), SMALL) == "again"


def test_what_a_message_holds_once_unpickled_counts_against_the_output_budget(sandbox):
    """pickle's memo let 1 MB of message stand for 2 GB of text (1 MB became 904 MB of database)."""
    with pytest.raises(BudgetExceededError) as caught:
        sandbox.run(jobs.memo_bomb, None, (), SMALL, on_item=lambda item: None)
    assert caught.value.resource == "output"
    assert sandbox.run(jobs.echo, None, ("again",), SMALL) == "again"


def test_a_caller_that_refuses_what_came_back_ends_the_job_not_the_sandbox(sandbox):
    def refuse(item: object) -> None:
        raise Refused("the wrong shape")

    with pytest.raises(Refused):
        sandbox.run(jobs.echo, None, ("x",), SMALL, on_item=refuse)
    assert sandbox.run(jobs.echo, None, ("again",), SMALL) == "again"


def test_passages_and_results_of_the_wrong_shape_refuse_the_file():
    from fara_desktop.documents.indexer import UnreadableFile, checked_passages, checked_result
    from fara_desktop.documents.passages import Passage

    good = [Passage("text", 1, 1, 2)]
    assert checked_passages(good) == good
    for bad in ([Passage(123, 1, 1, 2)], [Passage("t", "1", 1, 2)], [Passage("t", True, 1, 2)], ["text"], "x"):  # type: ignore[arg-type]
        with pytest.raises(UnreadableFile):
            checked_passages(bad)
    assert checked_result(("a" * 64, 10), 10) == ("a" * 64, 10)
    for bad_result in (("a" * 64, 11), ("a", 1), ["a" * 64, 1], ("a" * 64, True)):
        with pytest.raises(UnreadableFile):
            checked_result(bad_result, 10)


def test_a_child_reaped_by_another_thread_first_still_closes():
    """CI (stop 71): ``serve`` under a flood of pictures printed ``ValueError: Cannot close a process while it is still
    running`` from a sandbox's close. Each decoding thread starts its own child, and ``Process.start`` reaps every
    ended child of the process (``multiprocessing``'s ``_cleanup``): when it reaps this one between our ``join`` and
    its record of the status, ``join`` returns with the child unrecorded. Reaped here the same way, by hand."""
    import psutil

    box = Sandbox()
    pid = box.run(jobs.own_pid, None, (), SMALL)
    psutil.Process(pid).kill()
    assert os.waitpid(pid, 0)[0] == pid  # reaped, as another thread's _cleanup does, before the sandbox knows
    box.close()  # raised ValueError
    assert not psutil.pid_exists(pid)
