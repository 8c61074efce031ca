"""The window's menu bar and its keys, and the list of shortcuts read back from the actions themselves."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QMainWindow, QMenu, QMessageBox, QToolButton, QWidget

from fara_desktop import APP_NAME, __version__
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.dialogs.guide_dialog import GuideDialog
from fara_desktop.ui.widgets.plain_text import plain_message_box
from fara_desktop.ui.widgets.tool_approval import ToolApprovalBar


def _action(window: QMainWindow, menu: QMenu, text: str, slot: Callable[[], Any], shortcut: Any = None) -> QAction:
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(shortcut)
    action.triggered.connect(slot)
    menu.addAction(action)
    window.addAction(action)  # shortcuts work even with the menu bar hidden
    return action


def build_menus(window: Any) -> None:
    """Chat, Edit, Message, View, Model and Help, wired to the window's controllers (``window``: the main window),
    and the header's Settings button."""
    bar = window.menuBar()
    add = partial(_action, window)
    chat = bar.addMenu("&Chat")
    conversations = window.conversations
    add(chat, "&New chat", conversations.new_chat, QKeySequence.StandardKey.New)
    add(chat, "&Find chats", conversations.focus_search, QKeySequence.StandardKey.Find)
    chat.addSeparator()
    add(chat, "&Export this chat…", conversations.export_current, QKeySequence("Ctrl+E"))
    add(chat, "Export &all chats…", conversations.export_all)
    add(chat, "&Import chats (Fara, ChatGPT, Open WebUI, LM Studio)…", conversations.import_chat)
    chat.addSeparator()
    add(chat, "&Quit", window.close, QKeySequence.StandardKey.Quit)
    edit = bar.addMenu("&Edit")
    add(edit, "&Preferences…", window.open_settings, QKeySequence("Ctrl+,"))
    message = bar.addMenu("M&essage")
    for text, action, keys in (
        ("&Copy the last message", "copy", "Ctrl+Shift+C"),
        ("&Edit your last message", "edit", "Ctrl+Shift+E"),
        ("&Regenerate the last reply", "regenerate", "Ctrl+Shift+R"),
        ("&Branch from the last message", "branch", "Ctrl+Shift+B"),
        ("&Previous version of the last reply", "previous", "Alt+Left"),
        ("&Next version of the last reply", "next", "Alt+Right"),
    ):
        add(message, text, partial(window.chat.act_on_last, action), QKeySequence(keys))
    view = bar.addMenu("&View")
    add(view, "Chat &list", window.chats_toggle.toggle, QKeySequence("Ctrl+Shift+L"))
    add(view, "&Machine panel", window.panel_toggle.toggle, QKeySequence("Ctrl+Shift+H"))
    model = bar.addMenu("&Model")
    add(model, "&Open a model file…", window.choose_model_file, QKeySequence.StandardKey.Open)
    add(model, "&Get models…", window.open_models_dialog, QKeySequence("Ctrl+Shift+M"))
    add(model, "&Measure the best thread count", window.startup.recalibrate)
    add(model, "&Settings…", window.open_settings)  # where it was: Edit ▸ Preferences… holds its key
    settings_button = QToolButton()
    settings_button.setObjectName("settingsButton")
    settings_button.setText("Settings")
    settings_button.setToolTip("Settings: models, speed, prompts, servers, tools, the local API (Ctrl+,)")
    settings_button.setAccessibleName("Settings")
    settings_button.clicked.connect(lambda: window.open_settings())
    window.header.addWidget(settings_button)  # where desktop users look: in the window's header
    window.settings_button = settings_button
    help_menu = bar.addMenu("&Help")
    add(help_menu, "&User guide", lambda: open_guide(window, guide_section(window)), QKeySequence("Shift+F1"))
    add(help_menu, "&Keyboard shortcuts", window.show_shortcuts, QKeySequence(Qt.Key.Key_F1))
    add(help_menu, f"&About {APP_NAME}", window.show_about)
    escape = QShortcut(QKeySequence(Qt.Key.Key_Escape), window)
    escape.activated.connect(window.chat.escape)


def guide_section(window: Any) -> str:
    """The guide's section for what the user is looking at: a dialog open over the window, the documents panel,
    a tool call waiting; else its beginning."""
    from fara_desktop.ui.dialogs.settings_dialog import SettingsDialog

    if any(isinstance(w, SettingsDialog) and w.isVisible() for w in window.findChildren(QWidget)):
        return "Settings"
    if window.tool_approval.isVisible():
        return "Tools and MCP servers"
    focused = QApplication.focusWidget()
    if focused is not None and window.documents_panel.isAncestorOf(focused):
        return "Chat with your documents"
    return "What it does"


def open_guide(window: Any, section: str) -> GuideDialog:
    """Help ▸ User guide: the guide, offline and searchable, at ``section``."""
    guide = GuideDialog(window, section)
    guide.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    guide.show()
    return guide


def shortcuts_of(window: QMainWindow, approval: ToolApprovalBar) -> list[tuple[str, str]]:
    """(what, keys) of every action of ``window`` with a key, the approval bar's mnemonics, Esc and Enter."""
    found = [
        (
            action.text().replace("&", "").rstrip("…"),
            action.shortcut().toString(QKeySequence.SequenceFormat.NativeText),
        )
        for action in window.actions()
        if not action.shortcut().isEmpty()
    ]
    keys = [
        (b.text().replace("&", ""), f"Alt+{b.text().split('&', 1)[1][:1].upper()}")
        for b in (approval.allow_button, approval.always_button, approval.deny_button)
    ]
    return [
        *found,
        ("Stop the reply, cancel an edit", "Esc"),
        ("Send (Shift+Enter: a new line)", "Enter"),
        *((f"Tool call: {what}", key) for what, key in keys),
    ]


def show_about(window: QWidget, data_folder: Path) -> None:
    """Help ▸ About: the version, what the app is, and where the chats are kept."""
    box = plain_message_box(
        QMessageBox.Icon.Information,
        f"About {APP_NAME}",
        f"{APP_NAME} {__version__}: offline chat with local GGUF models, tuned for this computer's CPU.\n\n"
        f"Chats and documents are kept in {one_line(str(data_folder), 300)}.",
        window,
    )
    box.exec()
