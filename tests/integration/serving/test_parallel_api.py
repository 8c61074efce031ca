"""Several local API clients answered at once (issue 63): a model loaded with ``parallel`` sequences decodes every
client's reply together, with the real model, the real worker and the official ``openai`` client."""

from __future__ import annotations

import threading
import time
from typing import Any

import openai
import pytest

from fara_desktop.planning.params import LoadParams
from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import wait_until
from tests.helpers.local_api_server import serve_model

QUESTIONS = [
    "Write a long story about a lighthouse keeper.",
    "Explain how bread is baked, step by step.",
    "Describe the planets of the solar system.",
    "List ten uses of a paperclip and explain each.",
]
TOKENS = 40


@pytest.fixture(scope="module")
def together(smollm2_path):
    server, worker, info = serve_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False, parallel=4))
    yield server, worker, info
    server.stop()
    assert worker.shutdown(timeout=30)


@pytest.fixture(scope="module")
def alone(smollm2_path):
    server, worker, info = serve_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False))
    yield server, worker, info
    server.stop()
    assert worker.shutdown(timeout=30)


def agree(reply: str, alone: str) -> bool:
    """Two greedy replies to one request agree: token for token here, but batching may change a CPU's rounding
    (another kernel for four rows than for one; AVX2 and AVX-512 differ): the same text at least up to where such a
    difference could first show, taken as three quarters of the reply (``test_sequence_batch``: 20 of 24 tokens)."""
    shortest = min(len(reply), len(alone))
    shared = next((k for k, (a, b) in enumerate(zip(reply, alone, strict=False)) if a != b), shortest)
    return bool(alone) and shared >= 0.75 * max(len(reply), len(alone))


def client(server: ApiServer, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.address, api_key=key, max_retries=0)


def ask(server: ApiServer, question: str, tokens: int = TOKENS, key: str = "unused") -> str:
    reply = client(server, key).chat.completions.create(
        model="m", messages=[{"role": "user", "content": question}], temperature=0, max_tokens=tokens
    )
    return reply.choices[0].message.content or ""


def stream(server: ApiServer, question: str, log: dict[str, list[float]], texts: dict[str, str]) -> None:
    """``question`` streamed; when its first piece came and when it ended go to ``log``, its text to ``texts``."""
    chunks = client(server).chat.completions.create(
        model="m", messages=[{"role": "user", "content": question}], temperature=0, max_tokens=TOKENS, stream=True
    )
    pieces: list[str] = []
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            if not pieces:
                log["first"].append(time.monotonic())
            pieces.append(chunk.choices[0].delta.content)
    log["ended"].append(time.monotonic())
    texts[question] = "".join(pieces)


@pytest.mark.real_model
def test_four_streams_all_begin_before_any_ends_and_each_is_its_reply_alone(together, alone):
    server, worker, _info = together
    parallel = worker._backend.parallel
    assert parallel is not None and parallel.sequences == 4
    decodes_before = parallel.batch.decodes
    log: dict[str, list[float]] = {"first": [], "ended": []}
    texts: dict[str, str] = {}
    clients = [threading.Thread(target=stream, args=(server, q, log, texts)) for q in QUESTIONS]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(120)
    assert len(texts) == 4 and all(texts.values())
    assert max(log["first"]) < min(log["ended"]), "a client's first piece came after another's reply had ended"
    # one decode served several clients: far fewer decodes than the tokens written and the prompts read
    assert parallel.batch.decodes - decodes_before < 4 * TOKENS
    for question in QUESTIONS:  # greedy: what the same request gives alone, in the model's own context
        reply_alone = ask(alone[0], question)
        assert agree(texts[question], reply_alone), (texts[question], reply_alone)


@pytest.mark.real_model
def test_a_client_that_leaves_mid_reply_changes_no_other_clients_reply(together):
    server, worker, _info = together
    parallel = worker._backend.parallel
    expected = {q: ask(server, q) for q in QUESTIONS[:2]}
    texts: dict[str, str] = {}
    left = threading.Event()
    beside: list[int] = []

    def leave() -> None:
        chunks = client(server).chat.completions.create(
            model="m", messages=[{"role": "user", "content": QUESTIONS[3]}], temperature=0, max_tokens=400,
            stream=True,
        )  # fmt: skip
        for _chunk in chunks:
            if parallel.running >= 3:  # the others are under way beside it
                beside.append(parallel.running)
                break
        chunks.close()
        left.set()

    def stay(question: str) -> None:
        texts[question] = ask(server, question)

    threads = [threading.Thread(target=leave)] + [threading.Thread(target=stay, args=(q,)) for q in expected]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert left.is_set() and beside, "the client left after the others had ended"
    assert texts.keys() == expected.keys()
    assert all(agree(texts[q], expected[q]) for q in expected), (texts, expected)
    wait_until(lambda: parallel.idle, 30, "the sequence of the client that left to be freed")


@pytest.mark.real_model
def test_a_follow_up_continues_its_own_clients_kept_sequence_never_another_clients(smollm2_path):
    from fara_desktop.engine.types import ModelLoaded
    from fara_desktop.engine.worker import InferenceWorker

    events: list[object] = []
    loaded = threading.Event()

    def sink(event: object) -> None:
        events.append(event)
        if isinstance(event, ModelLoaded):
            loaded.set()

    worker = InferenceWorker(sink).start()
    worker.load_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False, parallel=2))
    assert loaded.wait(60)
    info = events[-1].info  # type: ignore[attr-defined]
    keys = "first-client-key-0001\nsecond-client-key-0002"
    server = ApiServer(LocalApi(worker, lambda: info, lambda: SamplingParams(temperature=0.0), keys))
    server.start()
    try:
        history = [{"role": "user", "content": QUESTIONS[0]}]
        first = client(server, "first-client-key-0001").chat.completions.create(
            model="m", messages=history, temperature=0, max_tokens=24
        )
        history += [{"role": "assistant", "content": first.choices[0].message.content}]
        history += [{"role": "user", "content": "And then?"}]

        def follow_up(key: str) -> tuple[int, int]:
            reply = client(server, key).chat.completions.create(
                model="m", messages=history, temperature=0, max_tokens=8
            )
            usage = reply.usage
            assert usage is not None and usage.prompt_tokens_details is not None
            return usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0

        prompt, cached_by_other = follow_up("second-client-key-0002")
        assert cached_by_other == 0, "another client's kept sequence was continued"
        prompt, cached = follow_up("first-client-key-0001")
        assert cached >= first.usage.prompt_tokens, (prompt, cached)  # only the new turn was read
    finally:
        server.stop()
        assert worker.shutdown(timeout=30)


@pytest.mark.real_model
def test_a_greedy_reply_proposes_its_next_tokens_from_its_own_text_and_usage_says_how_many_were_accepted(
    smollm2_path,
):
    """Issue 65 in the parallel replies: a greedy sequence proposes tokens from its prompt and reply (n-grams) and
    checks them in the same decode; the reply is the one plain decoding gives, and ``usage`` counts the proposals
    as OpenAI counts a prediction's tokens (accepted and rejected); so does one answered one at a time, in the
    model's own context. Servers of their own: until a decode's cost is measured here a reply probes with two
    proposals; once it is, whether they pay is this machine's to say (SmolLM2 is bound by computing here: they
    often do not), which a test cannot count on."""
    servers = [serve_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False, parallel=n)) for n in (2, 1)]
    try:
        reply, plain = _copy_twice(servers[0][0], servers[1][0])
    finally:
        for server, worker, _info in servers:
            server.stop()
            assert worker.shutdown(timeout=30)
    # one at a time, the reply is written in the model's own context (the window's path), which proposes too
    for answer in (reply, plain):
        details = answer.usage.completion_tokens_details
        accepted, rejected = details.accepted_prediction_tokens, details.rejected_prediction_tokens
        assert accepted + rejected > 0, "no token was proposed from a reply that repeats its prompt"
        assert accepted <= answer.usage.completion_tokens
    assert agree(reply.choices[0].message.content or "", plain.choices[0].message.content or "")


def _copy_twice(server: ApiServer, one_at_a_time: ApiServer) -> tuple[Any, Any]:
    passage = "The lighthouse stood on the rock for a hundred years, and its keeper lit the lamp every night."
    question = [{"role": "user", "content": f"Repeat this sentence exactly, twice: {passage}"}]
    reply = client(server).chat.completions.create(model="m", messages=question, temperature=0, max_tokens=60)
    plain = client(one_at_a_time).chat.completions.create(model="m", messages=question, temperature=0, max_tokens=60)
    return reply, plain


def alone_then_beside_three_clients(
    worker: Any, replies: Any, window: list[ChatMessage], greedy: SamplingParams, fresh: bool = False
) -> tuple[int, int, int, int]:
    """The window's request alone, then again while three clients stream (their requests cancelled after it):
    the two requests, and the sequences' decodes before and after the second. ``fresh``: each read whole."""
    parallel = worker._backend.parallel
    if fresh:
        worker._backend.local.forget_context()
    alone = worker.generate(window, greedy)
    replies.wait(lambda: alone in replies.ended)
    if fresh:
        worker._backend.local.forget_context()
    streaming = SamplingParams(temperature=0.0, max_tokens=100_000, ignore_eos=True)
    clients = [worker.generate([ChatMessage("user", q)], streaming, on_event=replies) for q in QUESTIONS[:3]]
    replies.wait(lambda: all(c in replies.first for c in clients))
    before = parallel.batch.decodes
    beside = worker.generate(window, greedy)
    replies.wait(lambda: beside in replies.ended)
    after = parallel.batch.decodes
    for client in clients:
        worker.cancel_request(client)
    replies.wait(lambda: all(c in replies.ended for c in clients))
    return alone, beside, before, after


@pytest.mark.real_model
def test_the_windows_reply_is_written_while_the_clients_sequences_go_on_between_its_tokens(together):
    """Issue 63: the window's chat is answered in the model's own context while three clients decode together; the
    clients' sequences are stepped between the window's tokens (they do not wait for its whole reply), and the
    window's reply is the one it gets alone."""
    from fara_desktop.bench.window_beside_clients import _Replies
    from fara_desktop.engine.types import Finished

    _server, worker, _info = together
    replies = _Replies()
    texts: dict[int, str] = {}

    def window_sink(event: object) -> None:  # the window's events: the worker's own sink
        if isinstance(event, Finished):
            texts[event.request_id] = event.text
        replies(event)  # type: ignore[arg-type]

    window = [ChatMessage("user", "What is the capital of France?")]
    greedy = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
    default, worker._emit_default = worker._emit_default, window_sink
    try:
        alone, beside, before, after = alone_then_beside_three_clients(worker, replies, window, greedy)
    finally:
        worker._emit_default = default
    stepped = after - before
    assert stepped >= 8, f"the clients' sequences were stepped {stepped} times during a 16-token reply"
    assert texts[beside] == texts[alone]  # both in the model's own context: the same kernels


@pytest.mark.real_model
def test_a_long_window_prompt_holds_the_clients_tokens_one_chunk_at_most(together):
    """Issue 63: "a long prompt never holds the others' tokens for more than one chunk". The window's prompt of
    about 1,500 tokens is read in the model's own context a batch (512) at a time, the clients' sequences stepped
    after each batch: they decode before the window's first token (once, between commands, without it), and its
    reply is the one it gets alone."""
    from fara_desktop.bench.window_beside_clients import _Replies
    from fara_desktop.engine.types import Finished, TokenText

    _server, worker, _info = together
    parallel = worker._backend.parallel
    replies = _Replies()
    texts: dict[int, str] = {}
    at_first_token: dict[int, int] = {}

    def window_sink(event: object) -> None:  # on the inference thread: the decodes counted as the token comes
        if isinstance(event, TokenText):
            at_first_token.setdefault(event.request_id, parallel.batch.decodes)
        if isinstance(event, Finished):
            texts[event.request_id] = event.text
        replies(event)  # type: ignore[arg-type]

    long = " ".join(f"Note {n}: the lighthouse keeper wrote the weather, the ships and the tide." for n in range(90))
    window = [ChatMessage("user", f"{long}\nWhat did the keeper write?")]
    greedy = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    default, worker._emit_default = worker._emit_default, window_sink
    try:
        alone, beside, before, _after = alone_then_beside_three_clients(worker, replies, window, greedy, fresh=True)
    finally:
        worker._emit_default = default
    stepped = at_first_token[beside] - before
    assert stepped >= 3, f"the clients decoded {stepped} times while the window read its prompt"
    # its last batch is split off its last token here: a CPU may round that batch otherwise (``agree``)
    assert agree(texts[beside], texts[alone]), (texts[beside], texts[alone])
