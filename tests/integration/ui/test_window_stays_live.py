"""The window stays live (issue 14: no event-loop stall over 50 ms): from its first paint until the model it
starts with is ready (discovery, planning and the load run on other threads meanwhile), and while a model loads,
reads a long message and streams. Measured in fresh processes, as the app runs, with the benchmark's probe: a 5 ms
timer on the GUI thread. The same probe at 8B is in the README."""

from __future__ import annotations

import statistics

from fara_desktop.bench.report import app_path_in_child
from fara_desktop.bench.runner import startup
from fara_desktop.files.paths import AppPaths
from fara_desktop.planning.params import LoadParams

LAUNCHES = 3  # the median of three: the app's own stalls show in every launch; another process taking both cores
# of this machine for a moment (the suite's previous test winding down) shows in one, and is not the app's


def test_the_event_loop_never_stalls_50_ms_from_the_first_paint_to_the_model_ready(tmp_path, smollm2_path):
    stalls = [round(startup(smollm2_path, tmp_path / f"home{run}")["stall_startup_ms"]) for run in range(LAUNCHES)]
    print(f"\nlongest event-loop stall from first paint to model ready, {LAUNCHES} launches: {stalls} ms")
    assert statistics.median(stalls) <= 50, stalls


def test_nor_while_a_model_loads_reads_a_long_message_and_streams(tmp_path, smollm2_path):
    runs = []
    for run in range(LAUNCHES):
        home = tmp_path / f"home{run}"
        paths = AppPaths(home / "data", home / "config", home / "cache", home / "logs").ensure()
        result = app_path_in_child(smollm2_path, LoadParams(n_ctx=2048, prefault=False), paths, repeats=1,
                                   gen_tokens=16, long_prompt_tokens=400)  # fmt: skip
        assert result["gen"].runs and result["gen"].runs[0] > 0
        runs.append({k: round(result[k]) for k in ("stall_load_ms", "stall_prompt_ms", "stall_stream_ms")})
    print(f"\nlongest event-loop stalls, {LAUNCHES} fresh processes: {runs}")
    for kind in runs[0]:
        assert statistics.median(run[kind] for run in runs) <= 50, (kind, runs)
