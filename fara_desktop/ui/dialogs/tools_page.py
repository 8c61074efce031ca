"""Settings ▸ Tools: the MCP servers the model's tools come from, pasted in the ``mcpServers`` JSON other apps use,
each switched on or off (a server runs only when on), with what it is doing; and the tools allowed without asking."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.settings import ToolSettings
from fara_desktop.text.untrusted import one_line
from fara_desktop.tools.mcp_config import McpConfigError, McpServerConfig, parse_mcp_servers
from fara_desktop.tools.mcp_hub import ServerState
from fara_desktop.ui.widgets.plain_text import plain_label

EXAMPLE = """{
  "mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time"]}
  }
}"""


def state_words(state: ServerState | None) -> str:
    if state is None:
        return "off"
    if state.state == "ready":
        return f"running · {len(state.tools)} tool{'s' if len(state.tools) != 1 else ''}"
    if state.state == "failed":
        return f"failed: {one_line(state.message, 160)}"
    return state.state


IDENTITY_ROLE = Qt.ItemDataRole.UserRole + 1  # the server definition an item stands for


class ToolsPage(QWidget):
    """Edits a copy of the tool settings; ``tool_settings()`` returns the result."""

    def __init__(
        self,
        settings: ToolSettings,
        states: Callable[[], dict[str, ServerState]] | None = None,
        restart: Callable[[str], None] | None = None,
        note: str = "",
    ) -> None:
        """``states``: what each running server is doing; ``restart``: start a failed server again; ``note``: said
        first, when there is something to know before setting tools up (the model in use cannot call them)."""
        super().__init__()
        self._states = states or dict
        self._restart = restart
        self._always = settings.always_allowed
        self._enabled = set(settings.enabled)
        self._servers: list[McpServerConfig] = []
        intro = plain_label(
            "MCP servers give the model tools (the time, your files, a git repository …). Paste the "
            '"mcpServers" block from another app (Claude Desktop, Cursor, LM Studio): a command with its '
            "arguments and environment, or an http address on this computer. A server runs only when it is "
            "switched on below, and every call the model makes asks you first."
        )
        intro.setWordWrap(True)
        self.note = plain_label(note)
        self.note.setObjectName("toolsModelNote")
        self.note.setWordWrap(True)
        self.note.setVisible(bool(note))
        self.editor = QPlainTextEdit(settings.servers_json)
        self.editor.setObjectName("mcpServersJson")
        self.editor.setAccessibleName("MCP servers (JSON)")
        self.editor.setPlaceholderText(EXAMPLE)
        self.editor.setFont(QFont("monospace"))
        self.editor.setTabChangesFocus(True)
        self.problem = plain_label()
        self.problem.setObjectName("mcpServersProblem")
        self.problem.setWordWrap(True)
        self.server_list = QListWidget()
        self.server_list.setObjectName("mcpServerList")
        self.server_list.setAccessibleName("MCP servers: switch each on or off")
        self.server_list.itemChanged.connect(self._switched)
        self.restart_button = QPushButton("Restart selected server")
        self.restart_button.setObjectName("restartMcpServer")
        self.restart_button.setToolTip("Start a server that failed or stopped again")
        self.restart_button.clicked.connect(self._restart_selected)
        self.restart_button.setEnabled(restart is not None)
        self.always_label = plain_label()
        self.always_label.setWordWrap(True)
        self.forget_button = QPushButton("Ask again for every tool")
        self.forget_button.setObjectName("forgetToolPermissions")
        self.forget_button.clicked.connect(self._forget)
        forget_row = QHBoxLayout()
        forget_row.addWidget(self.always_label, 1)
        forget_row.addWidget(self.forget_button)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.note)
        layout.addWidget(self.editor, 2)
        layout.addWidget(self.problem)
        layout.addWidget(plain_label("Servers (switched on: running):"))
        layout.addWidget(self.server_list, 1)
        layout.addWidget(self.restart_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addLayout(forget_row)
        self.editor.textChanged.connect(self._read)
        self._read()
        self._show_always()

    def _read(self) -> None:
        try:
            self._servers = parse_mcp_servers(self.editor.toPlainText())
        except McpConfigError as exc:
            self.problem.setText(str(exc))
            self.problem.show()
            return  # the list keeps the last servers that were read
        self.problem.hide()
        self.refresh()

    def refresh(self) -> None:
        """The list of servers, each with its switch and what it is doing now."""
        states = self._states()
        self.server_list.blockSignals(True)
        self.server_list.clear()
        for server in self._servers:
            on = server.identity in self._enabled  # a definition pasted under an enabled server's name is off
            state = states.get(server.name)
            if on and state is None:
                words = "on: starts when you press OK"
            elif not on and state is not None and state.state != "stopped":
                words = "off: stops when you press OK"
            else:
                words = state_words(state) if on else "off"
            item = QListWidgetItem(f"{one_line(server.name, 64)} — {words}\n    {one_line(server.summary, 200)}")
            item.setData(Qt.ItemDataRole.UserRole, server.name)
            item.setData(IDENTITY_ROLE, server.identity)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
            self.server_list.addItem(item)
        self.server_list.blockSignals(False)

    def _switched(self, item: QListWidgetItem) -> None:
        identity = item.data(IDENTITY_ROLE)
        if item.checkState() == Qt.CheckState.Checked:
            self._enabled.add(identity)
        else:
            self._enabled.discard(identity)
        # the row says at once what OK will do (it read "off" until OK and reopening); after this signal, whose item
        # the refresh replaces
        QTimer.singleShot(0, self.refresh)

    def _restart_selected(self) -> None:
        item = self.server_list.currentItem()
        if item is not None and self._restart is not None:
            self._restart(item.data(Qt.ItemDataRole.UserRole))

    def _show_always(self) -> None:
        count = len(self._always)
        self.always_label.setText(
            f"{count} tool{'s run' if count != 1 else ' runs'} without asking (you chose Always)."
            if count
            else "Every tool call asks you first."
        )
        self.forget_button.setEnabled(bool(count))

    def _forget(self) -> None:
        self._always = ()
        self._show_always()

    def tool_settings(self) -> ToolSettings:
        """The servers switched on (by identity: what is on is exactly the definition that was switched on) and the
        permissions of definitions still listed (a changed definition starts with none)."""
        identities = {s.identity for s in self._servers}
        enabled = tuple(sorted(i for i in self._enabled if i in identities))
        always = tuple(a for a in self._always if a.split("/", 1)[0] in identities)
        return ToolSettings(self.editor.toPlainText(), enabled, always)
