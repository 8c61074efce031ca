"""What each entry of the model catalog means on this machine: fit verdict, expected speed, installed or not, and
the one recommended."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from fara_desktop.machine.hardware import detect_hardware
from fara_desktop.machine.measurements import MachineCache
from fara_desktop.models.catalog import CatalogEntry, CatalogQuant, load_catalog, option_key
from fara_desktop.models.discovery import scan_models
from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.planning.cost import CostHere, MachineFacts, cost_here
from fara_desktop.planning.planner import bandwidth, machine_facts
from fara_desktop.planning.tuning import COMFORTABLE_TOK_PER_S, FitVerdict, architecture_reasons, choose_model
from fara_desktop.text.format import format_size


@dataclass(frozen=True)
class CatalogOption:
    """One (model, quantization) pair judged for this machine."""

    entry: CatalogEntry
    quant: CatalogQuant
    verdict: FitVerdict
    expected_tok_per_s: float
    installed: Path | None
    recommended: bool
    cost: CostHere
    differences: tuple[str, ...] = ()  # where the installed file's header says otherwise than the catalog
    lacks_projector: bool = False  # installed, sees pictures, but no projector was found beside it

    @property
    def memory_bytes(self) -> int:
        """The memory figure to show: at the context the model would be loaded with here."""
        return self.cost.memory.total

    @property
    def key(self) -> str:
        return option_key(self.entry, self.quant)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.entry.id,
            "name": self.entry.name,
            "repo": self.entry.repo,
            "file": self.quant.file_name,
            "quantization": self.quant.quant,
            "parameters": self.entry.parameters,
            "architecture": self.entry.architecture,
            "context_length": self.entry.context_length,
            "license": self.entry.license,
            "description": self.entry.description,
            "estimated_file_bytes": self.quant.estimated_bytes,
            "fit": {
                "verdict": self.verdict.verdict,
                "message": self.verdict.message,
                "suggestions": self.verdict.suggestions,
                "estimate_bytes": self.verdict.estimate.total,
                "n_ctx": self.verdict.estimate.n_ctx,
            },
            "expected_tok_per_s": round(self.expected_tok_per_s, 1),
            "cost_here": {
                "memory_bytes": self.cost.memory.total,
                "n_ctx": self.cost.memory.n_ctx,
                "kv_type": self.cost.memory.kv_type,
                "gen_tok_per_s": round(self.cost.gen_tok_per_s, 1),
                "typical_prompt_s": round(self.cost.typical_prompt_s, 1),
                "summary": self.cost.summary(),
            },
            "installed": str(self.installed) if self.installed else None,
            "header_differences": list(self.differences),
            "projector": self.entry.projector,
            "sources": list(self.entry.sources),
            "lacks_projector": self.lacks_projector,
            "recommended": self.recommended,
            "why": architecture_reasons(self.entry.metadata(self.quant)),
        }


# Draft pairs (issue 65): the share of a same-family draft's proposals a model accepts on the text where a person
# waits longest (quotes, edits, re-formatting): assumed, for nothing here can measure a pair before it is on disk
ASSUMED_ACCEPTANCE = 0.7
PAIR_WORTH = 1.1  # a pair is offered where it is expected to write at least this much faster
MOST_PROPOSED = 8


@dataclass(frozen=True)
class DraftPair:
    """A catalog option offered with a smaller model of its vocabulary as its draft, and what the pair is expected
    to give on this machine (``predicted_pair_gain``)."""

    draft: CatalogOption
    gain: float
    proposals: int

    def words(self) -> str:
        return (
            f"With {self.draft.entry.name} {self.draft.quant.quant} as its draft "
            f"({format_size(self.draft.quant.estimated_bytes)} more to download; the app pairs them by itself), "
            f"expected about ×{self.gain:.1f} here where {ASSUMED_ACCEPTANCE:.0%} of the {self.proposals} tokens "
            "proposed a step are accepted, as quoting or editing text gets (free writing gains less; the app "
            "measures it in use and stops proposing where it does not pay)."
        )


def predicted_pair_gain(
    gen_tok_per_s: float, prompt_tok_per_s: float, draft_tok_per_s: float, acceptance: float = ASSUMED_ACCEPTANCE
) -> tuple[float, int]:
    """(speed with ÷ without, proposals a step) of a draft here, at the best count: a step writes the next token
    and the run of accepted proposals, ``(1 − a^(k+1)) / (1 − a)`` tokens, and costs a plain decode, each proposal's
    place in it (a token read in a batch: 1 ÷ prompt speed; measured so: 13–15 ms a token at 1.7B against 15 ms)
    and the draft's writing of it (1 ÷ the draft's speed)."""
    if min(gen_tok_per_s, prompt_tok_per_s, draft_tok_per_s) <= 0:
        return 1.0, 0
    best, best_k = 1.0, 0
    for k in range(1, MOST_PROPOSED + 1):
        written = (1 - acceptance ** (k + 1)) / (1 - acceptance) if acceptance < 1 else k + 1.0
        cost = 1 + k * gen_tok_per_s / prompt_tok_per_s + k * gen_tok_per_s / draft_tok_per_s
        if written / cost > best:
            best, best_k = written / cost, k
    return best, best_k


def draft_pairs(options: Iterable[CatalogOption]) -> dict[str, DraftPair]:
    """For each option that fits, the draft among the others of its family that is expected to speed it up most
    here (where any is expected to give ``PAIR_WORTH``), by option key. The same family, not only the same
    vocabulary size: Gemma 3 and 4, Qwen2.5 and 3 count alike but may spell some tokens otherwise, and the engine,
    which compares the tokens at load, would then go without the draft someone downloaded for it."""
    from fara_desktop.planning.draft_pairing import pairs_as_draft

    fitting = [o for o in options if o.verdict.verdict == "fits"]
    pairs: dict[str, DraftPair] = {}
    for target in fitting:
        meta = target.entry.metadata(target.quant)
        for draft in fitting:
            if draft.entry.id == target.entry.id or draft.entry.family != target.entry.family:
                continue
            if not pairs_as_draft(meta, draft.entry.metadata(draft.quant)):
                continue
            gain, proposals = predicted_pair_gain(
                target.cost.gen_tok_per_s, target.cost.prompt_tok_per_s, draft.cost.gen_tok_per_s
            )
            known = pairs.get(target.key)
            if gain >= PAIR_WORTH and (known is None or gain > known.gain):
                pairs[target.key] = DraftPair(draft, gain, proposals)
    return pairs


@dataclass(frozen=True)
class CatalogAssessment:
    """Every catalog option with its verdict, and the one recommended for this machine (with why); ``pairs``: the
    options offered with a draft (by key)."""

    options: list[CatalogOption]
    recommended: CatalogOption | None
    reason: str | None
    available_bytes: int
    bandwidth_bytes_per_s: float
    pairs: Mapping[str, DraftPair] = field(default_factory=dict)

    @property
    def faster_choice(self) -> CatalogOption | None:
        """The pick's own model in a smaller file that writes clearly faster here, when the pick writes not much
        faster than people read (Granite 4.0 H Tiny: Q8_0 at ~10 tokens/s, Q4_K_M at ~16); None otherwise."""
        pick = self.recommended
        if pick is None or pick.expected_tok_per_s >= 2 * COMFORTABLE_TOK_PER_S:
            return None
        faster = [
            o
            for o in self.options
            if o.entry.id == pick.entry.id
            and o.verdict.verdict == "fits"
            and o.quant.estimated_bytes < pick.quant.estimated_bytes
            and o.expected_tok_per_s >= FASTER_BY * pick.expected_tok_per_s
        ]
        return max(faster, key=lambda o: o.expected_tok_per_s, default=None)


FASTER_BY = 1.25  # a speed a person notices beside the pick
QUALITY_WORDS = {
    "F16": "the original quality",
    "BF16": "the original quality",
    "Q8_0": "near the original quality",
    "Q6_K": "very close to the original",
    "Q5_K_M": "a little closer to the original than Q4_K_M",
    "Q4_K_M": "a small loss of quality few people notice",
    "MXFP4": "the format it was trained in",
}


def trade_off_words(pick: CatalogOption, faster: CatalogOption | None) -> str:
    """The pick in what a person weighs — its download, its speed here, its quality — and the faster file."""

    def said(option: CatalogOption) -> str:
        quality = QUALITY_WORDS.get(option.quant.quant, f"{option.quant.bits_per_weight:.1f} bits a weight")
        return (
            f"{format_size(option.quant.estimated_bytes)} to download, about {option.expected_tok_per_s:.0f} "
            f"tokens/s here, {quality}"
        )

    words = f"{pick.entry.name} {pick.quant.quant}: {said(pick)}."
    if faster is not None:
        words += f" Faster and smaller: {faster.quant.quant} — {said(faster)}."
    return words


def assess_catalog(
    entries: Iterable[CatalogEntry],
    available: int,
    total: int,
    bandwidth: float,
    installed_files: Iterable[Path] = (),
    facts: MachineFacts | None = None,
    previous: str | None = None,
    installed_metadata: Mapping[str, ModelMetadata] | None = None,
    installed_projectors: Iterable[str] = (),
) -> CatalogAssessment:
    """Judge each option as the model chooser would judge the file; the recommendation is the best quality that
    fits comfortably with a useful context at a usable speed (the same ranking as for models on disk).
    ``installed_projectors``: the installed models (paths) that a projector beside them lets see."""
    seeing = set(installed_projectors)
    pairs = [(entry, quant) for entry in entries for quant in entry.quants]
    metas = {option_key(entry, quant): entry.metadata(quant) for entry, quant in pairs}
    facts = facts or MachineFacts(None, 1, available, total, bandwidth)
    costs = {key: cost_here(meta, facts) for key, meta in metas.items()}
    best, ranked = choose_model(
        list(metas.values()),
        available,
        total,
        bandwidth,
        COMFORTABLE_TOK_PER_S,
        estimates={key: cost.memory for key, cost in costs.items()},
        previous=previous,
        cpu_features=facts.cpu_features,
    )
    by_key = {rec.path: rec for rec in ranked}
    on_disk = {path.name.lower(): path for path in installed_files}
    options = []
    for entry, quant in pairs:
        rec = by_key[option_key(entry, quant)]
        installed = on_disk.get(quant.file_name.lower())
        read = (installed_metadata or {}).get(str(installed)) if installed else None
        options.append(
            CatalogOption(
                entry,
                quant,
                rec.verdict,
                rec.expected_tok_per_s,
                installed,
                best is not None and rec.path == best.path,
                costs[option_key(entry, quant)],
                tuple(entry.header_differences(read)) if read is not None else (),
                bool(installed and entry.projector and str(installed) not in seeing),
            )
        )
    chosen = next((option for option in options if option.recommended), None)
    reason = best.reason if best else None
    return CatalogAssessment(options, chosen, reason, available, bandwidth, draft_pairs(options))


def assess_catalog_here(models_dir: Path, cache_dir: Path, extra_folders: Iterable[Path] = ()) -> CatalogAssessment:
    """The catalog judged for this machine: its free RAM, its measured memory bandwidth (cached per machine) and
    the models already on disk (marked installed)."""
    scan = scan_models(models_dir, cache_dir, list(extra_folders))
    memory = psutil.virtual_memory()
    profile = detect_hardware(probe_build=False)
    cache = MachineCache(cache_dir / MachineCache.FILE_NAME)
    speed = bandwidth(profile, cache)
    installed = [Path(model.path) for model in scan.usable]
    facts = machine_facts(profile, cache)
    read = {model.path: model.metadata for model in scan.usable if model.metadata}
    assessment = assess_catalog(
        load_catalog(),
        memory.available,
        memory.total,
        speed,
        installed,
        facts,
        cache.recommended(profile, "catalog"),
        read,
        [model.path for model in scan.usable if model.projector],
    )
    cache.set_recommended(profile, "catalog", assessment.recommended.key if assessment.recommended else None)
    return assessment
