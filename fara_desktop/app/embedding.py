"""The one embedding model of the app (document search, the local API's /v1/embeddings), loaded on first use."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from fara_desktop.engine.embedder import Embedder
from fara_desktop.planning.planner import StartupPlan
from fara_desktop.vocabulary.errors import FaraError

log = logging.getLogger(__name__)


def embedding_model_in(plan: StartupPlan) -> Path | None:
    """The first embedding GGUF among the models the start-up scan found."""
    return next((Path(m.path) for m in plan.scan.usable if m.metadata and m.metadata.embedding), None)


class EmbedderService:
    """Which embedding model the app uses and its ``Embedder``, created on the first request that needs it (any
    thread: the indexing's, a search's, the local API's). Another model closes the one loaded; a model that cannot
    be loaded is forgotten with a warning (search stays lexical) unless ``strict``, where the caller is told why."""

    def __init__(self, model: Path | None = None, strict: bool = False) -> None:
        self._lock = threading.Lock()  # the model and the embedder: held only to read or swap them
        self._loading = threading.Lock()  # one load at a time (seconds), never held by a reader of ``model``
        self._model = model
        self._strict = strict
        self._embedder: Embedder | None = None
        self._closed = False  # closed at shutdown: a load still under way then is closed, never kept

    @property
    def model(self) -> Path | None:
        """The model in use (a plain read: the window asks for it while a load may be under way)."""
        return self._model

    def use(self, model: Path | None) -> bool:
        """Use ``model`` from now on; True when that changed anything."""
        with self._lock:
            if model == self._model:
                return False
            self._model = model
            old, self._embedder = self._embedder, None
        if old is not None:
            old.close()
        return True

    def get(self) -> Embedder | None:
        """The embedder, loading the model now if needed; None without a (loadable) model. Raises ``FaraError``
        when ``strict`` and the model cannot be loaded."""
        with self._loading:
            with self._lock:
                embedder, model = self._embedder, self._model
            if embedder is not None or model is None or self._closed:
                return embedder
            try:
                loaded = Embedder(model)
            except FaraError as exc:
                if self._strict:
                    raise
                log.warning("The embedding model could not be loaded: %s", exc)
                with self._lock:
                    if self._model == model:
                        self._model = None
                return None
            with self._lock:
                if self._model == model and self._embedder is None and not self._closed:
                    self._embedder = loaded
                    return loaded
            loaded.close()  # another model was chosen, or the app closed, while this one loaded
            return None

    def close(self) -> None:
        """The embedder goes; one loading now is closed as soon as its load ends, and none is loaded again."""
        with self._lock:
            self._closed = True
            old, self._embedder = self._embedder, None
        if old is not None:
            old.close()
