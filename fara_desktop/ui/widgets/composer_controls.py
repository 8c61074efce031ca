"""The buttons beside the message box: Send, Stop, Think, Documents, Tools and Picture, in one column."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QPushButton, QToolButton, QVBoxLayout


class ComposerControls:
    """The column of buttons beside the message box; the window wires them."""

    def __init__(self) -> None:
        self.send = QPushButton("Send")
        self.send.setObjectName("sendButton")
        self.send.setAccessibleName("Send message")
        self.send.setToolTip("Send (Enter)")
        self.send.setDefault(True)
        self.stop = QPushButton("Stop")
        self.stop.setObjectName("stopButton")
        self.stop.setAccessibleName("Stop the reply")
        self.stop.setToolTip("Stop the reply (Esc)")
        self.thinking = QCheckBox("Think")
        self.thinking.setObjectName("thinkingSwitch")
        self.thinking.setToolTip(
            "Let the model reason before it answers (slower, often better). This model's template can turn it off; "
            "the choice is kept per chat."
        )
        self.thinking.setAccessibleName("Let the model think before answering")
        self.thinking.hide()  # shown for models whose template has the switch
        self.column = QVBoxLayout()
        self.column.setSpacing(6)
        self.column.addWidget(self.send)
        self.column.addWidget(self.stop)
        self.column.addWidget(self.thinking)
        self.documents = QToolButton()
        self.documents.setObjectName("documentsButton")
        self.documents.setText("Documents: off")
        self.documents.setAccessibleName("Document collections this chat answers from")
        self.column.addWidget(self.documents)
        self.tools = QToolButton()
        self.tools.setObjectName("toolsButton")
        self.tools.setText("Tools: off")
        self.tools.setAccessibleName("Tools this chat's model may call")
        self.column.addWidget(self.tools)
        self.attach = QToolButton()
        self.attach.setObjectName("attachButton")
        self.attach.setText("Picture…")
        self.attach.setToolTip("Attach pictures to the message (or paste one with Ctrl+V, or drop it here)")
        self.attach.setAccessibleName("Attach pictures")
        self.column.addWidget(self.attach)
        self.column.addStretch(1)
