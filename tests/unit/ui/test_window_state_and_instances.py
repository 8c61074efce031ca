"""One instance per user and a remembered window: locks, sockets, geometry, absurd saved state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication

from fara_desktop import APP_ID
from fara_desktop.files.paths import app_paths
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.ui.single_instance import SingleInstance
from fara_desktop.ui.window_state import first_geometry
from tests.helpers.fakes import FakeBackend


def test_window_announces_the_entry_id(qapp):
    from fara_desktop.ui.application import create_application

    create_application()
    assert QGuiApplication.desktopFileName() == APP_ID
    assert not QGuiApplication.windowIcon().isNull()


def test_second_launch_brings_the_first_window_forward(qtbot, fara_home):
    paths = app_paths().ensure()
    first = SingleInstance(paths.data)
    assert first.acquire()
    try:
        env = {**os.environ, "FARA_HOME": str(fara_home), "QT_QPA_PLATFORM": "offscreen"}
        second = subprocess.Popen(
            [sys.executable, "-m", "fara_desktop"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        with qtbot.waitSignal(first.activationRequested, timeout=30_000):
            pass
        qtbot.waitUntil(lambda: second.poll() is not None, timeout=30_000)
        out, err = second.communicate()
        assert second.returncode == 0, err
        assert "already running" in out
    finally:
        first.release()


def test_lock_of_a_crashed_instance_is_taken_over(fara_home):
    paths = app_paths().ensure()
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(child.stdout)
    (paths.data / "instance.lock").write_text(f"{dead_pid}\nfara-desktop\n{os.uname().nodename}\n")
    instance = SingleInstance(paths.data)
    assert instance.acquire()
    later = SingleInstance(paths.data)
    assert not later.acquire()
    instance.release()


def test_a_lock_that_cannot_be_written_does_not_stop_the_app(tmp_path):
    missing = tmp_path / "no-such-folder"  # stands for a read-only data folder: the lock file cannot be created
    instance = SingleInstance(missing)
    assert instance.acquire()
    instance.release()


def test_instances_with_separate_data_folders_do_not_meet(tmp_path):
    assert SingleInstance(tmp_path / "a").name != SingleInstance(tmp_path / "b").name


def test_window_size_position_and_splitter_are_remembered(qtbot):
    first = MainWindow(backend=FakeBackend())
    qtbot.addWidget(first)
    first.show()
    if first.screen().availableGeometry().width() < 1200:
        pytest.skip("needs a screen wide enough for both side panels (Xvfb's 1366 px; offscreen is 800)")
    first.resize(1150, 660)  # wide enough that neither side panel gives way to the chat
    first.move(11, 17)
    first.splitter.setSizes([250, 550, 330])
    qtbot.waitUntil(lambda: first.size().width() == 1150)
    geometry, sizes = first.geometry(), first.splitter.sizes()
    first.close()

    second = MainWindow(backend=FakeBackend())
    qtbot.addWidget(second)
    second.show()
    assert second.size() == geometry.size()
    # The offscreen screen is 600 px high, so Qt nudges the 660-px window to keep its frame visible.
    assert abs(second.x() - geometry.x()) <= 8 and abs(second.y() - geometry.y()) <= 8
    assert second.splitter.sizes() == sizes
    second.close()


def test_unreadable_window_state_falls_back_to_defaults(qtbot):
    paths = app_paths().ensure()
    (paths.config / "window.json").write_text("{not json")
    window = MainWindow(backend=FakeBackend())
    qtbot.addWidget(window)
    assert window.geometry() == first_geometry(window.screen().availableGeometry())
    window.close()


@pytest.mark.parametrize("sizes", [[10**12, 500, 300], [1e400, 1, 1], "x", [[[[1]]]]])
def test_absurd_saved_window_state_is_ignored(qtbot, tmp_path: Path, sizes):
    from PySide6.QtWidgets import QLabel, QMainWindow, QSplitter

    from fara_desktop.ui.window_state import restore_window_state, window_state_file

    window_state_file(tmp_path).write_text(json.dumps({"geometry": "", "splitter": sizes}).replace("Infinity", "1e400"))
    window, splitter = QMainWindow(), QSplitter()
    qtbot.addWidget(window)
    for _ in range(3):
        splitter.addWidget(QLabel("x"))
    before = splitter.sizes()
    restore_window_state(tmp_path, window, splitter)
    assert splitter.sizes() == before


def test_the_single_instance_socket_lives_in_a_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from fara_desktop.ui.single_instance import server_name

    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert Path(server_name(tmp_path)).parent == runtime
    os.chmod(runtime, 0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert Path(server_name(tmp_path)).parent == tmp_path / "tmp" / f"fara-desktop-run-{os.getuid()}"
