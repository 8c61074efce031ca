"""The curated model catalog (``catalog.json``, shipped in the package) and what each entry means on this machine.

The catalog holds what a person needs to choose (name, size, license, one line of description) and the model's
shapes from its config.json, so that memory use and speed can be estimated before downloading anything. It
deliberately holds no file sizes or checksums: those come from the hub's listing at download time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.planning.tuning import FitVerdict, choose_model

CATALOG_FILE = Path(__file__).with_name("catalog.json")
# A model "runs well" when it writes faster than people read (about 5 words, 7-8 tokens, a second).
COMFORTABLE_TOK_PER_S = 8.0


class CatalogError(ValueError):
    """The catalog file is missing or malformed (a packaging fault, reported with the field at fault)."""


@dataclass(frozen=True)
class CatalogQuant:
    """One offered quantization of a catalog model."""

    quant: str
    file_name: str
    bits_per_weight: float
    estimated_bytes: int  # parameters × bits per weight: an estimate until the hub's listing gives the real size


@dataclass(frozen=True)
class CatalogEntry:
    """One curated model, with its quantizations and config shapes."""

    id: str
    name: str
    family: str
    repo: str
    description: str
    license: str
    architecture: str
    parameters: int
    context_length: int
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    sliding_window: int | None
    quants: tuple[CatalogQuant, ...]

    def quant(self, name: str) -> CatalogQuant:
        for quant in self.quants:
            if quant.quant.lower() == name.lower():
                return quant
        raise CatalogError(f"{self.name} is not offered as {name} (offered: {', '.join(self.quant_names)})")

    @property
    def quant_names(self) -> list[str]:
        return [q.quant for q in self.quants]

    def metadata(self, quant: CatalogQuant) -> ModelMetadata:
        """The facts the tuning model needs, as if the file were already here."""
        return ModelMetadata(
            path=option_key(self, quant),
            name=self.name,
            architecture=self.architecture,
            size_label=size_label(self.parameters),
            parameters=self.parameters,
            quantization=quant.quant,
            context_length=self.context_length,
            n_layer=self.n_layer,
            n_embd=self.n_embd,
            n_ff=self.n_ff,
            n_vocab=self.n_vocab,
            n_head=self.n_head,
            n_head_kv=self.n_head_kv,
            head_dim_k=self.head_dim,
            head_dim_v=self.head_dim,
            sliding_window=self.sliding_window,
            has_chat_template=True,
            license=self.license,
            file_bytes=quant.estimated_bytes,
            weights_bytes=quant.estimated_bytes,
            instruct=True,
        )


def size_label(parameters: int) -> str:
    return f"{parameters / 1e9:.1f}B" if parameters >= 1e9 else f"{parameters / 1e6:.0f}M"


def option_key(entry: CatalogEntry, quant: CatalogQuant) -> str:
    return f"{entry.repo}/{quant.file_name}"


def _entry(raw: Mapping[str, Any], quant_table: Mapping[str, Any]) -> CatalogEntry:
    try:
        quants = []
        for name in raw["quants"]:
            bits = float(quant_table[name]["bits_per_weight"])
            file_name = str(raw["file_pattern"]).format(quant=name, quant_lower=name.lower())
            quants.append(CatalogQuant(name, file_name, bits, int(int(raw["parameters"]) * bits / 8)))
        return CatalogEntry(
            id=str(raw["id"]),
            name=str(raw["name"]),
            family=str(raw["family"]),
            repo=str(raw["repo"]),
            description=str(raw["description"]),
            license=str(raw["license"]),
            architecture=str(raw["architecture"]),
            parameters=int(raw["parameters"]),
            context_length=int(raw["context_length"]),
            n_layer=int(raw["n_layer"]),
            n_embd=int(raw["n_embd"]),
            n_ff=int(raw["n_ff"]),
            n_head=int(raw["n_head"]),
            n_head_kv=int(raw["n_head_kv"]),
            head_dim=int(raw["head_dim"]),
            n_vocab=int(raw["n_vocab"]),
            sliding_window=int(raw["sliding_window"]) if raw.get("sliding_window") else None,
            quants=tuple(quants),
        )
    except KeyError as exc:
        raise CatalogError(f"catalog entry {raw.get('id', '?')!r}: missing {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise CatalogError(f"catalog entry {raw.get('id', '?')!r}: {exc}") from exc


def load_catalog(path: Path = CATALOG_FILE) -> list[CatalogEntry]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [_entry(raw, data["quantizations"]) for raw in data["models"]]
    except OSError as exc:
        raise CatalogError(f"cannot read the model catalog {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise CatalogError(f"the model catalog {path} is not valid JSON: {exc}") from exc
    except (KeyError, TypeError) as exc:
        raise CatalogError(f"the model catalog {path} lacks {exc}") from exc


@dataclass(frozen=True)
class CatalogOption:
    """One (model, quantization) pair judged for this machine."""

    entry: CatalogEntry
    quant: CatalogQuant
    verdict: FitVerdict
    expected_tok_per_s: float
    installed: Path | None
    recommended: bool

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
            "installed": str(self.installed) if self.installed else None,
            "recommended": self.recommended,
        }


@dataclass(frozen=True)
class CatalogAssessment:
    """Every catalog option with its verdict, and the one recommended for this machine (with why)."""

    options: list[CatalogOption]
    recommended: CatalogOption | None
    reason: str | None
    available_bytes: int
    bandwidth_bytes_per_s: float


def assess_catalog(
    entries: Iterable[CatalogEntry],
    available: int,
    total: int,
    bandwidth: float,
    installed_files: Iterable[Path] = (),
) -> CatalogAssessment:
    """Judge each option as the model chooser would judge the file; the recommendation is the best quality that
    fits comfortably with a useful context at a usable speed (the same ranking as for models on disk)."""
    pairs = [(entry, quant) for entry in entries for quant in entry.quants]
    metas = {option_key(entry, quant): entry.metadata(quant) for entry, quant in pairs}
    best, ranked = choose_model(list(metas.values()), available, total, bandwidth, COMFORTABLE_TOK_PER_S)
    by_key = {rec.path: rec for rec in ranked}
    on_disk = {path.name.lower(): path for path in installed_files}
    options = []
    for entry, quant in pairs:
        rec = by_key[option_key(entry, quant)]
        options.append(
            CatalogOption(
                entry,
                quant,
                rec.verdict,
                rec.expected_tok_per_s,
                on_disk.get(quant.file_name.lower()),
                best is not None and rec.path == best.path,
            )
        )
    chosen = next((option for option in options if option.recommended), None)
    return CatalogAssessment(options, chosen, best.reason if best else None, available, bandwidth)


def assess_catalog_here(models_dir: Path, cache_dir: Path, extra_folders: Iterable[Path] = ()) -> CatalogAssessment:
    """The catalog judged for this machine: its free RAM, its measured memory bandwidth (cached per machine) and
    the models already on disk (marked installed)."""
    import psutil

    from fara_desktop.machine.hardware import detect_hardware
    from fara_desktop.machine.measurements import MachineCache
    from fara_desktop.models.discovery import scan_models
    from fara_desktop.planning.planner import bandwidth

    scan = scan_models(models_dir, cache_dir, list(extra_folders))
    memory = psutil.virtual_memory()
    profile = detect_hardware(probe_build=False)
    speed = bandwidth(profile, MachineCache(cache_dir / "machine.json"))
    installed = [Path(model.path) for model in scan.usable]
    return assess_catalog(load_catalog(), memory.available, memory.total, speed, installed)
