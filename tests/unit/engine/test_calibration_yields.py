"""The first question never waits behind the thread calibration (issue 29, item 3): a reply queued while the
calibration runs stops it, is answered, and the calibration runs again afterwards."""

from __future__ import annotations

import threading
from pathlib import Path

from fara_desktop.engine.errors import CalibrationYieldedError
from fara_desktop.engine.types import CalibrationPostponed, Finished, ModelLoaded, ThreadsCalibrated
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.vocabulary.messages import ChatMessage
from tests.helpers.fakes import FakeBackend


class SlowCalibration(FakeBackend):
    """A calibration that measures until it is released, or gives way when a reply waits."""

    def __init__(self) -> None:
        super().__init__(words=["Hello", "!"])
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def calibrate_threads(self, candidates, tokens: int = 48, should_yield=None) -> tuple[dict[int, float], bool]:
        self.calls += 1
        self.started.set()
        while not self.release.wait(0.005):  # one "token" of measuring per turn
            if should_yield is not None and should_yield():
                raise CalibrationYieldedError("a reply is waiting")
        return {t: 10.0 * t for t in candidates}, False


def test_a_question_sent_during_the_calibration_is_answered_first(event_log):
    backend = SlowCalibration()
    worker = InferenceWorker(event_log, backend).start()
    try:
        worker.load_model(Path("fake.gguf"))
        event_log.next_of(ModelLoaded, timeout=10)
        worker.calibrate_threads([1, 2])
        assert backend.started.wait(10)
        worker.generate([ChatMessage("user", "Hi")])
        reply = event_log.next_of(Finished, ThreadsCalibrated, timeout=10)
        assert isinstance(reply, Finished) and reply.text == "Hello!"  # before any calibration result
        assert any(isinstance(e, CalibrationPostponed) for _t, e in event_log.seen)
        backend.release.set()
        calibrated = event_log.next_of(ThreadsCalibrated, timeout=10)
        assert calibrated.best == 2 and backend.calls == 2  # measured again, after the reply
    finally:
        backend.release.set()
        worker.shutdown()
