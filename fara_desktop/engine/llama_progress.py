"""llama.cpp's model-load progress callback, which llama-cpp-python's ``Llama`` does not expose.

``Llama.__init__`` takes its model parameters from ``llama_model_default_params()`` and passes them straight to
``llama_model_load_from_file``; while a load runs, that function is wrapped so the parameters made *on the loading
thread* carry a progress callback (another thread loading an embedding model at the same moment gets the plain
defaults). llama.cpp calls it as it reads (and repacks) the tensors; returning False aborts the load.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)
_patch_lock = threading.Lock()


@contextmanager
def load_progress(report: Callable[[float], bool] | None, stopped: list[bool]) -> Iterator[None]:
    """While the block runs, ``report(fraction)`` is called as llama.cpp loads on this thread; when it returns
    False the load is aborted and ``stopped`` gets an entry (so the caller can tell a stop from a failure)."""
    if report is None:
        yield
        return
    import llama_cpp.llama_cpp as raw

    owner = threading.get_ident()

    def on_progress(fraction: float, _user_data: Any) -> bool:
        try:
            keep_going = bool(report(float(fraction)))
        except Exception:  # a callback must never raise into C
            log.exception("The load progress callback failed")
            keep_going = True
        if not keep_going:
            stopped.append(True)
        return keep_going

    callback = raw.llama_progress_callback(on_progress)
    with _patch_lock:
        original = raw.llama_model_default_params

        def with_progress() -> Any:
            params = original()
            if threading.get_ident() == owner:
                params.progress_callback = callback
            return params

        raw.llama_model_default_params = with_progress
        try:
            yield
        finally:
            raw.llama_model_default_params = original
