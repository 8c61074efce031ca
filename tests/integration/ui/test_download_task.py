"""Issue 61, suspected: a ``DownloadTask`` paused between the model and its projector. Confirmed: a Pause that came
as the model's file had been checked and the projector's began was lost (the projector's ``run`` cleared it), so the
projector downloaded whole; at quit, "paused" downloads went on. A pause now holds whichever file it meets."""

from __future__ import annotations

from pathlib import Path

from fara_desktop.models.hub import resolve_remote_file
from fara_desktop.models.transfer import DownloadCancelled
from fara_desktop.ui.download_task import DownloadTask
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.hub_server import HubServer

REPO = "fara-tests/Tiny-Seeing-GGUF"


def test_a_pause_as_the_projector_begins_holds_and_start_resumes(qtbot, tmp_path: Path):
    model = write_tiny_model(tmp_path / "tiny.gguf").read_bytes()
    projector = bytes(range(256)) * 64
    with HubServer() as server:
        server.add(REPO, "tiny.gguf", model)
        server.add(REPO, "mmproj-tiny.gguf", projector)
        remotes = [resolve_remote_file(REPO, name, endpoint=server.url) for name in ("tiny.gguf", "mmproj-tiny.gguf")]
        task = DownloadTask(remotes, tmp_path / "hf")
        outcome: list[object] = []
        task.finished.connect(lambda path: outcome.append(("finished", path)))
        task.failed.connect(lambda error: outcome.append(("failed", error)))
        second = task.downloaders[1]
        real_run = second.run

        def paused_as_it_begins() -> Path:
            task.pause()  # the user's Pause, as the model's file has just been checked
            return real_run()

        second.run = paused_as_it_begins  # type: ignore[method-assign]
        task.start()
        qtbot.waitUntil(lambda: bool(outcome), timeout=30_000)
        task.wait(10)
        kind, detail = outcome[0]  # type: ignore[misc]
        assert kind == "failed" and isinstance(detail, DownloadCancelled) and detail.kept_partial, outcome
        assert not second.target.exists(), "the projector downloaded whole through the pause"

        second.run = real_run  # type: ignore[method-assign]
        outcome.clear()
        task.start()  # Resume
        qtbot.waitUntil(lambda: bool(outcome), timeout=30_000)
        task.wait(10)
    assert outcome[0][0] == "finished" and second.target.read_bytes() == projector  # type: ignore[index]
