"""A real app process that starts streaming a long reply, for tests that kill it with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from PySide6.QtWidgets import QApplication
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.ui.main_window import MainWindow
app = QApplication([])
win = MainWindow(sampling=SamplingParams(temperature=0.8, seed=1, max_tokens=100000, ignore_eos=True))
win.show()
win.modelLoaded.connect(lambda info: print("LOADED", flush=True))
win.start_auto()
win.composer.setPlainText(sys.argv[1])
win.send_button.click()
app.exec()
"""


class StreamingChild:
    """``with StreamingChild(prompt, home) as child:`` — the model is loaded and the reply requested on entry;
    the process is killed with SIGKILL on exit."""

    def __init__(self, prompt: str, home: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", CHILD, prompt],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "FARA_HOME": str(home)},
        )

    def __enter__(self) -> StreamingChild:
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if line != "LOADED":
            self.kill()
            raise AssertionError(f"the child app did not load its model (it printed {line!r})")
        return self

    def kill(self) -> None:
        self._process.send_signal(signal.SIGKILL)
        self._process.wait(30)
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __exit__(self, *_exc: object) -> None:
        self.kill()
