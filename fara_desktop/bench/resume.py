"""The prompt wall: a chat resumed from its state on disk vs re-read, and a paste read ahead while a question is
typed vs read at Enter. Both drive the app's own engine (``LlamaBackend``, the worker) on the model."""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.kv_disk import CHECKPOINT_SLOT, KVDiskStore
from fara_desktop.engine.kv_states import common_prefix
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.llama_state import restore_sequence, snapshot_sequence
from fara_desktop.engine.types import Finished, ModelLoaded, ReadAheadProgress
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

CONTINUATION = SamplingParams(temperature=0.0, max_tokens=16, repeat_penalty=1.0)
PARAGRAPH = (
    "The committee reviewed the quarterly figures for the northern depots, the delays at the harbour and the new "
    "rota for the weekend shifts, and asked for a shorter report with the three most urgent points first. "
)


def chat_of(backend: LlamaBackend, tokens: int) -> list[ChatMessage]:
    """A chat whose prompt is about ``tokens`` long."""
    messages = [ChatMessage("system", "You are a helpful assistant.")]
    turn = 0
    while True:
        messages += [ChatMessage("user", f"Point {turn}: " + PARAGRAPH * 2), ChatMessage("assistant", PARAGRAPH * 2)]
        turn += 1
        prompt = [*messages, ChatMessage("user", "Summarise the chat.")]
        if len(backend.tokenize_prompt(prompt).tokens) >= tokens:
            return prompt


def evict(path: Path) -> None:
    """Drop the file's pages from the page cache (a cold read, as after a reboot or a long day)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def resume(model: Path, params: LoadParams, tokens: int, compare_q8_0: bool = True) -> dict[str, Any]:
    """Re-read a chat vs restore its state from disk (cold and warm), and the continuation on each; with
    ``compare_q8_0``, the same with a q8_0 KV cache: its state's size and whether its continuation is f16's."""
    figures = resume_once(model, params, tokens)
    if compare_q8_0 and params.kv_type != "q8_0":
        q8 = resume_once(model, replace(params, kv_type="q8_0"), tokens)
        figures["resume_q8_0_state_ratio"] = q8["resume_state_bytes"] / figures["resume_state_bytes"]
        figures["resume_q8_0_same_tokens"] = q8["resume_same_tokens"]
        figures["resume_q8_0_same_as_f16"] = q8["continuation"] == figures["continuation"]
        figures["resume_q8_0_reread_s"] = q8["resume_reread_s"]
    return figures


def resume_once(model: Path, params: LoadParams, tokens: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fara-resume-") as folder:
        store = KVDiskStore(Path(folder), budget_bytes=1 << 40)
        backend = LlamaBackend(state_store=store)
        backend.load(model, params)
        try:
            prompt = backend.prepare(PromptRequest(chat_of(backend, tokens), 64))
            llm = backend._llm
            assert llm is not None

            def run(conversation: int) -> Any:
                return backend.reply(prompt, ReplyRequest(CONTINUATION, lambda: False, lambda *_: None, conversation))

            reread = run(1)  # from an empty context: every token read
            started = time.perf_counter()
            kept = snapshot_sequence(llm)
            snapshot_s = time.perf_counter() - started
            assert kept is not None
            started = time.perf_counter()
            backend.save_to_disk(wait=True)
            save_s = time.perf_counter() - started
            # A model keeping exact states also writes where its prompt ended (the one a Regenerate restores)
            files = sorted(Path(folder).glob("*.kvstate"), key=lambda f: f.name.startswith(f"c1-{CHECKPOINT_SLOT}"))
            state_file = files[-1]
            state_bytes = state_file.stat().st_size
            restore_sequence(llm, kept)  # the same state, kept in memory: its last token decoded again
            in_memory = run(1)
            restored = {}
            for label, cold in (("cold", True), ("warm", False)):
                backend.forget_context(snapshots=True)  # as after a restart
                if cold:
                    evict(state_file)
                with StallProbe() as probe:  # what the window's thread would feel while the state is read
                    restored[label] = run(1)
        finally:
            backend.unload()
    return {
        "resume_tokens": reread.stats.prompt_tokens,
        "resume_reread_s": reread.stats.ttft_s,
        "resume_restore_s": restored["cold"].stats.ttft_s,
        "resume_restore_warm_s": restored["warm"].stats.ttft_s,
        "resume_restore_ratio": restored["cold"].stats.ttft_s / reread.stats.ttft_s,
        "resume_restored_tokens_read": restored["cold"].stats.prompt_tokens_evaluated,
        "resume_same_tokens": restored["cold"].text == in_memory.text and restored["warm"].text == in_memory.text,
        "resume_state_bytes": state_bytes,
        "resume_restore_max_stall_ms": probe.worst_ms,
        "resume_snapshot_s": snapshot_s,
        "resume_save_s": save_s,
        "continuation": in_memory.text,
    }


class StallProbe:
    """A thread that wakes every 5 ms and records how late it woke: what a GUI thread would feel meanwhile."""

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StallProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = time.perf_counter()
            self._stop.wait(0.005)
            self.worst_ms = max(self.worst_ms, (time.perf_counter() - asked - 0.005) * 1000)


def typeahead(
    model: Path, params: LoadParams, paste_tokens: int, typing_s: float = 5.0, rounds: int = 3
) -> dict[str, Any]:
    """A paste of ``paste_tokens`` then ``typing_s`` seconds of typing a question (a key every 200 ms), then Enter:
    the time to the first token with read-ahead vs without, and the wait forecast vs the reading it forecast."""
    events: list[Any] = []
    arrived = threading.Condition()

    def sink(event: Any) -> None:
        with arrived:
            events.append(event)
            arrived.notify_all()

    def wait_for(kind: type, after: int) -> Any:
        with arrived:
            arrived.wait_for(lambda: any(isinstance(e, kind) for e in events[after:]))
            return next(e for e in events[after:] if isinstance(e, kind))

    worker = InferenceWorker(sink).start()

    def fresh() -> Any:
        """The model loaded again: an empty context, no snapshot of the previous run."""
        mark = len(events)
        worker.unload()
        worker.load_model(model, params)
        return wait_for(ModelLoaded, mark).info

    backend_probe = LlamaBackend()  # only to size the paste with the model's tokenizer
    backend_probe.load(model, params)
    paste = " ".join([PARAGRAPH] * 200)
    while len(backend_probe.tokenize_prompt([ChatMessage("user", paste)]).tokens) > paste_tokens:
        paste = paste[: int(len(paste) * 0.9)]
    backend_probe.unload()
    question = " What are the three urgent points, and who should act on each of them first?"
    system = ChatMessage("system", "You are a helpful assistant.")
    sampling = SamplingParams(temperature=0.0, max_tokens=4, repeat_penalty=1.0)
    results: dict[str, list[float]] = {"with": [], "without": [], "forecast_ratio": []}
    worst_stall = 0.0
    try:
        for round_number in range(rounds):  # alternating, so drift affects both alike
            for mode in ("without", "with") if round_number % 2 == 0 else ("with", "without"):
                conversation = 100 + round_number * 2 + (mode == "with")
                info = fresh()
                prompt = [system, ChatMessage("user", paste + question)]
                if mode == "with":
                    with StallProbe() as probe:
                        worker.read_ahead([system, ChatMessage("user", paste)], sampling, conversation)
                        typed = ""
                        for key in range(int(typing_s / 0.2)):
                            typed = question[: int(len(question) * (key + 1) / (typing_s / 0.2))]
                            time.sleep(0.2)  # the user's typing: the benchmark plays it at a person's pace
                            worker.read_ahead([system, ChatMessage("user", paste + typed)], sampling, conversation)
                    worst_stall = max(worst_stall, probe.worst_ms)
                mark = len(events)
                worker.generate(prompt, sampling, conversation)
                finished = wait_for(Finished, mark)
                results[mode].append(finished.stats.ttft_s)
                if mode == "without":  # the forecast from the speed measured on the previous reading, vs this one
                    speed = finished.stats.prompt_tok_per_s
                    results.setdefault("speeds", []).append(speed)
                    results.setdefault("predicted_ratio", []).append(info.expected_prompt_tok_per_s / speed)
                    if len(results["speeds"]) > 1:
                        forecast = finished.stats.prompt_tokens_evaluated / results["speeds"][-2]
                        results["forecast_ratio"].append(forecast / finished.stats.ttft_s)
    finally:
        worker.shutdown(30)
    ratios = [w / wo for w, wo in zip(results["with"], results["without"], strict=True)]
    return {
        "typeahead_paste_tokens": paste_tokens,
        "typeahead_typing_s": typing_s,
        "typeahead_ttft_with_s": statistics.median(results["with"]),
        "typeahead_ttft_without_s": statistics.median(results["without"]),
        "typeahead_ttft_ratio": statistics.median(ratios),
        "typeahead_max_stall_ms": worst_stall,
        "wait_forecast_ratio": statistics.median(results["forecast_ratio"]) if results["forecast_ratio"] else None,
        "prompt_speed_tok_per_s": statistics.median(results["speeds"]),
        "prompt_speed_predicted_over_measured": statistics.median(results["predicted_ratio"]),
        "read_ahead_events": sum(isinstance(e, ReadAheadProgress) for e in events),
    }


def _first_cached(seen: list[int], _tokens: int, cached: int) -> None:
    seen.append(cached)


WORDS = SamplingParams(temperature=0.0, max_tokens=48, json_schema='{"type": "string", "pattern": "^[a-z ]{1,300}$"}')


def read_ahead_follow_up(model: Path, params: LoadParams, tokens: int = 1000) -> dict[str, Any]:
    """A chat's next messages read ahead as they are typed (the app's default), then sent: the tokens read for
    each (by the read-ahead, then the reply) over the tokens past where its prompt parts from the last one — the
    last answer (without its reasoning, where the template drops it) and the new words. Goal ≤ 1.2 on the hybrids,
    whose state cannot be cut back: the read-ahead keeps a checkpoint where the next prompt parts (issue 61, item 3).
    The replies are written under a grammar of lowercase words (a random-weight model's bytes are not text)."""
    backend = LlamaBackend()
    backend.load(model, params)
    ratios: list[float] = []
    try:
        chat = chat_of(backend, tokens)
        last: list[int] = []
        for asked in ("And what comes next", "Say it in other words", "Thank you"):
            prompt = backend.prepare(PromptRequest(chat, 64))
            began: list[int] = []
            cached = backend.read_ahead(prompt, 1, lambda: False, partial(_first_cached, began))
            reply = backend.reply(prompt, ReplyRequest(WORDS, lambda: False, lambda *_: None, 1))
            if last:
                read = cached - began[0] + reply.stats.prompt_tokens_evaluated
                ratios.append(read / max(1, len(prompt.detail.tokens) - common_prefix(last, prompt.detail.tokens)))
            last = prompt.detail.tokens
            chat = [*chat, ChatMessage("assistant", reply.text), ChatMessage("user", asked)]
    finally:
        backend.unload()
    return {"read_ahead_followup_read_over_new": round(max(ratios), 3)}
