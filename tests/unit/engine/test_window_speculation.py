"""Which window replies check proposals (``WindowSpeculation.writing``): none when speculation is off for the
model, none with Mirostat (whose draws this loop does not make as ``Llama.generate`` does), else every one —
greedy and sampled alike, since each token written is one draw of the reply's own sampler."""

from __future__ import annotations

from typing import Any, cast

from fara_desktop.engine.window_speculation import SpeculativeWriting, WindowSpeculation
from fara_desktop.vocabulary.sampling import SamplingParams

LLM = cast(Any, object())  # no decode happens until the writer's tokens are asked for


def test_off_or_mirostat_writes_plainly_and_greedy_or_sampled_replies_check_proposals():
    on, off = WindowSpeculation(True), WindowSpeculation(False)
    assert off.writing(LLM, SamplingParams(temperature=0.0)) is None
    assert on.writing(LLM, SamplingParams(temperature=0.8, mirostat_mode=2)) is None
    for sampling in (SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, seed=3)):
        writer = on.writing(LLM, sampling)
        assert isinstance(writer, SpeculativeWriting) and (writer.proposed, writer.accepted) == (0, 0)


def test_the_cost_a_token_is_measured_over_the_models_replies_not_each_alone():
    speculation = WindowSpeculation(True)
    first, second = (speculation.writing(LLM, SamplingParams()) for _ in range(2))
    assert first is not None and second is not None
    assert first._cost is second._cost is speculation.cost
