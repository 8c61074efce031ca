"""The question every tool call waits on: which tool, from which server, with which arguments — Allow once,
Always for this tool, or Deny. It sits above the message box; the first button has the focus, so Enter allows
once, Alt+W always, Alt+D (or Esc, which stops the reply) denies."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from fara_desktop.text.untrusted import one_line, with_hidden_shown
from fara_desktop.tools.tool_box import MAX_ARGUMENT_CHARS
from fara_desktop.ui.widgets.plain_text import plain_label


def readable_arguments(arguments: str) -> str:
    """The call's arguments as the user reads them, all of them: indented JSON when they are JSON, with every
    character a reader could not see (bidirectional overrides, line separators, zero-width ones) written as its
    JSON escape — the text reads back to exactly the value that is sent (``ToolFlow`` sends this very text)."""
    if len(arguments) > MAX_ARGUMENT_CHARS:
        return (
            with_hidden_shown(arguments[:MAX_ARGUMENT_CHARS]) + f"\n… {len(arguments):,} characters: longer "
            f"than the {MAX_ARGUMENT_CHARS // 1024} KiB a call may send, so the tool will not run."
        )
    try:
        text = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        text = arguments
    return with_hidden_shown(text)


class ToolApprovalBar(QFrame):
    """Asks about one call; ``decided`` carries "once", "always" or "deny"."""

    decided = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolApproval")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        self.question = plain_label()
        self.question.setObjectName("toolQuestion")
        self.question.setWordWrap(True)
        self.arguments = QPlainTextEdit()
        self.arguments.setObjectName("toolArguments")
        self.arguments.setReadOnly(True)
        self.arguments.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # Tab goes from button to button
        self.arguments.setAccessibleName("The call's arguments")
        buttons = QHBoxLayout()
        self.allow_button = QPushButton("&Allow once")
        self.always_button = QPushButton("Al&ways for this tool")
        self.deny_button = QPushButton("&Deny")
        self.allow_button.setDefault(True)
        for button, choice in ((self.allow_button, "once"), (self.always_button, "always"), (self.deny_button, "deny")):
            button.setAutoDefault(True)
            button.clicked.connect(lambda _checked=False, c=choice: self.decided.emit(c))
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout.addWidget(self.question)
        layout.addWidget(self.arguments)
        layout.addLayout(buttons)
        self.hide()

    def ask(self, tool: str, server: str, shown: str, number: int, count: int, runs: str = "") -> None:
        """``shown``: the arguments as ``readable_arguments`` writes them (what will be sent if allowed); ``runs``:
        what the server runs (its command or address) — a name can resemble another server's, what it runs not."""
        of = f" (call {number} of {count})" if count > 1 else ""
        what = f", which runs {one_line(runs, 100)}" if runs else ""
        self.question.setText(
            f"The model wants to run {one_line(tool, 80)} (from the server {one_line(server, 80)}{what}){of}. Allow it?"
        )
        self.arguments.setPlainText(shown)
        lines = min(shown.count("\n") + 1, 8)  # small for a small call; long ones scroll
        self.arguments.setFixedHeight(lines * self.arguments.fontMetrics().lineSpacing() + 14)
        self.setAccessibleName(f"Run {one_line(tool, 80)}? Allow once, always for this tool, or deny")
        self.show()
        self.allow_button.setFocus()

    def done(self) -> None:
        self.hide()
