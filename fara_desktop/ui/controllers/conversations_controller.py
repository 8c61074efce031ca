"""The list of conversations: new, open, rename, delete, find, and export/import through files."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDialog, QInputDialog, QLineEdit, QMessageBox, QWidget

from fara_desktop.app.jobs import Jobs, Stage
from fara_desktop.app.picture_ledger import PictureLedger
from fara_desktop.chats.exchange import import_or_update
from fara_desktop.chats.export import ImportResult, export_conversations, read_import, take_pictures_beside
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore
from fara_desktop.system.sandbox import SandboxStoppedError
from fara_desktop.text.format import format_count
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.widgets.chat_view import ChatView
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.ui.widgets.file_dialogs import FolderMemory
from fara_desktop.ui.widgets.plain_text import plain_message_box
from fara_desktop.ui.widgets.sidebar import Sidebar
from fara_desktop.ui.widgets.task_progress import TaskProgress
from fara_desktop.vocabulary.errors import FaraError


class ConversationsScreen(Protocol):
    """The widgets the conversations controller drives (the main window provides them)."""

    sidebar: Sidebar
    system_prompt: QLineEdit
    chat_view: ChatView
    composer: Composer
    task_progress: TaskProgress
    folders: FolderMemory

    def set_status(self, text: str) -> None: ...
    def show_notice(self, text: str, role: str = "notice") -> None: ...


RENAME_MIN_WIDTH_PX = 420
RENAME_MARGIN_PX = 120  # the dialog's margins and the field's frame around the title


class ConversationsController(QObject):
    """Keeps the sidebar, the open session and the chat on screen in step. It tells the chat through signals (the
    window connects them): ``leavingChat`` before another chat opens, ``enteredChat(show_messages)`` after."""

    leavingChat = Signal()
    enteredChat = Signal(bool)

    def __init__(
        self,
        screen: ConversationsScreen,
        dialog_parent: QWidget,
        store: ConversationStore,
        session: ChatSession,
        delete_chat: Callable[[int], None],
        jobs: Jobs | None = None,
    ) -> None:
        """``delete_chat``: the core's intent (the rows and every saved reading of the chat); ``jobs``: the app's
        (an import or export is stopped, and waited for, at quitting)."""
        super().__init__()
        self._delete_chat = delete_chat
        self.pictures: PictureLedger | None = None  # takes an import's pictures in, held until its chats are saved
        self.screen = screen
        self.dialog_parent = dialog_parent
        self.store = store
        self.session = session
        self._stop_task = threading.Event()
        self.task: BackgroundCall | None = None  # the import or export running, if any
        self.jobs = jobs or Jobs()

    def refresh_sidebar(self) -> None:
        sidebar = self.screen.sidebar
        sidebar.show_conversations(self.store.conversations(sidebar.search.text()), self.session.conversation_id)

    def refresh_conversation(self, conversation_id: int | None) -> None:
        """The open chat changed: its row alone is updated (the whole list only while a search filters it)."""
        sidebar = self.screen.sidebar
        summary = self.store.conversation(conversation_id) if conversation_id is not None else None
        if summary is None or sidebar.search.text().strip():
            self.refresh_sidebar()
            return
        sidebar.show_conversation(summary, self.session.conversation_id)

    def new_chat(self) -> None:
        self.leavingChat.emit()
        self.session.new()
        self.enteredChat.emit(False)
        self.screen.system_prompt.setText(self.session.system_prompt)
        self.screen.chat_view.clear()
        self.refresh_sidebar()
        self.screen.composer.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.session.conversation_id:
            return
        self.leavingChat.emit()
        self.session.open(conversation_id)
        self.enteredChat.emit(True)
        self.screen.system_prompt.setText(self.session.system_prompt)
        self.refresh_sidebar()

    def rename_conversation(self, conversation_id: int) -> None:
        summary = self.store.conversation(conversation_id)
        if summary is None:
            return
        dialog = title_dialog(self.dialog_parent, summary.title)
        title = dialog.textValue() if dialog.exec() == QDialog.DialogCode.Accepted else ""
        dialog.deleteLater()
        if title.strip():
            self.store.rename(conversation_id, title)
            self.refresh_sidebar()

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        summary = self.store.conversation(conversation_id)
        if summary is None:
            return
        if confirm:
            box = plain_message_box(
                QMessageBox.Icon.Question,
                "Delete chat",
                f"Delete “{summary.title}” and its {format_count(summary.message_count, 'message')}? "
                "This cannot be undone.",
                self.dialog_parent,
            )
            box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
            box.setDefaultButton(QMessageBox.StandardButton.No)
            if box.exec() != QMessageBox.StandardButton.Yes:
                return
        if conversation_id == self.session.conversation_id:
            self.new_chat()
        self._delete_chat(conversation_id)
        self.refresh_sidebar()

    def focus_search(self) -> None:
        self.screen.sidebar.search.setFocus()
        self.screen.sidebar.search.selectAll()

    def export_current(self) -> None:
        if self.session.conversation_id is None:
            self.screen.set_status("Nothing to export yet")
            return
        self._export([self.session.conversation_id])

    def export_all(self) -> None:
        self._export(None)

    def _export(self, ids: list[int] | None) -> None:
        folder = self.screen.folders.folder(self.dialog_parent, "exports", "Export chats to a folder")
        if folder:
            self.export_to(Path(folder), ids)

    def export_to(self, folder: Path, ids: list[int] | None) -> BackgroundCall | None:
        """Write the chats on a background thread (its own connection to the database), with progress and Stop."""
        progress = self.screen.task_progress
        if not self._task_can_start():
            return None
        database = self.store.path

        def work() -> list[Path]:
            store = ConversationStore(database)
            try:
                return export_conversations(
                    store,
                    folder,
                    ids=ids,
                    on_progress=progress.progressed.emit,
                    should_stop=self._stop_task.is_set,
                    picture_file=self.session.picture_file,
                )
            finally:
                store.close()

        def done(written: list[Path]) -> None:
            progress.end()
            self.screen.set_status(f"Exported {format_count(len(written), 'file')} to {one_line(str(folder), 300)}")

        def failed(error: Exception) -> None:
            progress.end()
            message = str(error) if isinstance(error, FaraError) else f"Export failed ({type(error).__name__})"
            self.screen.set_status(message)

        progress.begin("Exporting chats…")
        return self._start_task(work, done, failed)

    def import_chat(self) -> None:
        path = self.screen.folders.open_file(
            self.dialog_parent,
            "imports",
            "Import chats",
            "Chats from Fara Desktop, ChatGPT, Open WebUI or LM Studio (*.json)",
        )
        if path:
            self.import_file(Path(path))

    def import_file(self, path: Path) -> BackgroundCall | None:
        """Read (in the sandbox) and save the file's chats on a background thread, with Stop; then open the first."""
        progress = self.screen.task_progress
        if not self._task_can_start():
            return None
        database = self.store.path
        name = one_line(path.name, 120)

        def work() -> ImportResult:
            format_name, conversations = read_import(path, should_stop=self._stop_task.is_set)
            with self.pictures.importing() if self.pictures else nullcontext(None) as take:
                if take is not None:
                    conversations = take_pictures_beside(conversations, path.parent, take, self._stop_task.is_set)
                progress.progressed.emit(0, len(conversations))
                store = ConversationStore(database)
                try:
                    return ImportResult(format_name, import_or_update(store, conversations, format_name))
                finally:
                    store.close()

        def done(result: ImportResult) -> None:
            progress.end()
            self.refresh_sidebar()
            first = result.conversation_ids or [result.outcomes[0].conversation_id]
            self.open_conversation(first[0])
            self.screen.set_status(f"{name}: {result.summary()} from {result.format_name}")

        def failed(error: Exception) -> None:
            progress.end()
            if isinstance(error, SandboxStoppedError):
                self.screen.set_status(f"Import of {name} stopped; nothing was imported")
            elif isinstance(error, FaraError):  # refused or not saved: nothing was written
                self.screen.show_notice(f"{name} was not imported. {error}", "error")
                self.screen.set_status(f"{name} was not imported")
            else:
                self.screen.show_notice(f"{name} was not imported ({type(error).__name__}).", "error")
                self.screen.set_status(f"{name} was not imported")

        progress.begin(f"Importing {name}…")
        return self._start_task(work, done, failed)

    def stop_task(self) -> None:
        self._stop_task.set()
        self.screen.task_progress.stop_button.setEnabled(False)

    def _task_can_start(self) -> bool:
        if self.screen.task_progress.running:
            self.screen.set_status("An import or export is running: wait for it, or stop it")
            return False
        self._stop_task = threading.Event()
        return True

    def _start_task(
        self, work: Callable[[], Any], done: Callable[[Any], None], failed: Callable[[Exception], None]
    ) -> BackgroundCall:
        job = self.jobs.begin(self.screen.task_progress.label.text(), Stage.PRODUCERS, self.stop_task)

        def run() -> Any:
            try:
                return work()
            finally:  # on its thread: quitting waits for it without the GUI thread's help
                job.end()

        call = BackgroundCall(run, owner=self.dialog_parent)
        # A task that ended as the window closed (quitting waits for it) answers a window whose chats are closed:
        # what it wrote is kept, and nobody is left to show it to.
        call.done.connect(lambda result: None if self.store.closed else done(result))
        call.failed.connect(lambda error: None if self.store.closed else failed(error))
        self.task = call
        return call.start()


def title_dialog(parent: QWidget, title: str) -> QInputDialog:
    """The Rename box, wide enough for the title it holds (up to most of the screen): a long title was shown in a
    field a third of its length."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle("Rename chat")
    dialog.setLabelText("Title:")
    dialog.setTextValue(title)
    screen = (parent.screen() if parent is not None else dialog.screen()).availableGeometry()
    wanted = dialog.fontMetrics().horizontalAdvance(title) + RENAME_MARGIN_PX
    dialog.resize(int(min(max(RENAME_MIN_WIDTH_PX, wanted), screen.width() * 0.8)), dialog.sizeHint().height())
    return dialog
