"""Running test code on a thread without losing what it raised."""

from __future__ import annotations

from collections.abc import Callable


def capture_errors(fn: Callable[[], object], errors: list[BaseException]) -> None:
    """Call ``fn``; whatever it raises is appended to ``errors`` for the test to assert on."""
    try:
        fn()
    except BaseException as exc:
        errors.append(exc)
