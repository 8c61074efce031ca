"""Replies that run away: how often the model loops, whether the loop detector catches it, and whether it ever
cuts a reply that would have ended by itself.

Each prompt is answered with the detector off (up to ``max_tokens``), the way the window samples (the app's
defaults) and greedily; the detector is then run over the very pieces that streamed, so its verdict is the one it
would have given live. A reply that ran to the limit and ends in a repeated block is a loop; one the detector
fires on although it ended by itself is a normal reply cut (each is listed with the block, to be read).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.repetition import LoopDetector, repeated_period
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

PROMPTS = (
    "Summarise the plot of a detective story set in a lighthouse.",
    "Write a long story about a dragon who learns to bake bread.",
    "Explain how a refrigerator works, step by step.",
    "List twenty ideas for a child's birthday party.",
    "Write a Python function that parses a CSV file and sums a column, with comments.",
    "What are the causes of the French Revolution?",
    "Give me a weekly meal plan for a vegetarian family.",
    "Describe the water cycle to a ten-year-old.",
    "Write a poem about autumn leaves.",
    "Compare trains and planes for a trip from Paris to Rome.",
    "Explain recursion with an example.",
    "Write an email asking my landlord to fix the heating.",
    "What should I pack for a week of hiking in the Alps?",
    "Tell me about the history of the bicycle.",
    "Translate 'good morning, how are you?' into five languages and explain each.",
    "Write the rules of a card game you invent.",
)


def loop_detection(
    model: Path, params: LoadParams, max_tokens: int = 800, prompts: tuple[str, ...] = PROMPTS
) -> dict[str, Any]:
    """Loops caught, loops missed, normal replies cut and the tokens a caught loop would have cost."""
    samplers = {
        "app_defaults": SamplingParams(max_tokens=max_tokens, stop_loops=False, seed=7),
        "greedy": SamplingParams(temperature=0.0, max_tokens=max_tokens, stop_loops=False),
    }
    backend = LlamaBackend()
    backend.load(model, params)
    replies: list[dict[str, Any]] = []
    try:
        for label, sampling in samplers.items():
            for number, prompt in enumerate(prompts):
                seeded = replace(sampling, seed=number + 1) if sampling.temperature else sampling
                pieces, result = _answer(backend, prompt, seeded)
                replies.append(
                    _verdict(label, prompt, pieces, result.stats.completion_tokens, max_tokens, result.finish_reason)
                )
    finally:
        backend.unload()
    looped = [r for r in replies if r["looped"]]
    return {
        "loops": {
            "replies": len(replies),
            "max_tokens": max_tokens,
            "ran_to_the_limit": sum(1 for r in replies if r["tokens"] >= max_tokens),
            "looped_to_the_limit": len(looped),
            "loops_caught": sum(1 for r in looped if r["caught_at_token"] is not None),
            "loops_missed": sum(1 for r in looped if r["caught_at_token"] is None),
            "normal_replies_cut": sum(1 for r in replies if not r["looped"] and r["caught_at_token"] is not None),
            "tokens_saved": sum(r["tokens"] - r["caught_at_token"] for r in looped if r["caught_at_token"]),
            "tokens_in_loops": sum(r["tokens"] for r in looped),
            "details": replies,
        }
    }


def _answer(backend: LlamaBackend, prompt: str, sampling: SamplingParams) -> tuple[list[str], Any]:
    """The reply's streamed pieces and its result, from an empty context."""
    backend.forget_context()
    pieces: list[str] = []
    messages = [ChatMessage("system", "You are a helpful assistant."), ChatMessage("user", prompt)]
    result = backend.reply(
        backend.prepare(PromptRequest(messages, 64)),
        ReplyRequest(sampling, lambda: False, lambda text, *_: pieces.append(text)),
    )
    return pieces, result


def _verdict(label: str, prompt: str, pieces: list[str], tokens: int, max_tokens: int, finish: str) -> dict[str, Any]:
    detector = LoopDetector()
    caught = next((index + 1 for index, piece in enumerate(pieces) if detector.feed(piece)), None)
    text = "".join(pieces)
    period = repeated_period(text[-6000:])
    looped = finish in ("length", "context") and tokens >= max_tokens and period > 0
    return {
        "sampling": label,
        "prompt": prompt,
        "tokens": tokens,
        "finish": finish,
        "looped": looped,
        "caught_at_token": caught,
        "block": text[-period:][:200] if period else (text[-detector.period :][:200] if detector.period else ""),
    }
