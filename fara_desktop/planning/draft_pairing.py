"""A draft model for speculation (issue 65's second method), paired from the models on disk: a small model of
the same vocabulary writes proposals greedily and the chosen model checks them (``engine/draft_model.py``). Which
one is paired, and whether it fits beside the chosen model, is decided here; the engine still compares the two
vocabularies token by token at load and goes without a draft that differs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import psutil

from fara_desktop.models.discovery import DiscoveredModel
from fara_desktop.models.metadata import ModelMetadata, is_embedding_architecture
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import MemoryEstimate, estimate_memory, fit_verdict

# a draft pays only when it costs far less than the model it drafts for: SmolLM2-135M for its 1.7B (1/13),
# Qwen3.5 0.8B for its 4B (1/5) and 9B (1/11)
DRAFT_SHARE = 0.25


def pairs_as_draft(target: ModelMetadata, draft: ModelMetadata) -> bool:
    """Whether ``draft`` could draft for ``target``: the same vocabulary size (the engine checks the tokens' text)
    and at most ``DRAFT_SHARE`` of its parameters; never an embedding model."""
    return (
        target.n_vocab is not None
        and draft.n_vocab == target.n_vocab
        and 0 < draft.parameters <= target.parameters * DRAFT_SHARE
        and not is_embedding_architecture(draft.architecture)
    )


def draft_for(target: DiscoveredModel, models: Iterable[DiscoveredModel]) -> DiscoveredModel | None:
    """The largest model on disk that pairs as ``target``'s draft (the closest to it, the most often right), or
    None."""
    if target.metadata is None:
        return None
    pairs = [
        m
        for m in models
        if m.usable
        and not m.is_projector
        and m.path != target.path
        and not m.needs_assembly
        and m.metadata is not None
        and pairs_as_draft(target.metadata, m.metadata)
    ]
    return max(pairs, key=lambda m: m.metadata.parameters if m.metadata else 0, default=None)


def with_draft(
    target: DiscoveredModel, models: Iterable[DiscoveredModel], params: LoadParams, estimate: MemoryEstimate
) -> tuple[LoadParams, MemoryEstimate]:
    """``params`` naming the draft paired from ``models`` and ``estimate`` counting it (its weights, and its KV
    cache of the same context sized for the draft's own layers), where it fits beside the model comfortably
    now; else naming none, and ``estimate`` as it was (a draft never keeps a model from loading)."""
    paired = draft_for(target, models)
    if paired is None or paired.metadata is None or target.metadata is None:
        return replace(params, draft_model=""), estimate
    counted = replace(estimate, draft=estimate_memory(paired.metadata, estimate.n_ctx, params.kv_type).total)
    memory = psutil.virtual_memory()
    verdict = fit_verdict(target.metadata, estimate.n_ctx, memory.available, memory.total, estimate=counted)
    if verdict.verdict != "fits":
        return replace(params, draft_model=""), estimate
    return replace(params, draft_model=paired.path), counted
