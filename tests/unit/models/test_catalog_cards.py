"""The catalog's figures against the models' own cards (issue 54, item 4): what Get models shows — context,
vocabulary, architecture, whether it reasons and how, whether it sees — must be what the maker says. Each row names
where its figures were read. Every entry has a row."""

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
    "gemma-3-1b-it": (32_768, 262_144, "gemma3", None, False,
                      "huggingface.co/google/gemma-3-1b-it: 32K context for the 1B size, text only"),
    "qwen3.5-2b": (262_144, 248_320, "qwen35", "switch", True,
                   "huggingface.co/Qwen/Qwen3.5-2B: 262,144 tokens, image input; thinking off by default"),
    "qwen3.5-4b": (262_144, 248_320, "qwen35", "switch", True,
                   "huggingface.co/Qwen/Qwen3.5-4B: 262,144 tokens, image input; thinks by default"),
    "qwen3.5-9b": (262_144, 248_320, "qwen35", "switch", True,
                   "huggingface.co/Qwen/Qwen3.5-9B: 262,144 tokens, image input; thinks by default"),
    "qwen3-4b-instruct-2507": (262_144, 151_936, "qwen3", None, False,
                               "huggingface.co/Qwen/Qwen3-4B-Instruct-2507: 'Context Length: 262,144 natively', "
                               "'supports only non-thinking mode'"),
    "qwen3-30b-a3b-instruct-2507": (262_144, 151_936, "qwen3moe", None, False,
                                    "huggingface.co/Qwen/Qwen3-30B-A3B-Instruct-2507: 262,144 natively, "
                                    "non-thinking only"),
    "gpt-oss-20b": (131_072, 201_088, "gpt-oss", "always", False,
                    "huggingface.co/openai/gpt-oss-20b: 128k context (131,072 positions), o200k_harmony "
                    "vocabulary of 201,088; always reasons (low/medium/high effort)"),
    "granite-4.0-micro": (131_072, 100_352, "granite", None, False,
                          "huggingface.co/ibm-granite/granite-4.0-micro: 128K context, vocabulary 100,352"),
    "granite-4.0-h-tiny": (131_072, 100_352, "granitehybrid", None, False,
                           "huggingface.co/ibm-granite/granite-4.0-h-tiny: 128K context, Mamba-2 hybrid"),
    "fara-7b": (128_000, 152_064, "qwen2vl", None, True,
                "huggingface.co/microsoft/Fara-7B: Qwen2.5-VL-7B based, screenshots in, 128,000 positions"),
    "smollm2-135m-instruct": (8_192, 49_152, "llama", None, False,
                              "huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct: 8,192 context"),
    "smollm2-360m-instruct": (8_192, 49_152, "llama", None, False,
                              "huggingface.co/HuggingFaceTB/SmolLM2-360M-Instruct: 8,192 context"),
    "smollm2-1.7b-instruct": (8_192, 49_152, "llama", None, False,
                              "huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct: 8,192 context"),
    "qwen2.5-0.5b-instruct": (32_768, 151_936, "qwen2", None, False,
                              "huggingface.co/Qwen/Qwen2.5-0.5B-Instruct: 'Context Length: Full 32,768 tokens'"),
    "qwen2.5-1.5b-instruct": (32_768, 151_936, "qwen2", None, False,
                              "huggingface.co/Qwen/Qwen2.5-1.5B-Instruct: 'Context Length: Full 32,768 tokens'"),
    "qwen2.5-3b-instruct": (32_768, 151_936, "qwen2", None, False,
                            "huggingface.co/Qwen/Qwen2.5-3B-Instruct: 'Context Length: Full 32,768 tokens'"),
    "llama-3.2-1b-instruct": (131_072, 128_256, "llama", None, False,
                              "huggingface.co/meta-llama/Llama-3.2-1B-Instruct: 128k context, text only"),
    "llama-3.2-3b-instruct": (131_072, 128_256, "llama", None, False,
                              "huggingface.co/meta-llama/Llama-3.2-3B-Instruct: 128k context, text only"),
    "phi-3.5-mini-instruct": (131_072, 32_064, "phi3", None, False,
                              "huggingface.co/microsoft/Phi-3.5-mini-instruct: 128K context, vocabulary 32,064"),
    "phi-4-mini-instruct": (131_072, 200_064, "phi3", None, False,
                            "huggingface.co/microsoft/Phi-4-mini-instruct: 128K context, vocabulary 200,064"),
    "fara1.5-4b": (262_144, 248_320, "qwen35", None, True,
                   "github.com/microsoft/fara (README, 2026-07-22): Fara1.5-4B/9B/27B, native computer-use agents "
                   "built on Qwen3.5 (its shapes and positions); screenshots in, a thought and an action out"),
    "fara1.5-9b": (262_144, 248_320, "qwen35", None, True,
                   "github.com/microsoft/fara (README, 2026-07-22): built on Qwen3.5-9B"),
    "gemma-4-e2b-it": (131_072, 262_144, "gemma4", "switch", True,
                       "huggingface.co/google/gemma-4-E2B-it config.json: max_position_embeddings 131072, "
                       "vocab_size 262144; its template thinks only when enable_thinking is set"),
    "gemma-4-e4b-it": (131_072, 262_144, "gemma4", "switch", True,
                       "huggingface.co/google/gemma-4-E4B-it config.json: max_position_embeddings 131072, "
                       "vocab_size 262144"),
    "ministral-3-3b-instruct": (262_144, 131_072, "mistral3", None, True,
                                "huggingface.co/mistralai/Ministral-3-3B-Instruct-2512: 256k context window, vision, "
                                "instruct (the Reasoning variant is a separate model); vocabulary 131,072"),
}

# id: the projector's file in the entry's repository (downloaded with the model), where it is named
PROJECTORS = {
    "qwen3.5-0.8b": ("mmproj-F16.gguf", "huggingface.co/unsloth/Qwen3.5-0.8B-GGUF (every size's is mmproj-F16.gguf)"),
    "qwen3.5-2b": ("mmproj-F16.gguf", "huggingface.co/unsloth/Qwen3.5-2B-GGUF"),
    "qwen3.5-4b": ("mmproj-F16.gguf", "huggingface.co/unsloth/Qwen3.5-4B-GGUF"),
    "qwen3.5-9b": ("mmproj-F16.gguf", "huggingface.co/unsloth/Qwen3.5-9B-GGUF"),
    "fara-7b": ("mmproj-microsoft_Fara-7B-f16.gguf", "huggingface.co/bartowski/microsoft_Fara-7B-GGUF"),
    "fara1.5-4b": ("mmproj-Fara1.5-4B-f16.gguf", "huggingface.co/bartowski/Fara1.5-4B-GGUF"),
    "fara1.5-9b": ("mmproj-Fara1.5-9B-f16.gguf", "huggingface.co/bartowski/Fara1.5-9B-GGUF"),
    "gemma-3-4b-it": ("mmproj-google_gemma-3-4b-it-f16.gguf", "huggingface.co/bartowski/google_gemma-3-4b-it-GGUF"),
    "gemma-4-e2b-it": ("mmproj-F16.gguf", "huggingface.co/unsloth/gemma-4-E2B-it-GGUF"),
    "gemma-4-e4b-it": ("mmproj-F16.gguf", "huggingface.co/unsloth/gemma-4-E4B-it-GGUF"),
    "ministral-3-3b-instruct": ("Ministral-3-3B-Instruct-2512-BF16-mmproj.gguf",
                                "huggingface.co/mistralai/Ministral-3-3B-Instruct-2512-GGUF"),
}


def test_every_model_that_sees_names_the_projector_its_download_brings():
    """Issue 54, item 2: a model that sees comes with the file that makes it see, not a note to find it by hand."""
    seeing = {e.id: e.projector for e in load_catalog() if e.vision}
    assert seeing == {entry_id: name for entry_id, (name, _source) in PROJECTORS.items()}
    assert all(e.projector is None for e in load_catalog() if not e.vision)
    assert not [e.id for e in load_catalog() if "mmproj" in e.description]  # no "put it beside it by hand"


def test_every_entry_has_a_row():
    """A new entry must be read against its card before it is shown."""
    assert {e.id for e in load_catalog()} <= set(CARDS)


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


@pytest.mark.parametrize(("entry_id", "shape"), [("gemma-4-e2b-it", "gemma4-e2b"), ("gemma-4-e4b-it", "gemma4-e4b")])
def test_gemma_4_is_judged_before_the_download_as_its_file_will_be(entry_id, shape, tmp_path):
    """The catalog's figures for Gemma 4 (what a word touches, what the cache keeps) are those the file's own
    header gives, read from a file with the keys of its config.json: 2.3B of E2B's 4.6B parameters at work."""
    import gguf

    from fara_desktop.models.gguf_file import read_gguf_header
    from fara_desktop.models.metadata import metadata_from_header
    from tests.helpers.real_shapes import SHAPES, write_shape_keys

    path = tmp_path / "keys.gguf"
    writer = gguf.GGUFWriter(str(path), "gemma4")
    write_shape_keys(writer, SHAPES[shape])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    read = metadata_from_header(read_gguf_header(path))
    entry = next(e for e in load_catalog() if e.id == entry_id)
    meta = entry.metadata(entry.quant("Q4_K_M"))
    assert (meta.kv_layers, meta.kv_values_full, meta.kv_values_swa) == (read.kv_layers, read.kv_values_full,
                                                                          read.kv_values_swa)  # fmt: skip
    assert entry.header_differences(read) == []
    assert (meta.recurrent_layers, meta.rewindable) == (0, True)
    at_work = {"gemma-4-e2b-it": 2_279_759_360, "gemma-4-e4b-it": 4_644_441_344}[entry_id]  # the real shapes'
    assert meta.active_parameters == pytest.approx(at_work, rel=0.001)
    assert meta.resident_weights_bytes < 0.75 * meta.weights_bytes  # the per-layer table stays on disk
