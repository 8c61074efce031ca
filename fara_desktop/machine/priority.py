"""Background work gives the CPU to the window and to the chat model: on Linux a thread has its own nice value."""

from __future__ import annotations

import contextlib
import os
import threading

BACKGROUND_NICE = 10


def lower_this_threads_priority(nice: int = BACKGROUND_NICE) -> None:
    """Threads this one starts afterwards (llama.cpp's thread pool) inherit the value."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed: the work still yields
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
