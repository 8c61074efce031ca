"""The README's document figures, measured on a real corpus: the Python standard library's sources and documents
(this interpreter's, at least 20 MB of code, docstrings and text), with a question set whose answering passages are
known. Prints indexing speed, query latency (median, p95) and recall@5."""

from __future__ import annotations

import statistics
import sysconfig
import time
from pathlib import Path

from fara_desktop.documents.index import DocumentIndex
from fara_desktop.documents.indexer import index_collection

# (question, file that answers it, a phrase the answering passage holds)
QUESTIONS = [
    ("How does json escape non-ASCII characters when ensure_ascii is true?", "json/encoder.py", "ensure_ascii"),
    ("What does shutil.rmtree do with the onerror callback?", "shutil.py", "onerror"),
    ("How is heappush implemented in the heap queue algorithm?", "heapq.py", "def heappush"),
    ("What timeout does socket create_connection use by default?", "socket.py", "def create_connection"),
    ("How does textwrap dedent remove common leading whitespace?", "textwrap.py", "def dedent"),
    ("How does lru_cache build its cache key from the arguments?", "functools.py", "_make_key"),
    ("What does Path mkdir do with parents and exist_ok?", "pathlib.py", "exist_ok"),
    ("How does SequenceMatcher compute the similarity ratio?", "difflib.py", "def ratio"),
    ("How are urlsafe base64 strings decoded?", "base64.py", "urlsafe_b64decode"),
    ("How does the csv Sniffer guess the delimiter?", "csv.py", "_guess_delimiter"),
    ("What does gather do when return_exceptions is true?", "asyncio/tasks.py", "return_exceptions"),
    ("How does zipfile check the CRC of an extracted member?", "zipfile.py", "crc"),
]


def corpus_roots() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in stdlib.iterdir() if p.name not in ("site-packages", "dist-packages", "__pycache__"))


def test_index_speed_query_latency_and_recall_on_the_standard_library(tmp_path):
    index = DocumentIndex(tmp_path / "documents.sqlite3")
    report = index_collection(index, "stdlib", corpus_roots())
    mb = report.bytes_read / 1e6
    assert mb >= 20, f"the corpus is only {mb:.1f} MB"
    latencies: list[float] = []
    found = 0
    for question, expected_file, phrase in QUESTIONS:
        for _ in range(10):
            started = time.perf_counter()
            hits = index.search(["stdlib"], question, top=5)
            latencies.append(time.perf_counter() - started)
        found += any(h.path.endswith(expected_file) and phrase.lower() in h.text.lower() for h in hits)
    latencies.sort()
    median = statistics.median(latencies) * 1000
    p95 = latencies[int(len(latencies) * 0.95)] * 1000
    recall = found / len(QUESTIONS)
    print(
        f"\nstdlib corpus: {report.files:,} files, {mb:.1f} MB, {report.passages:,} passages, indexed in "
        f"{report.seconds:.1f} s = {mb / report.seconds:.1f} MB/s, {report.passages / report.seconds:,.0f} "
        f"passages/s; {len(report.unreadable)} unreadable\nquery latency: median {median:.1f} ms, p95 {p95:.1f} ms; "
        f"lexical recall@5: {found}/{len(QUESTIONS)} = {recall:.2f}"
    )
    assert recall >= 0.75
    assert p95 < 200
    index.close()
