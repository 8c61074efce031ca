"""Text and JSON reports for `fara-desktop hardware` and `fara-desktop models` (diagnostics, no Qt)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import psutil

from fara_desktop.files.paths import AppPaths
from fara_desktop.machine.hardware import detect_hardware
from fara_desktop.machine.kernel_check import PathVerdict
from fara_desktop.machine.kernels import ensure_kernel_path
from fara_desktop.machine.measurements import MachineCache
from fara_desktop.models.discovery import scan_models
from fara_desktop.planning.cost import cost_here
from fara_desktop.planning.planner import bandwidth, machine_facts
from fara_desktop.planning.tuning import choose_model, size_class
from fara_desktop.settings import load_settings
from fara_desktop.text.format import format_size
from fara_desktop.text.untrusted import printable


def say(*parts: object, **options: object) -> None:
    """print() for reports: names come from GGUF files and folders, so terminal escapes are stripped first."""
    print(*(printable(part) for part in parts), **options)  # type: ignore[call-overload]


def _power(on_battery: bool | None) -> str:
    return "no battery" if on_battery is None else "on battery" if on_battery else "on mains power"


def hardware_report(paths: AppPaths, as_json: bool = False) -> int:
    profile = detect_hardware()
    cache = MachineCache.of_app(paths)
    data = profile.to_json()
    data["memory_read_bandwidth_gb_s"] = round(bandwidth(profile, cache) / 1e9, 1)
    kernels = ensure_kernel_path(None, profile.usable_cores)  # checked in child processes the first time
    data["kernels"] = {
        "path": kernels.path.key,
        "reason": kernels.reason,
        "paths": {key: verdict.as_json() for key, verdict in kernels.verdicts.items()},
    }
    if as_json:
        print(json.dumps(data, indent=2))  # JSON escapes control characters itself
        return 0
    lines = [
        f"CPU            {profile.cpu_name} ({profile.architecture})",
        f"Cores          {profile.physical_cores or '?'} physical, {profile.logical_cores} logical, "
        f"{profile.usable_cores} usable"
        + (f", {profile.performance_cores} P + {profile.efficiency_cores} E" if profile.efficiency_cores else ""),
        f"Caches         L2 {format_size(profile.l2_cache_bytes)}/core, L3 {format_size(profile.l3_cache_bytes)}",
        f"NUMA nodes     {profile.numa_nodes or 'unknown'}",
        f"RAM            {format_size(profile.ram_available_bytes)} available of "
        f"{format_size(profile.ram_total_bytes)}; "
        f"swap {format_size(profile.swap_total_bytes)}",
        f"Power          {_power(profile.on_battery)}",
        f"Bandwidth      {data['memory_read_bandwidth_gb_s']} GB/s (memory reads)",
        f"CPU features   {' '.join(profile.cpu_features) or 'none detected'}",
        f"llama.cpp      {profile.build_info or 'could not be probed'}",
        "CPU kernels    "
        + (
            f"{profile.cpu_backend_variant} (runtime dispatch picked the best variant for this CPU)"
            if profile.cpu_backend_variant
            else "compiled into the library (native build)"
        ),
    ]
    lines.append(f"Kernel path    {kernels.reason}")
    lines += [f"  {key:<13}{_verdict_text(verdict)}" for key, verdict in kernels.verdicts.items()]
    if profile.avx512_missing:
        lines.append(
            f"Note           partial AVX-512 (missing {', '.join(profile.avx512_missing)}): AVX2 kernels are used"
        )
    lines += [f"WARNING        {gap.message}" for gap in profile.build_gaps]
    lines += [f"(probe)        {note}" for note in profile.probe_notes]
    say("\n".join(lines))
    return 0


def _verdict_text(verdict: PathVerdict) -> str:
    if not verdict.usable:
        return f"unusable here: {verdict.reason}"
    if verdict.difference:
        return f"correct here (logits within {verdict.difference:.1%} of the plain kernels')"
    return "correct here" + (f" ({verdict.reason})" if verdict.reason else "")


def models_report(paths: AppPaths, as_json: bool = False) -> int:
    settings = load_settings(paths.config).settings
    scan = scan_models(paths.models, paths.cache, [Path(f) for f in settings.extra_model_folders])
    profile = detect_hardware(probe_build=False)
    cache = MachineCache.of_app(paths)
    memory = psutil.virtual_memory()
    usable = [m.metadata for m in scan.usable if m.metadata]
    speed = bandwidth(profile, cache)
    facts = machine_facts(profile, cache)
    costs = {
        meta.path: cost_here(meta, replace(facts, calibrated_threads=cache.threads(profile, size_class(meta))))
        for meta in usable
        if not meta.embedding
    }
    # One memory figure per model: at the context it will load with, the one the window shows.
    best, ranked = choose_model(
        usable,
        memory.available,
        memory.total,
        speed,
        estimates={path: cost.memory for path, cost in costs.items()},
        previous=cache.recommended(profile, "on disk"),
        cpu_features=facts.cpu_features,
    )
    by_path = {rec.path: rec for rec in ranked}
    entries: list[dict[str, Any]] = []
    for model in scan.models:
        entry: dict[str, Any] = model.to_json()
        rec = by_path.get(model.path)
        if rec is not None and model.metadata is not None:
            cost = costs[model.path]
            tuned = cost.tuned
            verdict = rec.verdict
            entry["fit"] = {
                "verdict": verdict.verdict,
                "message": verdict.message,
                "suggestions": verdict.suggestions,
                "estimate_bytes": verdict.estimate.total,
                "n_ctx": verdict.estimate.n_ctx,
            }
            entry["expected_tok_per_s"] = round(rec.expected_tok_per_s, 1)
            entry["typical_prompt_s"] = round(cost.typical_prompt_s, 1)
            entry["cost_here"] = cost.summary()
            entry["tuned"] = {k: v for k, v in asdict(tuned).items() if k != "reasons"}
            entry["recommended"] = best is not None and best.path == model.path
        entries.append(entry)
    if as_json:
        say(
            json.dumps(
                {
                    "recommended": best.path if best else None,
                    "reason": best.reason if best else None,
                    "models": entries,
                    "searched": [asdict(loc) for loc in scan.searched],
                },
                indent=2,
            )
        )
        return 0
    for entry in entries:
        meta = entry["metadata"] or {}
        mark = "★" if entry.get("recommended") else " "
        if not entry["usable"]:
            say(f"  ✗ {entry['name']}  [{entry['source']}]\n      unusable: {entry['problem']}\n      {entry['path']}")
            continue
        fit = entry["fit"]
        say(
            f"{mark} {entry['name']}  [{entry['source']}]\n      {meta['architecture']}, {meta['size_label'] or ''} "
            f"{meta['quantization']}, {format_size(meta['file_bytes'])}, context {meta['context_length']}, "
            f"{'chat template' if meta['has_chat_template'] else 'no chat template'}\n"
            f"      {fit['verdict']}: {fit['message']}; ~{entry['expected_tok_per_s']} tok/s expected\n"
            f"      here it {entry['cost_here']}\n"
            f"      {entry['path']}"
        )
    if best:
        say(f"\nRecommended: {best.reason}")
    else:
        say("\nNo usable model found. Searched:")
        for loc in scan.searched:
            say(f"  {loc.source}: {loc.folder}{'' if loc.exists else ' (not present)'}")
    return 0
