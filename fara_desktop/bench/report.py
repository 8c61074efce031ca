"""`fara-desktop bench`: measure the raw engine, the app's path and this machine's ceiling; print a table or JSON.

Qt-free: the figures that need the real window (the app's path, event-loop stalls, start-up) are measured by
``bench/qt_probe.py`` in child processes, as the real app runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import psutil

from fara_desktop.bench.runner import (
    Figure,
    RawEngine,
    bandwidth_figures,
    median_of,
    model_metadata,
    multi_turn,
    startup,
    sweep_threads,
)
from fara_desktop.machine.hardware import detect_hardware
from fara_desktop.machine.llama_build import weights_are_repacked
from fara_desktop.machine.measurements import MachineCache
from fara_desktop.models.packaged import embedded_default_model
from fara_desktop.paths import AppPaths
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.planner import thread_candidates
from fara_desktop.planning.tuning import estimate_memory, size_class, tune


def app_path_in_child(
    model: Path, params: LoadParams, paths: AppPaths, repeats: int, gen_tokens: int
) -> dict[str, Any]:
    """Run ``app_path`` in a fresh process, as the real app runs: measured in this process after the raw
    engine, generation on the worker thread was ~20 % slower (the main thread's idle OpenMP team stays behind),
    which is an artefact of measuring both in one process, not a cost of the app."""

    spec = json.dumps(
        {
            "model": str(model),
            "params": asdict(params),
            "home": str(paths.data.parent),
            "repeats": repeats,
            "gen_tokens": gen_tokens,
        }
    )
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop.bench.qt_probe", "app-path", spec],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"the app-path benchmark failed: {result.stderr[-800:]}")
    data = json.loads(lines[-1])
    return {
        "gen": Figure(data["gen"]),
        "stall_load_ms": data["stall_load_ms"],
        "stall_stream_ms": data["stall_stream_ms"],
    }


STAGES = 7


class _Progress:
    """One line per stage on stderr, with the time so far: a benchmark that runs for minutes is never silent."""

    def __init__(self, stages: int) -> None:
        self.stages = stages
        self.number = 0
        self.started = time.perf_counter()

    def __call__(self, stage: str) -> None:
        self.number += 1
        elapsed = time.perf_counter() - self.started
        print(f"bench: [{self.number}/{self.stages}] {stage}… ({elapsed:.0f} s so far)", file=sys.stderr, flush=True)

    def done(self) -> None:
        print(f"bench: done in {time.perf_counter() - self.started:.0f} s", file=sys.stderr, flush=True)


def run_benchmark(model: Path | None, as_json: bool, quick: bool, paths: AppPaths) -> int:
    """Measure everything, print a table (and JSON with ``as_json``)."""

    model = model or embedded_default_model()
    if model is None:
        print("fara-desktop bench: no model given and the embedded model is not installed", flush=True)
        return 2
    repeats, pp, gen = (1, 128, 32) if quick else (3, 512, 256)
    step = _Progress(STAGES)
    meta = model_metadata(model)
    hardware = detect_hardware()
    memory = psutil.virtual_memory()
    cache = MachineCache.of_app(paths)
    tuned = tune(
        meta,
        hardware.physical_cores,
        hardware.usable_cores,
        memory.available,
        memory.total,
        cache.threads(hardware, size_class(meta)),
        repacks_weights=weights_are_repacked(),
    )
    n_ctx = min(tuned.n_ctx, 4096)
    params = replace(tuned.load_params(), n_ctx=n_ctx, prefault=False)
    out: dict[str, Any] = {
        "model": str(model),
        "model_name": meta.name,
        "cpu": hardware.cpu_name,
        "cores": {"physical": hardware.physical_cores, "logical": hardware.logical_cores},
        "repeats": repeats,
        "pp_tokens": pp,
        "gen_tokens": gen,
        "tuned": {
            "n_threads": tuned.n_threads,
            "n_threads_batch": tuned.n_threads_batch,
            "n_batch": tuned.n_batch,
            "n_ctx": n_ctx,
            "kv_type": tuned.kv_type,
        },
    }

    step("the library's defaults")
    default = RawEngine(model, n_ctx)  # the library's own defaults for everything else
    default_pp = median_of(repeats, lambda: default.prompt_tok_per_s(pp))
    default_gen = median_of(repeats, lambda: default.gen_tok_per_s(gen))
    out["library_default_threads"] = {
        "n_threads": default.llm.n_threads,
        "n_threads_batch": default.llm.n_threads_batch,
    }
    default.close()

    def tuned_engine() -> RawEngine:
        return RawEngine(
            model,
            n_ctx,
            n_threads=tuned.n_threads,
            n_threads_batch=tuned.n_threads_batch,
            n_batch=tuned.n_batch,
            n_ubatch=tuned.n_ubatch,
        )

    step("the tuned engine")
    raw = tuned_engine()
    tuned_pp = median_of(repeats, lambda: raw.prompt_tok_per_s(pp))
    tuned_gen = median_of(repeats, lambda: raw.gen_tok_per_s(gen))
    decode_only = median_of(repeats, lambda: raw.decode_tok_per_s(gen))
    step("a sweep over thread counts")
    sweep = sweep_threads(
        raw, list(range(1, hardware.logical_cores + 1)) if not quick else thread_candidates(hardware), repeats, pp, gen
    )
    raw.close()
    best_threads = max(sweep, key=lambda t: sweep[t]["gen"].median)

    with tempfile.TemporaryDirectory(prefix="fara-bench-") as home:
        bench_paths = AppPaths(
            Path(home) / "data", Path(home) / "config", Path(home) / "cache", Path(home) / "logs"
        ).ensure()
        step("the app's path (the real window)")
        app = app_path_in_child(model, params, bench_paths, repeats, gen)
        # The raw engine again, right after the app: this shared machine's speed drifts by ±10 % within minutes,
        # so the app is compared with raw runs taken on both sides of it.
        raw = tuned_engine()
        tuned_gen_after = median_of(repeats, lambda: raw.gen_tok_per_s(gen))
        raw.close()
        raw_around_app = Figure(tuned_gen.runs + tuned_gen_after.runs)
        step("multi-turn chats and KV reuse")
        turns = multi_turn(model, params, repeats)
        step("start-up and memory")
        starts = [startup(model, Path(home) / "startup") for _ in range(1 if quick else 2)]
    warm = starts[-1]
    step("memory bandwidth")
    bandwidth = bandwidth_figures(repeats)
    bound = bandwidth["read"] / meta.weights_bytes
    estimate = estimate_memory(meta, tuned.n_ctx, tuned.kv_type)  # the app loads at the tuned context
    loaded_increase = warm["rss_model_loaded_bytes"] - warm["rss_no_model_bytes"]

    ttft = {label: {str(t): f.median for t, f in turns[label].items()} for label in ("reuse", "fresh")}
    switch = turns["switch_back"]
    out.update(
        {
            "raw": {
                "default": {"pp_tok_per_s": default_pp.to_json(), "gen_tok_per_s": default_gen.to_json()},
                "tuned": {"pp_tok_per_s": tuned_pp.to_json(), "gen_tok_per_s": tuned_gen.to_json()},
                "tuned_after_app": {"gen_tok_per_s": tuned_gen_after.to_json()},
                "sweep": {
                    str(t): {"pp_tok_per_s": v["pp"].to_json(), "gen_tok_per_s": v["gen"].to_json()}
                    for t, v in sweep.items()
                },
            },
            "app": {"gen_tok_per_s": app["gen"].to_json()},
            "decode_only_tok_per_s": decode_only.to_json(),
            "ttft_s": ttft,
            "switch_back": {
                "history_tokens": switch["history_tokens"],
                "restored_ttft_s": switch["restored"].to_json(),
                "reread_ttft_s": switch["reread"].to_json(),
            },
            "startup": warm,
            "memory": {
                "rss_no_model_bytes": warm["rss_no_model_bytes"],
                "rss_model_loaded_bytes": warm["rss_model_loaded_bytes"],
                "model_rss_increase_bytes": loaded_increase,
                "estimate_bytes": estimate.total,
            },
            "bandwidth_bytes_per_s": bandwidth,
            "roofline_tok_per_s": bound,
            # headline figures
            "app_vs_raw_gen_ratio": app["gen"].median / raw_around_app.median,
            "app_vs_raw_before_gen_ratio": app["gen"].median / tuned_gen.median,
            "tuned_vs_default_gen_ratio": tuned_gen.median / default_gen.median,
            "tuned_vs_default_pp_ratio": tuned_pp.median / default_pp.median,
            "tuned_vs_best_sweep_gen_ratio": tuned_gen.median / sweep[best_threads]["gen"].median,
            "best_sweep_threads": best_threads,
            "ttft_turn8_over_turn1": ttft["reuse"]["8"] / ttft["reuse"]["1"],
            "ttft_turn8_no_reuse_over_reuse": ttft["fresh"]["8"] / ttft["reuse"]["8"],
            "switch_back_ttft_ratio": switch["restored"].median / switch["reread"].median,
            "max_event_loop_stall_ms": max(app["stall_load_ms"], app["stall_stream_ms"]),
            "event_loop_stall_ms": {"loading": app["stall_load_ms"], "streaming": app["stall_stream_ms"]},
            "window_shown_s": warm["window_shown_s"],
            "model_ready_s": warm["model_ready_s"],
            "roofline_fraction": tuned_gen.median / bound,
            "estimate_vs_rss_ratio": estimate.total / loaded_increase if loaded_increase > 0 else None,
        }
    )
    step.done()
    if as_json:
        print(json.dumps(out, indent=2), flush=True)
    else:
        print(_table(out, tuned_pp, tuned_gen, default_pp, default_gen, sweep, app["gen"]), flush=True)
    return 0


def _table(
    out: dict[str, Any],
    tuned_pp: Figure,
    tuned_gen: Figure,
    default_pp: Figure,
    default_gen: Figure,
    sweep: dict[int, dict[str, Figure]],
    app_gen: Figure,
) -> str:
    mib = 1024 * 1024
    rows = [
        f"Fara Desktop benchmark — {out['model_name']} on {out['cpu']} "
        f"({out['cores']['physical']} cores), medians of {out['repeats']} runs (spread in brackets)",
        "",
        f"{'what':58} {'figure':>24}",
        f"{'raw, library defaults: prompt tok/s':58} {default_pp.median:>10.1f} [{default_pp.spread()}]",
        f"{'raw, library defaults: generation tok/s':58} {default_gen.median:>10.1f} [{default_gen.spread()}]",
        f"{'raw, Fara tuned: prompt tok/s':58} {tuned_pp.median:>10.1f} [{tuned_pp.spread()}]",
        f"{'raw, Fara tuned: generation tok/s':58} {tuned_gen.median:>10.1f} [{tuned_gen.spread()}]",
    ]
    for threads, figures in sweep.items():
        rows.append(
            f"{f'raw, {threads} thread(s): prompt / generation tok/s':58} "
            f"{figures['pp'].median:>10.1f} / {figures['gen'].median:.1f}"
        )
    rows += [
        f"{'app path (worker → queue → Qt → chat view): generation tok/s':58} {app_gen.median:>10.1f} "
        f"[{app_gen.spread()}]",
        f"{'raw, Fara tuned, again right after the app: generation':58} "
        f"{out['raw']['tuned_after_app']['gen_tok_per_s']['median']:>10.1f}",
        f"{'app / raw generation (same parameters, raw runs around it)':58} {out['app_vs_raw_gen_ratio']:>10.3f}",
        f"{'tuned / default: generation, prompt':58} {out['tuned_vs_default_gen_ratio']:>10.3f}, "
        f"{out['tuned_vs_default_pp_ratio']:.3f}",
        f"{'tuned / best thread count in the sweep (generation)':58} {out['tuned_vs_best_sweep_gen_ratio']:>10.3f}",
        f"{'TTFT turns 1 / 4 / 8 with reuse (ms)':58} "
        + " / ".join(f"{out['ttft_s']['reuse'][t] * 1000:.0f}" for t in ("1", "4", "8")),
        f"{'TTFT turns 1 / 4 / 8, fresh context each turn (ms)':58} "
        + " / ".join(f"{out['ttft_s']['fresh'][t] * 1000:.0f}" for t in ("1", "4", "8")),
        f"{'TTFT turn 8 / turn 1 (reuse)':58} {out['ttft_turn8_over_turn1']:>10.2f}",
        f"{'switch back to a ' + str(out['switch_back']['history_tokens']) + '-token chat: snapshot / re-read':58} "
        f"{out['switch_back_ttft_ratio']:>10.3f}",
        f"{'longest event-loop stall: loading / streaming (ms)':58} "
        f"{out['event_loop_stall_ms']['loading']:>10.1f} / {out['event_loop_stall_ms']['streaming']:.1f}",
        f"{'window shown / model ready after launch (s)':58} {out['window_shown_s']:>10.2f} / "
        f"{out['model_ready_s']:.2f}",
        f"{'RSS without model / with model (MiB)':58} {out['memory']['rss_no_model_bytes'] / mib:>10.0f} / "
        f"{out['memory']['rss_model_loaded_bytes'] / mib:.0f}",
        f"{'model RSS increase vs fit estimate (MiB)':58} "
        f"{out['memory']['model_rss_increase_bytes'] / mib:>10.0f} / {out['memory']['estimate_bytes'] / mib:.0f}",
        f"{'memory bandwidth read / copy (GB/s)':58} {out['bandwidth_bytes_per_s']['read'] / 1e9:>10.1f} / "
        f"{out['bandwidth_bytes_per_s']['copy'] / 1e9:.1f}",
        f"{'generation roofline (tok/s) and fraction reached':58} {out['roofline_tok_per_s']:>10.0f} / "
        f"{out['roofline_fraction']:.2f}",
        f"{'llama_decode alone, one token at a time (tok/s)':58} {out['decode_only_tok_per_s']['median']:>10.1f}",
    ]
    return "\n".join(rows)
