"""The reply being written, on the window's side of the queue: the one copy of its answer and reasoning as they
arrive (the session saves it, the chat view shows it), and how long the model reasoned — the engine's figure,
carried by the first answer text after the reasoning, not a second clock in the window."""

from __future__ import annotations


class ReplyDraft:
    """Answer and reasoning text of the reply being streamed, appended in pieces, read whole."""

    def __init__(self) -> None:
        self._answer: list[str] = []
        self._reasoning: list[str] = []
        self.thinking_s: float | None = None  # set when the answer begins after reasoning (engine-measured)

    def add(self, text: str, reasoning: bool = False, thinking_s: float | None = None) -> None:
        (self._reasoning if reasoning else self._answer).append(text)
        if thinking_s is not None:
            self.thinking_s = thinking_s

    def clear(self) -> None:
        """The text so far went into a tool round (kept with the reply apart): the answer starts again."""
        self._answer, self._reasoning = [], []

    @property
    def answer(self) -> str:
        if len(self._answer) > 1:  # joined once per read, not once per piece
            self._answer = ["".join(self._answer)]
        return self._answer[0] if self._answer else ""

    @property
    def reasoning(self) -> str:
        if len(self._reasoning) > 1:
            self._reasoning = ["".join(self._reasoning)]
        return self._reasoning[0] if self._reasoning else ""

    @property
    def answering(self) -> bool:
        """The answer has begun (after any reasoning)."""
        return bool(self._answer)
