"""The budget a JSON schema's grammar is held to before llama.cpp sees it (engine/json_grammar.py), and the one
built by llama.cpp itself for a real vocabulary."""

from __future__ import annotations

import json

import pytest

from fara_desktop.engine.errors import GrammarError
from fara_desktop.engine.json_grammar import MAX_NESTING, check_gbnf, check_with_llama, schema_gbnf


def _gbnf(schema: object) -> str:
    return schema_gbnf(json.dumps(schema))


def test_an_everyday_limit_is_written_as_a_count_not_spelled_out():
    text = _gbnf({"type": "object", "properties": {"body": {"type": "string", "maxLength": 4096}}})
    assert "{0,4096}" in text and len(text) < 2000  # was 32,898 characters of nested groups, which llama.cpp refused


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "string", "minLength": 100_000_000}, "'minLength': 100,000,000"),
        ({"type": "array", "minItems": 2001}, "'minItems'"),
        ({"type": "object", "minProperties": 5000}, "'minProperties'"),
        ({"type": "string", "maxLength": "many"}, "'maxLength' must be a whole number"),
        ({"type": "string", "maxLength": -1}, "'maxLength' must be a whole number"),
        ({"type": "string", "maxLength": True}, "'maxLength' must be a whole number"),
        ({"type": "string", "pattern": "^a{1000000}$"}, "1,000,000 repetitions"),
        ({"type": "string", "pattern": "^a{99999999999999999999}$"}, "beyond any grammar's budget"),
        ({"type": "string", "pattern": "^a{$"}, "cannot be turned into a grammar"),
        ({"type": "string", "pattern": "^" + "(" * 300 + "a" + ")" * 300 + "$"}, "nests more than"),
    ],
)
def test_a_schema_over_the_budget_is_refused_with_its_reason(schema, words):
    with pytest.raises(GrammarError) as caught:
        _gbnf(schema)
    assert words in str(caught.value)


def test_the_text_budget_counts_nesting_outside_literals_and_classes():
    check_gbnf('root ::= "((((((" [(((((] x')  # parentheses in a literal or a class are text
    with pytest.raises(GrammarError, match="nests"):
        check_gbnf("root ::= " + "(" * (MAX_NESTING + 1) + '"a"' + ")" * (MAX_NESTING + 1))


def test_a_schema_that_is_not_json_is_a_grammar_error():
    with pytest.raises(GrammarError, match="not JSON"):
        schema_gbnf("{")


@pytest.mark.real_model
def test_llama_cpp_builds_what_passes_and_its_refusal_is_an_error_not_a_crash(smollm2_path):
    import llama_cpp

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(smollm2_path).encode(), params)
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        check_with_llama(vocab, _gbnf({"type": "string", "maxLength": 4096}))
        # each item's rules repeated 2,000 times inside a 2,000-fold repetition: llama.cpp's parser says no (NULL)
        inner = {"type": "array", "maxItems": 2000, "items": {"type": "string", "maxLength": 2000}}
        nested = {"type": "array", "maxItems": 2000, "items": inner}
        with pytest.raises(GrammarError, match=r"llama\.cpp could not build"):
            check_with_llama(vocab, _gbnf(nested))
    finally:
        llama_cpp.llama_model_free(model)
