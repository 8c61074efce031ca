"""Unit tests plan on this machine as probed once per session, with a fixed memory-bandwidth figure: the real
hardware probe (llama.cpp's build report included) and the 256 MiB bandwidth measurement belong to the
integration tests, not to every unit test that opens a window or plans a start-up (issue 28)."""

from __future__ import annotations

import pytest

from fara_desktop.machine.hardware import HardwareProfile, detect_hardware

UNIT_BANDWIDTH = 20e9  # bytes/s: a laptop's figure; the tests that depend on it set their own


@pytest.fixture(scope="session")
def machine_probed_once() -> HardwareProfile:
    return detect_hardware()


@pytest.fixture(autouse=True)
def cached_machine(monkeypatch: pytest.MonkeyPatch, machine_probed_once: HardwareProfile) -> HardwareProfile:
    def probe(*_args: object, **_kwargs: object) -> HardwareProfile:
        return machine_probed_once

    for module in ("fara_desktop.planning.planner", "fara_desktop.planning.catalog_fit"):
        monkeypatch.setattr(f"{module}.detect_hardware", probe)
    monkeypatch.setattr("fara_desktop.planning.planner.measure_read_bandwidth", lambda *_a, **_k: UNIT_BANDWIDTH)
    return machine_probed_once
