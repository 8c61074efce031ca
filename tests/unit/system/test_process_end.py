"""The last sweep of the app's process (``system.process_end``): no child outlives it, grandchildren included.
Run in a process of its own: in the test's process it would end pytest's own children (the Xvfb screen)."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil

from fara_desktop.system.process_end import end_child_processes

# the app's stand-in: a child that ignores SIGTERM (a parser stuck in C) and has a grandchild, then the sweep
APP = """
import json, signal, subprocess, sys
from fara_desktop.system.process_end import end_child_processes
stubborn = ("import signal, subprocess, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()']); print('ready', flush=True); "
            "signal.pause()")
child = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE, text=True)
child.stdout.readline()
import psutil
family = [p.pid for p in psutil.Process(child.pid).children(recursive=True)] + [child.pid]
print(json.dumps({"family": family, "ended": end_child_processes(grace_s=0.5), "again": end_child_processes(0.1)}))
"""


def test_every_child_and_grandchild_is_ended_even_one_that_ignores_sigterm():
    done = subprocess.run([sys.executable, "-c", APP], capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ended"] == 2 and report["again"] == 0
    for pid in report["family"]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_sweep_is_the_apps_own_and_leaves_other_processes_alone():
    with subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"]) as neighbour:
        try:
            subprocess.run([sys.executable, "-c", APP], capture_output=True, timeout=60, check=True)
            assert neighbour.poll() is None  # a process that is not the app's child
        finally:
            neighbour.kill()
    assert callable(end_child_processes)
