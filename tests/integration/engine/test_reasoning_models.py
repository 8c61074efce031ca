"""Reasoning models through the real engine: tiny random-weight models of the R1-distill (``qwen2``) and Qwen3
shapes carrying those models' real chat templates, loaded by llama.cpp and run by the inference thread."""

from __future__ import annotations

import pytest

from fara_desktop.engine.types import Finished, ModelLoaded, ModelLoadFailed, TokenText
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.paths import FIXTURES

TEMPLATES = FIXTURES / "chat_templates"
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)
QUESTION = (ChatMessage("system", "Be brief."), ChatMessage("user", "What is a cat?"))


@pytest.fixture(scope="module")
def reasoning_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reasoning")
    r1 = (TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text(encoding="utf-8")
    qwen3 = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    return {
        "r1": write_tiny_model(folder / "r1-distill-qwen2.gguf", "qwen2", chat_template=r1, only_words=True),
        "qwen3": write_tiny_model(folder / "qwen3.gguf", "qwen3", chat_template=qwen3, only_words=True),
    }


def _reply(worker, event_log, messages, thinking=True):
    request = worker.generate(messages, GREEDY, thinking=thinking)
    pieces = []
    while True:
        event = event_log.next_of(TokenText, Finished)
        if isinstance(event, TokenText) and event.request_id == request:
            pieces.append(event)
        elif isinstance(event, Finished) and event.request_id == request:
            return event, pieces


def _load(worker, event_log, path):
    worker.load_model(path, LoadParams(n_ctx=512, prefault=False))
    event = event_log.next_of(ModelLoaded, ModelLoadFailed)
    assert isinstance(event, ModelLoaded), event
    return event.info


@pytest.fixture
def worker(event_log):
    worker = InferenceWorker(event_log).start()
    yield worker
    assert worker.shutdown(timeout=30)


@pytest.mark.real_model
def test_an_r1_distill_reply_starts_inside_the_reasoning_its_template_opened(worker, event_log, reasoning_models):
    info = _load(worker, event_log, reasoning_models["r1"])
    assert info.thinking_switch  # llama.cpp's copy of R1's template closes the block at once when thinking is off
    finished, pieces = _reply(worker, event_log, QUESTION)
    # R1's template ends the prompt with "<think>\n": all six tokens are reasoning, none is the answer
    assert finished.text == "" and finished.reasoning.split() and set(finished.reasoning.split()) <= {"cat", "dog"}
    assert finished.stats.reasoning_tokens == finished.stats.completion_tokens == 6
    assert pieces and all(p.reasoning for p in pieces)
    # the next turn: the template gets the answer as content; the reasoning never reaches the prompt
    history = (*QUESTION, ChatMessage("assistant", "A pet.", finished.reasoning), ChatMessage("user", "And a dog?"))
    again, _ = _reply(worker, event_log, history)
    without, _ = _reply(worker, event_log, (*history[:2], ChatMessage("assistant", "A pet."), history[3]))
    assert again.stats.prompt_tokens == without.stats.prompt_tokens
    off, _ = _reply(worker, event_log, QUESTION, thinking=False)
    assert off.reasoning == "" and off.text.split() and off.stats.reasoning_tokens == 0


@pytest.mark.real_model
def test_qwen3_thinks_or_not_as_the_chat_s_switch_says(worker, event_log, reasoning_models):
    info = _load(worker, event_log, reasoning_models["qwen3"])
    assert info.thinking_switch
    off, off_pieces = _reply(worker, event_log, QUESTION, thinking=False)
    # thinking off: the template closes an empty block in the prompt, so every token is the answer
    assert off.reasoning == "" and off.text.split() and off.stats.reasoning_tokens == 0
    assert off_pieces and not any(p.reasoning for p in off_pieces)
    on, _ = _reply(worker, event_log, QUESTION, thinking=True)
    assert on.stats.prompt_tokens < off.stats.prompt_tokens  # no empty block: the model may open its own
