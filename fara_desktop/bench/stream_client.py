"""One client of ``bench --section parallel``, run as a process of its own: it streams one chat completion from an
OpenAI-compatible server and prints, as one JSON line, when it started, when its first piece of text came, when it
ended (``time.monotonic``: one clock for every process of the machine) and the server's token counts.

    python -m fara_desktop.bench.stream_client ADDRESS SEED PROMPT_WORDS MAX_TOKENS
"""

from __future__ import annotations

import json
import sys
import time

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "and",
    "runs",
    "far",
    "away",
    "into",
    "the",
    "green",
    "hills",
]


def prompt_text(seed: int, words: int) -> str:
    """A prompt of ``words`` words that opens with the client's own number (clients share no prefix)."""
    return f"Client {seed} asks: " + " ".join(WORDS[(i * 7 + seed) % len(WORDS)] for i in range(words))


def stream_once(address: str, seed: int, words: int, max_tokens: int) -> dict[str, object]:
    import httpx

    body = {
        "model": "any",
        "messages": [{"role": "user", "content": prompt_text(seed, words)}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started, first, usage = time.monotonic(), None, None
    with httpx.stream("POST", f"{address}/chat/completions", json=body, timeout=1800) as reply:
        reply.raise_for_status()
        for line in reply.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[len("data: ") :])
            choices = chunk.get("choices") or []
            if first is None and choices and (choices[0].get("delta") or {}).get("content"):
                first = time.monotonic()
            usage = chunk.get("usage") or usage
    ended = time.monotonic()
    return {"started": started, "first": first or ended, "ended": ended, "usage": usage or {}}


if __name__ == "__main__":
    address, seed, words, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(stream_once(address, seed, words, tokens)), flush=True)
