"""Settings ▸ Prompts: what the app does so the user does not wait twice for the same prompt to be read."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QFormLayout, QPushButton, QVBoxLayout, QWidget

from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.settings import PromptSettings
from fara_desktop.text.format import format_size
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.widgets.setting_fields import add_row, check_box, decimal_spin


class PromptsPage(QWidget):
    """Edits a copy of the prompt settings; shows what the chats' saved states take on disk."""

    def __init__(
        self,
        prompts: PromptSettings,
        states: KVDiskStore | None,
        conversation: int | None,
        parent: QWidget | None = None,
        forget_states: Callable[[], None] | None = None,
    ) -> None:
        """``forget_states``: deletes every saved reading (the core's intent, through the inference thread)."""
        super().__init__(parent)
        self._states = states
        self._forget_states = forget_states
        self._conversation = conversation
        layout = QVBoxLayout(self)
        intro = plain_label(
            "On a CPU the wait before the first word is the model reading the chat. Fara keeps what it has read "
            "of each chat on disk, so a chat opened again continues at once, and reads ahead while you type."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        self.states_gb = decimal_spin("prompts.chat_states_gb", "chatStatesBudget")
        self.states_gb.setValue(prompts.chat_states_gb)
        add_row(form, "prompts.chat_states_gb", self.states_gb)
        self.usage = plain_label()
        self.usage.setObjectName("chatStatesUsage")
        self.usage.setWordWrap(True)
        form.addRow("", self.usage)
        self.clear_states = QPushButton("Delete saved reading")
        self.clear_states.setAutoDefault(False)
        self.clear_states.clicked.connect(self._clear)
        form.addRow("", self.clear_states)
        self.read_ahead = check_box("prompts.read_ahead", "readAhead")
        self.read_ahead.setChecked(prompts.read_ahead)
        self.read_ahead_on_battery = check_box("prompts.read_ahead_on_battery", "readAheadOnBattery")
        self.read_ahead_on_battery.setChecked(prompts.read_ahead_on_battery)
        form.addRow("", self.read_ahead)
        form.addRow("", self.read_ahead_on_battery)
        self.document_wait = decimal_spin("prompts.document_wait_s", "documentWait")
        self.document_wait.setValue(prompts.document_wait_s)
        add_row(form, "prompts.document_wait_s", self.document_wait)
        self.pictures_whole = check_box("prompts.pictures_whole", "picturesWhole")
        self.pictures_whole.setChecked(prompts.pictures_whole)
        form.addRow("", self.pictures_whole)
        layout.addLayout(form)
        layout.addStretch(1)
        self._show_usage()

    def _show_usage(self) -> None:
        if self._states is None:
            self.usage.setText("")
            return
        used = self._states.bytes_used()
        this = self._states.size_of(self._conversation) if self._conversation is not None else 0
        self.usage.setText(f"In use: {format_size(used)}; this chat: {format_size(this)}.")
        self.clear_states.setEnabled(used > 0)

    def _clear(self) -> None:
        if self._forget_states is None:
            return
        self._forget_states()  # done on the inference thread, after what it is doing now
        self.usage.setText("The saved reading is being deleted.")
        self.clear_states.setEnabled(False)

    def prompt_settings(self) -> PromptSettings:
        return PromptSettings(
            chat_states_gb=self.states_gb.value(),
            read_ahead=self.read_ahead.isChecked(),
            read_ahead_on_battery=self.read_ahead_on_battery.isChecked(),
            document_wait_s=self.document_wait.value(),
            pictures_whole=self.pictures_whole.isChecked(),
        )
