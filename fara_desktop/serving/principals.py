"""Who sends a local API request, and what each has read and reused.

A principal is an API key — each key its own, so a key per app keeps each app's prompt cache apart — or, with no
key set, the apps on this computer together (they are the same user's programs on 127.0.0.1). The engine keeps a
principal's conversations for its follow-ups and never lets one principal reuse another's prefix, state or
picture embeddings (``engine.types.ApiClient``). The engine knows a principal by a fingerprint of its key, never by
the key; the user sees it as "Key 2 (…9f3a)".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from dataclasses import dataclass

from fara_desktop.vocabulary.stats import GenerationStats

LOCAL_CLIENTS = "local-clients"
SHOWN_KEY_END = 4  # characters of a key's end shown to tell keys apart, for keys long enough to spare them
MIN_SHOWN_KEY_LENGTH = 16


@dataclass
class ClientUse:
    """One principal's requests since the API started: how many, the prompt tokens read and those reused."""

    label: str
    requests: int = 0
    read: int = 0
    reused: int = 0


def split_keys(text: str | None) -> tuple[str, ...]:
    """The keys the user gave, one per app: separated by spaces, commas or lines; each once."""
    return tuple(dict.fromkeys(k for k in re.split(r"[\s,]+", text or "") if k))


class Principals:
    """The API's principals and their use; ``record`` may be called from any thread."""

    def __init__(self, keys: str | None) -> None:
        self.keys = split_keys(keys)
        self._ids = tuple("key-" + hashlib.sha256(key.encode()).hexdigest()[:16] for key in self.keys)
        labels = [
            f"Key {n} (…{key[-SHOWN_KEY_END:]})" if len(key) >= MIN_SHOWN_KEY_LENGTH else f"Key {n}"
            for n, key in enumerate(self.keys, 1)
        ]
        self._labels = dict(zip(self._ids, labels, strict=True)) or {LOCAL_CLIENTS: "Apps on this computer"}
        self._uses: dict[str, ClientUse] = {}
        self._lock = threading.Lock()

    def of(self, authorization: str) -> str | None:
        """The principal an ``Authorization`` header names (None: no key matches; every key is compared, in
        constant time, so the time does not say how near a guess came)."""
        if not self.keys:
            return LOCAL_CLIENTS
        found = None
        for key, principal in zip(self.keys, self._ids, strict=True):
            if hmac.compare_digest(authorization.encode(), f"Bearer {key}".encode()):
                found = principal
        return found

    def record(self, principal: str, stats: GenerationStats | None) -> None:
        """A request of ``principal`` ended (``stats``: what it read, when it got as far as reading)."""
        with self._lock:
            use = self._uses.setdefault(principal, ClientUse(self._labels.get(principal, principal)))
            use.requests += 1
            if stats is not None:
                use.read += stats.prompt_tokens_evaluated
                use.reused += max(0, stats.prompt_tokens - stats.prompt_tokens_evaluated)

    def uses(self) -> list[ClientUse]:
        """Each principal that sent a request, in the order they first did."""
        with self._lock:
            return [ClientUse(u.label, u.requests, u.read, u.reused) for u in self._uses.values()]
