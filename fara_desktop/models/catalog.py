"""The curated model catalog (``catalog.json``, shipped in the package); ``planning/catalog_fit`` judges it here.

The catalog holds what a person needs to choose (name, size, license, one line of description) and the model's
shapes from its config.json, so that memory use and speed can be estimated before downloading anything. It
deliberately holds no file sizes or checksums: those come from the hub's listing at download time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fara_desktop.models.architecture import OUTPUT_FIRST
from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.text.format import format_parameters

CATALOG_FILE = Path(__file__).with_name("catalog.json")
# A model "runs well" when it writes faster than people read (about 5 words, 7-8 tokens, a second).


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
    # What sets 2025-26 models apart (schema 2): experts, hybrid layers, a thinking phase, pictures
    n_expert: int = 0
    n_expert_used: int = 0
    active_parameters: int | None = None
    kv_layers: int | None = None
    recurrent_state_bytes: int = 0
    reasoning: str | None = None  # "switch": the template turns thinking on and off; "always"
    vision: bool = False  # a vision projector exists
    projector: str | None = None  # its file in ``repo``: downloaded with the model, into the model's own folder
    tools: bool = False  # its chat template declares tools in a call format this app reads
    released: int | None = None
    sources: tuple[str, ...] = ()
    # Gemma 4's E-models: per-layer inputs (a table read a row per word, kept on disk), the last layers reusing
    # earlier layers' KV, every ``global_every``-th layer global with heads ``global_head_dim`` wide
    per_layer_input: int = 0
    shared_kv_layers: int = 0
    global_every: int = 0
    global_head_dim: int = 0

    @property
    def kv_holding_layers(self) -> int:
        """The layers that keep a KV cache: the attending ones of a hybrid, all but those reusing others' KV."""
        return self.kv_layers if self.kv_layers is not None else self.n_layer - self.shared_kv_layers

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
        lazy = self.n_vocab * self.per_layer_input * self.n_layer  # parameters a word reads one row of
        used = (self.active_parameters or self.parameters) - lazy
        active = min(1.0, used / self.parameters) if self.parameters else 1.0
        recurrent_layers = self.n_layer - self.kv_layers if self.kv_layers is not None else 0
        per_parameter = quant.estimated_bytes / self.parameters if self.parameters else 0.0
        tied_again = self.n_vocab * self.n_embd if self.architecture in OUTPUT_FIRST else 0
        full_kv, swa_kv = self._kv_values()
        return ModelMetadata(
            path=option_key(self, quant),
            name=self.name,
            architecture=self.architecture,
            size_label=format_parameters(self.parameters),
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
            n_expert=self.n_expert,
            n_expert_used=self.n_expert_used,
            active_fraction=active,
            active_parameter_fraction=active,
            kv_layers=self.kv_layers
            if self.kv_layers is not None or not self.shared_kv_layers
            else self.kv_holding_layers,
            recurrent_layers=recurrent_layers,
            recurrent_state_bytes=self.recurrent_state_bytes,
            rewindable=recurrent_layers == 0,
            lazy_weights_bytes=int(lazy * per_parameter),
            duplicated_weights_bytes=int(tied_again * per_parameter),
            kv_values_full=full_kv,
            kv_values_swa=swa_kv,
        )

    def _kv_values(self) -> tuple[int | None, int | None]:
        """(global, windowed) KV values per word where the layers' heads differ in width, as the file's header
        would give them (``architecture._per_layer_kv_values``: V padded to the widest); (None, None) else."""
        if not self.global_head_dim:
            return None, None
        layers = self.kv_holding_layers
        globals_ = sum(1 for i in range(layers) if (i + 1) % self.global_every == 0) if self.global_every else 0
        v_max = self.n_head_kv * self.global_head_dim
        return (
            globals_ * (self.n_head_kv * self.global_head_dim + v_max),
            (layers - globals_) * (self.n_head_kv * self.head_dim + v_max),
        )

    def header_differences(self, meta: ModelMetadata) -> list[str]:
        """Where the file's own header says otherwise than this entry (the figures shown before the download):
        its architecture, depth, width, experts, attending layers, or a parameter count more than 10 % off."""
        found = []
        pairs = [
            ("architecture", self.architecture, meta.architecture),
            ("layers", self.n_layer, meta.n_layer),
            ("width", self.n_embd, meta.n_embd),
            ("experts", self.n_expert, meta.n_expert),
            ("experts used per word", self.n_expert_used, meta.n_expert_used),
        ]
        if self.kv_layers is not None or meta.kv_layers is not None:
            pairs.append(("layers with a KV cache", self.kv_holding_layers, meta.kv_layers or meta.n_layer))
        for what, listed, read in pairs:
            if listed != read:
                found.append(f"{what}: {read} in the file, {listed} in the catalog")
        if meta.parameters and abs(meta.parameters - self.parameters) > 0.1 * self.parameters:
            found.append(
                f"parameters: {format_parameters(meta.parameters)} in the file, "
                f"{format_parameters(self.parameters)} in the catalog"
            )
        return found


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
            n_expert=int(raw.get("n_expert", 0)),
            n_expert_used=int(raw.get("n_expert_used", 0)),
            active_parameters=int(raw["active_parameters"]) if raw.get("active_parameters") else None,
            kv_layers=int(raw["kv_layers"]) if raw.get("kv_layers") is not None else None,
            recurrent_state_bytes=int(raw.get("recurrent_state_bytes", 0)),
            reasoning=str(raw["reasoning"]) if raw.get("reasoning") else None,
            vision=bool(raw.get("vision", False)),
            projector=str(raw["projector"]) if raw.get("projector") else None,
            tools=raw.get("tools") is True,
            released=int(raw["released"]) if raw.get("released") else None,
            sources=tuple(str(source) for source in raw.get("sources", ())),
            per_layer_input=int(raw.get("per_layer_input", 0)),
            shared_kv_layers=int(raw.get("shared_kv_layers", 0)),
            global_every=int(raw.get("global_every", 0)),
            global_head_dim=int(raw.get("global_head_dim", 0)),
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
