"""Jobs for the sandbox's own tests: each breaks one budget, or misbehaves in one way, on purpose."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from fara_desktop.vocabulary.errors import FaraError


def echo(fd: int | None, text: str, *, emit: Callable[[Any], None]) -> str:
    emit(text.upper())
    return text


def own_pid(fd: int | None, *, emit: Callable[[Any], None]) -> int:
    """The child's process number."""
    return os.getpid()


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


def half_a_message(fd: int | None, marker: str, *, emit: Callable[[Any], None]) -> None:
    """Start a message to the parent (its length says 1 MB), send 10 bytes of it, and wait: a reader a hostile
    file took over. (The connection is the one ``emit`` writes to.)"""
    import struct
    import threading

    connection = emit.__closure__[0].cell_contents  # type: ignore[index]
    os.write(connection.fileno(), struct.pack("!i", 1 << 20) + b"0123456789")
    with open(marker, "w", encoding="utf-8") as handle:
        handle.write("sent")
    threading.Event().wait()


def memo_bomb(fd: int | None, *, emit: Callable[[Any], None]) -> None:
    """One 1 MB string, sent 2,000 times in one message: pickle writes it once (its memo refers back to it)."""
    text = "x" * 1_000_000
    emit([text] * 2000)
