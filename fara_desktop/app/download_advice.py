"""Whether a download is worth suggesting: the catalog's pick for this machine when it is far more capable than
the best chat model already here, with its size, the time to download it at a typical speed, and its speed here."""

from __future__ import annotations

from collections.abc import Iterable

from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.planning.catalog_fit import CatalogAssessment
from fara_desktop.planning.tuning import effective_parameters
from fara_desktop.text.format import format_plan_duration, format_size

TYPICAL_DOWNLOAD_BITS_PER_S = 50e6  # a home connection: what "time to download" is said at
MUCH_MORE_CAPABLE = 4.0  # the pick counts as this many times the parameters of the best model here (or more)


# a typical home line, written so that a line is never broken inside it ("Mbit/ s")
TYPICAL_LINE = "50\u00a0Mbit\u2060/\u2060s"


def download_suggestion(assessment: CatalogAssessment | None, installed: Iterable[ModelMetadata]) -> str | None:
    """A sentence for the welcome screen, or None when nothing much better fits (or it is downloaded already)."""
    pick = assessment.recommended if assessment is not None else None
    if pick is None or pick.installed is not None:
        return None
    best_here = max((effective_parameters(m) for m in installed if not m.embedding), default=0.0)
    if best_here and effective_parameters(pick.entry.metadata(pick.quant)) < MUCH_MORE_CAPABLE * best_here:
        return None
    size = pick.quant.estimated_bytes
    wait = format_plan_duration(size * 8 / TYPICAL_DOWNLOAD_BITS_PER_S)
    faster = assessment.faster_choice if assessment is not None else None
    smaller = (
        f" Its {faster.quant.quant} file is smaller and faster: {format_size(faster.quant.estimated_bytes)}, "
        f"about {faster.expected_tok_per_s:.0f} tok/s, a small loss of quality."
        if faster
        else ""
    )
    return (
        f"Worth downloading for this computer: {pick.entry.name} ({format_size(size)}, {wait} at {TYPICAL_LINE}; "
        f"about {pick.expected_tok_per_s:.0f} tok/s here), far more capable than the models you have.{smaller}"
    )
