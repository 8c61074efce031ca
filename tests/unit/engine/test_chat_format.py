"""Chat formats: fallbacks by architecture, Jinja templates in a sandbox, strangers' templates refused,
bounded and stoppable, and the worker's reports about them."""

from __future__ import annotations

import logging
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from jinja2.exceptions import SecurityError

from fara_desktop.engine.chat_format import (
    GEMMA_TURNS,
    SYSTEM_FOLDED_NOTE,
    TRANSCRIPT,
    JinjaChatFormatter,
    formatter_for,
)
from fara_desktop.engine.errors import RequestCancelled, TemplateRenderError
from fara_desktop.engine.types import Cancelled, Failed, Finished, ModelLoaded, PromptAdjusted
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.fakes import FakeBackend

MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello")]


def test_fallbacks_by_architecture():
    assert formatter_for(None, "gemma3", "<bos>", "<eos>") is GEMMA_TURNS
    assert formatter_for("", "llama", "<s>", "</s>") is TRANSCRIPT
    assert isinstance(formatter_for("{{ messages }}", "llama", "<s>", "</s>"), JinjaChatFormatter)


def test_gemma_fallback_folds_the_system_prompt_into_the_first_turn():
    rendered = GEMMA_TURNS.render([*MESSAGES, ChatMessage("user", "Bye")])
    assert rendered.text == (
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert rendered.add_bos


def test_gemma_fallback_keeps_a_system_prompt_with_no_user_turn_to_open():
    rendered = GEMMA_TURNS.render([ChatMessage("system", "Be brief.")])
    assert rendered.text == "<start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>model\n"
    assert rendered.stop == ("<end_of_turn>",)


def test_transcript_fallback():
    rendered = TRANSCRIPT.render(MESSAGES)
    assert rendered.text.endswith("### Assistant:\nHello\n\n### Assistant:\n")
    assert rendered.stop == ("\n### ",)


def test_jinja_template_renders_in_a_sandbox():
    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ bos_token }}"
    rendered = JinjaChatFormatter(template, "<s>", "</s>").render(MESSAGES)
    assert rendered.text == "<system>Be brief.<user>Hi<assistant>Hello<s>"
    assert not rendered.add_bos


HOSTILE_TEMPLATES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ messages.__class__.__init__.__globals__['sys'].modules['os'].system('touch /tmp/pwned') }}",
    "{% for m in messages %}{{ m.update({'role': 'system'}) }}{% endfor %}",
]


@pytest.mark.parametrize("template", HOSTILE_TEMPLATES)
def test_a_hostile_chat_template_can_neither_read_files_nor_run_code(template):
    formatter = JinjaChatFormatter(template, "<s>", "</s>")
    with pytest.raises(TemplateRenderError, match="access to attribute") as caught:
        formatter.render([ChatMessage("user", "hi")])
    assert isinstance(caught.value.__cause__, SecurityError)  # the sandbox refused it, not some accident
    assert not Path("/tmp/pwned").exists()


def test_templates_get_the_immutable_sandbox():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    formatter = JinjaChatFormatter("{{ messages[0].content }}", "", "")
    assert isinstance(formatter._template.environment, ImmutableSandboxedEnvironment)


GEMMA2 = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)


CONVERSATION = [
    ChatMessage("system", "Answer like a pirate."),
    ChatMessage("user", "Hello"),
    ChatMessage("assistant", "Ahoy"),
    ChatMessage("user", "Where is the treasure?"),
]


class TemplateBackend(FakeBackend):
    """The scripted backend, but its prompt goes through a real chat template."""

    def __init__(self, template: str) -> None:
        super().__init__()
        self.formatter = JinjaChatFormatter(template, "", "")

    def prepare(self, request):
        prompt = super().prepare(request)
        rendered = self.formatter.render(request.messages, request.should_cancel, request.thinking)
        return type(prompt)(prompt.messages, 0, rendered.note, rendered.reasoning, rendered)


def _worker(template: str, event_log) -> InferenceWorker:
    worker = InferenceWorker(event_log, TemplateBackend(template)).start()
    worker.load_model("fake.gguf")
    event_log.next_of(ModelLoaded)
    return worker


def test_a_template_without_system_role_gets_the_system_prompt_in_the_first_user_turn():
    rendered = JinjaChatFormatter(GEMMA2, "<bos>", "<eos>").render(CONVERSATION)
    assert rendered.note == SYSTEM_FOLDED_NOTE
    assert rendered.text.startswith("<bos><start_of_turn>user\nAnswer like a pirate.\n\nHello<end_of_turn>")
    assert rendered.text.endswith("<start_of_turn>model\n")


def test_turns_that_do_not_alternate_are_joined_for_a_strict_template():
    messages = [ChatMessage("user", "one"), ChatMessage("user", "two")]
    rendered = JinjaChatFormatter(GEMMA2, "", "").render(messages)
    assert "one\n\ntwo" in rendered.text and rendered.note and "alternate" in rendered.note


def test_a_refusal_is_reported_in_the_templates_own_words():
    formatter = JinjaChatFormatter("{{ raise_exception('Tool calls need a tools list') }}", "", "")
    with pytest.raises(TemplateRenderError, match="Tool calls need a tools list"):
        formatter.render(CONVERSATION)


def test_loop_controls_compile_like_on_the_hub():
    template = (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}[{{ m.content }}]"
        "{% if loop.index > 2 %}{% break %}{% endif %}{% endfor %}"
    )
    assert JinjaChatFormatter(template, "", "").render(CONVERSATION).text == "[Hello][Ahoy]"


@pytest.mark.parametrize(
    "template",
    [
        "{{ 'x' * 50000000 }}",
        "{{ 50000000 * 'x' }}",
        "{% set s = 'x' * 1000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",
        "{{ 'x' | center(400000000) }}",
        "{{ ('x' * 4000000) ~ ('y' * 4000000) ~ ('z' * 10000000) }}",
        "{{ [0] * 100000000 }}",
    ],
)
def test_templates_that_build_huge_text_are_stopped_before_they_allocate_it(template: str):
    tracemalloc.start()
    try:
        with pytest.raises(TemplateRenderError, match="characters"):
            JinjaChatFormatter(template, "", "").render(CONVERSATION)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20


@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% for m in messages %}{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}"
        "{% endfor %}{% endfor %}",
        "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    ],
)
def test_templates_that_run_forever_are_stopped_within_the_time_budget(template: str):
    started = time.monotonic()
    with pytest.raises(TemplateRenderError):
        JinjaChatFormatter(template, "", "").render(CONVERSATION)
    assert time.monotonic() - started < 5.0


def test_stop_reaches_a_template_that_runs_forever():
    formatter = JinjaChatFormatter(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "", ""
    )
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(RequestCancelled):
        formatter.render(CONVERSATION, should_cancel=stop.is_set)
    assert time.monotonic() - started < 1.0


def test_the_worker_reports_the_fold_and_still_replies(event_log):
    worker = _worker(GEMMA2, event_log)
    try:
        worker.generate(CONVERSATION, SamplingParams())
        note = event_log.next_of(PromptAdjusted)
        assert note.note == SYSTEM_FOLDED_NOTE
        assert isinstance(event_log.next_of(Finished, Failed), Finished)
    finally:
        worker.shutdown()


def test_stop_and_quit_are_not_held_up_by_a_runaway_template(event_log):
    worker = _worker("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", event_log)
    worker.generate(CONVERSATION, SamplingParams())
    started = time.monotonic()
    worker.cancel()
    assert isinstance(event_log.next_of(Cancelled, Failed, Finished, timeout=10), Cancelled)
    assert worker.shutdown(timeout=5.0)
    assert time.monotonic() - started < 2.0


def test_a_broken_template_gives_its_message_and_the_log_holds_no_message_text(event_log, caplog):
    worker = _worker("{{ raise_exception('Conversation roles must alternate') }}", event_log)
    secret = "my bank PIN is 4921"
    try:
        with caplog.at_level(logging.DEBUG):
            worker.generate([ChatMessage("user", secret)], SamplingParams())
            failed = event_log.next_of(Failed, Finished)
    finally:
        worker.shutdown()
    assert isinstance(failed, Failed)
    assert "Conversation roles must alternate" in failed.message
    assert failed.error_type == "TemplateRenderError"
    assert secret not in caplog.text


def test_an_unexpected_engine_error_logs_the_command_type_but_not_the_conversation(event_log, caplog):
    class Exploding(FakeBackend):
        def prepare(self, request):
            raise ZeroDivisionError("boom")

    worker = InferenceWorker(event_log, Exploding()).start()
    worker.load_model("fake.gguf")
    event_log.next_of(ModelLoaded)
    secret = "the password is hunter2"
    try:
        with caplog.at_level(logging.DEBUG):
            worker.generate([ChatMessage("user", secret)], SamplingParams())
            event_log.next_of(Failed)
    finally:
        worker.shutdown()
    assert "Generate(request" in caplog.text
    assert secret not in caplog.text
