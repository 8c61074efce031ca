"""The chat's Tools button and menu: which tools the chat offers its model (ticked in one go), what they cost in
prompt reading, and — before the user relies on them — when the model in use cannot call tools at all."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMenu, QToolButton, QWidgetAction

from fara_desktop.app.chat_turns import ChatTurns
from fara_desktop.app.tool_advice import cannot_call_tools
from fara_desktop.chats.storage import StorageError
from fara_desktop.text.untrusted import one_line
from fara_desktop.tools.tool_box import schema_tokens, tool_key
from fara_desktop.ui.controllers.tool_flow import ToolFlow
from fara_desktop.ui.widgets.stay_open_menu import StayOpenMenu


class ToolsMenu:
    """Fills the menu each time it opens (the servers' tools change as they start and stop)."""

    def __init__(
        self,
        button: QToolButton,
        turns: ChatTurns,
        flow: Callable[[], ToolFlow | None],
        show_notice: Callable[[str, str], None],
        get_models: Callable[[], None],
    ) -> None:
        self.button = button
        self.turns = turns
        self._flow = flow
        self._show_notice = show_notice
        self._get_models = get_models
        menu = StayOpenMenu(button)  # several tools are ticked in one go
        menu.aboutToShow.connect(self._fill)
        button.setMenu(menu)
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)

    def _fill(self) -> None:
        menu = self.button.menu()
        menu.clear()
        flow, turns, session = self._flow(), self.turns, self.turns.session
        tools = flow.box.available() if flow is not None else []
        chosen = set(session.tools)
        info = turns.model_info
        unable = cannot_call_tools(info)
        if unable and info is not None:  # said before the user relies on the tools, not after
            heading(menu, f"{one_line(info.name, 60)} cannot call tools")
            for line in turns.tool_suggestions or ["Choose a model made for tool calling"]:
                text_row(menu, f"Can: {line}")
            menu.addAction("Get models that call tools…").triggered.connect(self._get_models)
        server = None
        for tool in tools:
            if tool.server != server:
                server = tool.server
                heading(menu, f"Tools of {one_line(server, 60)}")
            action = menu.addAction(one_line(tool.spec.name, 60))
            action.setToolTip(one_line(tool.spec.description, 300))
            action.setCheckable(True)
            action.setEnabled(not unable)  # ticked or not, the model in use would never be offered it
            key = tool_key(tool)
            action.setChecked(key in chosen)
            action.toggled.connect(lambda on, k=key: self.use_tool(k, on))
        if not tools:
            menu.addAction("No tools yet: add MCP servers in Settings ▸ Tools").setEnabled(False)
            return
        menu.addSeparator()
        force = menu.addAction("Make the next reply call a tool")
        force.setCheckable(True)
        force.setChecked(turns.tool_choice == "required")
        force.setToolTip(
            "For models that do not call tools by themselves: the next reply must call one of this "
            "chat's tools (its arguments held to the tool's schema)."
        )
        force.toggled.connect(lambda on: setattr(turns, "tool_choice", "required" if on else "auto"))
        if unable:  # it would be used up with no effect: the model is never offered the tools
            force.setEnabled(False)
            force.setToolTip("The model in use cannot call tools at all; choose one that can.")

    def use_tool(self, key: str, used: bool) -> None:
        """Switch one tool on or off for this chat."""
        session = self.turns.session
        keys = [k for k in session.tools if k != key] + ([key] if used else [])
        try:
            session.set_tools(tuple(keys))
        except StorageError as exc:
            self._show_notice(f"The chat's tools could not be saved: {exc}", "error")
        self.show_choice()
        if used:
            self.turns.tools_chosen()

    def show_choice(self) -> None:
        """The Tools button: how many tools the chat offers and what they cost in prompt reading."""
        flow = self._flow()
        offered = flow.box.offered(self.turns.session.tools) if flow is not None else []
        self.button.setText(f"Tools: {len(offered)}" if offered else "Tools: off")
        cost = (
            (
                f" Their descriptions add about {schema_tokens(offered):,} prompt tokens (read once per chat, then "
                "cached; the wait shown under the message box counts them)."
            )
            if offered
            else ""
        )
        self.button.setToolTip(f"The tools this chat's model may call (each call asks you first).{cost}")


def heading(menu: QMenu, text: str) -> QWidgetAction:
    """A heading in the menu, after a separator: a bold line in the menu's own text colour that cannot be chosen.
    ``QMenu.addSection`` draws its text only in some styles (in Fusion and on Windows, a blank separator that left
    the rows under it unexplained)."""
    if menu.actions():
        menu.addSeparator()
    return text_row(menu, text, bold=True)


def text_row(menu: QMenu, text: str, bold: bool = False) -> QWidgetAction:
    """A line of text in the menu that is read, never chosen: a label (no click, no focus) rather than a disabled
    row, which is too pale to read in the light theme."""
    label = QLabel(text)
    label.setObjectName("menuHeading" if bold else "menuText")
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setContentsMargins(8, 4 if bold else 2, 8, 2)
    font = label.font()
    font.setBold(bold)
    label.setFont(font)
    action = QWidgetAction(menu)
    action.setDefaultWidget(label)
    action.setText(text)  # for accessibility and for tests
    menu.addAction(action)
    return action
