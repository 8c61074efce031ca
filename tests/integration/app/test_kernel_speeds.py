"""The kernel paths measured on a loaded model, in the background, in child processes, once per model size."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from fara_desktop.app.jobs import Jobs
from fara_desktop.app.kernel_speeds import KernelSpeeds
from fara_desktop.engine.types import ModelInfo
from fara_desktop.machine import kernels
from fara_desktop.machine.kernel_check import KernelCache, KernelChoice

pytestmark = pytest.mark.real_model


@pytest.fixture
def own_record(kernel_path, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """This process's kernel record, copied: what the test measures does not change later tests' choices."""
    if len(kernel_path.usable()) < 2:
        pytest.skip("one usable kernel path here: nothing to measure between")
    process = kernels._state[0]
    copy = tmp_path / "kernels.json"
    shutil.copy(process.cache.file, copy)
    monkeypatch.setattr(process, "cache", KernelCache(copy))
    return copy


def _info(model: Path) -> ModelInfo:
    return ModelInfo(model, "SmolLM2", "llama", 2048, 8192, 2, 2, "f16", False, "gguf template", 0.1,
                     model.stat().st_size, size_class="tiny")  # fmt: skip


def test_measured_once_per_size_and_kept_for_the_next_load(own_record, smollm2_path):  # type: ignore[no-untyped-def]
    jobs = Jobs()
    done: list[KernelChoice] = []
    finished = threading.Event()
    speeds = KernelSpeeds(jobs, rounds=1)
    assert speeds.measure_after(_info(smollm2_path), lambda choice: (done.append(choice), finished.set()))
    assert [job.name for job in jobs.running()] == ["measuring the kernel paths"]
    assert finished.wait(600)
    (entry,) = json.loads(own_record.read_text()).values()
    measured = entry["speeds"]["tiny"]["tok_per_s"]
    assert len(measured) >= 2 and all(v["prompt"] > 0 and v["reply"] > 0 for v in measured.values())
    assert done[0].path.key in measured
    assert kernels.ensure_kernel_path("tiny").path is done[0].path  # the next load of this size takes it
    if not entry["speeds"]["tiny"]["busy"]:
        assert not speeds.measure_after(_info(smollm2_path))  # known: not measured again


def test_quitting_stops_the_measurement_and_its_child(own_record, smollm2_path):  # type: ignore[no-untyped-def]
    import psutil

    before = {c.pid for c in psutil.Process().children(recursive=True)}
    jobs = Jobs()
    assert KernelSpeeds(jobs).measure_after(_info(smollm2_path))
    late = jobs.stop_all(timeout=20)
    assert late == []
    left = [c for c in psutil.Process().children(recursive=True) if c.pid not in before and c.is_running()]
    assert not [c for c in left if c.status() != psutil.STATUS_ZOMBIE]
    (entry,) = json.loads(own_record.read_text()).values()
    assert "tiny" not in entry.get("speeds", {})  # a stopped measurement keeps nothing half-measured


def test_replies_clearly_faster_than_the_measurement_make_it_measure_again(own_record, smollm2_path):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from fara_desktop.machine.kernel_check import Measurement, PathSpeed

    usable = [p.key for p in kernels.usable_paths()]
    kernels.keep_speeds("tiny", Measurement({k: PathSpeed(100.0, 20.0) for k in usable}, False, 0))
    jobs = Jobs()
    speeds = KernelSpeeds(jobs)
    info = replace(_info(smollm2_path), kernel_path=usable[0])
    assert not speeds.measure_after(info)  # measured, quiet: nothing to do
    assert not speeds.reply_seen(info, 25.0, 200)  # as measured
    assert not speeds.reply_seen(info, 80.0, 200)  # once may be chance
    assert speeds.reply_seen(info, 80.0, 200)  # twice: the measurement was taken on a busy machine
    assert [job.name for job in jobs.running()] == ["measuring the kernel paths"]
    assert jobs.stop_all(timeout=20) == []


def test_the_measurement_gives_way_while_the_user_waits_on_the_engine(own_record, smollm2_path, monkeypatch):  # type: ignore[no-untyped-def]
    """No child runs beside a reply or a read-ahead: the user's question has the processor."""
    from fara_desktop.machine import kernel_check
    from tests.conftest import wait_until

    started: list[str] = []
    real_run_child = kernel_check.run_child

    def counted(request, timeout, should_stop=None):  # type: ignore[no-untyped-def]
        started.append(request.path_key)
        return real_run_child(request, timeout, should_stop)

    monkeypatch.setattr(kernel_check, "run_child", counted)
    replying = threading.Event()
    replying.set()
    asked: list[int] = []

    def engine_busy() -> bool:
        asked.append(1)
        return replying.is_set()

    jobs = Jobs()
    finished = threading.Event()
    speeds = KernelSpeeds(jobs, rounds=1, engine_busy=engine_busy)
    assert speeds.measure_after(_info(smollm2_path), lambda _choice: finished.set())
    wait_until(lambda: len(asked) >= 10, 60, "the measurement to ask whether the engine is busy")
    assert started == []  # nothing measured while a reply runs
    replying.clear()
    assert finished.wait(600)
    assert len(started) >= 2
