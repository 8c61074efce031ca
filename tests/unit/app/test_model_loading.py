"""The plan → load → calibrate loop of the window and ``serve`` (``app.model_loading``): when the threads are
measured after a load, and what a measurement changes."""

from __future__ import annotations

import dataclasses

from fara_desktop.app.model_loading import ModelLoading
from fara_desktop.engine.types import ModelInfo, RemoteModel, ThreadsCalibrated
from fara_desktop.files.paths import app_paths
from fara_desktop.machine.measurements import MachineCache
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import size_class


def test_threads_are_measured_once_for_a_model_here_unless_pinned_or_a_servers(fara_home, smollm2_path):
    paths = app_paths().ensure()
    loading = ModelLoading(paths)
    prepared = loading.prepare(smollm2_path, [], lambda tuned: tuned.load_params())
    info = ModelInfo(smollm2_path, "SmolLM2", "llama", 2048, 8192, 2, 2, "f16", False, "gguf template", 0.5, 1)
    assert loading.plan is None and loading.calibration_after(info, None) is None
    loading.use_plan(prepared)
    plan = loading.plan
    assert plan is not None and plan.needs_calibration and plan.model is not None
    candidates = loading.calibration_after(info, None)
    assert candidates and 1 in candidates
    assert loading.calibration_after(info, 2) is None  # the user pinned a count
    remote = dataclasses.replace(info, path=RemoteModel("box", "http://box:8000/v1", "m"), server="box")
    assert loading.calibration_after(remote, None) is None  # a server's threads are the server's
    loading.calibrated(ThreadsCalibrated(smollm2_path, {1: 50.0, 2: 80.0}, 2))
    assert loading.plan.tuned.n_threads == 2 and not loading.plan.needs_calibration
    assert loading.calibration_after(info, None) is None  # measured once
    assert MachineCache.of_app(paths).threads(plan.hardware, size_class(plan.model.metadata)) is not None
    assert loading.recalibration(loaded=True) == candidates and loading.recalibration(loaded=False) is None
    assert isinstance(prepared.decision.params, LoadParams)


def _adopted(smollm2_path):  # type: ignore[no-untyped-def]
    paths = app_paths().ensure()
    loading = ModelLoading(paths)
    loading.use_plan(loading.prepare(smollm2_path, [], lambda tuned: tuned.load_params()))
    return paths, loading


def test_a_calibration_taken_while_the_machine_was_busy_is_measured_again_at_the_next_start(fara_home, smollm2_path):
    _, loading = _adopted(smollm2_path)
    loading.calibrated(ThreadsCalibrated(smollm2_path, {1: 26.0, 2: 4.0}, 1, busy=True))
    assert loading.plan.tuned.n_threads == 1  # used meanwhile
    _, next_start = _adopted(smollm2_path)
    assert next_start.plan.needs_calibration  # not kept for ever
    next_start.calibrated(ThreadsCalibrated(smollm2_path, {1: 26.0, 2: 40.0}, 2))
    _, after = _adopted(smollm2_path)
    assert not after.plan.needs_calibration and after.plan.tuned.n_threads == 2


def test_replies_clearly_faster_than_the_calibration_dispute_it(fara_home, smollm2_path):
    _, loading = _adopted(smollm2_path)
    loading.calibrated(ThreadsCalibrated(smollm2_path, {1: 30.0, 2: 20.0}, 1))  # quiet, as far as it knew
    info = ModelInfo(smollm2_path, "SmolLM2", "llama", 2048, 8192, 1, 2, "f16", False, "gguf template", 0.5, 1)
    assert loading.speed_seen(info, 80.0, 10) is None  # a short reply says little
    assert loading.speed_seen(info, 33.0, 200) is None  # within what a measurement drifts
    assert loading.speed_seen(info, 80.0, 200) is None  # once may be chance
    assert loading.speed_seen(info, 31.0, 200) is None  # the count starts again
    assert loading.speed_seen(info, 80.0, 200) is None
    candidates = loading.speed_seen(info, 80.0, 200)
    assert candidates and 1 in candidates
    _, next_start = _adopted(smollm2_path)
    assert next_start.plan.needs_calibration  # and if the window quits before it measures, the next start does
