"""The retrieval benchmark's scoring: a hit counts when it comes from the answering file and holds the phrase;
recall@5, MRR@10 and whether the answer is among the passages a ~1,000-token prompt holds."""

from __future__ import annotations

import importlib.metadata

from fara_desktop.bench.retrieval import PROMPT_CHARS, Rankings, quality, relevant_rank, scores, within_prompt
from fara_desktop.bench.retrieval_questions import README_QUESTIONS, STDLIB_QUESTIONS, Question
from fara_desktop.documents.index import Hit

QUESTION = Question("How is the pump primed?", "manual.md", "prime the pump")


def hit(path: str, text: str, pid: int = 0) -> Hit:
    return Hit(pid, path, text, None, 1, 1, 0.0)


def test_a_hit_needs_the_file_and_the_phrase():
    hits = [hit("/d/other.md", "prime the pump"), hit("/d/manual.md", "open the valve"),
            hit("/d/manual.md", "First, Prime The Pump with water.")]  # fmt: skip
    assert relevant_rank(hits, QUESTION) == 3
    assert relevant_rank(hits[:2], QUESTION) is None


def test_recall_mrr_and_the_prompt_budget():
    found_second = [hit("/d/a.md", "x"), hit("/d/manual.md", "prime the pump")]
    found_seventh = [hit("/d/a.md", "x" * 100)] * 6 + [hit("/d/manual.md", "prime the pump")]
    missed = [hit("/d/a.md", "x")]
    figures = scores([found_second, found_seventh, missed], [QUESTION] * 3)
    assert figures["recall_at_5"] == 1 / 3
    assert abs(figures["mrr"] - (1 / 2 + 1 / 7) / 3) < 1e-9
    assert figures["recall_in_prompt"] == 2 / 3  # 6 short passages and the answer fit
    long_ones = [hit("/d/a.md", "x" * (PROMPT_CHARS // 2))] * 2 + [hit("/d/manual.md", "prime the pump")]
    assert not within_prompt(long_ones, QUESTION)  # the prompt is full before the answer


def test_quality_splits_direct_and_paraphrased_questions():
    paraphrase = Question("How do I get water into it first?", "manual.md", "prime the pump", paraphrased=True)
    answer = [hit("/d/manual.md", "prime the pump", 1)]
    rankings = Rankings([QUESTION, paraphrase], lexical=[answer, []], semantic=[answer, answer])
    figures = quality(rankings)
    assert figures["direct"]["lexical"]["recall_at_5"] == 1.0 and figures["paraphrased"]["lexical"]["mrr"] == 0.0
    assert figures["paraphrased"]["fused"]["recall_at_5"] == 1.0 and figures["all"]["questions"] == 2


def test_the_question_sets_are_as_the_readme_says():
    assert len(STDLIB_QUESTIONS) == 12 and len(README_QUESTIONS) >= 30
    paraphrased = sum(q.paraphrased for q in README_QUESTIONS)
    assert paraphrased >= len(README_QUESTIONS) / 2
    assert len({q.text for q in README_QUESTIONS}) == len(README_QUESTIONS)


def test_the_readme_questions_name_packages_the_test_command_installs():
    installed = {str(d.metadata["Name"]).lower().replace("-", "_").replace(".", "_")
                 for d in importlib.metadata.distributions()}  # fmt: skip
    missing = {q.file for q in README_QUESTIONS if q.file.removesuffix(".md") not in installed}
    assert not missing


def test_a_package_name_becomes_a_plain_file_name():
    from fara_desktop.bench.retrieval import readme_file_name

    assert readme_file_name("python-dotenv") == "python_dotenv.md"
    assert readme_file_name("jaraco.functools") == "jaraco_functools.md"
    for hostile in ("../../etc/evil", "/abs/path", "a\\b", "..", ""):
        name = readme_file_name(hostile)
        assert name is None or ("/" not in name and "\\" not in name and not name.startswith("."))
