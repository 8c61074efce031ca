"""The tools a reply may call, and the calls it made."""

from __future__ import annotations

from dataclasses import dataclass

ToolChoice = str  # "auto", "none", "required", or the name of the one tool the reply must call


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name, what it does and its parameters' JSON schema (as text)."""

    name: str
    description: str = ""
    parameters: str = '{"type": "object", "properties": {}}'


@dataclass(frozen=True)
class ToolCall:
    """A call a reply made: ``arguments`` is a JSON object as text (what OpenAI's API carries)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolOffer:
    """The tools a reply may call and ``choice``: "auto" (the model decides), "none" (it may not), "required" (it
    must call one) or one tool's name (it must call that one)."""

    tools: tuple[ToolSpec, ...]
    choice: ToolChoice = "auto"

    def declared(self) -> tuple[ToolSpec, ...]:
        return () if self.choice == "none" else self.tools

    def forced(self) -> tuple[str, ...]:
        """The tools one of which the reply must call; () when the model decides."""
        if self.choice == "required":
            return tuple(t.name for t in self.tools)
        return (self.choice,) if self.choice not in ("auto", "none") else ()

    def schemas(self) -> dict[str, str]:
        return {t.name: t.parameters for t in self.tools}
