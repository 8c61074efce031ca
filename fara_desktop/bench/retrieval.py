"""Retrieval quality and the embedder's speed, measured: recall@5 and MRR for lexical, semantic and fused search on
two question sets, the fusion weights and passage size that the numbers favour, embedding throughput at 1 and 2
threads (interleaved), query latency alone and during background indexing, and the time to make a ~30 MB corpus
semantically searchable (``fara-desktop bench --section retrieval``)."""

from __future__ import annotations

import os
import re
import statistics
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fara_desktop.bench.retrieval_questions import README_QUESTIONS, STDLIB_QUESTIONS, Question
from fara_desktop.documents.index import DocumentIndex, Hit
from fara_desktop.documents.indexer import candidate_files, index_collection
from fara_desktop.documents.passages import TARGET_CHARS, PassageCutter
from fara_desktop.documents.semantic import (
    CANDIDATES_PER_RESULT,
    RRF_K,
    SEMANTIC_WEIGHT,
    embed_collection,
    fuse,
)
from fara_desktop.engine.embedder import Embedder

TOP = 5
MRR_DEPTH = 10
PROMPT_CHARS = 4000  # ~1,000 tokens of passages: what a 1.7B model reads in the accepted wait (10 s) on 2 cores
PASSAGE_SIZES = (400, 800, 1600)
FUSION_K = (10, 30, 60)
SEMANTIC_WEIGHTS = (0.5, 1.0, 1.5, 2.0, 3.0)


@dataclass(frozen=True)
class Rankings:
    """For each question, the lexical and the semantic ranking (deep enough for fusion and MRR)."""

    questions: Sequence[Question]
    lexical: list[list[Hit]]
    semantic: list[list[Hit]]


def relevant_rank(hits: Sequence[Hit], question: Question) -> int | None:
    for rank, hit in enumerate(hits, start=1):
        if hit.path.replace(os.sep, "/").endswith(question.file) and question.phrase.lower() in hit.text.lower():
            return rank
    return None


def within_prompt(hits: Sequence[Hit], question: Question) -> bool:
    """Whether the answer is among the best passages that fit ``PROMPT_CHARS``: what the model would read. A
    smaller passage size puts more passages in the prompt; a larger one keeps more context around each."""
    used = 0
    for hit in hits:
        used += len(hit.text)
        if used > PROMPT_CHARS:
            return False
        if relevant_rank([hit], question) is not None:
            return True
    return False


def scores(rankings: Sequence[Sequence[Hit]], questions: Sequence[Question]) -> dict[str, float]:
    ranks = [relevant_rank(hits, q) for hits, q in zip(rankings, questions, strict=True)]
    in_prompt = [within_prompt(hits, q) for hits, q in zip(rankings, questions, strict=True)]
    return {
        "recall_at_5": sum(1 for r in ranks if r is not None and r <= TOP) / len(ranks),
        "mrr": sum(1 / r for r in ranks if r is not None and r <= MRR_DEPTH) / len(ranks),
        "recall_in_prompt": sum(in_prompt) / len(ranks),
    }


def rank_all(index: DocumentIndex, collection: str, embedder: Embedder, questions: Sequence[Question]) -> Rankings:
    depth = TOP * CANDIDATES_PER_RESULT
    lexical = [index.search([collection], q.text, depth) for q in questions]
    semantic = [
        index.semantic_search([collection], embedder.embed_query(q.text), embedder.name, depth) for q in questions
    ]
    return Rankings(questions, lexical, semantic)


def fused(rankings: Rankings, k: float, semantic_weight: float) -> list[list[Hit]]:
    pairs = zip(rankings.lexical, rankings.semantic, strict=True)
    return [fuse([lexical, semantic], TOP * 4, (1.0, semantic_weight), k) for lexical, semantic in pairs]


def quality(rankings: Rankings, k: float = RRF_K, semantic_weight: float = SEMANTIC_WEIGHT) -> dict[str, Any]:
    """Recall@5 and MRR@10 of the three methods, for all questions and (where the set has them) the direct and the
    paraphrased ones apart."""
    methods = {"lexical": rankings.lexical, "semantic": rankings.semantic, "fused": fused(rankings, k, semantic_weight)}
    out: dict[str, Any] = {}
    groups: dict[str, Callable[[Question], bool]] = {"all": lambda q: True}
    if any(q.paraphrased for q in rankings.questions):
        groups |= {"direct": lambda q: not q.paraphrased, "paraphrased": lambda q: q.paraphrased}
    for group, keep in groups.items():
        chosen = [i for i, q in enumerate(rankings.questions) if keep(q)]
        out[group] = {
            name: scores([lists[i] for i in chosen], [rankings.questions[i] for i in chosen])
            for name, lists in methods.items()
        }
        out[group]["questions"] = len(chosen)
    return out


def fusion_grid(sets: dict[str, Rankings]) -> list[dict[str, Any]]:
    """Every (k, semantic weight) with its mean MRR and recall@5 over the sets (each set counts once), and each
    set's own figures."""
    grid = []
    for k in FUSION_K:
        for weight in SEMANTIC_WEIGHTS:
            per_set = {name: scores(fused(r, k, weight), r.questions) for name, r in sets.items()}
            grid.append(
                {
                    "k": k,
                    "semantic_weight": weight,
                    "mrr": statistics.mean(s["mrr"] for s in per_set.values()),
                    "recall_at_5": statistics.mean(s["recall_at_5"] for s in per_set.values()),
                    "sets": per_set,
                }
            )
    return grid


# ------------------------------------------------------------------ corpora


def stdlib_roots() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in stdlib.iterdir() if p.name not in ("site-packages", "dist-packages", "__pycache__"))


def stdlib_slice(every: int = 15) -> list[Path]:
    """The files that answer the standard-library questions and every ``every``-th other file (~2 MB): the passage
    sizes are compared on it (the whole library takes ~20 minutes to embed at each size)."""
    answers = {q.file for q in STDLIB_QUESTIONS}
    files = [path for path, _ in candidate_files(stdlib_roots())]
    chosen = [p for p in files if any(p.as_posix().endswith("/" + a) for a in answers)]
    return chosen + [p for i, p in enumerate(files) if i % every == 0 and p not in chosen]


def write_package_readmes(folder: Path) -> Path:
    """The long descriptions (READMEs) of the installed packages, one Markdown file each, named after the
    distribution (``python_dotenv.md``); the app's own is left out (it changes with every round)."""
    import importlib.metadata

    folder.mkdir(parents=True, exist_ok=True)
    for dist in importlib.metadata.distributions():
        name = readme_file_name(str(dist.metadata["Name"] or ""))
        body = dist.metadata.get_payload() if hasattr(dist.metadata, "get_payload") else ""
        if name is None or name == "fara_desktop.md" or not isinstance(body, str) or not body.strip():
            continue
        (folder / name).write_text(body, encoding="utf-8")
    return folder


def readme_file_name(distribution: str) -> str | None:
    """``python-dotenv`` → ``python_dotenv.md``; a name is outside input, so only letters, digits and ``_`` stay
    (None: nothing is left)."""
    name = re.sub(r"[^a-z0-9_]", "_", distribution.lower()).strip("_")
    return f"{name}.md" if name else None


def index_with_passage_size(index: DocumentIndex, collection: str, roots: Sequence[Path], target_chars: int) -> int:
    """The corpus cut into passages of ``target_chars`` (trusted text files, read here rather than in the app's
    sandboxed reader, which uses the app's one size). Returns the passage count."""
    cid = index.collection_id(collection, create=True)
    assert cid is not None
    count = 0
    for path, listed in candidate_files(list(roots)):
        cutter = PassageCutter(line=1, target_chars=target_chars)
        text = path.read_text(encoding="utf-8", errors="replace")
        found = [*cutter.feed(text), *cutter.finish()]
        index.replace_file(cid, str(path), listed.st_size, listed.st_mtime_ns, None, found)
        count += len(found)
    return count


# ------------------------------------------------------------------ speed


def throughput(model: Path, passages: Sequence[str], rounds: int = 3) -> dict[str, Any]:
    """Passages/s at 1 and 2 threads and with flash attention off, interleaved; medians."""
    configs: dict[str, Callable[[], Embedder]] = {
        "threads_1": lambda: Embedder(model, threads=1),
        "threads_2": lambda: Embedder(model, threads=2),
        "threads_2_no_flash_attention": lambda: Embedder(model, threads=2, flash_attention=False),
    }
    runs: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, make in configs.items():
            embedder = make()
            embedder.embed(passages[:4])  # warm up
            started = time.perf_counter()
            embedder.embed(passages)
            runs[name].append(len(passages) / (time.perf_counter() - started))
            embedder.close()
    return {"passages_per_s": {name: statistics.median(r) for name, r in runs.items()}, "runs": runs}


def query_latency_ms(embedder: Embedder, index: DocumentIndex, collection: str, queries: Sequence[str]) -> float:
    latencies = []
    for text in queries:
        started = time.perf_counter()
        index.semantic_search([collection], embedder.embed_query(text), embedder.name, TOP)
        latencies.append(time.perf_counter() - started)
    return statistics.median(latencies) * 1000


def semantic_corpus_time(
    embedder: Embedder, folder: Path, roots: Sequence[Path], queries: Sequence[str], limit_passages: int | None
) -> dict[str, Any]:
    """The app's own path (sandboxed reading, then vectors) on the corpus, with query latency sampled from another
    thread while the vectors are computed (as a search during background indexing)."""
    index = DocumentIndex(folder / "stdlib.sqlite3")
    report = index_collection(index, "stdlib", list(roots))
    stop = threading.Event()
    during: list[float] = []

    def probe() -> None:
        probe_index = DocumentIndex(folder / "stdlib.sqlite3")
        position = 0
        while not stop.wait(0.25):  # a query every quarter second, not synchronisation
            text = queries[position % len(queries)]
            position += 1
            started = time.perf_counter()
            embedder.embed_query(text)
            during.append(time.perf_counter() - started)
        probe_index.close()

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    total = len(index.passages_without_vectors("stdlib", embedder.name, 10_000_000))
    budget = limit_passages or total
    done = [0]
    embedding = embed_collection(
        index,
        "stdlib",
        embedder,
        should_stop=lambda: done[0] >= budget,
        on_progress=lambda p: done.__setitem__(0, p.done),
    )
    stop.set()
    prober.join()
    embed_s = time.perf_counter() - embedding.started
    per_s = embedding.done / embed_s
    mb = report.bytes_read / 1e6
    out = {
        "corpus_mb": mb,
        "files": report.files,
        "passages": total,
        "text_index_s": report.seconds,
        "vectors_done": embedding.done,
        "vectors_s": embed_s,
        "passages_per_s": per_s,
        "semantic_total_s": report.seconds + total / per_s,
        "semantic_s_per_30_mb": (report.seconds + total / per_s) * 30 / mb,
        "query_embed_ms_during_indexing": statistics.median(during) * 1000 if during else None,
        "query_embed_ms_during_indexing_p95": sorted(during)[int(len(during) * 0.95)] * 1000 if during else None,
    }
    return {"report": out, "index": index}


# ------------------------------------------------------------------ the section


def retrieval(model: Path, quick: bool, note: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Everything above on ``model`` (an embedding GGUF); ``quick`` embeds a slice of the standard library only."""
    out: dict[str, Any] = {"embedder": str(model), "target_chars": TARGET_CHARS}
    with tempfile.TemporaryDirectory(prefix="fara-retrieval-") as scratch:
        folder = Path(scratch)
        readmes = write_package_readmes(folder / "readmes")
        sample = [h.text for h in _passages_of(folder, readmes)[:120]]
        note("embedding throughput: 1 vs 2 threads, flash attention on and off")
        out["throughput"] = throughput(model, sample[:40] if quick else sample, rounds=1 if quick else 3)
        embedder = Embedder(model)
        try:
            note("passage sizes on the package READMEs and on a slice of the standard library")
            readme_sets: dict[int, Rankings] = {}
            corpora = {"readmes": ([readmes], README_QUESTIONS), "stdlib_slice": (stdlib_slice(), STDLIB_QUESTIONS)}
            for corpus_name, (roots, questions) in corpora.items():
                sizes: dict[str, Any] = {}
                for size in PASSAGE_SIZES:
                    index = DocumentIndex(folder / f"{corpus_name}-{size}.sqlite3")
                    passages = index_with_passage_size(index, corpus_name, roots, size)
                    embed_collection(index, corpus_name, embedder)
                    rankings = rank_all(index, corpus_name, embedder, questions)
                    sizes[str(size)] = {"passages": passages, **quality(rankings)}
                    if corpus_name == "readmes":
                        readme_sets[size] = rankings
                    if corpus_name == "readmes" and size == TARGET_CHARS:
                        out["query_ms_alone"] = query_latency_ms(
                            embedder, index, corpus_name, [q.text for q in questions]
                        )
                    index.close()
                out[f"passage_sizes_{corpus_name}"] = sizes
            note("the standard library: text index, then vectors (the app's path), queries meanwhile")
            corpus = semantic_corpus_time(
                embedder, folder, stdlib_roots(), [q.text for q in README_QUESTIONS], 3000 if quick else None
            )
            out["stdlib_corpus"] = corpus["report"]
            stdlib_index: DocumentIndex = corpus["index"]
            stdlib_rankings = rank_all(stdlib_index, "stdlib", embedder, STDLIB_QUESTIONS)
            stdlib_index.close()
            grid = fusion_grid({"readmes": readme_sets[TARGET_CHARS], "stdlib": stdlib_rankings})
            out["fusion_grid"] = grid
            best = max(grid, key=lambda g: (round(g["mrr"], 3), g["recall_at_5"]))
            out["fusion_best"] = best
            out["quality"] = {"stdlib": quality(stdlib_rankings), "readmes": quality(readme_sets[TARGET_CHARS])}
        finally:
            embedder.close()
    return out


def _passages_of(folder: Path, roots: Path) -> list[Hit]:
    """A sample of real passages (the READMEs cut at the app's size) for the throughput runs."""
    index = DocumentIndex(folder / "sample.sqlite3")
    index_with_passage_size(index, "sample", [roots], TARGET_CHARS)
    rows = index.passages_without_vectors("sample", "none", 400)
    index.close()
    return [Hit(pid, "", text, None, None, None, 0.0) for pid, text in rows[::3]]
