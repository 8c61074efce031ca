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


def test_each_chat_keeps_its_own_unsent_words_and_pictures(window, qtbot, tmp_path):
    """Issue 53, item 12: a picture in the tray followed the user into another chat (and so did the words being
    typed), to be sent there by mistake. Each chat now keeps its own, given back when the user returns; the
    pictures stay held (never swept) while they wait."""
    win = window(FakeBackend())
    win.composer.setPlainText("First chat's question")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    first = win.session.conversation_id
    picture = win.core.pictures.store.folder / "waiting.png"
    picture.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 48), (20, 200, 30)).save(picture)
    win.picture_tray.add("waiting", picture)
    win.composer.setPlainText("About this picture…")
    win.new_chat()
    assert win.composer.toPlainText() == "" and win.picture_tray.digests() == ()
    assert "waiting" in win.core.pictures.held()  # kept for the chat it was attached in
    win.composer.setPlainText("Another chat's words")
    win.conversations.open_conversation(first)
    assert win.composer.toPlainText() == "About this picture…" and win.picture_tray.digests() == ("waiting",)
    assert "waiting" in win.core.pictures.held()


def test_the_tray_and_the_message_box_forecast_the_same_wait_for_a_picture(window, qtbot, tmp_path):
    """Issue 53, item 7: the tray said "about 0.8 s to read here" (the encoding alone) while the message box said
    "about 9 s" (its tokens read); the real wait was both. The tray now counts both, as the wait is."""
    backend = FakeBackend()
    backend.prompt_speed = 32.0  # tokens/s: 256 picture tokens take 8 s to read, after 0.8 s of encoding
    win = window(backend)
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model(tmp_path / "seeing.gguf")
    picture = tmp_path / "red.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(picture)
    win.picture_tray.add("d" * 64, picture)
    win.pictures.show_cost()
    cost = win.picture_tray.cost.text()
    assert "about 256 tokens" in cost and "about 9 s to read here" in cost
