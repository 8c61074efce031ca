"""Which model on disk drafts for the chosen one (issue 65's draft model): the same vocabulary, at most a quarter
of its parameters, the largest of those; never itself, a projector or an embedder; counted in the memory where it
fits beside, else left out (a draft never keeps a model from loading)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fara_desktop.models.discovery import DiscoveredModel
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import ModelMetadata, metadata_from_header
from fara_desktop.planning.draft_pairing import draft_for, pairs_as_draft, with_draft
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import estimate_memory
from tests.helpers.gguf_factory import write_tiny_model


@pytest.fixture(scope="module")
def meta(tmp_path_factory: pytest.TempPathFactory) -> ModelMetadata:
    return metadata_from_header(read_gguf_header(write_tiny_model(tmp_path_factory.mktemp("m") / "m.gguf")))


def model(meta: ModelMetadata, name: str, parameters: int, **changes: object) -> DiscoveredModel:
    return DiscoveredModel(f"/models/{name}.gguf", "test", name, replace(meta, parameters=parameters, **changes))


def test_the_largest_small_model_of_the_same_vocabulary_drafts(meta: ModelMetadata):
    target = model(meta, "smollm2-1.7b", 1_700_000_000)
    tiny, small = model(meta, "smollm2-135m", 135_000_000), model(meta, "smollm2-360m", 360_000_000)
    too_big = model(meta, "smollm2-1b", 1_000_000_000)  # over a quarter: it would cost as much as it gives
    stranger = model(meta, "qwen-0.5b", 500_000_000, n_vocab=(meta.n_vocab or 0) + 1)
    embedder = model(meta, "bert", 100_000_000, architecture="bert")
    projector = replace(model(meta, "mmproj", 100_000_000), is_projector=True)
    broken = replace(model(meta, "broken", 100_000_000), problem="truncated")
    others = [tiny, small, too_big, stranger, embedder, projector, broken, target]
    assert draft_for(target, others) == small
    assert draft_for(target, [too_big, stranger, embedder, projector, broken, target]) is None
    assert pairs_as_draft(target.metadata, tiny.metadata) and not pairs_as_draft(tiny.metadata, target.metadata)  # type: ignore[arg-type]


def test_a_draft_is_counted_where_it_fits_and_left_out_where_it_does_not(meta: ModelMetadata):
    target = model(meta, "target", 1_700_000_000)
    draft = model(meta, "draft", 135_000_000)
    estimate = estimate_memory(target.metadata, 2048)  # type: ignore[arg-type]
    params, counted = with_draft(target, [draft], LoadParams(draft_model="auto"), estimate)
    assert params.draft_model == draft.path and counted.draft > 0 and counted.total == estimate.total + counted.draft
    huge = model(meta, "draft", 135_000_000, weights_bytes=1 << 50)
    params, counted = with_draft(target, [huge], LoadParams(draft_model="auto"), estimate)
    assert params.draft_model == "" and counted == estimate
    params, counted = with_draft(target, [], LoadParams(draft_model="auto"), estimate)
    assert params.draft_model == "" and counted == estimate


def test_the_settings_ask_for_a_paired_draft_unless_it_or_speculation_is_off():
    from fara_desktop.planning.params import TunedParams
    from fara_desktop.settings.values import InferenceOverrides

    tuned = TunedParams(2048, 2, 2, 512, 512, "f16", False, True, False, {})
    assert InferenceOverrides().apply(tuned).draft_model == "auto"
    assert InferenceOverrides(draft_model=False).apply(tuned).draft_model == ""
    assert InferenceOverrides(speculation=False).apply(tuned).draft_model == ""
    assert Path(InferenceOverrides(draft_model=True).apply(tuned).draft_model or "auto").name == "auto"


def test_the_gain_a_draft_is_expected_to_give_here_follows_the_measured_step_costs():
    from fara_desktop.planning.catalog_fit import predicted_pair_gain

    # the 1.7B shape here: 6.9 tok/s written, 65 read in a batch (a proposal's place: 13–15 ms measured), the
    # embedded 135M drafting at 84 tok/s: about ×1.6 at 7 in 10 accepted, three proposals a step
    gain, proposals = predicted_pair_gain(6.9, 65.0, 84.0, 0.7)
    assert 1.5 < gain < 1.7 and proposals == 3
    assert predicted_pair_gain(6.9, 65.0, 84.0, 0.0) == (1.0, 0)  # never accepted: never proposes
    assert predicted_pair_gain(6.9, 65.0, 6.9, 1.0)[0] < 1.0 + 1e-9  # a draft as slow as the model never pays
    assert predicted_pair_gain(6.9, 65.0, 84.0, 0.9)[0] > gain  # accepted more often, more gained
    assert predicted_pair_gain(6.9, 7.0, 84.0, 0.7)[0] < 1.1  # bound by computing: a proposal costs a token


def test_the_catalog_offers_small_models_of_the_same_vocabulary_as_drafts_where_they_pay_here():
    from fara_desktop.models.catalog import load_catalog
    from fara_desktop.planning.catalog_fit import PAIR_WORTH, assess_catalog

    gib = 1 << 30
    assessment = assess_catalog(load_catalog(), 16 * gib, 24 * gib, 20e9)
    by_id: dict[str, list[str]] = {}
    for key, pair in assessment.pairs.items():
        target = next(o for o in assessment.options if o.key == key)
        by_id.setdefault(target.entry.id, []).append(pair.draft.entry.id)
        assert pair.gain >= PAIR_WORTH and pair.draft.verdict.verdict == "fits" and target.verdict.verdict == "fits"
        assert pair.draft.entry.n_vocab == target.entry.n_vocab and pair.draft.entry.id != target.entry.id
        assert "as its draft" in pair.words() and f"×{pair.gain:.1f}" in pair.words()
    assert set(by_id["smollm2-1.7b-instruct"]) <= {"smollm2-135m-instruct", "smollm2-360m-instruct"}
    assert set(by_id["qwen3.5-9b"]) <= {"qwen3.5-0.8b", "qwen3.5-2b"}
    assert "smollm2-135m-instruct" not in by_id  # nothing smaller of its vocabulary
