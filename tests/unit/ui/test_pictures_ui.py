"""What the window says about pictures follows the model in use."""

from __future__ import annotations

from PIL import Image

from tests.helpers.fakes import FakeBackend


def test_cannot_see_pictures_goes_once_a_model_that_sees_is_loaded(window, qtbot, tmp_path):
    """Issue 53, item 10: "SmolLM2 cannot see pictures" stayed after switching to a model that sees."""
    win = window(FakeBackend())
    picture = tmp_path / "red.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(picture)
    win.picture_tray.add("d" * 64, picture)
    win.composer.setPlainText("What colour is it?")
    win.send_button.click()
    assert "cannot see pictures" in win.notice_bar.label.text() and win.notice_bar.isVisibleTo(win)
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model(tmp_path / "seeing.gguf")
    shown = win.notice_bar.label.text() if win.notice_bar.isVisibleTo(win) else ""
    assert "cannot see pictures" not in shown  # withdrawn (kept in the notices' history)
    assert "cannot see" not in win.picture_tray.cost.text() and "1 picture" in win.picture_tray.cost.text()
    assert win.composer.toPlainText() == "What colour is it?"  # the message and its picture waited
