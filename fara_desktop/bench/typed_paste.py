"""A long paste that arrives in pieces (typed in by xdotool, or delivered by a slow X server under load), on a quiet
and a loaded machine, as the composer reads it: a read-ahead after each piece, the wait said two seconds after the
last piece's read-ahead began measuring, against the wait Enter pressed then would have meant; then, the user having
waited, how much of the prompt Enter finds already read (``read_ahead_reused_fraction``)."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from fara_desktop.bench.paste_forecast import FIRST_WORD, FORECAST_AFTER_S, SYSTEM, Events, busy_processes
from fara_desktop.bench.resume import PARAGRAPH
from fara_desktop.chats.prompt_wait import SHOWN_ABOVE_S, PromptSpeed, ReadAheadWait
from fara_desktop.engine.types import Finished, ModelLoaded, ReadAheadProgress
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

PIECE_CHARS = 160  # what arrives between two read-aheads
PIECE_GAP_S = 0.35  # longer than the composer's pause for text typed on at the end: each piece is read ahead


def typed_paste(model: Path, params: LoadParams, paste_chars: int, loaded: bool, rounds: int = 2) -> dict[str, Any]:
    """``typed_paste_forecast_over_measured`` (rounds where the box said a wait, or there was one to say) and
    ``read_ahead_reused_fraction``, ``loaded`` or quiet."""
    events = Events()
    worker = InferenceWorker(events.sink).start()
    forecasts: list[float] = []
    reused: list[float] = []
    text = " ".join([PARAGRAPH] * 60)[:paste_chars]
    try:
        mark = len(events.seen)
        worker.load_model(model, params)
        info = events.wait(lambda e: isinstance(e, ModelLoaded), mark)[1].info
        for round_number in range(rounds):
            speed = PromptSpeed(info.expected_prompt_tok_per_s, info.prompt_span_tokens)
            mark = len(events.seen)  # the model's last reply, on the quiet machine: the speed the window knows
            worker.generate([SYSTEM, ChatMessage("user", f"({round_number}) " + text[:1500])],
                            SamplingParams(temperature=0.0, max_tokens=2), 3000 + round_number)  # fmt: skip
            speed.observe(events.wait(lambda e: isinstance(e, Finished), mark)[1].stats)
            hogs = busy_processes(os.cpu_count() or 2) if loaded else []
            try:
                forecast, fraction = _one_paste(worker, events, speed, f"{round_number}: {text}", 4000 + round_number)
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
            reused.append(fraction)
            if forecast is not None:
                forecasts.append(forecast)
    finally:
        worker.shutdown(30)
    label = "loaded" if loaded else "quiet"
    return {
        f"typed_paste_forecast_over_measured_{label}": statistics.median(forecasts) if forecasts else None,
        f"typed_paste_forecast_rounds_{label}": [round(r, 3) for r in forecasts],
        f"read_ahead_reused_fraction_{label}": statistics.median(reused),
    }


def _one_paste(
    worker: InferenceWorker, events: Events, speed: PromptSpeed, text: str, conversation: int
) -> tuple[float | None, float]:
    """The paste arrives piece by piece; the wait said against the wait it meant (None: read before it was
    judged), and the part of the prompt Enter found read once the read-ahead had ended."""
    ahead = 0
    for end in range(PIECE_CHARS, len(text) + PIECE_CHARS, PIECE_CHARS):
        mark = len(events.seen)
        ahead = worker.read_ahead([SYSTEM, ChatMessage("user", text[:end])], None, conversation)
        time.sleep(PIECE_GAP_S)  # the pieces' pace: the benchmark plays what the X server delivers
    wait = ReadAheadWait(speed)
    said: tuple[float, float] | None = None  # when, and the seconds said
    began = 0.0
    while True:  # the last read-ahead's reports, in order, as the composer follows them
        arrived, event = events.wait_timed(lambda _t, e: isinstance(e, ReadAheadProgress) and e.ahead_id == ahead, mark)
        mark = events.seen.index((arrived, event)) + 1
        seconds = wait.seconds(event.ahead_id, event.tokens, event.cached, event.tok_per_s)
        began = began or arrived
        if said is None and not event.finished and arrived - began >= FORECAST_AFTER_S and event.tok_per_s > 0:
            said = (arrived, seconds)
        if event.finished:
            break
    worker.generate([SYSTEM, ChatMessage("user", text)], FIRST_WORD, conversation)
    answered, finished = events.wait_timed(lambda _t, e: isinstance(e, Finished), mark)
    stats = finished.stats
    fraction = 1 - stats.prompt_tokens_evaluated / max(stats.prompt_tokens, 1)
    if said is None:
        return None, fraction
    waited = answered - said[0]  # what Enter pressed as the box said it would have cost: the reading left, the reply
    if max(said[1], waited) < SHOWN_ABOVE_S:
        return None, fraction  # the box said nothing, and there was nothing to wait for
    return said[1] / waited, fraction
