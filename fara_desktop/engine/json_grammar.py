"""JSON schemas (a client's ``response_format``, a tool's parameters) as llama.cpp grammars, within a budget.

A schema is a stranger's text, and what llama.cpp does with a grammar it cannot build is end the process: its
parser's failure comes back as a NULL sampler that llama-cpp-python adds to the sampler chain unchecked (SIGSEGV),
and a deeply nested grammar overflows the parser's stack. So a schema goes through three gates before a grammar
reaches generation, each ending in a ``GrammarError`` that says why:

1. the schema's counted keywords are whole numbers (``maxLength: "many"`` is refused by name);
2. llama-cpp-python's converter writes the GBNF, with counted repetitions in GBNF's ``item{m,n}`` form
   (``machine.llama_internals.compact_json_schema_repetitions``), and the text is budgeted: its size, its
   nesting, and every count (llama.cpp allows at most 2,000 required repetitions; above 2,000 it leaves an upper
   bound open, as llama.cpp's own converter does, so ``maxLength: 4096`` works and is not enforced past 2,000);
3. llama.cpp itself builds the grammar once for the model's vocabulary (``check_with_llama``), and a NULL is an
   error, never a crash.

The budget also bounds the cost: ``minLength: 100000000`` took 25 s and 3.1 GB to spell out before; it is now
refused in microseconds.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

from fara_desktop.engine.errors import GrammarError
from fara_desktop.machine.llama_internals import compact_json_schema_repetitions
from fara_desktop.text.untrusted import one_line

log = logging.getLogger(__name__)

MAX_REPETITIONS = 2000  # llama.cpp's MAX_REPETITION_THRESHOLD: more required repetitions are refused by its parser
MAX_GBNF_CHARS = 512 * 1024
MAX_NESTING = 128  # parentheses within parentheses: llama.cpp's parser recurses once per level
MAX_SCHEMA_NODES = 20_000
COUNTED_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")

# A GBNF text's tokens: literals and character classes (whose contents are not syntax), counts, parentheses.
_GBNF_PART = re.compile(
    r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}|[()]|[^"\[{()]+', re.S
)


def _schema_nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every object in the schema (iteratively: a deep one must not exhaust the recursion limit)."""
    stack, seen = [schema], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_SCHEMA_NODES:
            raise GrammarError(f"The schema has more than {MAX_SCHEMA_NODES:,} parts.")
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def check_schema_counts(schema: Any) -> None:
    """Refuse a counted keyword that is not a whole number ≥ 0 (the converter would write it into the grammar)."""
    for node in _schema_nodes(schema):
        for keyword in COUNTED_KEYWORDS:
            value = node.get(keyword)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                shown = one_line(repr(value), 40)
                raise GrammarError(f"'{keyword}' must be a whole number of at least 0, not {shown}.")
            if keyword.startswith("min") and value > MAX_REPETITIONS:
                raise GrammarError(
                    f"'{keyword}': {value:,} is more than the {MAX_REPETITIONS:,} repetitions a llama.cpp grammar can "
                    "require; lower it or leave it out."
                )


def check_gbnf(text: str) -> None:
    """The budget of a grammar's text: its size, its nesting and each counted repetition."""
    if len(text) > MAX_GBNF_CHARS:
        raise GrammarError(
            f"The grammar for this schema would be {len(text):,} characters; at most "
            f"{MAX_GBNF_CHARS:,} are allowed. Simplify the schema."
        )
    depth = 0
    for match in _GBNF_PART.finditer(text):
        part = match.group(0)
        if part == "(":
            depth += 1
            if depth > MAX_NESTING:
                raise GrammarError(f"The schema nests more than {MAX_NESTING} groups inside each other.")
        elif part == ")":
            depth -= 1
        elif part.startswith("{"):
            low, high = match.group(1), match.group(2)
            if not low and part.replace(" ", "") != "{}":
                low = "0"
            for number in (low, high):
                if number and (len(number) > 9 or int(number) > 10**9):
                    raise GrammarError(f"A count of {one_line(number, 24)} repetitions is beyond any grammar's budget.")
            if low and int(low) > MAX_REPETITIONS:
                raise GrammarError(
                    f"The schema requires {int(low):,} repetitions of one item (a minLength, minItems or a pattern's "
                    f"{{n}}); a llama.cpp grammar can require at most {MAX_REPETITIONS:,}."
                )


def schema_gbnf(schema_text: str) -> str:
    """The GBNF of a JSON schema (JSON text), checked against the budget; ``GrammarError`` says why not."""
    try:
        schema = json.loads(schema_text)
    except (ValueError, RecursionError) as exc:
        raise GrammarError("The schema is not JSON.") from exc
    check_schema_counts(schema)
    compact_json_schema_repetitions()
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        text = json_schema_to_gbnf(schema_text)
    except RecursionError as exc:
        raise GrammarError("The schema is nested too deeply to become a grammar.") from exc
    except Exception as exc:  # a stranger's schema through third-party code: any failure is said, not raised
        log.info("A JSON schema could not be converted", exc_info=True)
        reason = one_line(str(exc) or type(exc).__name__, 200)
        raise GrammarError(f"The schema cannot be turned into a grammar: {reason}") from exc
    if not isinstance(text, str):
        raise GrammarError("The schema cannot be turned into a grammar.")
    check_gbnf(text)
    return text


def check_with_llama(vocab: Any, text: str) -> None:
    """Build the grammar once with llama.cpp for this vocabulary and free it: a grammar its parser refuses comes
    back as NULL here, where it is an error, rather than inside llama-cpp-python's sampler chain (a crash)."""
    check_gbnf(text)
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
    if not sampler:
        raise GrammarError(
            "llama.cpp could not build a grammar from the schema (a limit or a construct it does not "
            "support); simplify the schema."
        )
    llama_cpp.llama_sampler_free(sampler)
