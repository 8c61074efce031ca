"""The local API asks which model is loaded from its own thread: the worker answers from its last load event,
under its lock, instead of the API reading the chat controller's field (issue 28)."""

from __future__ import annotations

import threading
from pathlib import Path

from fara_desktop.engine.types import ModelLoaded, ModelLoadFailed, ModelUnloaded
from fara_desktop.engine.worker import InferenceWorker
from tests.helpers.fakes import FakeBackend


def test_the_loaded_model_follows_loads_failed_switches_and_unloads(event_log):
    worker = InferenceWorker(event_log, FakeBackend()).start()
    try:
        assert worker.loaded_model is None
        worker.load_model(Path("fake.gguf"))
        loaded = event_log.next_of(ModelLoaded, timeout=10)
        assert worker.loaded_model == loaded.info
        worker.load_model(Path("broken.gguf"))  # a switch that fails keeps the model in use
        event_log.next_of(ModelLoadFailed, timeout=10)
        seen: list[object] = []
        reader = threading.Thread(target=lambda: seen.append(worker.loaded_model))  # as the API's thread reads it
        reader.start()
        reader.join(10)
        assert seen == [loaded.info]
        worker.unload()
        event_log.next_of(ModelUnloaded, timeout=10)
        assert worker.loaded_model is None
    finally:
        worker.shutdown()

