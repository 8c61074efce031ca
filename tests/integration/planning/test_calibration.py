"""Calibration on the real models: memory estimate vs measured RSS, thread calibration, header reader speed."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time

import pytest

from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import metadata_from_header
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import estimate_memory
from fara_desktop.text.format import MIB

MEASURE_RSS = r"""
import json, sys, psutil, llama_cpp
from pathlib import Path
from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
llama_cpp.llama_backend_init()
process = psutil.Process()
before = process.memory_info().rss
backend = LlamaBackend()
backend.load(Path(sys.argv[1]), LoadParams(n_ctx=int(sys.argv[2]), prefault=False))
text = "The quick brown fox jumps over the lazy dog. " * 60
prompt = backend.prepare(PromptRequest([ChatMessage("user", text)], 8))
backend.reply(prompt, ReplyRequest(SamplingParams(temperature=0.0, max_tokens=4), lambda: False, lambda _t: None))
print(json.dumps({"rss_increase": process.memory_info().rss - before, "prompt_tokens": len(prompt.detail.tokens)}))
"""


@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
@pytest.mark.parametrize("n_ctx", [2048, 8192])
def test_memory_estimate_matches_measured_rss(model, n_ctx, smollm2_path, gemma3_path):
    path = smollm2_path if model == "smollm2" else gemma3_path
    result = subprocess.run(
        [sys.executable, "-c", MEASURE_RSS, str(path), str(n_ctx)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])["rss_increase"]
    estimate = estimate_memory(metadata_from_header(read_gguf_header(path)), n_ctx)
    ratio = estimate.total / measured
    print(
        f"\n{model} n_ctx={n_ctx}: estimate {estimate.total / MIB:.1f} MiB (weights {estimate.weights / MIB:.1f}, "
        f"KV {estimate.kv_cache / MIB:.1f}, compute {estimate.compute / MIB:.1f}, overhead "
        f"{estimate.overhead / MIB:.1f}) vs measured RSS increase {measured / MIB:.1f} MiB: ratio {ratio:.3f}"
    )
    assert 0.85 <= ratio <= 1.15


def test_thread_calibration_measures_each_count_and_keeps_the_best(smollm2_path):
    backend = LlamaBackend()
    backend.load(smollm2_path, LoadParams(n_ctx=1024, n_threads=1, prefault=False))
    library_default = max(multiprocessing.cpu_count() // 2, 1)  # llama-cpp-python's own default for n_threads
    candidates = sorted({1, 2, library_default})
    results, _busy = backend.calibrate_threads(candidates, tokens=64)
    best = max(results, key=lambda t: results[t])
    assert set(results) == set(candidates) and all(v > 1 for v in results.values())
    assert backend.info is not None and backend.info.n_threads == best
    print(
        f"\nthread calibration (tok/s): {results}; best {best}; vs library default ({library_default} thread): "
        f"{results[best] / results[library_default]:.2f}×"
    )
    backend.unload()


@pytest.mark.slow
def test_header_reader_is_much_faster_than_gguf_reader(smollm2_path, gemma3_path):
    import gguf

    for path in (smollm2_path, gemma3_path):
        start = time.perf_counter()
        ours = read_gguf_header(path)
        fast = time.perf_counter() - start
        start = time.perf_counter()
        reader = gguf.GGUFReader(str(path))
        theirs = time.perf_counter() - start
        assert len(reader.tensors) == ours.tensor_count
        print(
            f"\n{path.name}: read_gguf_header {fast * 1000:.1f} ms, gguf.GGUFReader {theirs * 1000:.0f} ms "
            f"({theirs / fast:.0f}× slower)"
        )
        assert fast < theirs / 5


def test_a_thread_calibration_beside_a_busy_program_says_so(smollm2_path):
    """Another program holding a core while the counts are measured (the shared host that kept 1 thread for good):
    the calibration says the machine was busy, so it is not kept for ever."""
    backend = LlamaBackend()
    backend.load(smollm2_path, LoadParams(n_ctx=1024, n_threads=1, prefault=False))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        results, busy = backend.calibrate_threads([1, 2], tokens=32)
    finally:
        spinner.kill()
        spinner.wait()
        backend.close()
    assert set(results) == {1, 2} and busy
