"""The hardware panel says how the local API's replies are decoded (issue 63): how many at once, tuned or pinned,
and how many decode together now; their KV caches beside the model's."""

from __future__ import annotations

from pathlib import Path

from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import estimate_memory
from fara_desktop.settings import InferenceOverrides
from fara_desktop.ui.widgets.hardware_panel import HardwarePanel
from tests.helpers.fakes import FakeBackend
from tests.unit.planning.test_tuning import LLAMA_8B


def test_the_panel_shows_the_api_replies_decoding_together_now(qtbot):
    panel = HardwarePanel()
    qtbot.addWidget(panel)
    panel.show_api_requests(3)  # before a model: nothing to say yet
    assert panel.value("API replies") == "—"
    panel.show_model(FakeBackend().load(Path("four.gguf"), LoadParams(parallel=4)))
    assert panel.value("API replies") == "4 at once (auto) · 3 decoding now"
    panel.show_api_requests(6)
    assert panel.value("API replies") == "4 at once (auto) · 4 decoding now"
    panel.show_api_requests(0)
    assert panel.value("API replies") == "4 at once (auto)"
    tuned = panel._tuned
    panel.show_tuning(tuned, InferenceOverrides(parallel=2))  # type: ignore[arg-type]
    panel.show_model(FakeBackend().load(Path("two.gguf"), LoadParams(parallel=2)))
    assert panel.value("API replies") == "2 at once (yours)"
    panel.show_model(FakeBackend().load(Path("one.gguf"), LoadParams()))
    panel.show_api_requests(2)
    assert panel.value("API replies") == "one at a time · 2 under way"


def test_the_kv_memory_counts_the_api_replies_caches(qtbot):
    panel = HardwarePanel()
    qtbot.addWidget(panel)
    panel.show_memory_plan(estimate_memory(LLAMA_8B, 8192))
    assert "API" not in panel.value("KV memory")
    panel.show_memory_plan(estimate_memory(LLAMA_8B, 8192, parallel=4))
    assert panel.value("KV memory").endswith("+ 4.18 GiB for the API's replies")


def test_the_panel_says_where_the_windows_proposals_come_from(qtbot):
    """Issue 65: proposals from the reply's own text, from a draft model loaded beside, from the model's own MTP
    head, or none (speculation off,
    or a hybrid whose state cannot be taken back); a server's model decides for itself."""
    from dataclasses import replace

    panel = HardwarePanel()
    qtbot.addWidget(panel)
    info = FakeBackend().load(Path("one.gguf"), LoadParams())
    for shown, expected in (
        (replace(info, speculates=False), "off"),
        (replace(info, speculates=True), "from the reply's own text"),
        (replace(info, speculates=True, draft="SmolLM2-135M.gguf"), "from a draft model"),
        (replace(info, speculates=True, mtp=True), "from the model's MTP head"),
        (replace(info, server="http://127.0.0.1:8080"), "the server's"),
    ):
        panel.show_model(shown)
        assert panel.value("Proposals") == expected
        assert ("SmolLM2-135M.gguf" in panel._values["Proposals"].toolTip()) == bool(shown.draft)  # the file
