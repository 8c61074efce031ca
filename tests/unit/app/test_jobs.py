"""Every background job in one place (``app.jobs``): stopped stage after stage at quitting, each stage's jobs ended
before the next stage is stopped; a job that does not end in time is named, not waited for without end."""

from __future__ import annotations

import threading

from fara_desktop.app.jobs import Jobs, Stage


def test_quitting_stops_the_stages_in_order_and_waits_for_each_to_end():
    jobs = Jobs()
    said: list[str] = []
    ended_by_thread = threading.Event()

    def import_stops() -> None:  # asks its thread to stop; the thread ends the job a moment later
        said.append("import asked")
        threading.Thread(target=lambda: (ended_by_thread.wait(10), said.append("import ended"), job.end())).start()
        ended_by_thread.set()

    jobs.service("the engine", Stage.ENGINE, lambda: said.append("engine"))
    jobs.service("the embedder", Stage.EMBEDDER, lambda: said.append("embedder"))
    job = jobs.begin("Importing chats.json…", Stage.PRODUCERS, import_stops)
    jobs.service("the local API", Stage.INTAKE, lambda: said.append("api"))
    assert [j.name for j in jobs.running()] == ["the engine", "the embedder", "Importing chats.json…", "the local API"]
    assert jobs.stop_all(10) == []
    assert said == ["api", "import asked", "import ended", "engine", "embedder"]
    assert jobs.running() == []


def test_a_job_that_does_not_end_is_named_and_the_rest_still_stop():
    jobs = Jobs()
    said: list[str] = []
    jobs.begin("a stuck scan", Stage.PRODUCERS, lambda: None)  # never ends

    def failing() -> None:
        raise RuntimeError("broken stop")

    jobs.service("a broken server", Stage.TOOLS, failing)
    jobs.service("the engine", Stage.ENGINE, lambda: said.append("engine"))
    assert jobs.stop_all(0.2) == ["a stuck scan", "a broken server"]
    assert said == ["engine"]  # a failing stop keeps nobody else running; what it closes may still run: named
    assert [j.name for j in jobs.running()] == ["a stuck scan", "a broken server"]


def test_a_job_that_ends_by_itself_leaves_the_list():
    jobs = Jobs()
    job = jobs.begin("Exporting chats…", Stage.PRODUCERS, lambda: None)
    job.end()
    assert jobs.running() == [] and job.ended
    assert jobs.stop_all(1) == []


def test_quitting_is_bounded_by_one_limit_however_many_closes_block():
    """Issue 61, item 6: each blocking close ran after the other on the caller's thread (``stop_all(timeout=1.0)``
    took 6.0 s). Now a stage's closes start together and the whole quit keeps to its limit: here six closes that
    each block until the test lets them go, and the quit returns (naming all six) while they still block."""
    jobs = Jobs()
    release = threading.Event()
    entered: list[str] = []

    def blocking(name: str):
        def close() -> None:
            entered.append(name)
            release.wait(60)

        return close

    names = [f"server {i}" for i in range(3)] + ["downloads", "documents", "the engine"]
    for i, name in enumerate(names):
        jobs.service(name, Stage.TOOLS if i < 3 else Stage.INTAKE if i == 3 else Stage.PRODUCERS, blocking(name))
    try:
        assert sorted(jobs.stop_all(0.3)) == sorted(names)
        assert len(entered) == 6  # every close was asked, although none had returned
    finally:
        release.set()


def test_a_service_whose_close_says_it_is_still_running_is_named_late():
    """Issue 61, item 6: ``service`` ended its job whatever its close found (the inference thread still alive,
    ``late == []``)."""
    jobs = Jobs()
    jobs.service("the inference thread", Stage.ENGINE, lambda: False)
    jobs.service("the embedder", Stage.EMBEDDER, lambda: None)
    assert jobs.stop_all(0.5) == ["the inference thread"]
    assert [j.name for j in jobs.running()] == ["the inference thread"]


def test_a_job_is_stopped_once_however_often_quitting_is_asked():
    jobs = Jobs()
    asked: list[int] = []
    job = jobs.begin("Importing…", Stage.PRODUCERS, lambda: asked.append(1))
    job.stop()
    job.stop()
    assert asked == [1]
