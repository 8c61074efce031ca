"""The local API in front of a real inference worker with a model loaded, on 127.0.0.1 (for tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fara_desktop.engine.types import ModelInfo, ModelLoaded, ModelLoadFailed
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from fara_desktop.vocabulary.sampling import SamplingParams

PARAMS = LoadParams(n_ctx=2048, prefault=False)


def serve_model(
    path: Path, params: LoadParams = PARAMS, embedder: Callable[[], Any] | None = None, pictures: Any = None,
    backend: Any = None,
) -> tuple[ApiServer, InferenceWorker, ModelInfo]:  # fmt: skip
    """A worker with ``path`` loaded and the local API started in front of it (greedy sampling); ``embedder``: the
    documents' embedding model it serves; ``pictures``: what takes the requests' pictures in; ``backend``: the
    worker's, to look into. The caller stops the server and shuts the worker down."""
    events: list[object] = []
    loaded = threading.Event()

    def sink(event: object) -> None:
        events.append(event)
        if isinstance(event, (ModelLoaded, ModelLoadFailed)):
            loaded.set()

    worker = InferenceWorker(sink, backend).start()
    worker.load_model(path, params)
    assert loaded.wait(60) and isinstance(events[-1], ModelLoaded), events[-1:]
    info = events[-1].info
    extra: dict[str, Any] = {"embedder": embedder} if embedder is not None else {}
    if pictures is not None:
        extra["pictures"] = pictures
    server = ApiServer(LocalApi(worker, lambda: info, lambda: SamplingParams(temperature=0.0), **extra))
    server.start()
    return server, worker, info
