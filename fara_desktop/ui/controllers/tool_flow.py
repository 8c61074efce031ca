"""A reply's tool calls, one at a time: shown to the user, decided (Allow once / Always for this tool / Deny), run
off the window's thread, and kept with the reply; then the reply goes on with the results.

The chat controller hands over a finished engine reply that made calls (``start``); this flow asks about each call
on the approval bar, runs the allowed ones through the ``ToolBox`` (the result comes back through a queued signal,
never on the hub's thread), records each outcome as a ``ToolUse`` and, once the round is complete, gives the
controller the round to continue from (``on_round``). Stop ends it: a running call is abandoned and every call not
run yet is kept as stopped.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from fara_desktop.chats.tool_rounds import ToolRound, ToolUse
from fara_desktop.tools.mcp_hub import McpTool
from fara_desktop.tools.tool_box import MAX_CALLS_PER_REPLY, ToolBox
from fara_desktop.tools.tool_results import ToolResult
from fara_desktop.ui.widgets.tool_approval import ToolApprovalBar, readable_arguments
from fara_desktop.vocabulary.tools import ToolCall


class ToolFlow(QObject):
    """The calls of one round of the reply being written."""

    _resultReady = Signal(object)  # the future of a call, from the hub's thread to the window's

    def __init__(
        self,
        box: ToolBox,
        approval: ToolApprovalBar,
        keys: Callable[[], tuple[str, ...]],
        on_round: Callable[[ToolRound], None],
        set_status: Callable[[str], None],
    ) -> None:
        super().__init__()
        self.box = box
        self._approval = approval
        self._keys = keys  # the chat's tools ("server/tool"), read when a call is looked up
        self._on_round = on_round
        self._set_status = set_status
        self._text = ""
        self._reasoning = ""
        self._calls: list[ToolCall] = []
        self._uses: list[ToolUse] = []
        self._count = 0
        self._running: tuple[concurrent.futures.Future[ToolResult], ToolCall, McpTool] | None = None
        # The call on the approval bar: the very tool shown (of the server run that listed it) and the arguments as
        # shown; a decision applies to these, whatever bears the name when the user clicks.
        self._asked: tuple[McpTool, str] | None = None
        self.calls_in_reply = 0
        self.active = False
        self._resultReady.connect(self._on_result)
        approval.decided.connect(self.decide)

    def new_reply(self) -> None:
        self.calls_in_reply = 0

    @property
    def over_limit(self) -> bool:
        return self.calls_in_reply >= MAX_CALLS_PER_REPLY

    def start(self, text: str, reasoning: str, calls: tuple[ToolCall, ...]) -> None:
        self.active = True
        self._text, self._reasoning = text, reasoning
        self._calls, self._uses, self._count = list(calls), [], len(calls)
        self._next()

    def _record(self, call: ToolCall, server: str, outcome: str, result: str = "") -> None:
        self._uses.append(ToolUse(call, server, outcome, result))  # type: ignore[arg-type]
        self._calls.pop(0)

    def _next(self) -> None:
        if not self._calls:
            self.active = False
            self._approval.done()
            self._on_round(ToolRound(self._text, self._reasoning, tuple(self._uses)))
            return
        call = self._calls[0]
        tool = self.box.find(call.name, self._keys())
        if tool is None:
            self._record(call, "", "error", f"No tool named {call.name} is offered in this chat; nothing ran.")
            self._next()
        elif self.over_limit:
            self._record(
                call, tool.server, "error", f"More than {MAX_CALLS_PER_REPLY} calls in one reply; this one did not run."
            )
            self._next()
        elif self.box.is_always_allowed(tool):
            self._run(call, tool)
        else:
            number = self._count - len(self._calls) + 1
            shown = readable_arguments(call.arguments)
            self._asked = (tool, shown)
            self._approval.ask(tool.spec.name, tool.server, shown, number, self._count, self.box.hub.runs(tool.server))
            self._set_status(f"Waiting for your decision: run {tool.spec.name}?")

    def decide(self, choice: str) -> None:
        """The user's answer on the approval bar: "once", "always" or "deny"."""
        if not self.active or not self._calls or self._running is not None:
            return
        call = self._calls[0]
        asked, self._asked = self._asked, None
        self._approval.done()
        if asked is None or choice == "deny":
            self._record(call, asked[0].server if asked else "", "denied")
            self._next()
            return
        tool, shown = asked
        if choice == "always":
            self.box.allow_always(tool)
        self._run(call, tool, shown)

    def _run(self, call: ToolCall, tool: McpTool, shown: str | None = None) -> None:
        """``shown``: the arguments as the approval bar showed them, sent as shown (None: allowed for good)."""
        self.calls_in_reply += 1
        self._set_status(f"Running {tool.spec.name} ({tool.server})…")
        future = self.box.start_call(tool, call.arguments if shown is None else shown)
        self._running = (future, call, tool)
        future.add_done_callback(self._resultReady.emit)

    def _on_result(self, future: concurrent.futures.Future[ToolResult]) -> None:
        if self._running is None or self._running[0] is not future:
            return  # stopped meanwhile: the call was already kept as stopped
        _, call, tool = self._running
        self._running = None
        result = future.result()
        self._record(call, tool.server, "error" if result.is_error else "ran", result.text)
        self._next()

    def stop(self) -> ToolRound | None:
        """The user stopped the reply: the round as it stands, every call not done kept as stopped."""
        if not self.active:
            return None
        self.active = False
        self._asked = None
        self._approval.done()
        if self._running is not None:
            self._running[0].cancel()
            self._running = None
        for call in list(self._calls):
            tool = self.box.find(call.name, self._keys())
            self._record(call, tool.server if tool else "", "stopped")
        return ToolRound(self._text, self._reasoning, tuple(self._uses))
