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

from fara_desktop.format import format_parameters
from fara_desktop.models.metadata import ModelMetadata

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
        )


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
