"""The load record: a load that never finished is known at the next start, once, and only for that file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop.models.load_record import CRASHED_FILE, LOADING_FILE, LoadRecord


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "models" / "stranger.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + b"\0" * 100)
    return path


def dead_pid() -> int:
    """The number of a process that has ended."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def test_a_load_that_returns_leaves_no_record(tmp_path: Path, model: Path):
    record = LoadRecord(tmp_path / "data")
    with record.loading(model):
        assert (tmp_path / "data" / LOADING_FILE).is_file()
    assert not (tmp_path / "data" / LOADING_FILE).exists()
    with pytest.raises(ValueError), record.loading(model):  # llama.cpp refused it: an error, not a crash
        raise ValueError("Failed to load model")
    assert record.collect_crashes() == [] and record.crashed() == []


def _leave_record_of(folder: Path, model: Path, pid: int) -> None:
    LoadRecord(folder)._begin(model)
    entry = json.loads((folder / LOADING_FILE).read_text())
    (folder / LOADING_FILE).write_text(json.dumps({**entry, "pid": pid}))


def test_a_record_left_by_a_dead_process_is_a_crash_told_once_and_kept(tmp_path: Path, model: Path):
    folder = tmp_path / "data"
    _leave_record_of(folder, model, dead_pid())
    record = LoadRecord(folder)
    (crash,) = record.collect_crashes()
    assert crash.path == str(model) and "stopped the app" in crash.reason
    assert record.collect_crashes() == []  # told once …
    assert record.crash_of(model) == crash  # … remembered afterwards
    assert (folder / CRASHED_FILE).stat().st_mode & 0o077 == 0


def test_a_changed_file_is_tried_again(tmp_path: Path, model: Path):
    folder = tmp_path / "data"
    _leave_record_of(folder, model, dead_pid())
    record = LoadRecord(folder)
    record.collect_crashes()
    model.write_bytes(b"GGUF" + b"\1" * 200)  # re-downloaded: another size and time
    assert record.crash_of(model) is None


def test_a_load_in_progress_in_another_live_process_is_not_a_crash(tmp_path: Path, model: Path):
    folder = tmp_path / "data"
    _leave_record_of(folder, model, os.getppid())  # alive: a `serve` beside the window, say
    assert LoadRecord(folder).collect_crashes() == []
    assert (folder / LOADING_FILE).exists()


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"path": 5}', b"\xff" * 10])
def test_damaged_records_are_ignored(tmp_path: Path, model: Path, content: bytes):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / LOADING_FILE).write_bytes(content)
    (folder / CRASHED_FILE).write_bytes(content)
    record = LoadRecord(folder)
    assert record.collect_crashes() == []
    assert record.crashed() == [] and record.crash_of(model) is None


_LOADING_CHILD = """
import signal
import sys
from pathlib import Path
# as a desktop session starts the app: a suite run under nohup would have it ignore the logout's SIGHUP
signal.signal(signal.SIGHUP, signal.SIG_DFL)
from fara_desktop.files.fatal_log import enable_fatal_log
from fara_desktop.models.load_record import LoadRecord
home, model = Path(sys.argv[1]), Path(sys.argv[2])
enable_fatal_log(home / "logs")  # as the app's entry point does
with LoadRecord(home / "data").loading(model):
    print("loading", flush=True)
    sys.stdin.read()  # held inside the load until the parent signals
"""


def _die_while_loading(home: Path, model: Path, sig: int) -> int:
    """A real process of the app's shape, stopped by ``sig`` in the middle of a load (the parent holds the load
    open: no race)."""
    child = subprocess.Popen([sys.executable, "-c", _LOADING_CHILD, str(home), str(model)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None and child.stdout.readline().strip() == "loading"
    child.send_signal(sig)
    code = child.wait(30)
    child.stdout.close()
    if child.stdin is not None:
        child.stdin.close()
    return code


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_during_a_load_is_nobodys_fault(tmp_path: Path, model: Path, sig: int):
    """``systemctl stop``, Ctrl+C or a logout while the model loads: the next start loads it again."""
    code = _die_while_loading(tmp_path, model, sig)
    assert code != 0  # it did die in the load
    record = LoadRecord(tmp_path / "data")
    assert record.collect_crashes() == []
    assert record.crash_of(model) is None
    assert not (tmp_path / "data" / LOADING_FILE).exists()


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT])
def test_a_fatal_signal_during_a_load_is_the_files(tmp_path: Path, model: Path, sig: int):
    assert _die_while_loading(tmp_path, model, sig) == -sig
    record = LoadRecord(tmp_path / "data")
    (crash,) = record.collect_crashes()
    assert crash.path == str(model) and record.crash_of(model) is not None
