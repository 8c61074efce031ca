"""`fara-desktop bench`: the raw engine, the app's path and the machine's ceiling, measured side by side.

Everything runs in one process tree on the same model. Each figure is the median of several runs, all of them
kept in the report. The Qt parts (app path, event-loop stalls) live in ``bench/qt_probe.py``; start-up is measured
in a child process running the real app.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fara_desktop.engine.backend import PromptRequest, ReplyRequest, ignore_text
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.machine.bandwidth import measure_read_bandwidth
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import ModelMetadata, metadata_from_header
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

PROMPT_TEXT = (
    "The history of computing is a story of machines that grew smaller, faster and cheaper, while the problems "
    "people asked them to solve grew larger. "
)


@dataclass
class Figure:
    """A measured quantity: every run, its median and spread."""

    runs: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"median": round(self.median, 3), "runs": [round(r, 3) for r in self.runs]}


class RawEngine:
    """``llama_cpp.Llama`` driven directly: prompt processing and generation speed at given threads."""

    def __init__(self, model: Path, n_ctx: int, **kwargs: Any) -> None:
        from llama_cpp import Llama

        from fara_desktop.machine.kernels import prepare_llama_load

        prepare_llama_load(None, int(kwargs.get("n_threads") or 2))
        self.llm = Llama(model_path=str(model), n_ctx=n_ctx, verbose=False, **kwargs)
        text = PROMPT_TEXT * 40
        self.tokens = self.llm.tokenize(text.encode(), add_bos=True)

    def set_threads(self, threads: int, threads_batch: int) -> None:
        import llama_cpp

        llama_cpp.llama_set_n_threads(self.llm.ctx, threads, threads_batch)

    def prompt_tok_per_s(self, n_tokens: int) -> float:
        self.llm.reset()
        tokens = self.tokens[:n_tokens]
        start = time.perf_counter()
        self.llm.eval(tokens)
        return len(tokens) / (time.perf_counter() - start)

    def gen_tok_per_s(self, n_tokens: int) -> float:
        """Greedy generation, end-of-sequence ignored (``generate`` does not stop on it), after a short prompt."""
        self.llm.reset()
        count, first = 0, 0.0
        for _token in self.llm.generate(self.tokens[:16], temp=0.0, repeat_penalty=1.0):
            count += 1
            if count == 1:
                first = time.perf_counter()
            if count > n_tokens:
                break
        return (count - 1) / (time.perf_counter() - first)

    def close(self) -> None:
        self.llm.close()


def _conversation(turns: int) -> list[ChatMessage]:
    messages = [ChatMessage("system", "You are a helpful assistant.")]
    for i in range(turns):
        messages.append(ChatMessage("user", f"Question {i}: " + "tell me more about computers. " * 8))
        messages.append(ChatMessage("assistant", f"Answer {i}: " + "computers are fascinating machines. " * 10))
    return messages


def multi_turn(model: Path, params: LoadParams, repeats: int) -> dict[str, Any]:
    """TTFT at turns 1, 4 and 8 with prefix reuse, and with a fresh context each turn."""
    backend = LlamaBackend()
    backend.load(model, params)
    sampling = SamplingParams(temperature=0.0, max_tokens=24, repeat_penalty=1.0)
    result: dict[str, Any] = {}
    for label, reuse in (("reuse", True), ("fresh", False)):
        per_turn: dict[int, Figure] = {1: Figure(), 4: Figure(), 8: Figure()}
        for _ in range(repeats):
            backend.forget_context()
            messages = [ChatMessage("system", "You are a helpful assistant.")]
            for turn in range(1, 9):
                messages.append(ChatMessage("user", f"Turn {turn}: " + "tell me more about computers. " * 8))
                if not reuse:
                    backend.forget_context()
                reply = backend.reply(
                    backend.prepare(PromptRequest(messages, 64)),
                    ReplyRequest(sampling, lambda: False, ignore_text),
                )
                messages.append(ChatMessage("assistant", reply.text))
                if turn in per_turn:
                    per_turn[turn].runs.append(reply.stats.ttft_s)
        result[label] = per_turn
    # Switching back: conversation A (~1,500 tokens), then B, then A again.
    history_a, history_b = _conversation(12), _conversation(3)
    restored, reread = Figure(), Figure()
    for _ in range(repeats):
        for figure, keep_snapshots in ((restored, True), (reread, False)):
            backend.forget_context(snapshots=True)
            for messages, key in ((history_a, "A"), (history_b, "B")):
                backend.reply(
                    backend.prepare(PromptRequest(messages, 64)),
                    ReplyRequest(sampling, lambda: False, ignore_text, key),
                )
            if not keep_snapshots:
                backend.kv_states.clear()
            back = backend.reply(
                backend.prepare(PromptRequest(history_a, 64)),
                ReplyRequest(sampling, lambda: False, ignore_text, "A"),
            )
            figure.runs.append(back.stats.ttft_s)
    result["switch_back"] = {
        "restored": restored,
        "reread": reread,
        "history_tokens": len(backend.prepare(PromptRequest(history_a, 64)).detail.tokens),
    }
    backend.unload()
    return result


def startup(model: Path, home: Path, timeout: float = 300) -> dict[str, Any]:
    """Launch the real app in a child process (offscreen); it reports when its window showed and the model was
    ready, and its RSS at both moments, then quits."""
    env = {**os.environ, "FARA_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop.bench.qt_probe", "startup", "--model", str(model)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"the app did not report its start-up: {result.stderr[-500:]}")
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def model_metadata(model: Path) -> ModelMetadata:
    return metadata_from_header(read_gguf_header(model))


def bandwidth_figures(repeats: int) -> dict[str, float]:
    """Read bandwidth (dot product) and copy bandwidth (read + write), bytes per second."""
    import numpy as np

    read = max(measure_read_bandwidth(size_mib=256, repeats=3) for _ in range(repeats))
    source = np.ones(256 * 1024 * 1024 // 8)
    target = np.empty_like(source)
    np.copyto(target, source)
    best = float("inf")
    for _ in range(3 * repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return {"read": read, "copy": 2 * source.nbytes / best}


def _child_json(args: list[str], timeout: float, what: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{what} failed: {result.stderr[-800:]}")
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def memory_in_child(model: Path, n_ctx: int, kv_type: str, use_mmap: bool) -> dict[str, Any]:
    """The RSS a load adds (file-backed and anonymous) beside the app's estimate, in a fresh process."""
    args = ["fara_desktop.bench.memory_probe", str(model), str(n_ctx), kv_type, "1" if use_mmap else "0"]
    return _child_json(args, 900, "the memory probe")


def evict_from_page_cache(path: Path) -> None:
    """Ask the kernel to drop the file's cached pages (``posix_fadvise(DONTNEED)``): the next read goes to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cold_start_in_child(model: Path, n_ctx: int, mode: str) -> dict[str, Any]:
    """Evict the model file, then load it in a fresh process (``mode``: read, mapped or pre-read) and time the load
    and the first token."""
    evict_from_page_cache(model)
    return _child_json(["fara_desktop.bench.cold_probe", str(model), str(n_ctx), mode], 1800, "the cold-start probe")
