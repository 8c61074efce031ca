"""What a chat's model may call, and the user's standing permissions: the window's one view of the tools.

A chat offers the tools the user switched on for it (``"server/tool"`` keys) whose servers are running. Every
call waits for the user's decision unless the user chose *Always for this tool* for it — and only the user can
choose that: nothing a model writes or a tool returns changes a permission.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fara_desktop.tools.mcp_hub import McpHub, McpTool
from fara_desktop.tools.tool_results import ToolResult, error_result

MAX_CALLS_PER_REPLY = 8  # then the model is asked to answer without tools
MAX_ARGUMENT_CHARS = 64 * 1024


def tool_key(tool: McpTool) -> str:
    """How a chat names a tool it offers (by the server's name: switching the server on is the user's consent)."""
    return f"{tool.server}/{tool.name}"


def permission_key(tool: McpTool) -> str:
    """What *Always for this tool* is bound to: the server's whole definition and the tool's name."""
    return f"{tool.identity or tool.server}/{tool.name}"


class ToolBox:
    """The hub's tools as chats see them, and the set of tools the user allowed for good."""

    def __init__(
        self, hub: McpHub, always_allowed: Iterable[str] = (), on_permissions: Callable[[], None] | None = None
    ) -> None:
        self.hub = hub
        self.always: set[str] = set(always_allowed)
        self._on_permissions = on_permissions or (lambda: None)

    def available(self) -> list[McpTool]:
        """Every tool of the running servers."""
        return self.hub.tools()

    def offered(self, keys: Sequence[str]) -> list[McpTool]:
        """The chat's tools (``keys``) that can run now."""
        wanted = set(keys)
        return [t for t in self.hub.tools() if tool_key(t) in wanted]

    def find(self, model_name: str, keys: Sequence[str]) -> McpTool | None:
        """The offered tool a call names (by the name the model saw); None: the model named no tool it was given,
        or a name that is not exactly one tool's (never the first of two)."""
        named = [t for t in self.offered(keys) if t.spec.name == model_name]
        return named[0] if len(named) == 1 else None

    def is_always_allowed(self, tool: McpTool) -> bool:
        return permission_key(tool) in self.always

    def allow_always(self, tool: McpTool) -> None:
        """The user's *Always for this tool* (a click, never a model's or a tool's text), for the tool of the
        server definition that was shown."""
        self.always.add(permission_key(tool))
        self._on_permissions()

    def start_call(self, tool: McpTool, arguments: str) -> concurrent.futures.Future[ToolResult]:
        """Run a call the user allowed (``tool``: the very one shown, of the server run that listed it);
        arguments that are not a JSON object end it without running the tool."""
        parsed = parse_arguments(arguments)
        if parsed is None:
            future: concurrent.futures.Future[ToolResult] = concurrent.futures.Future()
            future.set_result(error_result("The model's arguments are not a JSON object; the tool did not run."))
            return future
        return self.hub.start_call(tool, parsed)


def schema_tokens(tools: Sequence[McpTool]) -> int:
    """About how many prompt tokens the tools' names, descriptions and schemas take (3 characters a token, as
    measured for JSON schemas; the template's own tool instructions come on top: ~120 tokens with Qwen's)."""
    return sum(len(t.spec.name) + len(t.spec.description) + len(t.spec.parameters) for t in tools) // 3


def parse_arguments(arguments: str) -> dict[str, Any] | None:
    if len(arguments) > MAX_ARGUMENT_CHARS:
        return None
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
