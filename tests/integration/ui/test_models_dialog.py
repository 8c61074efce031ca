"""Get models: the catalog judged for this machine, downloads from a stand-in hub on 127.0.0.1."""

from __future__ import annotations

import html
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QPushButton

from fara_desktop.models.catalog import load_catalog
from fara_desktop.planning.catalog_fit import assess_catalog
from fara_desktop.settings import load_settings
from fara_desktop.text.format import GIB
from fara_desktop.ui.dialogs.models_dialog import GetModelsDialog
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.ui.theme import VERDICT_COLORS, apply_appearance
from tests.helpers.fakes import FakeBackend
from tests.helpers.gguf_factory import write_projector, write_tiny_model
from tests.helpers.hub_server import HubServer
from tests.helpers.screenshots import keep_screenshot

REPO = "fara-tests/Tiny-Llama-GGUF"


FILE = "Tiny-Llama-Q8_0.gguf"


def laptop(available_gib: float, total_gib: float = 8.0):
    return lambda: assess_catalog(load_catalog(), int(available_gib * GIB), int(total_gib * GIB), 20e9)


def open_dialog(qtbot, assess, **kwargs) -> GetModelsDialog:
    dialog = GetModelsDialog(assess, **kwargs)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.assessment is not None, timeout=10_000)
    return dialog


def option_rows(dialog: GetModelsDialog) -> dict[str, tuple[str, str]]:
    """key → (verdict kind, button text) for every quantization row."""
    rows = {}
    for top in range(dialog.tree.topLevelItemCount()):
        parent = dialog.tree.topLevelItem(top)
        for index in range(parent.childCount()):
            item = parent.child(index)
            button = dialog.tree.itemWidget(item, 5)
            assert isinstance(button, QPushButton)
            rows[item.data(0, Qt.ItemDataRole.UserRole)] = (item.data(2, Qt.ItemDataRole.UserRole), button.text())
    return rows


@pytest.fixture
def hub(tmp_path_factory):
    data = write_tiny_model(tmp_path_factory.mktemp("hub") / "tiny.gguf", n_embd=256, n_ff=512, n_layer=4).read_bytes()
    with HubServer() as server:
        server.add(REPO, FILE, data)
        server.data = data  # type: ignore[attr-defined]
        yield server


def test_catalog_shows_every_option_with_a_verdict_and_one_recommendation(qtbot):
    dialog = open_dialog(qtbot, laptop(6.0))
    rows = option_rows(dialog)
    assert len(rows) == sum(len(entry.quants) for entry in load_catalog())
    assert dialog.recommended_item is not None
    recommended = dialog.recommended_item.data(0, Qt.ItemDataRole.UserRole)
    assert rows[recommended][0] == "fits"
    assert "★ Worth downloading for this machine" in dialog.recommendation.text()
    assert all(text == "Download" for _, text in rows.values())  # nothing installed in this test's home
    families = [dialog.tree.topLevelItem(i) for i in range(dialog.tree.topLevelItemCount())]
    described = {entry.name: entry.description for entry in load_catalog()}
    for family in families:  # a description cut to the width is whole in its tooltip (issue 53, item 12)
        name = family.text(0).split(" — ")[0]
        assert any(html.escape(f"{n}: {d}") in family.toolTip(0) for n, d in described.items() if name.startswith(n))


def test_a_laptop_is_offered_a_2026_mixture_of_experts_and_told_why_it_is_fast(qtbot):
    """Issue 41: on a 16 GB laptop a mixture of experts that is faster than the dense models of its size and fits
    is recommended, the reason in words (on hover: the label itself says size, speed and quality, issue 54), and
    the catalog says what each model is."""
    dialog = open_dialog(qtbot, lambda: assess_catalog(load_catalog(), 11 * GIB, 16 * GIB, 30e9))
    chosen = dialog.assessment.recommended
    assert chosen.entry.n_expert > 0 and chosen.entry.released and chosen.entry.released >= 2025
    text, why = dialog.recommendation.text(), html.unescape(dialog.recommendation.toolTip())
    assert chosen.entry.name in text and "per word" in why and "are used for each" in why
    titles = [dialog.tree.topLevelItem(i).text(0) for i in range(dialog.tree.topLevelItemCount())]
    assert any("mixture of experts" in t and "hybrid" in t for t in titles)  # Granite 4.0 H Tiny, LFM2.5 8B-A1B
    assert any(t.startswith("Fara-7B") for t in titles)


def contrast(a: QColor, b: QColor) -> float:
    """WCAG's contrast ratio of two colours."""

    def luminance(color: QColor) -> float:
        def channel(value: float) -> float:
            return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

        return 0.2126 * channel(color.redF()) + 0.7152 * channel(color.greenF()) + 0.0722 * channel(color.blueF())

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def rendered_contrast(dialog: GetModelsDialog, item, column: int) -> float:
    """The contrast of the text drawn in a cell against the cell's own background, read from the pixels: the
    colour most pixels have is the background, the one that stands out most from it the text."""
    tree = dialog.tree
    tree.scrollToItem(item)
    rect = tree.visualRect(tree.indexFromItem(item, column))
    image = tree.viewport().grab(rect).toImage()
    counts: dict[int, int] = {}
    for y in range(image.height()):
        for x in range(image.width()):
            rgb = image.pixel(x, y)
            counts[rgb] = counts.get(rgb, 0) + 1
    background = QColor(max(counts, key=lambda rgb: counts[rgb]))
    return max(contrast(QColor(rgb), background) for rgb in counts)


@pytest.mark.parametrize(("theme", "page"), [("light", "#ffffff"), ("dark", "#17191d")])
def test_get_models_is_readable_in_both_themes(qtbot, theme, page):
    """Issue 43, item 6: in the dark theme the recommended row was white on pale green and the verdicts faint."""
    apply_appearance(QApplication.instance(), theme, 10)
    dialog = open_dialog(qtbot, laptop(6.0))
    item = dialog.recommended_item
    assert item is not None
    for column in (0, 1, 2, 3):
        assert rendered_contrast(dialog, item, column) >= 4.5, f"column {column} of the recommended row"
    for kind in ("fits", "slow", "too_big"):
        assert contrast(QColor(VERDICT_COLORS[theme][kind]), QColor(page)) >= 3.0, kind


def test_small_laptop_gets_too_big_verdicts_and_a_smaller_recommendation(qtbot):
    roomy = open_dialog(qtbot, laptop(12.0, 16.0))
    small = open_dialog(qtbot, laptop(1.2, 4.0))
    small_rows = option_rows(small)
    assert small_rows["bartowski/Phi-3.5-mini-instruct-GGUF/Phi-3.5-mini-instruct-Q8_0.gguf"][0] == "too_big"
    assert small.assessment.recommended.quant.estimated_bytes <= roomy.assessment.recommended.quant.estimated_bytes
    assert small.assessment.recommended.verdict.verdict == "fits"


def test_paste_a_file_address_downloads_it_and_hands_it_over(qtbot, hub, tmp_path):
    dialog = open_dialog(qtbot, laptop(6.0), endpoint=hub.url, cache_dir=tmp_path / "hf")
    assert not dialog.downloads_scroll.isVisibleTo(dialog)  # no downloads yet, no empty area
    dialog.paste_edit.setText(f"{hub.url}/{REPO}/resolve/main/{FILE}")
    qtbot.mouseClick(dialog.paste_button, Qt.MouseButton.LeftButton)
    row = dialog.rows[0]
    qtbot.waitUntil(lambda: row.use_button.isVisibleTo(row), timeout=30_000)
    assert "sha256 verified" in row.status.text()
    assert row.path.read_bytes() == hub.data
    with qtbot.waitSignal(dialog.modelReady, timeout=5000) as ready:
        qtbot.mouseClick(row.use_button, Qt.MouseButton.LeftButton)
    assert ready.args[0] == row.path


def test_pause_and_resume_from_the_gui(qtbot, hub, tmp_path):
    hub.state.throttle_bytes = 256 * 1024
    hub.state.gate = threading.Semaphore(2)
    dialog = open_dialog(qtbot, laptop(6.0), endpoint=hub.url, cache_dir=tmp_path / "hf")
    dialog.paste_edit.setText(f"{REPO}")
    dialog.get_pasted()  # a repository: its files are listed to choose from
    qtbot.waitUntil(lambda: dialog.files.count() == 1, timeout=10_000)
    assert dialog.tabs.currentIndex() == 1
    dialog.files.setCurrentRow(0)
    qtbot.mouseClick(dialog.file_download_button, Qt.MouseButton.LeftButton)
    row = dialog.rows[0]
    qtbot.waitUntil(lambda: " of " in row.status.text(), timeout=10_000)  # progress: bytes of total · speed
    qtbot.mouseClick(row.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: row.pause_button.text() == "Resume", timeout=10_000)
    assert "Paused" in row.status.text()
    assert row.task.downloader.partial_bytes() > 0
    hub.open_gate()
    qtbot.mouseClick(row.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: row.path is not None, timeout=30_000)
    assert row.path.read_bytes() == hub.data
    assert any(r and r.startswith("bytes=") for p, r in hub.state.requests if p.startswith("/cdn/"))


def test_failures_are_shown_in_the_row_not_as_dialogs(qtbot, hub, tmp_path):
    dialog = open_dialog(qtbot, laptop(6.0), endpoint=hub.url, cache_dir=tmp_path / "hf")
    dialog.paste_edit.setText("this is not a model")
    dialog.get_pasted()
    dialog.paste_edit.setText(f"{hub.url}/fara-tests/Nope/resolve/main/x-Q4_0.gguf")
    dialog.get_pasted()
    bad, missing = dialog.rows
    assert "not a repository id" in bad.status.text()
    qtbot.waitUntil(lambda: "no repository fara-tests/Nope" in missing.status.text(), timeout=10_000)
    assert missing.property("problem") is True


def test_search_lists_repositories_then_their_files(qtbot, hub):
    dialog = open_dialog(qtbot, laptop(6.0), endpoint=hub.url)
    dialog.tabs.setCurrentIndex(1)
    dialog.search_edit.setText("tiny-llama")
    qtbot.mouseClick(dialog.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.results.count() == 1, timeout=10_000)
    dialog.results.setCurrentRow(0)
    qtbot.waitUntil(lambda: dialog.files.count() == 1, timeout=10_000)
    assert dialog.files.item(0).text().startswith(FILE)
    assert "fits in memory" in dialog.files.item(0).text()


def test_main_window_loads_a_model_handed_over_by_the_dialog(qtbot, tmp_path):
    model = write_tiny_model(tmp_path / "downloaded.gguf")
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    dialog = win.open_models_dialog()
    assert win.open_models_dialog() is dialog  # one dialog: downloads go on while it is hidden
    with qtbot.waitSignal(win.modelLoaded, timeout=20_000):
        dialog.modelReady.emit(model)
    assert win.model_info is not None and Path(win.model_info.path) == model
    assert load_settings(win.paths.config).settings.model_path == str(model)  # still the choice at next start
    win.close()


def test_a_search_that_cannot_reach_the_hub_says_why_and_offers_retry(qtbot, hub):
    """Offline, the search said "[Errno -2] Name or service not known" and had no Retry (issue 29, item 12)."""
    dialog = open_dialog(qtbot, laptop(6.0), endpoint="http://127.0.0.1:9")  # nothing listens there
    dialog.tabs.setCurrentIndex(1)
    dialog.search_edit.setText("tiny-llama")
    qtbot.mouseClick(dialog.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(dialog.search_retry.isVisible, timeout=10_000)
    assert dialog.search_status.text() == "Searching failed: 127.0.0.1:9 refused the connection."
    dialog.endpoint = hub.url  # the network is back
    qtbot.mouseClick(dialog.search_retry, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.results.count() == 1, timeout=10_000)
    assert not dialog.search_retry.isVisible()


def _download_button(dialog: GetModelsDialog, key: str) -> QPushButton:
    button = dialog.findChild(QPushButton, f"download:{key}")
    assert button is not None, key
    return button


def test_two_qwen3_5_sizes_arrive_each_with_its_own_projector(qtbot, tmp_path):
    """Issue 54, item 2: one click brings a model that sees and the file that makes it see, into the model's own
    folder; unsloth names both sizes' projectors mmproj-F16.gguf, and neither overwrites the other."""
    files = {}
    with HubServer() as server:
        for size, width in (("0.8B", 64), ("2B", 96)):
            repo = f"unsloth/Qwen3.5-{size}-GGUF"
            model = write_tiny_model(tmp_path / f"model-{size}.gguf", n_embd=width).read_bytes()
            projector = write_projector(tmp_path / f"mmproj-{size}.gguf", text_embd=width).read_bytes()
            server.add(repo, f"Qwen3.5-{size}-Q4_K_M.gguf", model)
            server.add(repo, "mmproj-F16.gguf", projector)
            files[size] = (repo, model, projector)
        dialog = open_dialog(qtbot, laptop(16.0, 32.0), endpoint=server.url, cache_dir=tmp_path / "hf")
        button = _download_button(dialog, "unsloth/Qwen3.5-0.8B-GGUF/Qwen3.5-0.8B-Q4_K_M.gguf")
        assert "mmproj-F16.gguf" in button.toolTip()
        button.click()
        _download_button(dialog, "unsloth/Qwen3.5-2B-GGUF/Qwen3.5-2B-Q4_K_M.gguf").click()
        rows = list(dialog.rows)
        qtbot.waitUntil(lambda: all(r.path is not None for r in rows), timeout=30_000)
    folders = set()
    for row, size in zip(rows, ("0.8B", "2B"), strict=True):
        repo, model, projector = files[size]
        assert row.task.total == len(model) + len(projector)  # its size in the total
        assert row.path.name == f"Qwen3.5-{size}-Q4_K_M.gguf" and row.path.read_bytes() == model
        assert (row.path.parent / "mmproj-F16.gguf").read_bytes() == projector
        assert "both files" in row.status.text() and "mmproj-F16.gguf" in row.title.text()
        folders.add(row.path.parent)
    assert len(folders) == 2


def test_an_installed_model_that_sees_without_its_projector_offers_to_fetch_it(qtbot, tmp_path):
    """A Qwen3.5 file the user already had (another app's folder) lacks its projector: the row offers it, and it
    lands beside the model under the model's name, so a second size in the same folder keeps its own."""
    folder = tmp_path / "Models"
    folder.mkdir()
    installed = write_tiny_model(folder / "Qwen3.5-2B-Q4_K_M.gguf", n_embd=96)
    entries = [e for e in load_catalog() if e.id == "qwen3.5-2b"]
    assess = lambda: assess_catalog(entries, 16 * GIB, 32 * GIB, 20e9, [installed])  # noqa: E731
    projector = write_projector(tmp_path / "mmproj.gguf", text_embd=96).read_bytes()
    with HubServer() as server:
        server.add("unsloth/Qwen3.5-2B-GGUF", "mmproj-F16.gguf", projector)
        dialog = open_dialog(qtbot, assess, endpoint=server.url, cache_dir=tmp_path / "hf")
        button = _download_button(dialog, "unsloth/Qwen3.5-2B-GGUF/Qwen3.5-2B-Q4_K_M.gguf")
        assert button.text() == "Get its projector" and button.isEnabled()
        button.click()
        row = dialog.rows[0]
        qtbot.waitUntil(lambda: row.path is not None, timeout=30_000)
    assert (folder / "mmproj-Qwen3.5-2B-Q4_K_M.gguf").read_bytes() == projector
    assert row.path == installed  # "Use this model" loads the model, not its projector
    assert "Saved beside Qwen3.5-2B-Q4_K_M.gguf" in row.status.text()
    seeing = assess_catalog(entries, 16 * GIB, 32 * GIB, 20e9, [installed], installed_projectors=[str(installed)])
    assert not any(o.lacks_projector for o in seeing.options)


def test_the_pick_says_its_trade_off_and_offers_the_faster_file_beside_it(qtbot, tmp_path):
    """Issue 54, item 6: the pick in download size, speed here and quality, and its faster, smaller file one
    click away in the same place."""
    dialog = open_dialog(qtbot, lambda: assess_catalog(load_catalog(), 20 * GIB, 24 * GIB, 20e9),
                         cache_dir=tmp_path / "hf", endpoint="http://127.0.0.1:9")  # fmt: skip
    text = dialog.recommendation.text()
    assert "Granite 4.0 H Tiny Q8_0" in text and "to download" in text and "near the original quality" in text
    assert "Faster and smaller: Q4_K_M" in text and "per word" not in text
    assert dialog.faster_button.isVisibleTo(dialog) and "Q4_K_M" in dialog.faster_button.text()
    dialog.faster_button.setFocus()
    keep_screenshot(dialog, "issue64-13-get-models-faster-file-focused")
    dialog.faster_button.click()
    assert dialog.rows[0].title.text() == "Granite 4.0 H Tiny Q4_K_M"  # its row, until the listing says more


def test_enter_in_a_search_box_searches_and_never_starts_a_download(qtbot, hub):
    """Issue 64, item 1: Enter in Get models' search box or repository box also pressed the dialog's default
    button, the pick's "Download Q4_K_M instead" (gigabytes), offline and online alike."""
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    dialog = win.open_models_dialog()
    dialog.endpoint = hub.url
    qtbot.waitUntil(lambda: dialog.assessment is not None, timeout=10_000)
    dialog.paste_edit.setFocus()
    qtbot.keyClicks(dialog.paste_edit, "no-such/repository")
    dialog.paste_edit.clear()  # what the user typed, then thought better of: Enter on an empty box
    qtbot.keyClick(dialog.paste_edit, Qt.Key.Key_Return)
    dialog.tabs.setCurrentIndex(1)
    dialog.search_edit.setFocus()
    qtbot.keyClicks(dialog.search_edit, "tiny-llama")
    qtbot.keyClick(dialog.search_edit, Qt.Key.Key_Enter)
    qtbot.waitUntil(lambda: dialog.results.count() == 1, timeout=10_000)  # Enter searched
    assert dialog.rows == [], "a download began"
    assert dialog.isVisible()
    keep_screenshot(dialog, "issue64-1-get-models-enter-searched")
    win.close()


def test_a_downloaded_model_is_listed_as_installed_without_a_restart(qtbot, hub, hf_cache):
    """Issue 64, item 6: a downloaded model showed as installed, in Settings and in Get models, only after a
    restart. Once its download is verified, the models here are read again and the catalog judged again."""
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60_000):
        win.start_auto()
    dialog = win.open_models_dialog()
    dialog.endpoint = hub.url
    qtbot.waitUntil(lambda: dialog.assessment is not None, timeout=10_000)
    judged = dialog.assessment
    dialog.paste_edit.setText(f"{hub.url}/{REPO}/resolve/main/{FILE}")
    qtbot.mouseClick(dialog.paste_button, Qt.MouseButton.LeftButton)
    row = dialog.rows[0]
    qtbot.waitUntil(lambda: row.use_button.isVisibleTo(row), timeout=30_000)
    qtbot.waitUntil(lambda: any(Path(m.path).name == FILE for m in win.plan.scan.models), timeout=30_000)
    qtbot.waitUntil(lambda: dialog.assessment is not judged, timeout=30_000)  # the catalog judged again
    settings = win.open_settings("Model")
    names = [settings.models.item(r, 1).text() for r in range(settings.models.rowCount())]
    assert any("Tiny" in name for name in names), names
    keep_screenshot(settings, "issue64-6-settings-lists-the-download")
    keep_screenshot(dialog, "issue64-6-get-models-after-the-download")
    settings.reject()
    win.close()


def test_a_model_is_offered_with_its_draft_and_the_speed_the_pair_is_expected_to_give_here(qtbot):
    """Issue 65: the catalog pairs a model with a smaller one of its family as its draft (e.g. SmolLM2-1.7B with
    the 135M); its row says how much faster the pair is expected to write here, its tooltip which file to add."""
    dialog = open_dialog(qtbot, laptop(16, 24))
    assert dialog.assessment is not None and dialog.assessment.pairs
    shown = 0
    for top in range(dialog.tree.topLevelItemCount()):
        parent = dialog.tree.topLevelItem(top)
        for index in range(parent.childCount()):
            item = parent.child(index)
            pair = dialog.assessment.pairs.get(item.data(0, Qt.ItemDataRole.UserRole))
            assert ("· draft ×" in item.text(2)) == (pair is not None)
            if pair is not None:
                shown += 1
                assert item.text(2).endswith(f"· draft ×{pair.gain:.1f}")
                assert pair.draft.entry.name in html.unescape(item.toolTip(2))
    assert shown == len(dialog.assessment.pairs)
