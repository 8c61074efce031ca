"""The main window's widgets and their places: the chat list and documents on the left, the chat with its header,
notices and message box in the middle, the machine panel on the right, the status bar; and the side panels that
give their room to the chat in a narrow window. ``MainWindow`` wires these widgets to its controllers."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.ui.widgets.chat_view import ChatView
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.ui.widgets.composer_controls import ComposerControls
from fara_desktop.ui.widgets.documents_panel import DocumentsPanel
from fara_desktop.ui.widgets.hardware_panel import HardwarePanel
from fara_desktop.ui.widgets.notice_bar import NoticeBar
from fara_desktop.ui.widgets.picture_thumbnails import PictureTray
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.widgets.sidebar import Sidebar
from fara_desktop.ui.widgets.task_progress import TaskProgress
from fara_desktop.ui.widgets.tool_approval import ToolApprovalBar
from fara_desktop.ui.window_state import DEFAULT_PANES, sizes_giving_room

# Window widths below which a side panel gives its room to the chat: at 1024 px the chat keeps about 790 px
# (the machine panel is hidden), at 800 px about 770 (the chat list is hidden too).
HIDE_PANEL_BELOW = 1100
HIDE_CHATS_BELOW = 800


class WindowLayout(QMainWindow):
    """The main window's widgets, laid out; the side panels' toggles and their narrow-window behaviour."""

    def _build(self, system_prompt: str) -> None:
        self._narrow: dict[str, bool] = {}  # per side panel: was the window narrower than its width last time
        self.sidebar = Sidebar()

        self.system_prompt = QLineEdit(system_prompt)
        self.system_prompt.setObjectName("systemPrompt")
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText("System prompt (how the assistant should behave)")

        self.chat_view = ChatView()

        self.edit_banner = plain_label(
            "Editing an earlier message: Enter sends it again and the chat continues from there; Esc cancels."
        )
        self.edit_banner.setObjectName("editBanner")
        self.edit_banner.setWordWrap(True)
        self.edit_banner.hide()
        self.tool_approval = ToolApprovalBar()
        self.composer = Composer()
        self.wait_hint = plain_label("")
        self.wait_hint.setObjectName("waitHint")
        self.wait_hint.setAccessibleName("How long the model would take to read the message")
        self.wait_hint.setToolTip(
            "The model reads the chat and your message before its first word. It reads ahead while you type; "
            "this is what would be left to read if you pressed Enter now."
        )
        self.wait_hint.hide()
        controls = ComposerControls()
        self.send_button, self.stop_button, self.thinking_box = controls.send, controls.stop, controls.thinking
        self.documents_button, self.tools_button = controls.documents, controls.tools
        self.attach_button, buttons = controls.attach, controls.column
        self.picture_tray = PictureTray()
        composer_row = QHBoxLayout()
        composer_row.setSpacing(10)
        composer_row.addWidget(self.composer, 1)
        composer_row.addLayout(buttons)
        bottom = QVBoxLayout()
        bottom.setContentsMargins(18, 8, 18, 14)
        bottom.setSpacing(6)
        bottom.addWidget(self.edit_banner)
        bottom.addWidget(self.tool_approval)
        bottom.addWidget(self.picture_tray)
        bottom.addLayout(composer_row)
        bottom.addWidget(self.wait_hint)
        self.chats_toggle = self._panel_toggle("chatsToggle", "Chats", "Show or hide the chat list (Ctrl+Shift+L)")
        self.panel_toggle = self._panel_toggle(
            "machineToggle", "Machine", "Show or hide the machine and model panel (Ctrl+Shift+H)"
        )
        top = self.header = QHBoxLayout()  # window_menus adds the Settings button at its end
        top.setContentsMargins(18, 10, 18, 0)
        top.addWidget(self.chats_toggle)
        self.system_prompt_label = plain_label("System prompt:")
        self.system_prompt_label.setObjectName("systemPromptLabel")
        self.system_prompt_label.setBuddy(self.system_prompt)
        # It never holds the window wide (a set minimum replaces its text's width in the layout's sums); below
        # HIDE_CHATS_BELOW it is hidden (``resizeEvent``), the field stays with its placeholder.
        self.system_prompt_label.setMinimumWidth(1)
        top.addWidget(self.system_prompt_label)
        top.addWidget(self.system_prompt, 1)
        top.addWidget(self.panel_toggle)

        chat_column = QWidget()
        chat_column.setObjectName("chatColumn")
        column = QVBoxLayout(chat_column)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.notice_bar = NoticeBar()
        notices = QHBoxLayout()
        notices.setContentsMargins(18, 8, 18, 0)
        notices.addWidget(self.notice_bar)
        column.addLayout(top)
        column.addLayout(notices)
        column.addWidget(self.chat_view, 1)
        column.addLayout(bottom)

        self.hardware_panel = HardwarePanel()
        # A short screen (a 768-pixel laptop, 150 % scaling) scrolls the panel rather than squeezing its rows.
        panel_scroll = QScrollArea()
        panel_scroll.setObjectName("hardwarePanelScroll")
        panel_scroll.setWidget(self.hardware_panel)
        panel_scroll.setWidgetResizable(True)
        panel_scroll.setFrameShape(QFrame.Shape.NoFrame)
        panel_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        panel_scroll.setMinimumWidth(self.hardware_panel.minimumWidth())
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.documents_panel = DocumentsPanel()
        left = QSplitter(Qt.Orientation.Vertical)
        left.setObjectName("leftColumn")
        left.addWidget(self.sidebar)
        left.addWidget(self.documents_panel)
        left.setStretchFactor(0, 3)
        left.setStretchFactor(1, 2)
        self.left_column, self.panel_scroll = left, panel_scroll
        self.splitter.addWidget(left)
        self.splitter.addWidget(chat_column)
        self.splitter.addWidget(panel_scroll)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes(list(DEFAULT_PANES))
        self.setCentralWidget(self.splitter)

        self.status_label = plain_label("Starting…")
        self.status_label.setObjectName("statusLabel")
        self.load_progress = QProgressBar()
        self.load_progress.setObjectName("loadProgress")
        self.load_progress.setAccessibleName("Model loading")
        self.load_progress.setRange(0, 0)  # busy until llama.cpp reports how far it has read
        self.load_progress.setMaximumWidth(160)
        self.load_progress.hide()
        self.stop_loading_button = QPushButton("Stop loading")
        self.stop_loading_button.setObjectName("stopLoadingButton")
        self.stop_loading_button.setToolTip("Stop loading this model (no model will be loaded)")
        self.stop_loading_button.hide()
        self.api_label = plain_label()
        self.api_label.setObjectName("apiLabel")
        self.api_label.hide()
        self.task_progress = TaskProgress()
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addPermanentWidget(self.task_progress)
        self.statusBar().addPermanentWidget(self.api_label)
        self.statusBar().addPermanentWidget(self.load_progress)
        self.statusBar().addPermanentWidget(self.stop_loading_button)
        self.composer.setFocus()

    # ------------------------------------------------------------------ side panels

    def _panel_toggle(self, name: str, text: str, tip: str) -> QToolButton:
        button = QToolButton()
        button.setObjectName(name)
        button.setText(text)
        button.setToolTip(tip)
        button.setAccessibleName(tip)
        button.setCheckable(True)
        button.setChecked(True)
        button.toggled.connect(lambda shown: self._show_panel(button, shown))
        return button

    def _show_panel(self, button: QToolButton, shown: bool) -> None:
        pane = self.left_column if button is self.chats_toggle else self.panel_scroll
        pane.setVisible(shown)
        if shown:
            self._give_room(self.splitter.indexOf(pane))

    def _give_room(self, index: int) -> None:
        sizes = sizes_giving_room(self.splitter.sizes(), index)
        if sizes is not None:
            self.splitter.setSizes(sizes)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Below a width the side panels give their room to the chat (the machine panel first, then the chat
        list); the toggles by the system prompt bring them back. Crossing the width again restores the default,
        so a choice made in a narrow window does not stick to a wide one."""
        super().resizeEvent(event)
        width = event.size().width()
        self.system_prompt_label.setVisible(width >= HIDE_CHATS_BELOW)  # the field keeps its room (and placeholder)
        for button, below in ((self.panel_toggle, HIDE_PANEL_BELOW), (self.chats_toggle, HIDE_CHATS_BELOW)):
            narrow = width < below
            if self._narrow.get(button.objectName()) != narrow:
                self._narrow[button.objectName()] = narrow
                button.setChecked(not narrow)
