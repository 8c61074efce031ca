"""The Model and Inference pages as a person reads them (issue 29, item 12): the model table shows every column
without sideways scrolling and gives the name the room; the Inference page speaks the page's words, not n_ctx or
kv_type; an override goes back to auto with a button, not only by stepping below the lowest value."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QPushButton

from fara_desktop.api_keys import ApiKeyStore
from fara_desktop.paths import app_paths
from fara_desktop.planning.planner import plan_startup
from fara_desktop.settings import Settings
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
