"""Proposals from the reply's own text (issue 65's first method), in the engine: three copying tasks (a passage
quoted from a document, a pasted text given back with one word fixed, JSON re-formatted) and three free-writing
tasks, each written greedily with and without proposals, interleaved round by round; generation tok/s (from the
first token to the last) and the ratio with ÷ without, medians. The replies are compared token for token: a
quantized model's near-ties may round the other way in a decode of several tokens than in one, so where they part
is said (``speculative_text_shared_tokens_worst``); the suite checks equality on F32 models.

On a model of random weights (the real-size shapes) no text repeats; there the section measures what proposals
can give on this machine and what they cost: a drafter that always proposes the reply's own next tokens (the
ceiling: every proposal accepted) and one that is always wrong (the cost before the self-tuning turns it off)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fara_desktop.bench.speculative_mtp import mtp_rounds
from fara_desktop.bench.window_replies import in_the_window
from fara_desktop.engine.draft_model import DraftModel, DraftVocabularyError
from fara_desktop.engine.llama_loading import open_model
from fara_desktop.engine.llama_state import is_rewindable
from fara_desktop.engine.mtp_head import mtp_beside
from fara_desktop.engine.ngram_draft import DecodeCost, NgramDrafter
from fara_desktop.engine.sequence_batch import SequenceBatch
from fara_desktop.engine.window_speculation import WindowSpeculation
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.sampling import SamplingParams

DOCUMENT = (
    "The harbour of Aldmere was built in 1843 to shelter the herring fleet. Its north wall is 412 metres long and "
    "was rebuilt after the storm of 1911, when the sea broke through in three places. The lighthouse at the end of "
    "the wall was lit by oil until 1952 and by electricity since. Today the harbour holds forty small boats, a "
    "lifeboat station and a museum of the fishing trade, which is open from April to October. The town council "
    "repairs the wall every ten years; the last repair, in 2019, cost two million pounds and took eight months."
)
PASTED = (
    "Dear team, thank you for the quick work on the quarterly report. The figures for the northern region look "
    "right, but the southern region still shows last year's sales in the third table. Could you check the source "
    "spreadsheet before Friday? I will present the report to the board on Monday mornnig, so any changes need to "
    "reach me by Sunday evening. If something is unclear, call me on my mobile. Best regards, Anna"
)
RECORD = {
    "name": "Aldmere Harbour",
    "built": 1843,
    "wall": {"length_m": 412, "rebuilt": 1911},
    "boats": 40,
    "open": ["April", "May", "June", "July", "August", "September", "October"],
}
TASKS = {
    "quote a passage": f"{DOCUMENT}\n\nQuote, word for word, the sentence of this text about the lighthouse.",
    "fix one word": f"Give this text back exactly, with its one spelling mistake fixed:\n\n{PASTED}",
    "re-format JSON": f"Rewrite this JSON with two spaces of indentation, keys unchanged:\n{json.dumps(RECORD)}",
    "free: a story": "Write a short story about a cat who learns to swim.",
    "free: an explanation": "Explain to a child why the sky is blue.",
    "free: advice": "Give five pieces of advice for a first job interview.",
}


CEILING_COUNT = 4


class ScriptedDrafter(NgramDrafter):
    """Proposes the reply's known next tokens (``right``: four a step, all accepted — what proposals can give
    here), or tokens that are never the next (not ``right``: as many as the self-tuning says, until it stops)."""

    def __init__(self, reply: list[int], prompt_length: int, right: bool) -> None:
        super().__init__()
        self.reply, self.prompt_length, self.right = reply, prompt_length, right

    def draft(self, history: Sequence[int], cost: DecodeCost, others: int, room: int, writers: int = 1) -> list[int]:
        # the ceiling proposes CEILING_COUNT a step whatever they cost; the wrong one as the self-tuning says
        count = min(CEILING_COUNT, room) if self.right else self.count(cost, others, room, writers)
        written = len(history) - self.prompt_length
        upcoming = self.reply[written : written + count]
        return upcoming if self.right else [t - 1 if t > 0 else t + 1 for t in upcoming]  # never the model's


def _written(
    batch: SequenceBatch, prompt: list[int], sampling: SamplingParams, speculate: bool | NgramDrafter
) -> tuple[list[int], float]:
    """The reply's tokens and its generation speed (tokens after the first ÷ the seconds from first to last)."""
    times: list[float] = []
    tokens: list[int] = []

    def got(token: int) -> None:
        tokens.append(token)
        times.append(time.perf_counter())

    batch.add(prompt, sampling, got, speculate=speculate)
    batch.run()
    speed = (len(tokens) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
    return tokens, speed


def _window_rounds(
    llm: Any, prompts: dict[str, list[int]], sampling: SamplingParams, rounds: int
) -> tuple[dict[str, list[float]], int, int, bool]:
    """The window's replies with and without proposals, interleaved: each task's ratios, what was proposed and
    accepted, and whether every reply was plain decoding's."""
    window = WindowSpeculation.of(llm, True, is_rewindable(llm))
    ratios: dict[str, list[float]] = {name: [] for name in prompts}
    proposed = accepted = 0
    same = True
    for _ in range(rounds):
        for name, prompt in prompts.items():
            plain, plain_speed, _ = in_the_window(llm, prompt, sampling, None)
            fast, fast_speed, (n, m) = in_the_window(llm, prompt, sampling, window.writing(llm, sampling))
            proposed, accepted, same = proposed + n, accepted + m, same and plain == fast
            ratios[name].append(fast_speed / plain_speed if plain_speed else 0.0)
    return ratios, proposed, accepted, same


def _drafts(model: Path, smaller: Path | None, params: LoadParams, target: Any, n_ctx: int) -> dict[str, Any]:
    """Draft models over ``target`` by kind: the same file (it always agrees: the ceiling with the draft's own
    cost) and ``smaller`` where it shares the vocabulary; each with its ``Llama``, for the caller to close."""
    opened: dict[str, Any] = {}
    for kind, path in (("draft: the same model", model), ("draft: a smaller model", smaller)):
        if path is None:
            continue
        llm = open_model(path, read_gguf_header(path), params, None, None)[0]
        try:
            opened[kind] = (DraftModel(llm.model, target.model, n_ctx, 1, params.n_threads or 2), llm)
        except DraftVocabularyError:
            llm.close()
    return opened


def speculative(
    model: Path, params: LoadParams, out_tokens: int = 160, rounds: int = 3, smaller: Path | None = None
) -> dict[str, Any]:
    """The section's figures (see the module); ``smaller``: a draft model for this one, where its vocabulary is
    this one's."""
    llm, formatter, info, used = open_model(model, read_gguf_header(model), params, None, None)
    from fara_desktop.vocabulary.messages import ChatMessage

    sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=out_tokens, ignore_eos=True)
    kinds: tuple[str, ...] = ("text", "always right", "always wrong")
    drafts: dict[str, Any] = {}
    out_mtp: dict[str, Any] = {}
    try:
        prompts = {
            name: llm.tokenize(formatter.render([ChatMessage("user", text)]).text.encode(), special=True)
            for name, text in TASKS.items()
        }
        n_ctx = max(len(p) for p in prompts.values()) + out_tokens + 8
        drafts = _drafts(model, smaller, params, llm, n_ctx)
        kinds = (*kinds, *drafts)
        ratios: dict[str, dict[str, list[float]]] = {kind: {name: [] for name in TASKS} for kind in kinds}
        same = True
        shared = out_tokens  # the tokens every reply with proposals shared with plain decoding's before they parted
        proposed = dict.fromkeys(kinds, 0)
        accepted = dict.fromkeys(kinds, 0)
        batch = SequenceBatch(llm.model, n_ctx, 1, used.n_threads or 2)
        try:
            for _ in range(rounds):
                for name, prompt in prompts.items():
                    plain, plain_speed = _written(batch, prompt, sampling, False)
                    for kind in kinds:
                        drafter: NgramDrafter = (
                            NgramDrafter()
                            if kind == "text"
                            else drafts[kind][0].drafter()
                            if kind in drafts
                            else ScriptedDrafter(plain, len(prompt), kind == "always right")
                        )
                        before = (batch.proposed, batch.accepted)
                        fast, fast_speed = _written(batch, prompt, sampling, drafter)
                        proposed[kind] += batch.proposed - before[0]
                        accepted[kind] += batch.accepted - before[1]
                        same = same and plain == fast
                        if kind == "text":
                            shared = min(
                                shared,
                                next(
                                    (i for i, (a, b) in enumerate(zip(plain, fast, strict=False)) if a != b), len(plain)
                                ),
                            )
                        ratios[kind][name].append(fast_speed / plain_speed if plain_speed else 0.0)
        finally:
            batch.close()
        window, window_proposed, window_accepted, window_same = _window_rounds(llm, prompts, sampling, rounds)
        head = mtp_beside(llm, used.n_threads or 2) if info.mtp else None  # the file carries an MTP head
        if head is not None:
            try:
                out_mtp = mtp_rounds(llm, head, prompts, sampling, rounds)
            finally:
                head.close()
    finally:
        for draft, draft_llm in drafts.values():
            draft.close()
            draft_llm.close()
        llm.close()
    text = ratios["text"]
    out: dict[str, Any] = {f"speculative_ratio_{name}": round(statistics.median(r), 3) for name, r in text.items()}
    out["speculative_copying_worst_ratio"] = round(
        min(statistics.median(r) for name, r in text.items() if not name.startswith("free")), 3
    )
    out["speculative_free_worst_ratio"] = round(
        min(statistics.median(r) for name, r in text.items() if name.startswith("free")), 3
    )
    for kind, key in (("always right", "ceiling"), ("always wrong", "never_right")):
        out[f"speculative_{key}_ratio"] = round(statistics.median(x for r in ratios[kind].values() for x in r), 3)
    for kind in drafts:
        key = "draft_same_model" if "same" in kind else "draft_smaller_model"
        out[f"speculative_{key}_ratio"] = round(statistics.median(x for r in ratios[kind].values() for x in r), 3)
    for name, r in window.items():
        out[f"speculative_window_ratio_{name}"] = round(statistics.median(r), 3)
    out["speculative_window_copying_worst_ratio"] = round(
        min(statistics.median(r) for name, r in window.items() if not name.startswith("free")), 3
    )
    out["speculative_window_free_worst_ratio"] = round(
        min(statistics.median(r) for name, r in window.items() if name.startswith("free")), 3
    )
    out["speculative_window_accepted_of_proposed"] = f"{window_accepted}/{window_proposed}"
    out["speculative_window_same_replies"] = window_same
    out["speculative_same_replies"] = same
    out["speculative_text_shared_tokens_worst"] = shared
    out["speculative_accepted_of_proposed"] = {kind: f"{accepted[kind]}/{proposed[kind]}" for kind in kinds}
    out["speculative_rounds"] = {name: [round(x, 3) for x in r] for name, r in text.items()}
    return {**out, **out_mtp}
