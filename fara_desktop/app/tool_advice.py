"""What to say when the model in use cannot call tools: before the user relies on them — in the Tools menu, when
a tool is ticked, on the Tools page of Settings — with the catalog's models that can and what each costs here."""

from __future__ import annotations

from fara_desktop.engine.types import ModelInfo
from fara_desktop.planning.catalog_fit import CatalogAssessment
from fara_desktop.planning.tuning import COMFORTABLE_TOK_PER_S
from fara_desktop.text.format import format_size
from fara_desktop.text.untrusted import one_line

MAX_SUGGESTIONS = 3
# The smallest offered to try tools with: below a billion parameters a model misformats its calls too often to
# learn from (a choice, not measured here: no trained model of that size is reachable from this machine).
SMALLEST_FOR_TOOLS = 1_000_000_000


def cannot_call_tools(info: ModelInfo | None) -> bool:
    """A model on this computer whose chat template declares no tools (a server's model is asked anyway)."""
    return info is not None and not info.tool_calls and not info.remote


def models_that_call_tools(assessment: CatalogAssessment | None, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """The catalog's models that call tools and fit here at a comfortable speed, one line each: "Qwen3 4B Instruct
    2507 (Q4_K_M, 2.5 GB download, about 11 tok/s here)"; already downloaded ones say so. First the smallest worth
    trying tools with (a newcomer's first download: the others were 3.9–11.3 GiB), then the largest."""
    if assessment is None:
        return []
    best: dict[str, tuple[int, str]] = {}
    for option in assessment.options:
        entry = option.entry
        comfortable = option.expected_tok_per_s >= COMFORTABLE_TOK_PER_S
        if not entry.tools or option.verdict.verdict != "fits" or not comfortable or entry.id in best:
            continue
        where = "downloaded" if option.installed else f"{format_size(option.quant.estimated_bytes)} download"
        best[entry.id] = (
            entry.parameters,
            f"{entry.name} ({option.quant.quant}, {where}, about {option.expected_tok_per_s:.0f} tok/s here)",
        )
    small = sorted((v for v in best.values() if v[0] >= SMALLEST_FOR_TOOLS), key=lambda item: item[0])[:1]
    large = [line for size, line in sorted(best.values(), key=lambda item: -item[0]) if (size, line) not in small]
    first = [line[:-1] + "; the smallest to try tools with)" for _size, line in small]
    return (first + large)[:limit]


def no_tools_words(info: ModelInfo, suggestions: list[str]) -> str:
    """The sentence that says it, and what to do."""
    what = (
        f"{one_line(info.name, 80)} cannot call tools: its chat template declares none, so a chat's tools are "
        "not offered to it and it would only pretend (a time or a result it makes up)."
    )
    if suggestions:
        return f"{what} Models that can, here: {'; '.join(suggestions)}. Get one with Model ▸ Get models…"
    return f"{what} Choose a model made for tool calling (Qwen 2.5/3, Llama 3.1+, Granite, LFM2, gpt-oss …)."
