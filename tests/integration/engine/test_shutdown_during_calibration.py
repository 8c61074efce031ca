"""Closing while the first calibration runs (issue 50, item 8): the measurement gives way at its next token, so
the inference thread ends at once and the core closes nothing under a running llama.cpp. Before, the calibration
ran its every token (``should_yield`` ignored the shutdown) and the close gave up after 10 s."""

from __future__ import annotations

import threading

import pytest

from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.types import ModelLoaded, ModelLoadFailed
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from tests.conftest import EventLog

pytestmark = pytest.mark.real_model


class WatchedCalibration(LlamaBackend):
    """Says when the calibration has begun, and counts the tokens it measures once the app was asked to close."""

    def __init__(self) -> None:
        super().__init__()
        self.measuring = threading.Event()
        self.closing = threading.Event()
        self.tokens_after_close = 0

    def calibrate_threads(self, candidates, tokens=48, should_yield=None):
        def watched() -> bool:
            self.measuring.set()
            if self.closing.is_set():
                self.tokens_after_close += 1
            return should_yield() if should_yield is not None else False

        return super().calibrate_threads(candidates, tokens, watched)


def test_closing_during_a_calibration_ends_it_at_its_next_token(smollm2_path):
    backend = WatchedCalibration()
    log = EventLog()
    worker = InferenceWorker(log, backend).start()
    worker.load_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False))
    assert isinstance(log.next_of(ModelLoaded, ModelLoadFailed), ModelLoaded)
    worker.calibrate_threads((1, 2), tokens=1500)  # long enough to still run when the window closes
    assert backend.measuring.wait(60)
    backend.closing.set()
    assert worker.shutdown(timeout=120)
    assert backend.tokens_after_close <= 2, f"{backend.tokens_after_close} tokens measured after the close began"
