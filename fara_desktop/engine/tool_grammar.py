"""A llama.cpp grammar that makes a reply a call of one of the given tools, its arguments following the tool's
JSON schema.

The prompt already ends where the forced calls part (``ForcedCall``): the grammar lets the reply go on only with
one call's opening (the tool's name, in the family's own syntax) and then a JSON object its schema allows. Each
schema is turned into rules by llama-cpp-python's own converter; each tool's rules get their own prefix so that
several schemas live in one grammar.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from fara_desktop.engine.chat_format import ForcedCall
from fara_desktop.engine.errors import GrammarError
from fara_desktop.engine.json_grammar import check_gbnf, schema_gbnf

_GBNF_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[A-Za-z][A-Za-z0-9-]*|\s+|.', re.S)


def _namespaced(gbnf: str, prefix: str) -> str:
    """Every rule name of ``gbnf`` with ``prefix`` (literals and character classes untouched)."""
    return "".join(prefix + token if token[0].isalpha() else token for token in _GBNF_TOKEN.findall(gbnf))


def gbnf_literal(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped.replace("\t", "\\t") + '"'


def forced_call_grammar(calls: Sequence[ForcedCall], schemas: Mapping[str, str]) -> str:
    """GBNF for "one of ``calls``, with arguments its schema (``schemas[name]``, JSON text) allows"."""
    rules: list[str] = []
    choices: list[str] = []
    for number, call in enumerate(calls):
        prefix = f"t{number}-"
        try:
            rules.append(_namespaced(schema_gbnf(schemas.get(call.name) or '{"type": "object"}'), prefix))
        except GrammarError as exc:
            raise GrammarError(f"The tool {call.name}'s parameters cannot be turned into a grammar: {exc}") from exc
        opening = f"{gbnf_literal(call.opening)} " if call.opening else ""
        choices.append(f"{opening}{prefix}root")
    text = "root ::= " + " | ".join(f"( {c} )" for c in choices) + "\n" + "\n".join(rules)
    check_gbnf(text)
    return text
