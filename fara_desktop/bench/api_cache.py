"""The local API's prompt cache, as a chat client uses it (issue 52): ``fara-desktop serve`` in a process of its
own with a key per app; a long conversation, then it plus the reply and one short question (the follow-up), then
the follow-up sent by a key that never sent anything. Rounds of new conversations (nothing of one round serves the
next), the times of the follow-up and the first request side by side, medians of their ratios; the tokens the
other key reused are reported from ``usage.prompt_tokens_details.cached_tokens``, which must be 0."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fara_desktop.system.process_end import stop_process

CLIENT_KEY = "sk-bench-first-client-0001"
MAX_ROUNDS = 8
TOKENS_PER_DAY = 90  # what one day of ``bakery_chat`` costs SmolLM2's tokenizer, about
FOLLOW_UP = "And which day sold the fewest?"


def bakery_chat(days: int, seed: int = 0) -> list[dict[str, str]]:
    """A conversation as a chat client sends it (every earlier turn, then the new question): ``days`` days of a
    bakery's accounts, about ``TOKENS_PER_DAY`` tokens each; ``seed`` makes another conversation of the same size."""
    messages = [{"role": "system", "content": "You are a careful assistant for a small bakery's accounts."}]
    for day in range(1, days + 1):
        n = day + seed * 31
        messages += [
            {
                "role": "user",
                "content": f"Day {day}: we sold {n * 7} loaves, {n * 3 % 97} cakes and {n * 11} "
                f"rolls; flour cost {n * 13} euros and the oven ran {n % 9 + 4} hours.",
            },
            {
                "role": "assistant",
                "content": f"Noted day {day}: {n * 7} loaves, {n * 3 % 97} cakes, {n * 11} "
                f"rolls, flour {n * 13} euros, oven {n % 9 + 4} hours.",
            },
        ]
    messages.append({"role": "user", "content": "Which day sold the most cakes?"})
    return messages


def followed_up(chat: list[dict[str, str]], reply: str) -> list[dict[str, str]]:
    return [*chat, {"role": "assistant", "content": reply}, {"role": "user", "content": FOLLOW_UP}]


def api_cache(model: Path, tokens: int, rounds: int) -> dict[str, Any]:
    """Measure ``rounds`` conversations of about ``tokens`` tokens through ``fara-desktop serve``."""
    import httpx

    with tempfile.TemporaryDirectory(prefix="fara-bench-api-") as home:
        keys = Path(home) / "keys.txt"
        keys.write_text("\n".join([CLIENT_KEY, *map(stranger_key, range(MAX_ROUNDS))]) + "\n", encoding="utf-8")
        env = {**os.environ, "FARA_HOME": home, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fara_desktop",
                "serve",
                "--port",
                "0",
                "--model",
                str(model),
                "--api-key-file",
                str(keys),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        try:
            address = process.stdout.readline().strip() if process.stdout is not None else ""
            if not address.startswith("http"):
                return {"api_cache": {"skipped": "fara-desktop serve did not start"}}
            with httpx.Client(base_url=address, timeout=1800) as client:
                runs = [_round(client, tokens, seed) for seed in range(min(rounds, MAX_ROUNDS))]
        finally:
            stop_process(process, 60)
    return {
        "api_cache": {"runs": runs},
        "api_followup_over_first": statistics.median(r["followup_s"] / r["first_s"] for r in runs),
        "api_cross_principal_reuse_tokens": max(r["stranger_cached"] for r in runs),
        "api_first_prompt_tokens": statistics.median(r["first_prompt"] for r in runs),
        "api_followup_read_tokens": statistics.median(r["followup_prompt"] - r["followup_cached"] for r in runs),
    }


def _round(client: Any, tokens: int, seed: int) -> dict[str, Any]:
    chat = bakery_chat(max(2, tokens // TOKENS_PER_DAY), seed)
    first, first_s = _ask(client, CLIENT_KEY, chat)
    follow_up = followed_up(chat, first["choices"][0]["message"]["content"] or "")
    second, followup_s = _ask(client, CLIENT_KEY, follow_up)
    stranger, stranger_s = _ask(client, stranger_key(seed), follow_up)  # its first request: nothing of its own
    return {
        "first_s": first_s,
        "followup_s": followup_s,
        "stranger_s": stranger_s,
        "first_prompt": first["usage"]["prompt_tokens"],
        "followup_prompt": second["usage"]["prompt_tokens"],
        "followup_cached": second["usage"]["prompt_tokens_details"]["cached_tokens"],
        "stranger_cached": stranger["usage"]["prompt_tokens_details"]["cached_tokens"],
    }


def stranger_key(round_number: int) -> str:
    return f"sk-bench-stranger-{round_number:04d}"


def _ask(client: Any, key: str, messages: list[dict[str, str]]) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    reply = client.post(
        "/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": "any", "messages": messages, "temperature": 0, "max_tokens": 16},
    )
    reply.raise_for_status()
    return reply.json(), time.perf_counter() - started
