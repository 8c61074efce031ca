"""The list of conversations: new, open, rename, delete, find, and export/import through files."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6.QtWidgets import QFileDialog, QInputDialog, QLineEdit, QMessageBox, QWidget

from fara_desktop.chats.export import export_conversations, import_conversations
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore
from fara_desktop.errors import FaraError
from fara_desktop.ui.controllers.chat_controller import ChatController
from fara_desktop.ui.widgets.chat_view import ChatView
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.ui.widgets.plain_text import plain_message_box
from fara_desktop.ui.widgets.sidebar import Sidebar


class ConversationsScreen(Protocol):
    """The widgets the conversations controller drives (the main window provides them)."""

    sidebar: Sidebar
    system_prompt: QLineEdit
    chat_view: ChatView
    composer: Composer

    def set_status(self, text: str) -> None: ...
    def show_notice(self, text: str, role: str = "notice") -> None: ...


class ConversationsController:
    """Keeps the sidebar, the open session and the chat on screen in step."""

    def __init__(
        self,
        screen: ConversationsScreen,
        dialog_parent: QWidget,
        store: ConversationStore,
        session: ChatSession,
        chat: ChatController,
    ) -> None:
        self.screen = screen
        self.dialog_parent = dialog_parent
        self.store = store
        self.session = session
        self.chat = chat

    def refresh_sidebar(self) -> None:
        sidebar = self.screen.sidebar
        sidebar.show_conversations(self.store.conversations(sidebar.search.text()), self.session.conversation_id)

    def new_chat(self) -> None:
        self.chat.stop()
        self.chat.cancel_edit()
        self.session.new()
        self.chat.chat_changed()
        self.screen.system_prompt.setText(self.session.system_prompt)
        self.screen.chat_view.clear()
        self.refresh_sidebar()
        self.screen.composer.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.session.conversation_id:
            return
        self.chat.stop()
        self.chat.cancel_edit()
        self.session.open(conversation_id)
        self.chat.chat_changed()
        self.screen.system_prompt.setText(self.session.system_prompt)
        self.chat.show_session_messages()
        self.refresh_sidebar()

    def rename_conversation(self, conversation_id: int) -> None:
        summary = self.store.conversation(conversation_id)
        if summary is None:
            return
        title, ok = QInputDialog.getText(self.dialog_parent, "Rename chat", "Title:", text=summary.title)
        if ok and title.strip():
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
                f"Delete “{summary.title}” and its {summary.message_count} messages? This cannot be undone.",
                self.dialog_parent,
            )
            box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
            box.setDefaultButton(QMessageBox.StandardButton.No)
            if box.exec() != QMessageBox.StandardButton.Yes:
                return
        if conversation_id == self.session.conversation_id:
            self.new_chat()
        self.store.delete(conversation_id)
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
        folder = QFileDialog.getExistingDirectory(self.dialog_parent, "Export chats to a folder", str(Path.home()))
        if folder:
            written = export_conversations(self.store, Path(folder), ids=ids)
            self.screen.set_status(f"Exported {len(written)} files to {folder}")

    def import_chat(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.dialog_parent,
            "Import chats",
            str(Path.home()),
            "Chats from Fara Desktop, ChatGPT, Open WebUI or LM Studio (*.json)",
        )
        if not path:
            return
        try:
            result = import_conversations(self.store, Path(path))
        except FaraError as exc:  # refused (ImportRefusedError) or not saved (StorageError): nothing was written
            self.screen.show_notice(f"{Path(path).name} was not imported. {exc}", "error")
            return
        self.refresh_sidebar()
        self.open_conversation(result.conversation_ids[0])
        count = len(result.conversation_ids)
        self.screen.set_status(f"Imported {count} chat{'s' if count != 1 else ''} from {result.format_name}")
