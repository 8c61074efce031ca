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


def test_a_chat_deleted_while_a_picture_is_being_attached_keeps_that_picture(window, qtbot):
    """Issue 61, item 4: the tray held a batch's pictures only once the whole batch was read; a chat deleted
    meanwhile that showed the same picture deleted its file, and every later turn of the chat it was then sent in
    failed ("A picture of this chat could not be read"). The read is held open here until the chat is deleted."""
    import io
    import threading

    from PIL import Image

    win = window()
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 200, 90)).save(buffer, format="PNG")
    shown = win.pictures.intake.take_bytes(buffer.getvalue())
    win.session.add_user_message("An older chat with the picture", pictures=(shown.digest,))
    older = win.session.conversation_id
    win.new_chat()
    read, release = threading.Event(), threading.Event()
    real = win.pictures.intake.take_bytes

    def slow_take(data, whole=False, should_stop=None, sandbox=None):  # type: ignore[no-untyped-def]
        taken = real(data, whole, should_stop, sandbox)
        read.set()
        release.wait(30)
        return taken

    win.pictures.intake.take_bytes = slow_take  # type: ignore[method-assign]
    win.pictures.offer([buffer.getvalue()])
    assert read.wait(30)  # read and kept in the store, not yet in the tray
    win.delete_conversation(older, confirm=False)
    release.set()
    qtbot.waitUntil(lambda: win.picture_tray.digests() == (shown.digest,), timeout=30000)
    assert shown.path.is_file()
    win.close()


def test_small_words_of_the_tray_the_draft_and_the_forecast(window, qtbot, tmp_path):
    """Issue 64, item 13: the status bar said "1 picture attached" with three in the tray; a picture dropped a
    second time was ignored without a word; the caret went to the start of a restored draft; a tiny wait read
    "about 0.0 s to read"."""
    import io

    from fara_desktop.chats.prompt_wait import wait_words

    win = window(FakeBackend())
    pngs = []
    for colour in ((200, 0, 0), (0, 200, 0), (0, 0, 200)):
        buffer = io.BytesIO()
        Image.new("RGB", (32, 24), colour).save(buffer, format="PNG")
        pngs.append(buffer.getvalue())
    win.pictures.offer(pngs[:2])
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 2, timeout=30_000)
    win.pictures.offer([pngs[2], pngs[0]])  # one new, one attached already
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 3, timeout=30_000)
    qtbot.waitUntil(lambda: "3 pictures attached" in win.status_label.text(), timeout=5_000)
    assert "attached once" in win.status_label.text()
    win.composer.setPlainText("A draft to come back to")
    first = win.session.conversation_id
    win.new_chat()
    win.conversations.open_conversation(first) if first is not None else win.drafts.enter(None)
    assert win.composer.textCursor().position() == len("A draft to come back to")
    assert wait_words(0.02) == "under a tenth of a second" and wait_words(0.4) == "about 0.4 s"
