"""Jobs for the sandbox's own tests: each breaks one budget, or misbehaves in one way, on purpose."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from fara_desktop.errors import FaraError


def echo(fd: int | None, text: str, *, emit: Callable[[Any], None]) -> str:
    emit(text.upper())
    return text


def read_descriptor(fd: int | None, limit: int, *, emit: Callable[[Any], None]) -> bytes:
    assert fd is not None
    return os.read(fd, limit)


def hoard_memory(fd: int | None, *, emit: Callable[[Any], None]) -> int:
    hoard = []
    while True:
        hoard.append(bytearray(16 * 1024 * 1024))


def spin(fd: int | None, *, emit: Callable[[Any], None]) -> int:
    count = 0
    while True:
        count += 1


def flood(fd: int | None, *, emit: Callable[[Any], None]) -> None:
    while True:
        emit("x" * 1_000_000)


def crash(fd: int | None, *, emit: Callable[[Any], None]) -> None:
    os._exit(3)


def refuse(fd: int | None, *, emit: Callable[[Any], None]) -> None:
    raise FaraError("is not welcome here")


def buggy(fd: int | None, *, emit: Callable[[Any], None]) -> None:
    raise ZeroDivisionError


def wait_forever(fd: int | None, *, emit: Callable[[Any], None]) -> None:
    import threading

    threading.Event().wait()


class Smuggled:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned",))


def smuggle(fd: int | None, *, emit: Callable[[Any], None]) -> Any:
    return Smuggled()
