"""A long paste that arrives in pieces (typed in by xdotool, or delivered by a slow X server under load), on a quiet
and a loaded machine, as the composer reads it: a read-ahead after each piece, the wait said two seconds after the
last piece's read-ahead began measuring, against the first word when Enter is pressed right then; and how much of
what the read-ahead had read by then the reply found kept (``read_ahead_reused_fraction``: the newcomer's 1,524
tokens read ahead came to "0 reused")."""

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
            asked = [SYSTEM, ChatMessage("user", f"({round_number}) " + text[:1500])]
            worker.generate(asked, SamplingParams(temperature=0.0, max_tokens=2), 3000 + round_number)
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
        f"read_ahead_reused_fraction_{label}": min(reused),  # the worst round: 1.0 kept all it read
    }


def _one_paste(
    worker: InferenceWorker, events: Events, speed: PromptSpeed, text: str, conversation: int
) -> tuple[float | None, float]:
    """The paste arrives piece by piece; Enter is pressed as the box says the wait (2 s into the last piece's
    read-ahead), or once it has read everything. The wait said over the wait it meant (None: nothing was said, and
    there was nothing to wait for), and the part of what the read-ahead had read that Enter found kept."""
    ahead = 0
    for end in range(PIECE_CHARS, len(text) + PIECE_CHARS, PIECE_CHARS):
        mark = len(events.seen)
        ahead = worker.read_ahead([SYSTEM, ChatMessage("user", text[:end])], None, conversation)
        time.sleep(PIECE_GAP_S)  # the pieces' pace: the benchmark plays what the X server delivers
    wait = ReadAheadWait(speed)
    said, began = 0.0, 0.0
    while True:  # the last read-ahead's reports, in order, as the composer follows them
        arrived, event = events.wait_timed(lambda _t, e: isinstance(e, ReadAheadProgress) and e.ahead_id == ahead, mark)
        mark = events.seen.index((arrived, event)) + 1
        said = wait.seconds(event.ahead_id, event.tokens, event.cached, event.tok_per_s)
        began = began or arrived
        if event.finished or (arrived - began >= FORECAST_AFTER_S and event.tok_per_s > 0):
            break
    read_by_then, entered = event.cached, time.perf_counter()
    worker.generate([SYSTEM, ChatMessage("user", text)], FIRST_WORD, conversation)
    answered, finished = events.wait_timed(lambda _t, e: isinstance(e, Finished), mark)
    stats = finished.stats
    kept = min(1.0, (stats.prompt_tokens - stats.prompt_tokens_evaluated) / max(read_by_then, 1))
    waited = answered - entered
    if max(said, waited) < SHOWN_ABOVE_S:
        return None, kept  # the box said nothing, and there was nothing to wait for
    return said / waited, kept
