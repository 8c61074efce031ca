"""Run in a child process right after the model file was evicted from the page cache: load it as the app would in
one of three ways and print the seconds to a loaded model and to the first token — one JSON line.

``python -m fara_desktop.bench.cold_probe MODEL N_CTX MODE`` with MODE ``read`` (llama.cpp reads the file),
``read-ahead`` (the same, while the engine's prefault thread reads the file ahead into the page cache), ``mapped``
(mmap, pages faulted in as llama.cpp touches them) or ``pre-read`` (the file read sequentially first with
``POSIX_FADV_SEQUENTIAL``/``WILLNEED``, then mapped).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from fara_desktop.engine.backend import PromptRequest, ReplyRequest

MODES = ("read", "read-ahead", "mapped", "pre-read")


def pre_read(path: Path) -> None:
    with open(path, "rb", buffering=0) as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
        while handle.read(16 << 20):
            pass


def main(argv: list[str]) -> None:
    from fara_desktop.engine.backend import ignore_text
    from fara_desktop.engine.llama_backend import LlamaBackend
    from fara_desktop.planning.params import LoadParams
    from fara_desktop.vocabulary.messages import ChatMessage
    from fara_desktop.vocabulary.sampling import SamplingParams

    path, n_ctx, mode = Path(argv[0]), int(argv[1]), argv[2]
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {', '.join(MODES)}")
    started = time.perf_counter()
    if mode == "pre-read":
        pre_read(path)
    read = time.perf_counter()
    backend = LlamaBackend()
    # "read-ahead" is the engine's own prefault on a load that reads the file (the app's default on such builds)
    backend.load(path, LoadParams(n_ctx=n_ctx, use_mmap=mode in ("mapped", "pre-read"), prefault=mode == "read-ahead"))
    loaded = time.perf_counter()
    prompt = backend.prepare(PromptRequest([ChatMessage("user", "Hello!")], 8))
    backend.reply(prompt, ReplyRequest(SamplingParams(temperature=0.0, max_tokens=1), lambda: False, ignore_text))
    first = time.perf_counter()
    print(
        json.dumps(
            {"mode": mode, "pre_read_s": read - started, "loaded_s": loaded - started, "first_token_s": first - started}
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
