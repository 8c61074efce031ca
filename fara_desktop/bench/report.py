"""`fara-desktop bench`: measure the raw engine, the app's path and this machine's ceiling, section by section (the
figures are saved and printed by ``bench/results.py``).

Qt-free: the figures that need the real window (the app's path, event-loop stalls, start-up) are measured by
``bench/qt_probe.py`` in child processes, as the real app runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from fara_desktop.bench.api_cache import api_cache
from fara_desktop.bench.cold_probe import MODES as COLD_MODES
from fara_desktop.bench.kernels import kernel_speeds
from fara_desktop.bench.loops import loop_detection
from fara_desktop.bench.parallel import parallel_generation
from fara_desktop.bench.parallel_serving import parallel_serving
from fara_desktop.bench.paste_forecast import paste_forecast
from fara_desktop.bench.plan import SECTION_HELP, SECTIONS, default_sections, plan_for
from fara_desktop.bench.prefix_paths import prefix_paths
from fara_desktop.bench.restart import restart
from fara_desktop.bench.results import COMPARED, previous_result, save_result, table
from fara_desktop.bench.resume import read_ahead_follow_up, resume, typeahead
from fara_desktop.bench.retrieval import retrieval
from fara_desktop.bench.runner import (
    Figure,
    RawEngine,
    bandwidth_figures,
    cold_start_in_child,
    memory_in_child,
    model_metadata,
    multi_turn,
    startup,
)
from fara_desktop.bench.speculative import speculative
from fara_desktop.bench.sweep import EngineConfig, run_sweep, sweep_configs
from fara_desktop.bench.typed_paste import typed_paste
from fara_desktop.bench.vision import vision
from fara_desktop.bench.window_beside_clients import window_beside_clients
from fara_desktop.files.paths import AppPaths
from fara_desktop.machine.bandwidth import measure_read_bandwidth
from fara_desktop.machine.hardware import detect_hardware
from fara_desktop.machine.llama_build import weights_are_repacked
from fara_desktop.machine.measurements import MachineCache, machine_key
from fara_desktop.models.embedder_convert import PACKAGED_EMBEDDER, import_embedder, packaged_embedder_installed
from fara_desktop.models.packaged import embedded_default_model
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.planner import thread_candidates, tuned_for
from fara_desktop.planning.tuning import (
    expected_prompt_tokens_per_second,
    expected_tokens_per_second,
)
from fara_desktop.text.untrusted import printable


def app_path_in_child(
    model: Path, params: LoadParams, paths: AppPaths, repeats: int, gen_tokens: int, long_prompt_tokens: int = 0
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
            "long_prompt_tokens": long_prompt_tokens,
        }
    )
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop.bench.qt_probe", "app-path", spec],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"the app-path benchmark failed: {result.stderr[-800:]}")
    data: dict[str, Any] = json.loads(lines[-1])
    return {**data, "gen": Figure(data["gen"])}


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

    def note(self, text: str) -> None:
        print(f"bench: {text}", file=sys.stderr, flush=True)

    def done(self) -> None:
        print(f"bench: done in {time.perf_counter() - self.started:.0f} s", file=sys.stderr, flush=True)


STAGE_TITLES = {
    "bandwidth": "memory bandwidth",
    "engine": "the engine: tuned vs defaults vs a sweep of settings",
    "app": "the app's path (the real window)",
    "memory": "memory: estimate vs what loads take",
    "startup": "start-up",
    "turns": "multi-turn chats and KV reuse",
    "resume": "a chat resumed from disk vs re-read",
    "typeahead": "reading ahead while a question is typed",
    "cold": "cold start (the file evicted from the page cache)",
    "retrieval": "document search: quality and the embedder's speed",
    "loops": "replies that repeat themselves, and the loop detector",
    "prefix": "every path that keeps part of a chat's context, against a fresh read",
    "vision": "pictures: encoding, reuse, resume, memory and hostile files",
    "api": "the local API's prompt cache: a client's follow-up vs its first request, and another key's reuse",
    "kernels": "the kernel paths: each correct one's prompt and reply speed, interleaved in child processes",
    "parallel": "several conversations decoded together: aggregate generation by count, first tokens",
    "speculative": "proposals from the reply's own text: copying and free tasks, the ceiling and the cost",
}


class Benchmark:
    """The sections of ``fara-desktop bench`` on one model; each adds its figures to ``out``."""

    def __init__(self, model: Path, paths: AppPaths, quick: bool) -> None:
        self.model = model
        self.paths = paths
        self.quick = quick
        self.meta = model_metadata(model)
        self.hardware = detect_hardware()
        cache = MachineCache.of_app(paths)
        self.repacks = weights_are_repacked()
        self.tuned = tuned_for(self.meta, self.hardware, cache)  # as the window would load it, on battery too
        self.n_ctx = min(self.tuned.n_ctx, 4096)
        self.params = replace(self.tuned.load_params(), n_ctx=self.n_ctx, prefault=False)
        self.bandwidth = cache.bandwidth(self.hardware) or measure_read_bandwidth()
        self.plan = plan_for(self.meta, self.bandwidth, self.tuned.n_threads, quick, self.hardware.cpu_features)
        self.out: dict[str, Any] = {
            "model": str(model),
            "model_name": self.meta.name,
            "model_bytes": model.stat().st_size,
            "quantization": self.meta.quantization,
            "parameters": self.meta.parameters,
            "cpu": self.hardware.cpu_name,
            "machine": machine_key(self.hardware),
            "cores": {"physical": self.hardware.physical_cores, "logical": self.hardware.logical_cores},
            "llama_build_repacks_weights": self.repacks,
            "repeats": self.plan.repeats,
            "pp_tokens": self.plan.pp_tokens,
            "gen_tokens": self.plan.gen_tokens,
            "tuned": {
                "n_threads": self.tuned.n_threads,
                "n_threads_batch": self.tuned.n_threads_batch,
                "n_batch": self.tuned.n_batch,
                "n_ctx": self.n_ctx,
                "n_ctx_tuned": self.tuned.n_ctx,
                "kv_type": self.tuned.kv_type,
                "flash_attn": self.tuned.flash_attn,
                "use_mmap": self.tuned.use_mmap,
            },
        }
        self._raw: RawEngine | None = None

    # ------------------------------------------------------------------ sections

    def bandwidth_section(self) -> None:
        first, second = bandwidth_figures(self.plan.repeats), bandwidth_figures(self.plan.repeats)
        self.bandwidth = statistics.median([first["read"], second["read"]])
        self.out["bandwidth_bytes_per_s"] = {"read": self.bandwidth, "copy": max(first["copy"], second["copy"])}
        self.out["bandwidth_runs_bytes_per_s"] = [first["read"], second["read"]]
        self.out["read_bandwidth_gb_per_s"] = self.bandwidth / 1e9
        self.out["bandwidth_repeat_ratio"] = max(first["read"], second["read"]) / min(first["read"], second["read"])

    def _raw_engine(self) -> RawEngine:
        if self._raw is None:
            self._raw = RawEngine(
                self.model,
                self.n_ctx,
                n_threads=self.tuned.n_threads,
                n_threads_batch=self.tuned.n_threads_batch,
                n_batch=self.tuned.n_batch,
                n_ubatch=self.tuned.n_ubatch,
                use_mmap=self.tuned.use_mmap,
            )
        return self._raw

    def engine_section(self) -> None:
        raw = self._raw_engine()
        tuned = EngineConfig(
            self.tuned.n_threads,
            self.tuned.n_threads_batch,
            self.tuned.n_batch,
            self.tuned.n_ubatch,
            self.tuned.kv_type,
            self.tuned.flash_attn,
        )
        cpus = os.cpu_count() or 1
        default = EngineConfig(max(cpus // 2, 1), cpus, 512, 512, "f16", False)  # llama-cpp-python's Llama()
        counts = thread_candidates(self.hardware)
        configs = sweep_configs(tuned, default, counts)
        prompt = raw.tokens[: self.plan.pp_tokens]
        sweep = run_sweep(
            raw.llm.model, self.n_ctx, configs, prompt, self.plan.gen_tokens, self.plan.pp_rounds, self.plan.gen_rounds
        )
        best_gen, best_pp = sweep.best("gen"), sweep.best("pp")
        by_threads = {
            c.n_threads: c
            for c in configs
            if c.n_threads == c.n_threads_batch
            and c.n_batch == tuned.n_batch
            and c.kv_type == tuned.kv_type
            and c.flash_attn == tuned.flash_attn
        }
        best_threads = max(by_threads, key=lambda t: statistics.median(sweep.gen[by_threads[t]]))
        predicted_gen = expected_tokens_per_second(self.meta, self.bandwidth, cpu_features=self.hardware.cpu_features)
        predicted_pp = expected_prompt_tokens_per_second(self.meta, tuned.n_threads_batch, self.hardware.cpu_features)
        measured_gen, measured_pp = statistics.median(sweep.gen[tuned]), statistics.median(sweep.pp[tuned])
        roofline = self.bandwidth / self.meta.weights_bytes
        self.out["library_default_threads"] = {
            "n_threads": default.n_threads,
            "n_threads_batch": default.n_threads_batch,
        }
        self.out["raw"] = {
            "default": {
                "pp_tok_per_s": Figure(sweep.pp[default]).to_json(),
                "gen_tok_per_s": Figure(sweep.gen[default]).to_json(),
            },
            "tuned": {
                "pp_tok_per_s": Figure(sweep.pp[tuned]).to_json(),
                "gen_tok_per_s": Figure(sweep.gen[tuned]).to_json(),
            },
            "sweep": {
                str(t): {"pp_tok_per_s": Figure(sweep.pp[c]).to_json(), "gen_tok_per_s": Figure(sweep.gen[c]).to_json()}
                for t, c in by_threads.items()
            },
        }
        self.out["sweep"] = sweep.to_json()
        self.out["sweep_best"] = {"gen": best_gen.label, "pp": best_pp.label}
        self.out.update(
            {
                "decode_only_tok_per_s": Figure(sweep.gen[tuned]).to_json(),
                "tuned_vs_default_gen_ratio": sweep.ratio("gen", tuned, default),
                "tuned_vs_default_pp_ratio": sweep.ratio("pp", tuned, default),
                "tuned_vs_best_sweep_gen_ratio": sweep.ratio("gen", tuned, best_gen),
                "tuned_vs_best_sweep_pp_ratio": sweep.ratio("pp", tuned, best_pp),
                "best_sweep_threads": best_threads,
                "roofline_tok_per_s": roofline,
                "roofline_fraction": measured_gen / roofline,
                "predicted": {
                    "gen_tok_per_s": predicted_gen,
                    "pp_tok_per_s": predicted_pp,
                    "gen_measured_over_predicted": measured_gen / predicted_gen if predicted_gen else None,
                    "pp_measured_over_predicted": measured_pp / predicted_pp if predicted_pp else None,
                    "bandwidth_bytes_per_s": self.bandwidth,
                },
            }
        )
        if self.meta.is_moe:  # issue 41's keys: a mixture of experts judged by what a token touches
            self.out["moe_gen_predicted_over_measured"] = predicted_gen / measured_gen
            self.out["moe_prompt_predicted_over_measured"] = predicted_pp / measured_pp

    def app_section(self) -> None:
        """Raw and app runs alternate, round by round (raw, app, raw): each round's ratio is the app's speed over
        the raw runs on either side of it, and the figure is the median of those ratios. The machine drifts
        10-30 % within minutes: a raw figure measured minutes earlier says more about the drift than the app."""
        raw = self._raw_engine()
        rounds, gen = 2 if self.quick else max(self.plan.repeats, 3), self.plan.gen_tokens
        before, after, app_runs, ratios, children = Figure(), Figure(), Figure(), [], []
        with tempfile.TemporaryDirectory(prefix="fara-bench-") as home:
            for _ in range(rounds):
                before.runs.append(raw.gen_tok_per_s(gen))
                child = app_path_in_child(
                    self.model, self.params, _scratch_paths(Path(home)), 1, gen, self.plan.long_prompt_tokens
                )
                after.runs.append(raw.gen_tok_per_s(gen))
                app_runs.runs.extend(child["gen"].runs)
                ratios.append(child["gen"].median / statistics.mean([before.runs[-1], after.runs[-1]]))
                children.append(child)
        stalls = {
            "loading": max(c["stall_load_ms"] for c in children),
            "prompt": max(c["stall_prompt_ms"] for c in children),
            "streaming": max(c["stall_stream_ms"] for c in children),
        }
        app = children[-1]
        self.out["raw"] = {
            **self.out.get("raw", {}),
            "tuned_with_sampling": {"gen_tok_per_s": before.to_json()},
            "tuned_after_app": {"gen_tok_per_s": after.to_json()},
        }
        self.out["app"] = {"gen_tok_per_s": app_runs.to_json()}
        self.out["app_vs_raw_gen_ratio"] = statistics.median(ratios)
        self.out["app_vs_raw_round_ratios"] = ratios
        self.out["event_loop_stall_runs_ms"] = [
            [c["stall_load_ms"], c["stall_prompt_ms"], c["stall_stream_ms"]] for c in children
        ]
        self.out["max_event_loop_stall_ms"] = max(stalls.values())
        self.out["event_loop_stall_ms"] = stalls
        self.out["long_prompt_tokens"] = self.plan.long_prompt_tokens
        self.out["app_rss_increase_bytes"] = app["rss_loaded_bytes"] - app["rss_before_bytes"]

    def memory_section(self) -> None:
        cases = [(4096, "f16"), (self.tuned.n_ctx, self.tuned.kv_type), (4096, "q8_0")]
        if self.quick:
            cases = cases[1:2]
        seen, results = set(), []
        for n_ctx, kv in cases:
            if (n_ctx, kv) in seen:
                continue
            seen.add((n_ctx, kv))
            results.append(memory_in_child(self.model, n_ctx, kv, self.tuned.use_mmap))
        tuned = next(r for r in results if r["n_ctx"] == self.tuned.n_ctx and r["kv_type"] == self.tuned.kv_type)
        self.out["memory_cases"] = results
        self.out["memory"] = {
            **self.out.get("memory", {}),
            "model_rss_increase_bytes": tuned["increase"],
            "estimate_bytes": tuned["estimate"],
            "n_ctx": tuned["n_ctx"],
        }
        self.out["estimate_vs_rss_ratio"] = tuned["ratio"]
        if self.meta.recurrent_layers:
            self.out["recurrent_estimate_over_rss"] = tuned["ratio"]

    def startup_section(self) -> None:
        with tempfile.TemporaryDirectory(prefix="fara-bench-") as home:
            runs = 1 if self.quick or self.plan.big else 2
            starts = [startup(self.model, Path(home) / "startup") for _ in range(runs)]
        warm = starts[-1]
        self.out["startup"] = warm
        self.out["window_shown_s"] = warm["window_shown_s"]
        self.out["model_ready_s"] = warm["model_ready_s"]
        self.out["memory"] = {
            **self.out.get("memory", {}),
            "rss_no_model_bytes": warm["rss_no_model_bytes"],
            "rss_model_loaded_bytes": warm["rss_model_loaded_bytes"],
        }

    def turns_section(self) -> None:
        turns = multi_turn(self.model, self.params, self.plan.repeats)
        ttft = {label: {str(t): f.median for t, f in turns[label].items()} for label in ("reuse", "fresh")}
        switch = turns["switch_back"]
        self.out["ttft_s"] = ttft
        self.out["switch_back"] = {
            "history_tokens": switch["history_tokens"],
            "restored_ttft_s": switch["restored"].to_json(),
            "reread_ttft_s": switch["reread"].to_json(),
        }
        self.out["ttft_turn8_over_turn1"] = ttft["reuse"]["8"] / ttft["reuse"]["1"]
        self.out["ttft_turn8_no_reuse_over_reuse"] = ttft["fresh"]["8"] / ttft["reuse"]["8"]
        self.out["switch_back_ttft_ratio"] = switch["restored"].median / switch["reread"].median

    def resume_section(self) -> None:
        self.close()  # one copy of the model at a time
        tokens = min(2000 if self.plan.big else 3000, self.n_ctx - 256)
        self.out.update(resume(self.model, self.params, min(tokens, 600) if self.quick else tokens, not self.quick))
        self.out.update(restart(self.model, self.params, min(tokens, 600) if self.quick else tokens))
        if self.meta.recurrent_layers:
            self.out["recurrent_restore_ratio"] = self.out["resume_restore_ratio"]
        self.out.update(read_ahead_follow_up(self.model, self.params, min(tokens, 1000)))

    def typeahead_section(self) -> None:
        self.close()
        if self.quick:
            self.out.update(typeahead(self.model, self.params, 300, typing_s=2.0, rounds=2))
        else:
            self.out.update(typeahead(self.model, self.params, 1000, rounds=2 if self.plan.big else 3))
            for loaded in (False, True):  # the wait said for a long paste, then the machine got busy
                self.out.update(paste_forecast(self.model, self.params, min(2400, self.n_ctx - 512), loaded))
                self.out.update(typed_paste(self.model, self.params, min(7000, (self.n_ctx - 512) * 3), loaded))

    def cold_section(self) -> None:
        self.close()  # nothing of ours may keep the file's pages
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in COLD_MODES}
        for _ in range(1 if self.quick or self.plan.big else 2):
            for mode in COLD_MODES:
                runs[mode].append(cold_start_in_child(self.model, min(self.n_ctx, 2048), mode))
        medians = {mode: statistics.median(r["first_token_s"] for r in rs) for mode, rs in runs.items()}
        default_mode = "read-ahead" if not self.tuned.use_mmap else "mapped"  # prefault is on by default
        self.out["cold_start"] = {
            "runs": runs,
            "first_token_s": medians,
            "default_mode": default_mode,
            "fastest_mode": min(medians, key=lambda m: medians[m]),
        }

    def prefix_section(self) -> None:
        self.close()
        self.out.update(prefix_paths(self.model, self.params))

    def api_section(self) -> None:
        self.close()
        tokens = min(2500, self.n_ctx - 512)
        self.out.update(api_cache(self.model, min(tokens, 600) if self.quick else tokens, 2 if self.plan.big else 3))

    def kernels_section(self) -> None:
        self.close()  # each path loads the model in a child of its own: nothing of ours beside it
        prompt = min(512, max(64, self.plan.pp_tokens))
        rounds = 3 if self.quick else 5
        self.out.update(kernel_speeds(self.model, self.tuned.n_threads_batch, rounds, prompt, 32))

    def parallel_section(self) -> None:
        self.close()
        quick = self.quick
        figures = parallel_generation(
            self.model, self.params, 120 if quick else 500, 16 if quick else 128, 1 if quick else 3
        )
        self.out.update(figures)
        # then as clients see it: through ``serve``, each client a process (and llama.cpp's server beside it)
        threads = self.params.n_threads or self.tuned.n_threads
        self.out.update(
            parallel_serving(self.model, threads, 40 if quick else 430, 8 if quick else 128, 1 if quick else 3)
        )
        self.out.update(window_beside_clients(self.model, self.params, 1 if quick else 3, 4 if quick else 16))

    def speculative_section(self) -> None:
        self.close()
        out_tokens = 24 if self.quick else (64 if self.plan.big else 160)
        embedded = embedded_default_model()  # SmolLM2-135M drafts for a model of its vocabulary (SmolLM2-1.7B)
        smaller = embedded if embedded is not None and embedded.resolve() != Path(self.model).resolve() else None
        rounds = 1 if self.quick else (2 if self.plan.big else 3)
        self.out.update(speculative(self.model, self.params, out_tokens, rounds, smaller))

    def vision_section(self) -> None:
        self.close()
        self.out.update(vision(self.model, self.n_ctx, self.params.n_threads, self.quick))

    def loops_section(self) -> None:
        self.close()
        self.out.update(loop_detection(self.model, self.params, 200 if self.quick else 800))

    def retrieval_section(self) -> None:
        """On all-MiniLM-L6-v2, converted from its installed package into a scratch folder (the chat model is not
        used: the section is about the documents' embedder)."""
        if not packaged_embedder_installed():
            self.out["retrieval"] = {"skipped": f"{PACKAGED_EMBEDDER} is not installed"}
            return
        with tempfile.TemporaryDirectory(prefix="fara-embedder-") as folder:
            model = import_embedder(PACKAGED_EMBEDDER, Path(folder))
            self.out["retrieval"] = retrieval(model, self.quick, _Progress(0).note)

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None


def _scratch_paths(home: Path) -> AppPaths:
    return AppPaths(home / "data", home / "config", home / "cache", home / "logs").ensure()


def run_benchmark(
    model: Path | None, as_json: bool, quick: bool, paths: AppPaths, sections: list[str] | None = None
) -> int:
    """Measure the chosen sections (default: all that suit the model's size), print a table (or JSON), and save
    the figures."""

    model = model or embedded_default_model()
    if model is None:
        print("fara-desktop bench: no model given and the embedded model is not installed", flush=True)
        return 2
    unknown = [section for section in sections or [] if section not in SECTIONS]
    if unknown:
        listing = "\n".join(f"  {name:10} {text}" for name, text in SECTION_HELP.items())
        if unknown != ["help"]:
            names = ", ".join(printable(name)[:40] for name in unknown if name != "help")
            print(f"fara-desktop bench: there is no section {names}", file=sys.stderr, flush=True)
        print(f"fara-desktop bench: the sections are\n{listing}", flush=True)
        return 0 if unknown == ["help"] else 2
    bench = Benchmark(model, paths, quick)
    chosen = sections or default_sections(bench.plan)
    ordered = [section for section in SECTIONS if section in chosen]
    step = _Progress(len(ordered))
    skipped = [section for section in SECTIONS if section not in ordered]
    step.note(
        f"{bench.meta.name}: runs of {bench.plan.gen_tokens} generated and {bench.plan.pp_tokens} prompt "
        f"tokens; sections {', '.join(ordered)}" + (f" (not run: {', '.join(skipped)})" if skipped else "")
    )
    bench.out["sections"] = ordered
    try:
        for section in ordered:
            step(STAGE_TITLES[section])
            getattr(bench, f"{section}_section")()
    finally:
        bench.close()
    out = bench.out
    previous = previous_result(paths, out)
    saved = save_result(paths, out)
    step.note(f"figures saved to {saved}")
    if previous:
        for key in COMPARED:
            if isinstance(out.get(key), (int, float)) and isinstance(previous.get(key), (int, float)):
                step.note(f"{key}: {previous[key]:.3f} last time, {out[key]:.3f} now")
    step.done()
    if as_json:
        print(json.dumps(out, indent=2), flush=True)
    else:
        print(table(out), flush=True)
    return 0
