"""The private names of llama-cpp-python we rely on (machine/llama_internals.py) are still where we use them.

When an upgrade moves one, this fails naming it, instead of KV-cache restores silently sampling from stale logits
or the portable build's CPU library never loading.
"""

from __future__ import annotations

import pytest

from fara_desktop.machine.llama_internals import libllama, mark_logits_stale


def test_libllama_exposes_the_ggml_backend_registry():
    lib = libllama()
    for name in ("ggml_backend_reg_count", "ggml_backend_load_all_from_path"):
        assert hasattr(lib, name), f"libllama no longer exports {name}"


@pytest.mark.real_model
def test_llama_still_has_the_flag_that_forces_a_fresh_evaluation(smollm2_path):
    from llama_cpp import Llama

    llm = Llama(model_path=str(smollm2_path), n_ctx=256, verbose=False)
    try:
        assert "_requires_eval" in vars(llm), "llama_cpp.Llama has no _requires_eval any more"
        llm._requires_eval = False
        mark_logits_stale(llm)
        assert llm._requires_eval is True
    finally:
        llm.close()


def test_marking_fails_loudly_when_the_flag_is_gone():
    class NotALlama:
        pass

    with pytest.raises(AttributeError, match="_requires_eval"):
        mark_logits_stale(NotALlama())  # type: ignore[arg-type]


def test_the_schema_converter_still_builds_repetitions_through_the_function_we_swap():
    import inspect

    import llama_cpp.llama_grammar as grammar

    from fara_desktop.machine.llama_internals import compact_json_schema_repetitions

    parameters = list(inspect.signature(grammar._build_repetition).parameters)
    assert parameters[:4] == ["item_rule", "min_items", "max_items", "separator_rule"], parameters
    compact_json_schema_repetitions()
    text = grammar.json_schema_to_gbnf('{"type": "string", "maxLength": 4096}')
    assert "{0,4096}" in text and text.count("(") < 10, "the converter no longer uses _build_repetition"


@pytest.mark.real_model
def test_the_load_progress_swap_still_reaches_llama_cpp(smollm2_path):
    """``Llama`` still takes its model parameters from ``llama_model_default_params`` (which ``load_progress`` wraps):
    the callback is called as the model loads, up to the whole file."""
    from llama_cpp import Llama

    from fara_desktop.machine.llama_internals import load_progress

    seen: list[float] = []
    with load_progress(lambda fraction: seen.append(fraction) or True, []):
        llm = Llama(model_path=str(smollm2_path), n_ctx=256, verbose=False)
    llm.close()
    assert seen and seen[-1] == pytest.approx(1.0), "Llama no longer builds its parameters from the function we wrap"


def test_lazy_tables_are_asked_of_llama_cpp_on_the_loading_thread_only():
    """Gemma 4's per-layer embeddings stay on disk only when the parameters ``Llama`` takes carry
    ``LLAMA_LAZY_MODE_ON`` (llama.cpp's default keeps tables under 4 GiB in memory); another thread loading at the
    same moment (the embedder) gets llama.cpp's defaults."""
    import threading

    import llama_cpp.llama_cpp as raw

    from fara_desktop.machine.llama_internals import load_progress

    default = raw.llama_model_default_params().lazy_mode
    other: list[int] = []
    with load_progress(None, [], lazy_tables=True):
        here = raw.llama_model_default_params().lazy_mode
        thread = threading.Thread(target=lambda: other.append(raw.llama_model_default_params().lazy_mode))
        thread.start()
        thread.join()
    assert (here, other, raw.llama_model_default_params().lazy_mode) == (raw.LLAMA_LAZY_MODE_ON, [default], default)
    assert default != raw.LLAMA_LAZY_MODE_ON


def test_the_recurrent_snapshots_reach_a_hybrids_context_and_llama_cpp_keeps_none_for_others(tmp_path, smollm2_path):
    """``Llama`` still takes its context parameters from ``llama_context_default_params`` (which
    ``recurrent_rollback`` wraps): a hybrid that can roll back gets its ``n_rs_seq``, a model of cells none."""
    import llama_cpp
    from llama_cpp import Llama

    from fara_desktop.machine.llama_internals import recurrent_rollback
    from tests.helpers.hybrid_factory import write_tiny_hybrid

    hybrid = write_tiny_hybrid(tmp_path / "qwen35.gguf", "qwen35")
    kept = []
    for path in (hybrid, smollm2_path):
        with recurrent_rollback(4):
            llm = Llama(model_path=str(path), n_ctx=256, verbose=False)
        kept.append(int(llama_cpp.llama_n_rs_seq(llm.ctx)))
        llm.close()
    assert kept == [4, 0], "Llama no longer builds its context parameters from the function we wrap"
    assert llama_cpp.llama_context_default_params().n_rs_seq == 0  # put back


@pytest.mark.real_model
def test_the_prefix_generate_reuses_is_the_one_we_mirror_and_writing_n_tokens_cuts_the_context(smollm2_path):
    """``reused_prefix`` mirrors ``Llama.generate``'s prefix matching (counted at ``Llama.eval``), and
    ``cut_context`` then ``eval`` gives the logits a fresh read gives."""
    import numpy as np
    from llama_cpp import Llama

    from fara_desktop.machine.llama_internals import cut_context, reused_prefix

    llm = Llama(model_path=str(smollm2_path), n_ctx=256, verbose=False, logits_all=False)
    try:
        held = llm.tokenize(b"The quick brown fox jumps over the lazy dog and runs far away.")
        evaluated: list[int] = []
        real_eval = llm.eval
        llm.eval = lambda tokens: (evaluated.append(len(tokens)), real_eval(tokens))[1]  # type: ignore[method-assign]
        for prompt in (held[:10] + llm.tokenize(b" cat sleeps", add_bos=False), held[:12]):
            llm.reset()
            real_eval(held)
            evaluated.clear()
            next(llm.generate(prompt, temp=0.0))
            assert sum(evaluated) == len(prompt) - reused_prefix(held, prompt), (evaluated, len(prompt))
        llm.reset()
        real_eval(held)
        cut_context(llm, 8)
        real_eval(held[8:])
        cut = np.array(llm.scores[llm.n_tokens - 1])
        llm.reset()
        real_eval(held)
        assert np.allclose(cut, llm.scores[llm.n_tokens - 1], atol=1e-4)
    finally:
        llm.close()
