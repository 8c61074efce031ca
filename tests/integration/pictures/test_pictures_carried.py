"""Pictures go where their chat goes: Branch keeps them; an export writes them beside its JSON and Markdown; an
import takes them back through the sandbox (our own export's pictures are recognised by digest; a damaged one is
left out and the chat still comes in)."""

from __future__ import annotations

import json

from PIL import Image

from fara_desktop.app.picture_intake import PictureIntake
from fara_desktop.chats.exchange import copy_branch
from fara_desktop.chats.export import export_conversations, import_conversations
from fara_desktop.chats.storage import ConversationStore
from fara_desktop.pictures.store import PictureStore


def chat_with_a_picture(tmp_path):
    store = ConversationStore(tmp_path / "chats.db")
    pictures = PictureStore(tmp_path / "pictures")
    intake = PictureIntake(pictures)
    photo = tmp_path / "photo.png"
    Image.new("RGB", (120, 80), (10, 160, 90)).save(photo)
    digest = intake.take_file(photo).digest
    chat = store.create_conversation("A photo")
    question = store.add_message(chat, "user", "What is this?", pictures=(digest,))
    answer = store.add_message(chat, "assistant", "A green rectangle.", parent_id=question.id)
    return store, pictures, intake, chat, digest, (question.id, answer.id)


def test_branch_keeps_the_pictures(tmp_path):
    store, _pictures, _intake, chat, digest, ids = chat_with_a_picture(tmp_path)
    branch = copy_branch(store, chat, ids, "A photo (branch)")
    assert [m.pictures for m in store.messages(branch)] == [(digest,), ()]
    assert store.pictures_in_use() == {digest}


def test_an_export_carries_its_pictures_and_an_import_takes_them_back(tmp_path):
    store, pictures, _intake, _chat, digest, _ids = chat_with_a_picture(tmp_path)
    out = tmp_path / "export"
    written = export_conversations(store, out, picture_file=pictures.path)
    assert (out / "pictures" / f"{digest}.png") in written
    markdown = next(p for p in written if p.suffix == ".md").read_text()
    assert f"![picture 1](pictures/{digest}.png)" in markdown
    exported = json.loads(next(p for p in written if p.suffix == ".json").read_text())
    assert exported["messages"][0]["pictures"] == [digest]
    # another computer: an empty store takes the picture in through the sandbox
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_store = ConversationStore(elsewhere / "chats.db")
    other_pictures = PictureStore(elsewhere / "pictures")
    result = import_conversations(other_store, next(p for p in written if p.suffix == ".json"),
                                  take_picture=PictureIntake(other_pictures).take_imported)  # fmt: skip
    imported = other_store.messages(result.conversation_ids[0])
    assert imported[0].pictures and other_pictures.path(imported[0].pictures[0]).is_file()


def test_a_damaged_picture_beside_an_import_is_left_out(tmp_path):
    store, pictures, _intake, _chat, digest, _ids = chat_with_a_picture(tmp_path)
    out = tmp_path / "export"
    written = export_conversations(store, out, formats=("json",), picture_file=pictures.path)
    (out / "pictures" / f"{digest}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)  # an adversary's
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_store = ConversationStore(elsewhere / "chats.db")
    take = PictureIntake(PictureStore(elsewhere / "pictures")).take_imported
    result = import_conversations(other_store, written[0], take_picture=take)
    messages = other_store.messages(result.conversation_ids[0])
    assert [m.content for m in messages] == ["What is this?", "A green rectangle."]
    assert messages[0].pictures == ()


def png_bytes(colour, size=(64, 48)) -> bytes:
    import io

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def test_open_webui_and_chatgpt_exports_bring_their_pictures(tmp_path):
    """Open WebUI keeps a picture as a data: URI in the message's files; ChatGPT's export has the picture's file
    beside conversations.json, named from its id. Both come in through the sandbox; a damaged one, a web address
    and a path are left out, and the chat still comes in."""
    import base64

    store = ConversationStore(tmp_path / "chats.db")
    pictures = PictureStore(tmp_path / "pictures")
    take = PictureIntake(pictures).take_imported
    uri = "data:image/png;base64," + base64.b64encode(png_bytes((200, 10, 10))).decode()
    broken = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(30)).decode()
    webui = [{"id": "w1", "title": "A red picture", "chat": {"history": {"currentId": "b", "messages": {
        "a": {"role": "user", "content": "What is this?", "timestamp": 1700000000, "files": [
            {"type": "image", "url": uri}, {"type": "image", "url": broken},
            {"type": "image", "url": "https://example.org/cat.png"}, {"type": "image", "url": "/etc/passwd"}]},
        "b": {"role": "assistant", "content": "Red.", "parentId": "a", "timestamp": 1700000001},
    }}}}]  # fmt: skip
    (tmp_path / "webui.json").write_text(json.dumps(webui))
    result = import_conversations(store, tmp_path / "webui.json", take_picture=take)
    first = store.messages(result.conversation_ids[0])[0]
    assert len(first.pictures) == 1 and pictures.path(first.pictures[0]).is_file()

    chatgpt_folder = tmp_path / "chatgpt"
    chatgpt_folder.mkdir()
    (chatgpt_folder / "file-Abc123XYZ-photo.png").write_bytes(png_bytes((10, 10, 200)))
    conversation = {"title": "A blue picture", "create_time": 1700000000, "current_node": "u", "mapping": {
        "root": {"id": "root", "parent": None, "children": ["u"], "message": None},
        "u": {"id": "u", "parent": "root", "children": [], "message": {
            "author": {"role": "user"}, "create_time": 1700000001, "content": {
                "content_type": "multimodal_text", "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-Abc123XYZ"},
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-Missing1"},
                    "What colour?"]}}},
    }}  # fmt: skip
    (chatgpt_folder / "conversations.json").write_text(json.dumps([conversation]))
    result = import_conversations(store, chatgpt_folder / "conversations.json", take_picture=take)
    (message,) = store.messages(result.conversation_ids[0])
    assert message.content == "What colour?" and len(message.pictures) == 1


def chatgpt_export_with_pictures(folder, ids):
    """A ChatGPT export whose one message points at the files ``ids`` (each a ``file-…`` id)."""
    folder.mkdir(exist_ok=True)
    parts = [{"content_type": "image_asset_pointer", "asset_pointer": f"file-service://{i}"} for i in ids]
    conversation = {"title": "Pictures", "create_time": 1700000000, "current_node": "u", "mapping": {
        "root": {"id": "root", "parent": None, "children": ["u"], "message": None},
        "u": {"id": "u", "parent": "root", "children": [], "message": {
            "author": {"role": "user"}, "create_time": 1700000001, "content": {
                "content_type": "multimodal_text", "parts": [*parts, "What are these?"]}}},
    }}  # fmt: skip
    (folder / "conversations.json").write_text(json.dumps([conversation]))
    return folder / "conversations.json"


def png_file(path, colour):
    Image.new("RGB", (8, 8), colour).save(path, format="PNG")


def test_an_imports_stop_is_heard_in_its_picture_step_and_nothing_is_imported(tmp_path):
    """Issue 50 item 11, issue 51 item 7: Stop between two pictures ends the import; no chat comes in."""
    import pytest

    from fara_desktop.system.sandbox import SandboxStoppedError

    ids = [f"file-Pic{n}" for n in range(5)]
    export = chatgpt_export_with_pictures(tmp_path / "export", ids)
    for n, file_id in enumerate(ids):
        png_file(export.parent / f"{file_id}-photo.png", (n * 40, 10, 10))
    store = ConversationStore(tmp_path / "chats.db")
    intake = PictureIntake(PictureStore(tmp_path / "pictures"))
    read: list[str | None] = []

    def take(source):
        read.append(intake.take_imported(source))
        return read[-1]

    with pytest.raises(SandboxStoppedError):
        import_conversations(store, export, take_picture=take, should_stop=lambda: len(read) >= 2)
    assert len(read) == 2 and store.conversations("") == []


def test_a_chatgpt_file_id_names_its_own_file_only_and_an_import_reads_a_bounded_number(tmp_path, monkeypatch):
    """Issue 51 item 7: ``file-Ab`` does not take ``file-AbCd-…`` (matched whole, not by prefix); past the cap the
    pictures are left out and the chat still comes in."""
    from fara_desktop.chats import export as export_module

    export = chatgpt_export_with_pictures(tmp_path / "export", ["file-Ab", "file-Own1", "file-Own2", "file-Own3"])
    png_file(export.parent / "file-AbCd-someone elses.png", (1, 2, 3))  # a longer id that begins the same
    for n, name in enumerate(("file-Own1-a.png", "file-Own2.png", "file-Own3-c.png")):
        png_file(export.parent / name, (200, 20 * n, 0))
    store = ConversationStore(tmp_path / "chats.db")
    intake = PictureIntake(PictureStore(tmp_path / "pictures"))
    taken: list[object] = []

    def take(source):
        taken.append(source)
        return intake.take_imported(source)

    monkeypatch.setattr(export_module, "MAX_IMPORT_PICTURES", 3)  # references tried: file-Ab's (no file) counts
    result = import_conversations(store, export, take_picture=take)
    (message,) = store.messages(result.conversation_ids[0])
    assert [getattr(p, "name", p) for p in taken] == ["file-Own1-a.png", "file-Own2.png"]
    assert len(message.pictures) == 2 and message.content == "What are these?"


def test_an_import_tries_a_bounded_number_of_references_in_one_sandbox_whether_or_not_they_decode(tmp_path):
    """Issue 62, item 6: the cap counted pictures that decoded: 400 distinct data: URIs that are no pictures (a
    27 KiB file) ran 75 s, a sandbox child each, and kept none. Now what is tried is bounded, and one child reads
    them all; as a person runs it, ``fara-desktop import`` ends in seconds."""
    import base64
    import os
    import subprocess
    import sys

    from fara_desktop.chats import export as export_module
    from fara_desktop.system.sandbox import Sandbox

    junk = [f"data:image/png;base64,{base64.b64encode(os.urandom(24)).decode()}" for _ in range(400)]
    messages = {str(n): {"role": "user", "content": "Look", "timestamp": 1700000000 + n,
                         **({"parentId": str(n - 1)} if n else {}),
                         "files": [{"type": "image", "url": uri} for uri in junk[16 * n : 16 * n + 16]]}
                for n in range(25)}  # fmt: skip
    webui = [{"id": "w1", "title": "Not pictures", "chat": {"history": {"currentId": "24", "messages": messages}}}]
    export = tmp_path / "webui.json"
    export.write_text(json.dumps(webui))
    store = ConversationStore(tmp_path / "chats.db")
    intake = PictureIntake(PictureStore(tmp_path / "pictures"))
    tried: list[object] = []
    with Sandbox() as sandbox:

        def take(source: object) -> str | None:
            tried.append(source)
            return intake.take_imported(source, sandbox)  # type: ignore[arg-type]

        result = import_conversations(store, export, take_picture=take)
        assert len(tried) == export_module.MAX_IMPORT_PICTURES  # not 400, and not until 200 had decoded
        assert sandbox.children_started == 1  # one child for the file, not a process a reference
    kept = store.messages(result.conversation_ids[0])
    assert len(kept) == 25 and all(m.content == "Look" and m.pictures == () for m in kept)
    store.close()
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-m", "fara_desktop", "import", str(export)], capture_output=True,
                          text=True, env={**os.environ, "FARA_HOME": str(home)}, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_picture_another_process_just_took_in_survives_a_chat_deleted_here(fara_home, tmp_path):
    """Issue 61, item 7 and issue 62, item 7: ``fara-desktop import`` restoring a backup beside the window took in
    a picture the window knew ("ours", by digest) without touching its file; the window, deleting a chat that
    showed it, deleted it before the import's messages were written (121 pictures, 1 missing). The other process
    here is a real one; it takes the picture in and exits before its messages would be written."""
    import subprocess
    import sys

    from fara_desktop.app.core import AppCore
    from fara_desktop.files.paths import app_paths
    from fara_desktop.settings import Settings
    from tests.helpers.fakes import FakeBackend

    core = AppCore(app_paths().ensure(), Settings(), FakeBackend())
    try:
        with core.pictures.importing() as take:
            backup = tmp_path / "backup"
            (backup / "pictures").mkdir(parents=True)
            (backup / "pictures" / "x.png").write_bytes(png_bytes((9, 99, 199)))
            shared = take(backup / "pictures" / "x.png")
        assert shared is not None
        (backup / "pictures" / f"{shared}.png").write_bytes(core.pictures.path(shared).read_bytes())
        core.session.add_user_message("A chat with the picture", pictures=(shared,))
        chat = core.session.conversation_id
        assert chat is not None
        other = ("import sys; from pathlib import Path; from fara_desktop.app.picture_intake import PictureIntake; "
                 "from fara_desktop.pictures.store import PictureStore; "
                 "print(PictureIntake(PictureStore(Path(sys.argv[1]))).take_imported(Path(sys.argv[2])))")
        done = subprocess.run([sys.executable, "-c", other, str(core.pictures.store.folder),
                               str(backup / "pictures" / f"{shared}.png")], capture_output=True, text=True,
                              timeout=60, check=True)  # fmt: skip
        assert done.stdout.strip() == shared
        core.delete_chat(chat)
        assert core.pictures.path(shared).is_file()  # the other process's import still needs it
        core.session.add_user_message("Mine alone", pictures=(core.pictures.store.put(png_bytes_picture()),))
        mine = core.session.conversation_id
        own = core.store.pictures_of(mine) if mine is not None else set()
        core.delete_chat(mine)  # type: ignore[arg-type]
        assert not any(core.pictures.path(d).is_file() for d in own)  # a chat's own picture still goes at once
    finally:
        core.close()


def png_bytes_picture():  # type: ignore[no-untyped-def]
    """A decoded picture of our own (what the store keeps), made here rather than read from a stranger."""
    from fara_desktop.pictures.decode import Picture

    return Picture(4, 3, bytes(range(36)))
