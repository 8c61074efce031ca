"""Decide what to run at start: scan the machine and its models, pick the best one, tune it.

Qt-free; the GUI runs ``plan_startup`` on a background thread and the CLI calls it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil

from fara_desktop.files.paths import AppPaths
from fara_desktop.machine.bandwidth import measure_read_bandwidth
from fara_desktop.machine.hardware import HardwareProfile, detect_hardware
from fara_desktop.machine.llama_build import weights_are_repacked
from fara_desktop.machine.measurements import MachineCache
from fara_desktop.models import packaged
from fara_desktop.models.discovery import (
    DiscoveredModel,
    ScanResult,
    packaged_models_dir,
    projector_beside,
    scan_models,
)
from fara_desktop.models.gguf_checks import check_projector
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.load_record import CrashedLoad, LoadRecord
from fara_desktop.models.metadata import MetadataCache, ModelMetadata
from fara_desktop.planning.cost import CostHere, MachineFacts, cost_here
from fara_desktop.planning.draft_pairing import with_draft
from fara_desktop.planning.params import LoadParams, TunedParams
from fara_desktop.planning.tuning import (
    MemoryEstimate,
    Recommendation,
    choose_model,
    estimate_memory,
    fit_verdict,
    size_class,
    tune,
)
from fara_desktop.planning.vision_cost import ProjectorShape, projector_shape
from fara_desktop.vocabulary.errors import FaraError, NotAGGUFError


@dataclass(frozen=True)
class StartupPlan:
    """The model to load, how to load it, and why."""

    hardware: HardwareProfile
    scan: ScanResult
    model: DiscoveredModel | None
    recommendation: Recommendation | None
    ranked: list[Recommendation]
    tuned: TunedParams | None
    reason: str
    needs_calibration: bool
    costs: dict[str, CostHere] = field(default_factory=dict)  # by model path: what each would cost here
    crashed_now: list[CrashedLoad] = field(default_factory=list)  # loads that stopped the app last time


def thread_candidates(hardware: HardwareProfile) -> list[int]:
    """1, 2, 4, … up to the usable cores, plus the physical-core count itself."""
    usable = hardware.usable_cores
    counts = {1, usable, min(usable, hardware.physical_cores or usable)}
    value = 2
    while value < usable:
        counts.add(value)
        value *= 2
    return sorted(counts)


def bandwidth(hardware: HardwareProfile, cache: MachineCache) -> float:
    value = cache.bandwidth(hardware)
    if value is None:
        value = measure_read_bandwidth()
        cache.set_bandwidth(hardware, value)
    return value


def machine_facts(hardware: HardwareProfile, cache: MachineCache) -> MachineFacts:
    """What a model's cost depends on here: the cores, the memory free now, the read bandwidth (measured once and
    kept), and the build's repacking and instruction sets."""
    memory = psutil.virtual_memory()
    return MachineFacts(
        hardware.physical_cores,
        hardware.usable_cores,
        memory.available,
        memory.total,
        bandwidth(hardware, cache),
        weights_are_repacked(),
        cpu_features=tuple(hardware.cpu_features),
    )


def tuned_for(meta: ModelMetadata, hardware: HardwareProfile, cache: MachineCache) -> TunedParams:
    """The one place the app's tuning is asked for a model here and now (the window, the server and the benchmark):
    free memory now, this machine's calibrated threads, the battery, the llama.cpp build."""
    memory = psutil.virtual_memory()
    return tune(
        meta,
        hardware.physical_cores,
        hardware.usable_cores,
        memory.available,
        memory.total,
        calibrated_threads=cache.threads(hardware, size_class(meta)),
        on_battery=hardware.on_battery,
        repacks_weights=weights_are_repacked(),
    )


def plan_startup(
    paths: AppPaths, preferred: Path | None = None, extra_folders: list[Path] | None = None, avoid: Path | None = None
) -> StartupPlan:
    """``avoid``: a model that just failed to load (the saved choice, at start): the best of the others instead."""
    hardware = detect_hardware()
    record = LoadRecord(paths.data)
    crashed_now = record.collect_crashes()  # a load that never finished: that file is not loaded again
    scan = without_crashed(scan_models(paths.models, paths.cache, extra_folders), record)
    cache = MachineCache.of_app(paths)
    memory = psutil.virtual_memory()
    usable = [m for m in scan.usable if avoid is None or Path(m.path) != avoid]
    speed = bandwidth(hardware, cache)
    facts = machine_facts(hardware, cache)
    costs = {
        m.path: cost_here(
            m.metadata, replace(facts, calibrated_threads=cache.threads(hardware, size_class(m.metadata)))
        )
        for m in usable
        if m.metadata and not m.metadata.embedding
    }
    best, ranked = choose_model(
        [m.metadata for m in usable if m.metadata],
        memory.available,
        memory.total,
        speed,
        estimates={path: cost.memory for path, cost in costs.items()},
        previous=cache.recommended(hardware, "on disk"),
        cpu_features=facts.cpu_features,
    )
    cache.set_recommended(hardware, "on disk", best.path if best else None)
    chosen: DiscoveredModel | None = None
    reason = ""
    crash = record.crash_of(preferred) if preferred is not None else None
    if crash is not None and preferred is not None:
        preferred = None
        note = "the model you chose stopped the app while loading, so it is not loaded again"
        reason = f"best of the models you have: {best.reason} ({note})" if best is not None else note
        chosen = next((m for m in usable if best is not None and m.path == best.path), None)
    elif preferred is not None:
        chosen = next((m for m in usable if Path(m.path) == preferred), None)
        chosen = chosen or projector_beside(_describe_file(preferred, paths))
        reason = "chosen by you"
    elif best is not None:
        chosen = next(m for m in usable if m.path == best.path)
        reason = f"best of the models you have: {best.reason}"
    tuned = tuned_for(chosen.metadata, hardware, cache) if chosen is not None and chosen.metadata else None
    size = size_class(chosen.metadata) if chosen is not None and chosen.metadata else ""
    needs_calibration = bool(
        tuned and size and (cache.threads(hardware, size) is None or cache.threads_provisional(hardware, size))
    )
    return StartupPlan(hardware, scan, chosen, best, ranked, tuned, reason, needs_calibration, costs, crashed_now)


def rescanned(plan: StartupPlan, paths: AppPaths, extra_folders: list[Path] | None = None) -> StartupPlan:
    """``plan`` with the models on disk found again (a download finished): the model in use and the tuning stay.
    Slow (reads new files' headers): never on a GUI thread."""
    scan = without_crashed(scan_models(paths.models, paths.cache, extra_folders), LoadRecord(paths.data))
    return replace(plan, scan=scan)


def without_crashed(scan: ScanResult, record: LoadRecord) -> ScanResult:
    """The scan with every model file that stopped the app while loading marked unusable, with the reason."""
    crashed = record.crashed()
    if not crashed:
        return scan
    models = []
    for model in scan.models:
        crash = record.crash_of(Path(model.path), crashed) if model.usable else None
        models.append(replace(model, problem=crash.reason) if crash is not None else model)
    return ScanResult(models, scan.searched)


def _describe_file(path: Path, paths: AppPaths) -> DiscoveredModel:
    """A model file the user picked that no scan found: read its header if it is a GGUF (else the engine will
    say what is wrong with it when it tries to load it)."""
    try:
        metadata = MetadataCache(None).read(path)
    except (NotAGGUFError, OSError):
        metadata = None
    return DiscoveredModel(str(path), "opened by you", metadata.name if metadata else path.name, metadata)


def fit_refusal(model: DiscoveredModel, params: LoadParams) -> str | None:
    """Why this model must not be loaded with these parameters on this machine now, or None when it fits."""
    if model.metadata is None:
        return None
    memory = psutil.virtual_memory()
    n_ctx = params.context_for(model.metadata.context_length)
    verdict = fit_verdict(
        model.metadata, n_ctx, memory.available, memory.total, params.kv_type, parallel=params.parallel
    )
    if verdict.verdict != "too_big":
        return None
    advice = f" Instead: {'; or '.join(verdict.suggestions)}." if verdict.suggestions else ""
    return f"{model.display_name} was not loaded: it {verdict.message}.{advice}"


def model_file(model: DiscoveredModel, paths: AppPaths) -> Path:
    """The file to load; a model packaged in chunks is assembled into the cache on first use."""
    if model.needs_assembly:
        assembled = packaged.assemble_gemma3(packaged_models_dir(paths.cache))
        if assembled is not None:
            return assembled
    return Path(model.path)


@dataclass(frozen=True)
class LoadDecision:
    """What to do with a plan's model once the user's overrides are applied: load it with ``params``, or refuse
    with ``refusal`` (it would not fit); ``estimate`` is the memory it will take at the context it loads with."""

    params: LoadParams | None
    estimate: MemoryEstimate | None
    refusal: str | None


def decide_load(
    plan: StartupPlan, params: LoadParams | None, projector_choices: Mapping[str, str] | None = None
) -> LoadDecision:
    """Judge the plan's model with the parameters it will really load with (tuned values plus overrides, and the
    projector the user chose for it: ``projector_choices``, model path → projector path, "" for none)."""
    model = plan.model
    if model is None or params is None or model.metadata is None:
        return LoadDecision(params, None, None)
    n_ctx = params.context_for(model.metadata.context_length)
    doubled = params.use_mmap and weights_are_repacked()
    estimate = estimate_memory(
        model.metadata, n_ctx, params.kv_type, mapped_and_repacked=doubled, parallel=params.parallel
    )
    projector = chosen_projector(model, projector_choices or {})
    eyes = projector_shape_of(projector) if projector else None
    if eyes is not None:  # the model sees pictures: its projector loads with it, and counts in its memory
        params = replace(params, projector=projector)
        estimate = replace(estimate, vision=eyes.memory_bytes)
    if params.draft_model == "auto":
        params, estimate = with_draft(model, plan.scan.usable, params, estimate)
    return LoadDecision(params, estimate, fit_refusal(model, params))


def chosen_projector(model: DiscoveredModel, choices: Mapping[str, str]) -> str | None:
    """The user's choice for this model when it is still there and a projector llama.cpp can load safely ("":
    none); else the one discovery paired."""
    chosen = choices.get(model.path)
    if chosen is None:
        return model.projector
    if chosen == "":
        return None
    try:
        check_projector(read_gguf_header(Path(chosen)))
    except (FaraError, OSError):
        return model.projector  # gone or unsafe: the guess stands
    return chosen


def projector_shape_of(path: str) -> ProjectorShape | None:
    """The shape of a projector discovery paired (checked then); None when it cannot be read now."""
    try:
        return projector_shape(read_gguf_header(Path(path)))
    except (FaraError, OSError):
        return None


def remember_calibration(
    paths: AppPaths, plan: StartupPlan, tok_per_s: dict[int, float], best: int, busy: bool = False
) -> None:
    """Keep a thread calibration for this machine and the plan's model-size class (the next start skips it,
    unless it was measured while other programs were busy)."""
    if plan.model is not None and plan.model.metadata is not None:
        cache = MachineCache.of_app(paths)
        cache.set_threads(plan.hardware, size_class(plan.model.metadata), tok_per_s, best, busy)


@dataclass(frozen=True)
class PreparedLoad:
    """The whole plan → decide → file flow's result: the plan, what to do with its model, and the file to load
    (None when there is no model or it was refused; a packaged model is assembled by then)."""

    plan: StartupPlan
    decision: LoadDecision
    file: Path | None


def prepare_load(
    paths: AppPaths,
    preferred: Path | None,
    extra_folders: list[Path],
    with_overrides: Callable[[TunedParams], LoadParams],
    projector_choices: Mapping[str, str] | None = None,
    avoid: Path | None = None,
) -> PreparedLoad:
    """The one start-up flow, for the window (off its thread) and ``fara-desktop serve``: scan and plan, apply the
    user's overrides (``with_overrides``: the settings' ``InferenceOverrides.apply``), judge the load, and find
    the file. Slow (it probes the machine and reads every model's header); never on a GUI thread."""
    plan = plan_startup(paths, preferred, extra_folders, avoid)
    decision = decide_load(plan, with_overrides(plan.tuned) if plan.tuned else None, projector_choices)
    usable = plan.model is not None and decision.refusal is None
    return PreparedLoad(plan, decision, model_file(plan.model, paths) if usable and plan.model else None)
