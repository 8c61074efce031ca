"""The Model and Inference pages as a person reads them (issue 29, item 12): the model table shows every column
without sideways scrolling and gives the name the room; the Inference page speaks the page's words, not n_ctx or
kv_type; an override goes back to auto with a button, not only by stepping below the lowest value."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QLabel, QPushButton

from fara_desktop.files.paths import app_paths
from fara_desktop.planning.planner import plan_startup
from fara_desktop.settings import Settings
from fara_desktop.system.api_keys import ApiKeyStore
from fara_desktop.ui.dialogs.settings_dialog import SettingsDialog
from tests.helpers.gguf_factory import write_tiny_model

LONG_NAME = "Meta-Llama-3.1-8B-Instruct-abliterated-uncensored-Q4_K_M.gguf"
INTERNAL_NAMES = ("n_ctx", "kv_type", "n_threads", "n_batch", "n_ubatch", "flash_attn", "use_mmap", "use_mlock")


def open_dialog(qtbot, tmp_path: Path) -> SettingsDialog:
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / LONG_NAME)
    (folder / "broken-download.gguf").write_bytes(b"GGUF" + bytes(20))  # its problem is a long sentence
    paths = app_paths().ensure()
    plan = plan_startup(paths, None, [folder])
    dialog = SettingsDialog(Settings(extra_model_folders=[str(folder)]), plan, ApiKeyStore(paths.config))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def test_the_model_table_needs_no_sideways_scrolling_and_short_cells_are_whole(qtbot, tmp_path):
    dialog = open_dialog(qtbot, tmp_path)
    table = dialog.models
    header = table.horizontalHeader()
    used = sum(header.sectionSize(column) for column in range(table.columnCount()))
    assert used <= table.viewport().width()  # the Fit column was pushed out of sight by a problem's sentence
    metrics = table.fontMetrics()
    for row in range(table.rowCount()):
        for column in (2, 3, 5):  # size, quantization, fit: never cut
            text = table.item(row, column).text()
            assert metrics.horizontalAdvance(text) <= header.sectionSize(column), text
        name = table.item(row, 1)
        assert name.text() in name.toolTip()  # the whole name, however the cell elides it
    assert header.sectionSize(1) >= max(header.sectionSize(c) for c in (2, 3, 4, 5))  # the name has the room


def test_the_inference_page_speaks_in_the_pages_words_and_auto_is_a_button(qtbot, tmp_path):
    dialog = open_dialog(qtbot, tmp_path)
    dialog.show_page("Inference")
    page = dialog.pages.currentWidget()
    shown = " ".join(
        widget.text() for widget in page.findChildren(type(dialog.status)) if widget.isVisibleTo(dialog)
    )
    assert "Context length:" in shown
    assert not [name for name in INTERNAL_NAMES if name in shown]
    auto = page.findChild(QPushButton, "contextLengthAuto")
    assert auto is not None and not auto.isEnabled()
    dialog.ctx.setValue(1024)
    assert auto.isEnabled()
    auto.click()
    assert dialog.ctx.value() == 0 and dialog.ctx.text().startswith("auto") and not auto.isEnabled()
    kv_auto = page.findChild(QPushButton, "kvCacheTypeAuto")
    dialog.kv.setCurrentIndex(dialog.kv.findData("q8_0"))
    kv_auto.click()
    assert dialog.kv.currentData() is None
    assert dialog.settings().inference.n_ctx is None and dialog.settings().inference.kv_type is None


def test_every_setting_survives_the_dialog_unchanged_at_the_ends_of_its_range(qtbot, fara_home):
    """The dialog's fields come from the same description as the loader's ranges: a value the file holds is shown
    and saved back as it was. Before, a seed above 2^31 - 1 or 1,000 GB for saved readings (both valid in the
    file) were cut by the dialog's own ranges and changed on OK."""
    import dataclasses

    from PySide6.QtWidgets import QDoubleSpinBox, QSpinBox

    from fara_desktop.settings import InferenceOverrides, PromptSettings, SamplingSettings
    from fara_desktop.settings.fields import FIELDS, described

    paths = app_paths().ensure()
    for end in ("high", "low"):
        def at(key: str, end: str = end) -> float:
            item = described(key)
            return item.high if end == "high" else item.low  # type: ignore[return-value]

        settings = Settings(
            inference=InferenceOverrides(n_ctx=int(at("inference.n_ctx")), n_threads=int(at("inference.n_threads")),
                                         n_batch=int(at("inference.n_batch"))),
            sampling=SamplingSettings(temperature=at("sampling.temperature"), top_k=int(at("sampling.top_k")),
                                      repeat_penalty=at("sampling.repeat_penalty"), seed=int(at("sampling.seed")),
                                      max_tokens=int(at("sampling.max_tokens")),
                                      mirostat_tau=at("sampling.mirostat_tau")),
            prompts=PromptSettings(chat_states_gb=at("prompts.chat_states_gb"),
                                   document_wait_s=at("prompts.document_wait_s")),
            font_size=int(at("font_size")),
        )  # fmt: skip
        settings = Settings.from_json(settings.to_json())  # as the file holds it
        dialog = SettingsDialog(settings, None, ApiKeyStore(paths.config))
        qtbot.addWidget(dialog)
        saved = dialog.settings()
        assert saved.sampling == settings.sampling and saved.inference == settings.inference, end
        assert saved.prompts == settings.prompts and saved.font_size == settings.font_size, end
        assert dataclasses.replace(saved, local_api=settings.local_api) == dataclasses.replace(
            settings, local_api=settings.local_api
        )
    # And every numeric field of the dialog has its description's range and help.
    dialog = SettingsDialog(Settings(), None, ApiKeyStore(paths.config))
    qtbot.addWidget(dialog)
    spins = {w.accessibleName(): w for w in [*dialog.findChildren(QSpinBox), *dialog.findChildren(QDoubleSpinBox)]}
    checked = 0
    for item in FIELDS:
        spin = spins.get(item.label)
        if spin is None or item.low is None or item.choices:
            continue
        checked += 1
        assert spin.maximum() == item.high, item.key
        assert spin.minimum() == item.low or (item.auto and spin.minimum() < item.low), item.key
        assert spin.accessibleDescription() == item.help, item.key
    assert checked >= 14  # every number the dialog asks for


def test_the_model_page_lists_the_model_in_use_and_embedders_apart(qtbot, fara_home, tmp_path):
    """Issue 43, item 10: the converted embedder was listed as an "unusable" chat model with no reason, and a
    model opened with Ctrl+O from another folder, in use, was not listed at all."""
    from tests.helpers.gguf_factory import write_bert_embedder, write_projector

    folder, elsewhere = tmp_path / "models", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    write_tiny_model(folder / "tiny-chat.gguf")
    write_bert_embedder(folder / "bge-tiny.gguf")
    write_projector(folder / "mmproj-tiny-chat-f16.gguf")  # the model's eyes (issue 44): not a chat model either
    opened = write_tiny_model(elsewhere / "opened-with-ctrl-o.gguf")
    paths = app_paths().ensure()
    plan = plan_startup(paths, opened, [folder])
    assert plan.model is not None and plan.model.path == str(opened)
    dialog = SettingsDialog(Settings(extra_model_folders=[str(folder)]), plan, ApiKeyStore(paths.config))
    qtbot.addWidget(dialog)
    names = [dialog.models.item(row, 1).text() for row in range(dialog.models.rowCount())]
    marks = [dialog.models.item(row, 0).text() for row in range(dialog.models.rowCount())]
    fits = [dialog.models.item(row, 5).text() for row in range(dialog.models.rowCount())]
    row = next(r for r, name in enumerate(names) if "opened" in name.lower())
    assert marks[row] == "●" and fits[row] == "In use"
    assert not any("bge" in name.lower() for name in names) and "unusable" not in fits
    assert dialog.embedders.isVisibleTo(dialog) and "bge" in dialog.embedders.text().lower()
    assert not any("mmproj" in name for name in names)
    assert "Vision projectors: mmproj-tiny-chat-f16" in dialog.embedders.text()
    row = next(r for r, name in enumerate(names) if name == "tiny-chat")
    assert "Can see pictures with mmproj-tiny-chat-f16.gguf" in dialog.models.item(row, 1).toolTip()


def test_a_model_with_two_projectors_beside_it_gets_the_one_chosen_in_settings(qtbot, fara_home, tmp_path):
    """Issue 44: two projectors beside a model and neither name closer: none is guessed; Settings ▸ Model offers
    both (and none), and the load takes the one chosen (a choice of none leaves the memory free)."""
    from fara_desktop.planning.planner import decide_load
    from tests.helpers.gguf_factory import write_projector

    folder = tmp_path / "models"
    folder.mkdir()
    model = write_tiny_model(folder / "gemma-3-4b-it-Q4_K_M.gguf")
    first = write_projector(folder / "mmproj-f16.gguf")
    second = write_projector(folder / "mmproj-bf16.gguf")
    paths = app_paths().ensure()
    plan = plan_startup(paths, model, [folder])
    assert plan.model is not None and plan.model.projector is None  # ambiguous: not guessed
    dialog = SettingsDialog(Settings(extra_model_folders=[str(folder)]), plan, ApiKeyStore(paths.config))
    qtbot.addWidget(dialog)
    row = next(r for r in range(dialog.models.rowCount()) if dialog.models.item(r, 1).data(256) == str(model))
    dialog.models.selectRow(row)
    combo = dialog.projector_choice
    assert combo.isEnabled()
    offered = [combo.itemData(i) for i in range(combo.count())]
    assert offered[:2] == [None, ""] and sorted(offered[2:]) == sorted([str(first), str(second)])
    combo.setCurrentIndex(offered.index(str(second)))
    combo.activated.emit(offered.index(str(second)))
    chosen = dialog.settings().projectors
    assert chosen == {str(model): str(second)}
    tuned = plan.tuned.load_params()
    assert decide_load(plan, tuned, chosen).params.projector == str(second)
    with_none = decide_load(plan, tuned, {str(model): ""})
    assert with_none.params.projector is None and with_none.estimate.vision == 0
    assert decide_load(plan, tuned, chosen).estimate.vision > 0
    gone = decide_load(plan, tuned, {str(model): str(folder / "deleted.gguf")})
    assert gone.params.projector is None  # a choice whose file went: the guess (none here) stands


def test_the_model_page_opens_on_the_model_in_use_and_its_projector(qtbot, fara_home, tmp_path):
    """Issue 53, item 10: the projector box was empty (and off) for the model reading pictures until its row was
    clicked: nothing was selected when the page opened."""
    from tests.helpers.gguf_factory import write_projector

    folder = tmp_path / "models"
    folder.mkdir()
    model = write_tiny_model(folder / "gemma-3-4b-it-Q4_K_M.gguf")
    write_projector(folder / "mmproj-gemma-3-4b-it-f16.gguf")
    paths = app_paths().ensure()
    plan = plan_startup(paths, model, [folder])
    assert plan.model is not None and plan.model.projector is not None
    dialog = SettingsDialog(Settings(extra_model_folders=[str(folder)]), plan, ApiKeyStore(paths.config))
    qtbot.addWidget(dialog)
    selected = dialog.models.selectedItems()
    assert selected and selected[0].data(256) == str(model)
    combo = dialog.projector_choice
    assert combo.isEnabled() and combo.currentText() == "Found beside it: mmproj-gemma-3-4b-it-f16.gguf"


def test_the_sampling_page_says_what_the_field_being_edited_does(qtbot, fara_home):
    """Issue 53, item 12: Sampling's help was only in tool tips (a keyboard user never sees them)."""
    from PySide6.QtWidgets import QApplication

    from fara_desktop.settings.fields import described
    from fara_desktop.ui.widgets.focused_help import FocusedHelp

    paths = app_paths().ensure()
    dialog = SettingsDialog(Settings(), None, ApiKeyStore(paths.config))
    qtbot.addWidget(dialog)
    dialog.show_page("Sampling")
    dialog.show()
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5000)
    help_line = dialog.findChild(QLabel, "samplingHelp")
    assert isinstance(dialog.sampling_help, FocusedHelp) and help_line.isVisible()
    dialog.min_p.setFocus()
    qtbot.waitUntil(lambda: described("sampling.min_p").help in help_line.text(), timeout=2000)
    dialog.temperature.setFocus()
    qtbot.waitUntil(lambda: help_line.text().startswith(described("sampling.temperature").label), timeout=2000)
    dialog.reject()


def test_a_kernel_path_that_failed_the_check_cannot_be_pinned(qtbot, tmp_path):
    from PySide6.QtWidgets import QComboBox

    from fara_desktop.machine.kernels import known_verdicts

    dialog = open_dialog(qtbot, tmp_path)
    combo = dialog.pages.findChild(QComboBox, "kernelPath")
    assert combo is not None and combo.currentData() is None  # auto
    model = combo.model()
    for key, verdict in known_verdicts().items():
        index = combo.findData(key)
        assert model.item(index).isEnabled() is verdict.usable
        if not verdict.usable:
            assert "unusable here" in combo.itemText(index) and verdict.reason in combo.itemData(index, 3)
    combo.setCurrentIndex(combo.findData("plain"))
    assert dialog.settings().inference.kernel_path == "plain"
