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
    assert jobs.stop_all(0.2) == ["a stuck scan"]
    assert said == ["engine"]  # a failing stop ends its job and keeps nobody else running
    assert [j.name for j in jobs.running()] == ["a stuck scan"]


def test_a_job_that_ends_by_itself_leaves_the_list():
    jobs = Jobs()
    job = jobs.begin("Exporting chats…", Stage.PRODUCERS, lambda: None)
    job.end()
    assert jobs.running() == [] and job.ended
    assert jobs.stop_all(1) == []
