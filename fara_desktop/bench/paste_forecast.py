"""The composer's wait for a long paste, on a quiet and on a loaded machine: what it says once the read-ahead has
read for a couple of seconds (at the speed the read-ahead measures now, and — as it said before — at the speed of
the model's last reply) against the wait for the first word when Enter is pressed then. The load starts after the last
reply, as when the user's other apps got busy: the forecast must follow the machine as it is now."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fara_desktop.bench.resume import PARAGRAPH
from fara_desktop.chats.prompt_wait import PromptSpeed
from fara_desktop.engine.types import Finished, ModelLoaded, ReadAheadProgress
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

FORECAST_AFTER_S = 2.0  # the wait is judged as the box says it this long after the paste (once it measured)
SYSTEM = ChatMessage("system", "You are a helpful assistant.")
FIRST_WORD = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)


class Events:
    """The worker's events with the time each arrived, waited for by kind."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, Any]] = []
        self._arrived = threading.Condition()

    def sink(self, event: Any) -> None:
        with self._arrived:
            self.seen.append((time.perf_counter(), event))
            self._arrived.notify_all()

    def wait(self, accept: Callable[[Any], bool], after: int) -> tuple[float, Any]:
        return self.wait_timed(lambda _t, e: accept(e), after)

    def wait_timed(self, accept: Callable[[float, Any], bool], after: int) -> tuple[float, Any]:
        """The first event since ``after`` that ``accept(arrived_at, event)`` takes."""
        with self._arrived:
            self._arrived.wait_for(lambda: any(accept(t, e) for t, e in self.seen[after:]))
            return next((t, e) for t, e in self.seen[after:] if accept(t, e))


def forecast_moment(events: Events, ahead: int, mark: int) -> tuple[int, ReadAheadProgress]:
    """Where the read-ahead's reading began, and what the box was told ``FORECAST_AFTER_S`` after, once it had
    measured its speed (or the end, when it read everything before)."""

    def progress(_arrived: float, event: Any) -> bool:
        return isinstance(event, ReadAheadProgress) and event.ahead_id == ahead

    began, first = events.wait_timed(progress, mark)

    def judged(arrived: float, event: Any) -> bool:
        return progress(arrived, event) and (
            event.finished or (arrived - began >= FORECAST_AFTER_S and event.tok_per_s > 0)
        )

    said: ReadAheadProgress = events.wait_timed(judged, mark)[1]
    return first.cached, said


def busy_processes(count: int) -> list[subprocess.Popen[bytes]]:
    """Other programs keeping the CPU busy: one spinning process per core."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def paste_forecast(model: Path, params: LoadParams, paste_tokens: int, loaded: bool, rounds: int = 2) -> dict[str, Any]:
    """``paste_forecast_over_measured`` (the wait said now / the reading it took) and the same at the last
    reply's speed, as the window said before it followed the read-ahead's speed."""
    events = Events()
    worker = InferenceWorker(events.sink).start()
    now_ratios: list[float] = []
    reply_ratios: list[float] = []
    speeds: list[float] = []
    words = " ".join([PARAGRAPH] * 60)
    try:
        mark = len(events.seen)
        worker.load_model(model, params)
        info = events.wait(lambda e: isinstance(e, ModelLoaded), mark)[1].info
        paste = words[: int(len(words) * min(1.0, paste_tokens / (len(words) / 4.2)))]
        for round_number in range(rounds):
            speed = PromptSpeed(info.expected_prompt_tok_per_s, info.prompt_span_tokens)
            mark = len(events.seen)  # the model's last reply, on the quiet machine: the speed the window knows
            worker.generate(
                [SYSTEM, ChatMessage("user", f"({round_number}) " + paste[:1500])],
                SamplingParams(temperature=0.0, max_tokens=2),
                1000 + round_number,
            )
            speed.observe(events.wait(lambda e: isinstance(e, Finished), mark)[1].stats)
            hogs = busy_processes(os.cpu_count() or 2) if loaded else []
            try:
                mark = len(events.seen)
                pasted = [SYSTEM, ChatMessage("user", f"{round_number}: {paste}")]
                start, said = forecast_moment(events, worker.read_ahead(pasted, None, 2000 + round_number), mark)
                entered, mark = time.perf_counter(), len(events.seen)  # Enter, as the box says it
                worker.generate(pasted, FIRST_WORD, 2000 + round_number)
                waited = events.wait_timed(lambda _t, e: isinstance(e, Finished), mark)[0] - entered
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
            left = said.tokens - said.cached
            if said.finished or left <= 0 or said.tok_per_s <= 0:
                continue  # read before it could be judged: paste more
            reply_ratios.append(speed.seconds_for(left, said.cached) / waited)
            speed.observe_read_ahead(said.tok_per_s, start, said.cached - start)
            now_ratios.append(speed.seconds_for(left, said.cached) / waited)
            speeds.append(said.tok_per_s)
    finally:
        worker.shutdown(30)
    label = "loaded" if loaded else "quiet"
    return {
        f"paste_forecast_over_measured_{label}": statistics.median(now_ratios) if now_ratios else None,
        f"paste_forecast_at_reply_speed_over_measured_{label}": (
            statistics.median(reply_ratios) if reply_ratios else None
        ),
        f"paste_read_ahead_tok_per_s_{label}": statistics.median(speeds) if speeds else None,
        f"paste_forecast_rounds_{label}": [round(r, 3) for r in now_ratios],
    }
