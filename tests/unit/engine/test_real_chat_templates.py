"""Every real chat template in llama.cpp's collection (70 released models, tests/fixtures/chat_templates) loads and
renders a four-message conversation the way Hugging Face's chat templating does: the system text is there, the
turns are in order, and the prompt ends with the assistant's opening."""

from __future__ import annotations

import pytest

from fara_desktop.engine.chat_format import SYSTEM_FOLDED_NOTE, JinjaChatFormatter
from fara_desktop.engine.types import ChatMessage
from tests.helpers.paths import FIXTURES

TEMPLATES = sorted((FIXTURES / "chat_templates").glob("*.jinja"))
CONVERSATION = [
    ChatMessage("system", "SYSTEM-TEXT-7"),
    ChatMessage("user", "USER-ONE"),
    ChatMessage("assistant", "ASSISTANT-ONE"),
    ChatMessage("user", "USER-TWO"),
]


def test_the_collection_is_all_there():
    assert len(TEMPLATES) >= 70


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_a_real_template_renders_the_conversation_in_order(path):
    formatter = JinjaChatFormatter(path.read_text(encoding="utf-8"), "<s>", "</s>")  # loads: no "broken template"
    prompt = formatter.render(CONVERSATION)
    text = prompt.text
    assert "SYSTEM-TEXT-7" in text  # wherever the template puts it (Mistral Nemo: in the last user turn)
    positions = [text.find(marker) for marker in ("USER-ONE", "ASSISTANT-ONE", "USER-TWO")]
    assert -1 not in positions and positions == sorted(positions), positions
    opening = text[positions[-1] + len("USER-TWO") :]
    assert opening.strip(), "the prompt must end with the assistant's opening, not the user's words"
    assert not any(marker in opening for marker in ("USER-", "ASSISTANT-ONE", "SYSTEM-TEXT"))


def test_gemma_2_refuses_the_system_role_and_gets_it_in_the_first_user_turn():
    formatter = JinjaChatFormatter((FIXTURES / "chat_templates" / "google-gemma-2-2b-it.jinja").read_text(), "", "")
    prompt = formatter.render(CONVERSATION)
    assert prompt.note == SYSTEM_FOLDED_NOTE
    assert "<start_of_turn>user\nSYSTEM-TEXT-7\n\nUSER-ONE" in prompt.text


def test_the_generation_tag_renders_its_body():
    formatter = JinjaChatFormatter(
        "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}[{{ m.content }}]{% endgeneration %}"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}",
        "",
        "",
    )
    assert formatter.render(CONVERSATION).text == "SYSTEM-TEXT-7USER-ONE[ASSISTANT-ONE]USER-TWO"
