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
    loading.adopt(prepared)
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
