"""Pictures through the real window and the real llama.cpp: paste an image (Ctrl+V), see its thumbnail and its cost
here, send, get a reply; the second question encodes nothing; a hostile picture is refused with a message and the
app goes on; a drop on the window attaches a file; a model that cannot see says so and sends nothing."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication
from PySide6.QtWidgets import QApplication

from fara_desktop.chats.storage import ConversationStore, database_path
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_projector

pytestmark = pytest.mark.real_model


def png_bytes(colour: tuple[int, int, int], size: tuple[int, int] = (300, 200)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def paste_picture(qtbot, win: MainWindow, data: bytes) -> None:
    mime = QMimeData()
    mime.setData("image/png", data)
    QGuiApplication.clipboard().setMimeData(mime)
    win.composer.setFocus()
    qtbot.keyClick(win.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)


@pytest.fixture
def seeing_window(qtbot, gemma3_path, tmp_path):
    projector = write_projector(tmp_path / "mmproj-gemma-3-270m.gguf", n_embd=128, n_ff=256, n_layer=2)
    backend = LlamaBackend()
    win = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=8, stop_loops=False), backend=backend)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60000):
        win.load_model(gemma3_path, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
    return win, backend


def test_paste_thumbnail_send_reply_and_a_second_turn_that_encodes_nothing(seeing_window, qtbot):
    win, backend = seeing_window
    paste_picture(qtbot, win, png_bytes((220, 40, 40)))
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)
    assert win.picture_tray.isVisible()
    assert win.composer.toPlainText() == ""  # attached, not pasted as text
    cost = win.picture_tray.cost.text()
    assert "1 picture" in cost and "16 tokens" in cost and "to read here" in cost, cost
    qtbot.keyClicks(win.composer, "What colour is it?")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as finished:
        win.send_button.click()
    assert finished.args[0].stats.prompt_tokens > 16
    assert not win.picture_tray.isVisible() and win.picture_tray.digests() == ()
    user = [w for w in win.chat_view.messages() if w.role == "user"][-1]
    assert len(user.pictures.paths) == 1 and user.pictures.isVisible()
    stored = ConversationStore(database_path(win.paths.data))
    digests = [m.pictures for m in stored.messages(win.session.conversation_id) if m.role == "user"]
    stored.close()
    assert digests == [(user.pictures.paths[0].stem,)]
    assert backend.vision.encodes == 1
    win.composer.setPlainText("And its shape?")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as again:
        win.send_button.click()
    assert backend.vision.encodes == 1, "the second question encoded the picture again"
    assert again.args[0].stats.prompt_tokens_evaluated < again.args[0].stats.prompt_tokens - 16
    viewer = win.pictures.show_picture(user.pictures.paths[0])
    assert viewer.image.pixmap().width() == 300
    viewer.close()


def test_a_chat_deleted_while_a_picture_waits_in_the_tray_leaves_it_to_send_and_read_again(seeing_window, qtbot):
    """Issue 50, item 2: the tray holds its pictures; deleting a chat that showed the same picture (and another
    without pictures) leaves the file, the message sends, and the next turn reads it again."""
    win, _ = seeing_window
    picture = png_bytes((40, 40, 220))
    paste_picture(qtbot, win, picture)
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)
    win.composer.setPlainText("What colour is it?")
    with qtbot.waitSignal(win.replyFinished, timeout=120000):
        win.send_button.click()
    first = win.session.conversation_id
    win.conversations.new_chat()
    win.composer.setPlainText("No pictures here")
    with qtbot.waitSignal(win.replyFinished, timeout=120000):
        win.send_button.click()
    plain = win.session.conversation_id
    win.conversations.new_chat()
    paste_picture(qtbot, win, picture)  # the same picture, waiting in the tray of a new chat
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)
    digest = win.picture_tray.digests()[0]
    assert first is not None and plain is not None
    win.conversations.delete_conversation(plain, confirm=False)
    win.conversations.delete_conversation(first, confirm=False)
    assert win.core.pictures.path(digest).is_file(), "deleting a chat deleted the picture waiting in the tray"
    win.composer.setPlainText("Describe it.")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as sent:
        win.send_button.click()
    assert sent.args[0].stats.prompt_tokens > 16
    win.core.worker.forget_conversation(win.session.conversation_id)  # its reading gone: the next turn reads it all
    win.composer.setPlainText("And again?")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as again:
        win.send_button.click()
    assert again.args[0].stats.prompt_tokens > 16
    assert not [t for t in win.notice_bar.texts() if "could not" in t or "error" in t.lower()]


def test_a_hostile_picture_is_refused_with_a_message_and_the_app_goes_on(seeing_window, qtbot):
    win, _ = seeing_window
    truncated = png_bytes((10, 200, 10), (800, 800))[:300]
    paste_picture(qtbot, win, truncated)
    qtbot.waitUntil(lambda: "was not attached" in " ".join(win.notice_bar.texts()), timeout=30000)
    assert win.picture_tray.digests() == ()
    bomb = io.BytesIO()
    Image.new("1", (20000, 20000)).save(bomb, format="PNG")  # 400 M pixels in a small file
    paste_picture(qtbot, win, bomb.getvalue())
    qtbot.waitUntil(lambda: "pixels" in " ".join(win.notice_bar.texts()), timeout=30000)
    assert win.picture_tray.digests() == ()
    paste_picture(qtbot, win, png_bytes((1, 2, 3)))  # and a good one still works
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)


def test_a_picture_file_dropped_on_the_window_is_attached_and_removable(seeing_window, qtbot, tmp_path):
    win, _ = seeing_window
    photo = tmp_path / "holiday photo.jpg"
    Image.new("RGB", (640, 480), (30, 120, 200)).save(photo)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(photo))])
    enter = QDragEnterEvent(QPoint(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)  # fmt: skip
    assert QApplication.sendEvent(win, enter) and enter.isAccepted()  # the window takes the drag
    # Qt delivers a Drop only during a live drag (its drag manager's), which no offscreen test can start: the drop
    # goes to the same filter the window installed.
    drop = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)  # fmt: skip
    assert win.pictures.eventFilter(win, drop)
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)
    remove = win.picture_tray.findChildren(type(win.attach_button), "removePictureButton")
    assert len(remove) == 1
    remove[0].click()
    assert win.picture_tray.digests() == () and not win.picture_tray.isVisible()


def test_a_model_that_cannot_see_says_so_and_sends_nothing(qtbot, smollm2_path):
    win = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=8))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60000):
        win.load_model(smollm2_path)
    paste_picture(qtbot, win, png_bytes((200, 200, 0)))
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)
    assert "cannot see pictures" in win.picture_tray.cost.text()
    win.composer.setPlainText("What is this?")
    win.send_button.click()
    assert "cannot see pictures" in " ".join(win.notice_bar.texts())
    assert win.composer.toPlainText() == "What is this?" and len(win.picture_tray.digests()) == 1
    assert not [w for w in win.chat_view.messages() if w.role == "user"]
    assert json.dumps(win.picture_tray.digests())  # still attached, for another model


def test_a_model_that_sees_downloaded_in_one_click_reads_a_picture(qtbot, gemma3_path, tmp_path):
    """Issue 54, item 2, end to end: Get models brings the model and its projector from a stand-in hub, "Use this
    model" loads them together, and a pasted picture is read by it."""
    from dataclasses import replace

    from fara_desktop.models.catalog import CatalogQuant, load_catalog
    from fara_desktop.planning.catalog_fit import assess_catalog
    from fara_desktop.text.format import GIB
    from tests.helpers.hub_server import HubServer

    repo, name = "fara-tests/Tiny-Gemma-GGUF", "Tiny-Gemma-Q4_K_M.gguf"
    model = gemma3_path.read_bytes()
    projector = write_projector(tmp_path / "p.gguf", n_embd=128, n_ff=256, n_layer=2).read_bytes()
    gemma = next(e for e in load_catalog() if e.id == "gemma-3-4b-it")
    entry = replace(gemma, id="tiny-gemma", name="Tiny Gemma", repo=repo, projector="mmproj-F16.gguf",
                    quants=(CatalogQuant("Q4_K_M", name, 4.85, len(model)),))  # fmt: skip
    win = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=8, stop_loops=False), backend=LlamaBackend())
    qtbot.addWidget(win)
    win.show()
    with HubServer() as server:
        server.add(repo, name, model)
        server.add(repo, "mmproj-F16.gguf", projector)
        dialog = win.open_models_dialog()
        dialog.endpoint, dialog.cache_dir = server.url, tmp_path / "hf"
        row = dialog.download_option(assess_catalog([entry], 16 * GIB, 32 * GIB, 20e9).options[0])
        qtbot.waitUntil(lambda: row.path is not None, timeout=60_000)
    assert (row.path.parent / "mmproj-F16.gguf").read_bytes() == projector
    row.use_button.click()
    qtbot.waitUntil(lambda: win.model_info is not None and str(win.model_info.path) == str(row.path), timeout=60_000)
    assert win.model_info.vision == "mmproj-F16.gguf"
    paste_picture(qtbot, win, png_bytes((40, 40, 220)))
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30_000)
    cost = win.picture_tray.cost.text()
    assert "to read here" in cost and "cannot see" not in cost, cost


@pytest.mark.parametrize("style", ["gemma3", "llava"])
def test_new_chats_after_a_picture_chat_are_answered_through_the_window(qtbot, gemma3_path, tmp_path, style):
    """Issue 62, item 1, through the real window: after a chat with a picture, a new chat's "Hello, how are you?"
    (LLaVA's projector: no token opens a picture) and one typed to begin with ``<start_of_image>`` (Gemma 3's
    user-defined token) aborted the process when the prompt was spelled with the picture chat's tokens."""
    from tests.helpers.gguf_factory import write_llava_projector

    if style == "gemma3":
        projector = write_projector(tmp_path / "mmproj-gemma-3-270m.gguf", n_embd=128, n_ff=256, n_layer=2)
    else:
        projector = write_llava_projector(tmp_path / "mmproj-llava.gguf")
    win = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=4, stop_loops=False), backend=LlamaBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60000):
        win.load_model(gemma3_path, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
    paste_picture(qtbot, win, png_bytes((20, 160, 60)))
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)
    qtbot.keyClicks(win.composer, "What is this?")
    with qtbot.waitSignal(win.replyFinished, timeout=120000):
        win.send_button.click()
    for text in ("Hello, how are you?", "<start_of_image> what was that?"):
        win.new_chat()
        qtbot.keyClicks(win.composer, text)
        with qtbot.waitSignal(win.replyFinished, timeout=120000) as finished:
            win.send_button.click()
        assert finished.args[0].stats.completion_tokens > 0
    win.close()


def test_an_imported_chat_and_a_picture_chat_without_its_projector_are_answered_through_the_window(
    qtbot, gemma3_path, tmp_path
):
    """Issue 62, item 1 (b) and (d), through the real window: a stranger's chat file whose first message begins
    with ``<start_of_image>``, imported and answered after a chat with a picture; and the picture chat continued
    at the next start with the model loaded without its projector (its saved state, with the picture, on disk:
    every follow-up aborted, at every start)."""
    import json

    from tests.helpers.gguf_factory import write_llava_projector

    projector = write_llava_projector(tmp_path / "mmproj-llava.gguf")
    greedy = SamplingParams(temperature=0.0, max_tokens=4, stop_loops=False)
    win = MainWindow(sampling=greedy, backend=LlamaBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60000):
        win.load_model(gemma3_path, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
    paste_picture(qtbot, win, png_bytes((200, 200, 30)))
    qtbot.waitUntil(lambda: len(win.picture_tray.digests()) == 1, timeout=30000)
    qtbot.keyClicks(win.composer, "What is this?")
    with qtbot.waitSignal(win.replyFinished, timeout=120000):
        win.send_button.click()
    picture_chat = win.session.conversation_id
    stranger = tmp_path / "stranger.json"
    first = {"role": "user", "content": "<start_of_image> hello", "timestamp": 1700000000}
    stranger.write_text(json.dumps([{"id": "s1", "title": "Imported",
                                     "chat": {"history": {"currentId": "a", "messages": {"a": first}}}}]))
    call = win.conversations.import_file(stranger)
    assert call is not None
    qtbot.waitUntil(lambda: win.session.conversation_id not in (None, picture_chat), timeout=60000)
    qtbot.keyClicks(win.composer, "Go on.")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as finished:
        win.send_button.click()
    assert finished.args[0].stats.completion_tokens > 0
    win.close()  # the picture chat's reading is kept on disk

    blind = MainWindow(sampling=greedy, backend=LlamaBackend())
    qtbot.addWidget(blind)
    blind.show()
    with qtbot.waitSignal(blind.modelLoaded, timeout=60000):
        blind.load_model(gemma3_path, LoadParams(n_ctx=1024, prefault=False))  # its projector left out
    blind.open_conversation(picture_chat)  # type: ignore[arg-type]
    qtbot.keyClicks(blind.composer, "And now?")
    with qtbot.waitSignal(blind.replyFinished, timeout=120000) as finished:
        blind.send_button.click()
    assert finished.args[0].stats.completion_tokens > 0
    blind.close()
