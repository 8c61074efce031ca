"""The pick says its trade-off (issue 54, item 6): a new user was offered Granite 4.0 H Tiny at Q8_0 (6.87 GiB,
~10 tokens/s here) over the same model's Q4_K_M (~16 tokens/s), with a reason in MiB per word. The choice is said
in what a person weighs — download size, speed here, quality — and the faster, smaller file is offered beside it."""

from __future__ import annotations

from fara_desktop.models.catalog import load_catalog
from fara_desktop.planning.catalog_fit import assess_catalog, trade_off_words
from fara_desktop.text.format import GIB, format_size


def test_a_slow_high_precision_pick_offers_the_same_model_s_faster_smaller_file():
    assessment = assess_catalog(load_catalog(), 20 * GIB, 24 * GIB, 20e9)
    pick, faster = assessment.recommended, assessment.faster_choice
    assert pick is not None and faster is not None
    assert (pick.entry.id, pick.quant.quant, faster.entry.id, faster.quant.quant) == (
        "granite-4.0-h-tiny", "Q8_0", "granite-4.0-h-tiny", "Q4_K_M")  # fmt: skip
    assert faster.expected_tok_per_s > 1.4 * pick.expected_tok_per_s
    words = trade_off_words(pick, faster)
    for figure in (format_size(pick.quant.estimated_bytes), format_size(faster.quant.estimated_bytes),
                   f"about {pick.expected_tok_per_s:.0f} tokens/s", f"about {faster.expected_tok_per_s:.0f} tokens/s"):
        assert figure in words  # fmt: skip
    assert "near the original quality" in words and "per word" not in words


def test_a_pick_that_is_already_the_fast_file_offers_nothing_beside_it():
    assessment = assess_catalog([e for e in load_catalog() if e.id == "smollm2-360m-instruct"], 20 * GIB, 24 * GIB,
                                20e9)  # fmt: skip
    assert assessment.recommended is not None and assessment.recommended.quant.quant == "Q8_0"
    # its Q8_0 already writes far faster than anyone reads: no faster choice is worth the words
    assert assessment.faster_choice is None
    assert "tokens/s" in trade_off_words(assessment.recommended, None)
