"""Who sends a local API request, and what each has read and reused.

A principal is an API key — each key its own, so a key per app keeps each app's prompt cache apart — or, with no
key set, one user's programs on this computer together: another user's programs (the connection's owner, from the
kernel's socket table) are a principal of their own, so they never learn from a cached prompt what this user's
apps sent. The engine keeps a
principal's conversations for its follow-ups and never lets one principal reuse another's prefix, state or
picture embeddings (``engine.types.ApiClient``). The engine knows a principal by a fingerprint of its key, never by
the key; the user sees it as "Key 2 (…9f3a)".
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import threading
from dataclasses import dataclass

from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.stats import GenerationStats

LOCAL_CLIENTS = "local-clients"
OTHER_USER = "user-"  # with no key: the programs of another user of this computer, by user id
SHOWN_KEY_END = 4  # characters of a key's end shown to tell keys apart, for keys long enough to spare them
MIN_SHOWN_KEY_LENGTH = 16


@dataclass
class ClientUse:
    """One principal's requests since the API started: how many, the prompt tokens read and those reused."""

    label: str
    requests: int = 0
    read: int = 0
    reused: int = 0
    running: int = 0  # its requests admitted and not ended yet (decoding, or waiting for the model)


MIN_KEY_LENGTH = 8  # "my", "x7Qp2": a key this short is guessed, and was a list split where it should not be


class ApiKeyError(FaraError):
    """A key the API cannot take (too short, or characters a client cannot send in a header)."""


def split_keys(text: str | None) -> tuple[str, ...]:
    """The keys the user gave, one per app: one per line (a list in Settings, a key file, ``FARA_API_KEY``), each
    kept whole — spaces and commas are part of a key, as in "correct horse battery staple" — each once."""
    return tuple(dict.fromkeys(line.strip() for line in (text or "").splitlines() if line.strip()))


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an API key (None: it can)."""
    if not key.isascii() or not key.isprintable():
        return "holds characters other than ASCII letters, digits, spaces and punctuation (no client sends them)"
    if len(key) < MIN_KEY_LENGTH:
        return f"is {len(key)} characters long; an API key needs at least {MIN_KEY_LENGTH}"
    return None


def checked_keys(text: str | None) -> tuple[str, ...]:
    """``split_keys``, each key checked: ``ApiKeyError`` names the first that cannot be one (by its place, never
    by its text)."""
    keys = split_keys(text)
    for n, key in enumerate(keys, 1):
        problem = key_problem(key)
        if problem:
            where = "The API key" if len(keys) == 1 else f"API key {n}"
            raise ApiKeyError(f"{where} {problem}.")
    return keys


def key_label(n: int, key: str) -> str:
    """How the user sees key ``n``: "Key 2 (…9f3a)", the end only for keys long enough to spare it."""
    return f"Key {n} (…{key[-SHOWN_KEY_END:]})" if len(key) >= MIN_SHOWN_KEY_LENGTH else f"Key {n}"


class Principals:
    """The API's principals and their use; ``record`` may be called from any thread."""

    def __init__(self, keys: str | None, earlier: Principals | None = None) -> None:
        """``keys``: one per line (``ApiKeyError`` for one that cannot be a key: never an API left open instead);
        ``earlier``: the principals these replace (Settings changed the keys), whose use is kept for the keys that
        stay."""
        self.keys = checked_keys(keys)
        self._ids = tuple("key-" + hashlib.sha256(key.encode()).hexdigest()[:16] for key in self.keys)
        labels = [key_label(n, key) for n, key in enumerate(self.keys, 1)]
        self._labels = dict(zip(self._ids, labels, strict=True)) or {LOCAL_CLIENTS: "Apps on this computer"}
        self._uses: dict[str, ClientUse] = {}
        if earlier is not None:
            for principal, use in earlier._copy_of_uses().items():
                if principal in self._labels:
                    self._uses[principal] = dataclasses.replace(use, label=self._labels[principal])
        self._lock = threading.Lock()

    def _copy_of_uses(self) -> dict[str, ClientUse]:
        with self._lock:
            return {p: dataclasses.replace(u) for p, u in self._uses.items()}

    def principal_for(self, authorization: str, owner: int | None = None) -> str | None:
        """The principal an ``Authorization`` header names (None: no key matches; every key is compared, in
        constant time, so the time does not say how near a guess came). With no key, ``owner`` (the user id of the
        connection's other end, ``system.socket_owner``) keeps another user's programs apart from this user's."""
        if not self.keys:
            if owner is None or owner == getattr(os, "getuid", lambda: owner)():
                return LOCAL_CLIENTS
            return f"{OTHER_USER}{owner}"
        found = None
        for key, principal in zip(self.keys, self._ids, strict=True):
            if hmac.compare_digest(authorization.encode(), f"Bearer {key}".encode()):
                found = principal
        return found

    def _use(self, principal: str) -> ClientUse:
        label = self._labels.get(principal, principal)
        if principal.startswith(OTHER_USER):
            label = f"Programs of another user of this computer (user id {principal.removeprefix(OTHER_USER)})"
        return self._uses.setdefault(principal, ClientUse(label))

    def admitted(self, principal: str, change: int = 1) -> None:
        """A request of ``principal`` was handed to the engine (``change`` -1: it could not be after all)."""
        with self._lock:
            use = self._use(principal)
            use.running = max(0, use.running + change)

    def record(self, principal: str, stats: GenerationStats | None) -> None:
        """A request of ``principal`` ended (``stats``: what it read, when it got as far as reading)."""
        with self._lock:
            use = self._use(principal)
            use.requests += 1
            use.running = max(0, use.running - 1)
            if stats is not None:
                use.read += stats.prompt_tokens_evaluated
                use.reused += max(0, stats.prompt_tokens - stats.prompt_tokens_evaluated)

    def uses(self) -> list[ClientUse]:
        """Each principal that sent a request, in the order they first did."""
        with self._lock:
            return [ClientUse(u.label, u.requests, u.read, u.reused, u.running) for u in self._uses.values()]
