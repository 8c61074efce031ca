"""Background threads lower their own priority only: the window's thread keeps its own."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from fara_desktop.machine.priority import lower_this_threads_priority


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a per-thread nice value is Linux's")
def test_a_background_thread_lowers_its_own_priority_and_no_other():
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def background() -> None:
        lower_this_threads_priority(before + 5)
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=background)
    thread.start()
    thread.join()
    assert seen == [before + 5]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
