"""The shared basics: private temporary folders, racing writers of one cache file."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import pytest

from fara_desktop.atomic_files import save_cache_file
from fara_desktop.paths import private_temp_dir


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


def test_moments_carry_their_year_unless_it_is_this_one():
    import time as clock

    from fara_desktop.format import format_when

    now = clock.mktime((2026, 12, 4, 12, 0, 0, 0, 0, -1))
    today = clock.mktime((2026, 12, 4, 9, 5, 0, 0, 0, -1))
    this_year = clock.mktime((2026, 5, 29, 16, 26, 0, 0, 0, -1))
    years_ago = clock.mktime((2023, 5, 29, 16, 26, 0, 0, 0, -1))
    assert format_when(today, now=now) == "09:05"
    assert format_when(today, always_date=True, now=now) == "4 Dec 09:05"
    assert format_when(this_year, now=now) == "29 May 16:26"
    assert format_when(years_ago, now=now) == "29 May 2023 16:26"
    assert format_when(years_ago, with_time=False, now=now) == "29 May 2023"


def test_counts_and_parameter_counts_read_as_people_write_them():
    from fara_desktop.format import format_count, format_parameters

    assert [format_count(n, "thread") for n in (1, 2, 10_000)] == ["1 thread", "2 threads", "10,000 threads"]
    assert format_parameters(999_700_000) == "1.0B" and format_parameters(135_000_000) == "135M"
