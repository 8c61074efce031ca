"""The catalog's "calls tools" mark is what the models' real chat templates say (llama.cpp's collection and the
models' own, in tests/fixtures/chat_templates): the template declares tools in a call format this app reads."""

from __future__ import annotations

import pytest

from fara_desktop.engine.chat_format import formatter_for
from fara_desktop.models.catalog import load_catalog
from tests.helpers.paths import REPO_ROOT

TEMPLATES = REPO_ROOT / "tests/fixtures/chat_templates"
# catalog entry -> a real template of that family (the same template across its sizes)
TEMPLATE_OF = {
    "qwen3.5-4b": ("Qwen3.5-4B.jinja", "qwen35"),
    "qwen3-4b-instruct-2507": ("Qwen-Qwen3-0.6B.jinja", "qwen3"),
    "qwen2.5-3b-instruct": ("Qwen-Qwen2.5-7B-Instruct.jinja", "qwen2"),
    "llama-3.2-3b-instruct": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "llama"),
    "smollm3-3b": ("HuggingFaceTB-SmolLM3-3B.jinja", "smollm3"),
    "granite-4.0-micro": ("ibm-granite-granite-4.0.jinja", "granite"),
    "lfm2.5-1.2b-instruct": ("LFM2.5-Instruct.jinja", "lfm2"),
    "lfm2.5-8b-a1b": ("LFM2.5-8B-A1B.jinja", "lfm2moe"),
    "gpt-oss-20b": ("openai-gpt-oss-120b.jinja", "gpt-oss"),
    "phi-3.5-mini-instruct": ("microsoft-Phi-3.5-mini-instruct.jinja", "phi3"),
}


@pytest.mark.parametrize("entry_id", sorted(TEMPLATE_OF))
def test_the_catalogs_tools_mark_is_what_the_real_template_says(entry_id):
    entry = next(e for e in load_catalog() if e.id == entry_id)
    name, architecture = TEMPLATE_OF[entry_id]
    formatter = formatter_for((TEMPLATES / name).read_text(encoding="utf-8"), architecture, "<s>", "</s>")
    assert (formatter.tool_family is not None) == entry.tools, (entry_id, formatter.tool_family)
