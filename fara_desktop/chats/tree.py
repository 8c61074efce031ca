"""A conversation as a tree of messages: edits and regenerations are siblings, the chat shows one branch.

Every message has a parent (the message it answers or follows; none for the first turn). The branch on screen is
the path from the root to a leaf. Switching to a sibling shows that sibling's most recent continuation, as
LM Studio, Open WebUI and llama.cpp's web UI do. The database may have been edited by hand or written by an
import: a parent that does not exist, or a loop of parents, ends the path instead of hanging or raising.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class TreeNode(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def parent_id(self) -> int | None: ...
    @property
    def position(self) -> int: ...


Node = TypeVar("Node", bound=TreeNode)


@dataclass(frozen=True)
class SiblingPlace:
    """Where a message stands among the versions of its turn: ``index`` of ``count`` (0-based)."""

    index: int
    count: int


class MessageTree(Generic[Node]):
    """The messages of one conversation, indexed by id and by parent."""

    def __init__(self, messages: Sequence[Node]) -> None:
        self.by_id: dict[int, Node] = {m.id: m for m in messages}
        self.children: dict[int | None, list[Node]] = {}
        for message in sorted(messages, key=lambda m: m.position):
            parent = message.parent_id if message.parent_id in self.by_id else None
            self.children.setdefault(parent, []).append(message)

    def __len__(self) -> int:
        return len(self.by_id)

    def parent_of(self, message: Node) -> int | None:
        return message.parent_id if message.parent_id in self.by_id else None

    def path_to(self, leaf_id: int | None) -> list[Node]:
        """The branch from the root to ``leaf_id``; the most recent branch when it is unknown."""
        if leaf_id not in self.by_id:
            leaf_id = self.latest_leaf(None)
        path: list[Node] = []
        seen: set[int] = set()
        current = leaf_id
        while current is not None and current in self.by_id and current not in seen:
            seen.add(current)
            node = self.by_id[current]
            path.append(node)
            current = self.parent_of(node)
        path.reverse()
        return path

    def latest_leaf(self, message_id: int | None) -> int | None:
        """The end of the most recent continuation of ``message_id`` (of the whole tree when None)."""
        current = message_id
        seen: set[int | None] = set()
        while current not in seen:
            seen.add(current)
            children = self.children.get(current)
            if not children:
                break
            current = children[-1].id
        return current

    def siblings(self, message: Node) -> list[Node]:
        return self.children.get(self.parent_of(message), [message])

    def place(self, message: Node) -> SiblingPlace:
        siblings = self.siblings(message)
        ids = [m.id for m in siblings]
        return SiblingPlace(ids.index(message.id) if message.id in ids else 0, len(siblings))

    def sibling_leaf(self, message: Node, step: int) -> int | None:
        """The branch shown after moving ``step`` versions away from ``message`` (clamped to the ends)."""
        siblings = self.siblings(message)
        index = min(max(self.place(message).index + step, 0), len(siblings) - 1)
        return self.latest_leaf(siblings[index].id)
