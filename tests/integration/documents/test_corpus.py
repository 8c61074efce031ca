"""The README's document figures, measured on a real corpus: the Python standard library's sources and documents
(this interpreter's, at least 20 MB of code, docstrings and text), with a question set whose answering passages are
known. Prints indexing speed, query latency (median, p95) and recall@5."""

from __future__ import annotations

import statistics
import time

from fara_desktop.bench.retrieval import stdlib_roots
from fara_desktop.bench.retrieval_questions import STDLIB_QUESTIONS
from fara_desktop.documents.index import DocumentIndex
from fara_desktop.documents.indexer import index_collection

# (question, file that answers it, a phrase the answering passage holds): the retrieval benchmark's set
QUESTIONS = [(q.text, q.file, q.phrase) for q in STDLIB_QUESTIONS]


def test_index_speed_query_latency_and_recall_on_the_standard_library(tmp_path):
    index = DocumentIndex(tmp_path / "documents.sqlite3")
    report = index_collection(index, "stdlib", stdlib_roots())
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
