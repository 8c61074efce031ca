"""Put the best passages of the user's documents into the prompt, within a token budget that leaves room for the
history and the reply, numbered so the reply can cite them.

The passages go into the copy of the newest user message that the model is sent (every chat template has a user
turn; not all have a system role). What is stored and shown stays what the user typed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fara_desktop.documents.index import DocumentIndex, Hit
from fara_desktop.documents.semantic import TextEmbedder, hybrid_search
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams, reply_reserve
from fara_desktop.vocabulary.sources import Source

CHARS_PER_TOKEN = 3.5  # a cautious average for English prose and code: budgets are kept, not overshot
MIN_BUDGET_TOKENS = 200
MAX_BUDGET_TOKENS = 2000
DEFAULT_CONTEXT = 4096  # when the context window is not known (a server's model)
TOP_PASSAGES = 16  # of ~400 characters: the token budget decides how many go in (2,000 tokens hold ~16)


@dataclass(frozen=True)
class Grounded:
    """The messages to send, and the passages they carry, in citation order ([1] first)."""

    messages: list[ChatMessage]
    used: list[Hit]


def passage_budget(n_ctx: int, history_chars: int, reply_reserve: int, readable: int = MAX_BUDGET_TOKENS) -> int:
    """Tokens the passages may take: a share of what the history and the reply leave free, and no more than the
    model reads in the wait the user accepts (``readable``: its measured prompt speed × that wait)."""
    window = n_ctx or DEFAULT_CONTEXT
    free = window - reply_reserve - int(history_chars / CHARS_PER_TOKEN)
    return max(MIN_BUDGET_TOKENS, min(MAX_BUDGET_TOKENS, readable, int(free * 0.6)))


def ground(messages: Sequence[ChatMessage], hits: Sequence[Hit], budget_tokens: int) -> Grounded:
    """The last user message, rewritten to carry the best passages that fit ``budget_tokens``."""
    if not hits or not messages or messages[-1].role != "user":
        return Grounded(list(messages), [])
    room = int(budget_tokens * CHARS_PER_TOKEN)
    used: list[Hit] = []
    blocks: list[str] = []
    for hit in hits:
        block = f"[{len(used) + 1}] {hit.where}\n{hit.text.strip()}"
        if used and len(block) > room:
            break
        if not used and len(block) > room:  # the best passage alone is too long: its start
            block = block[: max(room, 200)] + " …"
        used.append(hit)
        blocks.append(block)
        room -= len(block) + 2
    question = messages[-1].content
    text = (
        "Passages from my documents (cite them by number, like [1]):\n\n"
        + "\n\n".join(blocks)
        + "\n\nAnswer the question below from these passages when they are relevant, citing the passage numbers "
        "you use. If they do not contain the answer, say so.\n\nQuestion: " + question
    )
    return Grounded([*messages[:-1], ChatMessage("user", text)], used)


def grounded_prompt(
    index: DocumentIndex,
    collections: Sequence[str],
    messages: Sequence[ChatMessage],
    embedder: TextEmbedder | None,
    n_ctx: int,
    sampling: SamplingParams,
    readable: int = MAX_BUDGET_TOKENS,
) -> tuple[list[ChatMessage], tuple[Source, ...]]:
    """The prompt to send for ``messages`` with the best passages of ``collections`` in its last user message,
    and those passages as numbered sources. The room left for the reply is the engine's own (``reply_reserve``,
    which honours the user's max tokens), so the passages never push the history out of the window; ``readable``
    caps them at what the model reads in the wait the user accepts."""
    hits = hybrid_search(index, list(collections), messages[-1].content, embedder, TOP_PASSAGES)
    history = sum(len(m.content) for m in messages)
    reserve = reply_reserve(sampling, n_ctx or DEFAULT_CONTEXT)
    grounded = ground(messages, hits, passage_budget(n_ctx, history, reserve, readable))
    sources = tuple(
        Source(number, h.path, h.text, h.page, h.line_start, h.line_end) for number, h in enumerate(grounded.used, 1)
    )
    return grounded.messages, sources
