"""What is said when the model in use cannot call tools: which models can, and what each costs here."""

from __future__ import annotations

from pathlib import Path

from fara_desktop.app.tool_advice import cannot_call_tools, models_that_call_tools, no_tools_words
from fara_desktop.engine.types import ModelInfo
from fara_desktop.models.catalog import load_catalog
from fara_desktop.planning.catalog_fit import assess_catalog

GIB = 1 << 30


def _info(tool_calls: str) -> ModelInfo:
    return ModelInfo(Path("/m/small.gguf"), "Small model", "llama", 2048, 8192, 2, 2, "f16", False, "gguf", 0.1, 1,
                     tool_calls=tool_calls)  # fmt: skip


def test_the_models_that_call_tools_here_are_the_catalogs_that_fit_at_a_comfortable_speed():
    assessment = assess_catalog(load_catalog(), 12 * GIB, 16 * GIB, 20e9)
    lines = models_that_call_tools(assessment)
    tool_names = {e.name for e in load_catalog() if e.tools}
    assert 1 <= len(lines) <= 3
    assert all(line.split(" (", 1)[0] in tool_names and "tok/s here" in line and "download" in line for line in lines)
    assert models_that_call_tools(assess_catalog(load_catalog(), GIB // 8, GIB // 4, 1e9)) == []  # nothing fits
    assert models_that_call_tools(None) == []


def test_it_is_said_for_a_local_model_without_tools_only():
    assert cannot_call_tools(_info(""))
    assert not cannot_call_tools(_info("hermes / qwen")) and not cannot_call_tools(None)
    words = no_tools_words(_info(""), ["Qwen3 4B Instruct 2507 (Q4_K_M, 2.5 GB download, about 11 tok/s here)"])
    assert words.startswith("Small model cannot call tools") and "Qwen3 4B" in words and "Get models" in words


def test_a_download_is_suggested_only_when_far_more_capable_than_the_best_model_here():
    """Issue 43, item 4: a first start with only the 135M model suggests the catalog's pick for this computer,
    with its size, the time to download it and its speed here; nothing when a capable model is already here."""
    from fara_desktop.app.download_advice import download_suggestion

    catalog = load_catalog()
    assessment = assess_catalog(catalog, 12 * GIB, 16 * GIB, 20e9)
    assert assessment.recommended is not None
    tiny = next(e for e in catalog if e.id == "smollm2-135m-instruct")
    text = download_suggestion(assessment, [tiny.metadata(tiny.quants[0])])
    pick = assessment.recommended
    assert text is not None and text.startswith(f"Worth downloading for this computer: {pick.entry.name} (")
    assert "at 50\u00a0Mbit\u2060/\u2060s" in text and "tok/s here" in text  # never broken as "Mbit/ s" (issue 53)
    assert download_suggestion(assessment, [pick.entry.metadata(pick.quant)]) is None  # as good a model is here
    slow = assess_catalog(catalog, 20 * GIB, 24 * GIB, 20e9)  # Granite 4.0 H Tiny's Q8_0 at ~10 tok/s (issue 54)
    said = download_suggestion(slow, [tiny.metadata(tiny.quants[0])])
    assert said is not None and "Its Q4_K_M file is smaller and faster: 3.92 GiB" in said
    assert download_suggestion(None, []) is None


def test_the_smallest_model_worth_trying_tools_with_is_offered_first():
    """Issue 64, item 8: the models offered for tools were 3.9–11.3 GiB; a newcomer gets the smallest catalog model
    that calls tools (of a billion parameters or more) first, with its size and speed here."""
    from fara_desktop.app.tool_advice import SMALLEST_FOR_TOOLS

    assessment = assess_catalog(load_catalog(), 16 * GIB, 24 * GIB, 20e9)
    lines = models_that_call_tools(assessment)
    assert lines[0].endswith("; the smallest to try tools with)")
    sizes = {o.entry.name: o.entry.parameters for o in assessment.options if o.entry.tools}
    first = lines[0].split(" (", 1)[0]
    fitting = [o for o in assessment.options if o.entry.tools and o.verdict.verdict == "fits"
               and o.expected_tok_per_s >= 8 and o.entry.parameters >= SMALLEST_FOR_TOOLS]  # fmt: skip
    assert sizes[first] == min(o.entry.parameters for o in fitting)
    assert "download" in lines[0] and "tok/s here" in lines[0]
