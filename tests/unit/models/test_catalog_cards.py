"""The catalog's figures against the models' own cards (issue 54, item 4): what Get models shows — context,
vocabulary, architecture, whether it reasons and how, whether it sees — must be what the maker says. Each row names
where its figures were read. Rows are added as entries are checked; this round: the entries the issue found wrong
and the ones checked beside them."""

from __future__ import annotations

import pytest

from fara_desktop.models.catalog import load_catalog

# id: (context, vocabulary, architecture, reasoning, sees pictures, where the figures are said)
CARDS = {
    "lfm2.5-1.2b-instruct": (32_768, 65_536, "lfm2", None, False,
                             "huggingface.co/LiquidAI/LFM2.5-1.2B-Instruct: 'Context length: 32,768 tokens' "
                             "(the GGUF header says 128,000: the position limit, not what it was trained for)"),
    "lfm2.5-8b-a1b": (128_000, 128_000, "lfm2moe", "always", False,
                      "huggingface.co/LiquidAI/LFM2.5-8B-A1B: 'Context length: 128,000', 'Vocabulary size: "
                      "128,000', 'Reasoning-tuned' (it emits its chain of thought before every answer)"),
    "qwen3.5-0.8b": (262_144, 248_320, "qwen35", "switch", True,
                     "huggingface.co/Qwen/Qwen3.5-0.8B: 262,144 tokens; thinking off by default for the small sizes"),
    "smollm3-3b": (65_536, 128_256, "smollm3", "switch", False,
                   "huggingface.co/HuggingFaceTB/SmolLM3-3B: extended thinking by default, /no_think turns it off"),
    "gemma-3-4b-it": (131_072, 262_144, "gemma3", None, True,
                      "huggingface.co/google/gemma-3-4b-it: 128K context, text and image input"),
}


@pytest.mark.parametrize("entry_id", sorted(CARDS))
def test_the_figures_shown_are_the_cards(entry_id):
    entry = next(e for e in load_catalog() if e.id == entry_id)
    context, vocabulary, architecture, reasoning, vision, source = CARDS[entry_id]
    shown = (entry.context_length, entry.n_vocab, entry.architecture, entry.reasoning, entry.vision)
    assert shown == (context, vocabulary, architecture, reasoning, vision), source


@pytest.mark.parametrize("entry_id", ["qwen3.5-0.8b", "qwen3.5-2b", "smollm3-3b", "lfm2.5-8b-a1b"])
def test_the_description_says_where_thinking_starts(entry_id):
    """Qwen3.5 0.8B and 2B start without thinking, SmolLM3 with it, LFM2.5 8B-A1B always reasons: the catalog said
    the opposite of the first three."""
    description = next(e for e in load_catalog() if e.id == entry_id).description
    expected = {"qwen3.5-0.8b": "answers directly unless thinking is switched on",
                "qwen3.5-2b": "answers directly unless thinking is switched on",
                "smollm3-3b": "thinks before it answers unless told not to",
                "lfm2.5-8b-a1b": "always reasons"}[entry_id]  # fmt: skip
    assert expected in description
