"""Run in a child process: load a model as the app would (its estimate's parameters) and print the RSS it added,
split into file-backed and anonymous memory, with the app's estimate — one JSON line.

``python -m fara_desktop.bench.memory_probe MODEL N_CTX KV_TYPE USE_MMAP``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fara_desktop.engine.backend import PromptRequest, ReplyRequest


def _rss() -> dict[str, int]:
    parts: dict[str, int] = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("VmRSS", "RssAnon", "RssFile")):
                key, value = line.split(":")
                parts[key] = int(value.split()[0]) * 1024
    return parts


def main(argv: list[str]) -> None:
    from fara_desktop.bench.runner import model_metadata
    from fara_desktop.engine.backend import ignore_text
    from fara_desktop.engine.llama_backend import LlamaBackend
    from fara_desktop.machine.llama_build import weights_are_repacked
    from fara_desktop.planning.params import LoadParams
    from fara_desktop.planning.tuning import estimate_memory
    from fara_desktop.vocabulary.messages import ChatMessage
    from fara_desktop.vocabulary.sampling import SamplingParams

    path, n_ctx, kv_type, use_mmap = Path(argv[0]), int(argv[1]), argv[2], argv[3] == "1"
    meta = model_metadata(path)
    before = _rss()
    backend = LlamaBackend()
    backend.load(
        path, LoadParams(n_ctx=n_ctx, kv_type=kv_type, use_mmap=use_mmap, prefault=False, flash_attn=kv_type != "f16")
    )
    prompt = backend.prepare(PromptRequest([ChatMessage("user", "hello " * 200)], 64))
    backend.reply(prompt, ReplyRequest(SamplingParams(temperature=0.0, max_tokens=8), lambda: False, ignore_text))
    after = _rss()
    estimate = estimate_memory(meta, n_ctx, kv_type, mapped_and_repacked=use_mmap and weights_are_repacked())
    increase = after["VmRSS"] - before["VmRSS"]
    print(
        json.dumps(
            {
                "n_ctx": n_ctx,
                "kv_type": kv_type,
                "use_mmap": use_mmap,
                "estimate": estimate.total,
                "increase": increase,
                "anon": after["RssAnon"] - before["RssAnon"],
                "file": after["RssFile"] - before["RssFile"],
                "ratio": estimate.total / increase,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
