"""Documents at size: a folder of 10,000 small files and a 100 MB file, indexed with the speed printed; a re-scan of
the unchanged folder reads nothing again; a paused scan waits and resumes; a scan yields while a reply runs."""

from __future__ import annotations

import threading
import time

from fara_desktop.documents.index import DocumentIndex
from fara_desktop.documents.indexer import IndexProgress, index_collection


def test_ten_thousand_small_files(tmp_path):
    folder = tmp_path / "notes"
    for n in range(10_000):
        sub = folder / f"d{n // 500:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note-{n:05d}.md").write_text(f"# Note {n}\n\nThis note is about item number {n} and kiwi{n}.\n")
    index = DocumentIndex(tmp_path / "documents.sqlite3")
    started = time.perf_counter()
    report = index_collection(index, "notes", [folder])
    first = time.perf_counter() - started
    started = time.perf_counter()
    again = index_collection(index, "notes", [])
    rescan = time.perf_counter() - started
    print(f"\n10,000 files: indexed in {first:.1f} s ({report.files / first:,.0f} files/s), re-scanned unchanged in "
          f"{rescan:.2f} s")  # fmt: skip
    assert report.files == 10_000 and report.passages == 10_000 and report.unreadable == []
    assert again.indexed == 0 and again.unchanged == 10_000
    hit = index.search(["notes"], "kiwi7777")[0]
    assert hit.path.endswith("note-07777.md")
    index.close()


def test_a_100_mb_file(tmp_path):
    big = tmp_path / "big.log"
    line = "2026-12-03 12:00:00 INFO worker processed a request in 12 ms without any trouble at all\n"
    with open(big, "w", encoding="utf-8") as handle:
        for n in range(100 * 1024 * 1024 // len(line)):
            handle.write(line if n != 654_321 else "2026-12-03 12:00:00 ERROR the flux capacitor overheated\n")
    index = DocumentIndex(tmp_path / "documents.sqlite3")
    started = time.perf_counter()
    report = index_collection(index, "logs", [big])
    seconds = time.perf_counter() - started
    print(
        f"\n100 MB file: {report.passages:,} passages in {seconds:.1f} s ({report.bytes_read / 1e6 / seconds:.1f} MB/s)"
    )
    hit = index.search(["logs"], "flux capacitor")[0]
    assert hit.line_start <= 654_322 <= hit.line_end and "flux capacitor" in hit.text
    index.close()


def test_a_paused_scan_waits_and_a_scan_yields_while_a_reply_runs(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(50):
        (folder / f"n{n}.txt").write_text(f"note {n}\n")
    index = DocumentIndex(tmp_path / "documents.sqlite3")
    pause = threading.Event()
    replying = threading.Event()
    seen: list[int] = []
    waited = threading.Event()

    def progress(state: IndexProgress) -> None:
        seen.append(state.files_done)
        if state.files_done == 10:
            pause.set()  # the user pressed Pause
            threading.Timer(0.3, waited.set).start()
        if state.files_done == 20:
            replying.set()  # a reply starts
            threading.Timer(0.3, replying.clear).start()

    def release() -> None:
        waited.wait(5)
        pause.clear()

    threading.Thread(target=release, daemon=True).start()
    started = time.perf_counter()
    report = index_collection(index, "notes", [folder], on_progress=progress, pause=pause, yield_to=replying.is_set)
    assert report.files == 50 and seen == list(range(1, 51))
    assert time.perf_counter() - started >= 0.6  # it waited through the pause and the reply
    index.close()
