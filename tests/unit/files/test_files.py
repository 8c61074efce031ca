"""Files: private temporary folders, racing writers of one cache file."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import pytest

from fara_desktop.files.atomic import save_cache_file
from fara_desktop.files.paths import private_temp_dir


def test_a_temp_folder_someone_else_prepared_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    target = tmp_path / f"fara-desktop-logs-{os.getuid()}"
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    target.symlink_to(elsewhere)
    chosen = private_temp_dir("fara-desktop-logs")
    assert chosen != target and not chosen.is_symlink() and elsewhere not in chosen.parents
    target.unlink()
    target.mkdir(mode=0o777)
    os.chmod(target, 0o777)  # world-writable: someone else could have made it
    assert private_temp_dir("fara-desktop-logs") != target
    os.chmod(target, 0o700)
    assert private_temp_dir("fara-desktop-logs") == target


def test_two_writers_of_one_cache_file_do_not_trip_over_each_other(tmp_path: Path):
    path = tmp_path / "cache" / "gguf-metadata.json"
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def write(n: int) -> None:
        start.wait()
        for i in range(200):
            try:
                if not save_cache_file(path, {"writer": n, "i": i, "pad": "x" * 2000}):
                    failures.append(RuntimeError("not saved"))
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert json.loads(path.read_text())["i"] == 199
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left behind
