"""Several sequences in one llama.cpp context (issue 63's engine step), with the real library and SmolLM2: each
sequence's greedy reply is what it gives alone, a cancel leaves the others' tokens untouched, one decode serves a
token of every sequence, and a long prompt holds the others for one chunk at most."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fara_desktop.engine.errors import PromptTooLongError
from fara_desktop.engine.sequence_batch import SequenceBatch, SequencesFullError
from fara_desktop.vocabulary.sampling import SamplingParams

pytestmark = pytest.mark.real_model

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=24, ignore_eos=True)
QUESTIONS = (
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers.",
    "Why is the sky blue?",
)


@pytest.fixture(scope="module")
def llm(smollm2_path: Path):
    from llama_cpp import Llama

    model = Llama(str(smollm2_path), n_ctx=512, n_threads=2, verbose=False)
    yield model
    model.close()


def prompt_of(llm, question: str) -> list[int]:
    text = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    return llm.tokenize(text.encode(), add_bos=False, special=True)


def replies(llm, questions, sequences: int, n_batch: int = 512, cancel_after: dict[int, int] | None = None):
    """Each question's tokens, all added at once to a batch of ``sequences``; ``cancel_after``: question index →
    tokens after which its client leaves."""
    return replies_to_prompts(llm, [prompt_of(llm, q) for q in questions], sequences, n_batch, cancel_after)


def replies_to_prompts(llm, prompts, sequences: int = 1, n_batch: int = 512, cancel_after=None):
    batch = SequenceBatch(llm.model, 512, sequences, 2, n_batch)
    got: dict[int, list[int]] = {}
    try:
        ids = {}
        for i, prompt in enumerate(prompts):
            got[i] = []
            leave = (cancel_after or {}).get(i)
            ids[i] = batch.add(
                prompt,
                GREEDY,
                got[i].append,
                (lambda got_i=got[i], leave=leave: leave is not None and len(got_i) >= leave),
            )
        ends = batch.run()
        return got, {e.seq_id: e for e in ends}, ids, batch.decodes
    finally:
        batch.close()


def test_each_sequences_greedy_reply_is_what_it_gives_alone(llm):
    alone = {i: replies(llm, [q], 1)[0][0] for i, q in enumerate(QUESTIONS)}
    together, ends, _, _ = replies(llm, QUESTIONS, 4)
    assert all(len(t) == 24 for t in together.values())
    assert {e.ended for e in ends.values()} == {"length"}
    # Batching may change the CPU's rounding (another kernel for four rows than for one): the replies must agree
    # token for token at least up to the first difference a rounding could make, measured here as ≥ 20 of 24.
    for i in range(len(QUESTIONS)):
        shared = next((k for k, (a, b) in enumerate(zip(alone[i], together[i], strict=True)) if a != b), 24)
        assert shared >= 20, (i, alone[i], together[i])
    text = llm.detokenize(together[0]).decode(errors="ignore")
    assert "Paris" in text


def test_one_decode_serves_a_token_of_every_sequence(llm):
    _, _, _, one = replies(llm, QUESTIONS[:1], 1)
    _, _, _, four = replies(llm, QUESTIONS, 4)
    # One sequence: its prompt in one decode, then one decode a token (the 24th token is sampled, not decoded).
    assert one == 1 + 23
    # Four: the prompts one chunk each (the first steps also decode the tokens of the sequences already reading),
    # then one decode for the four sequences' next tokens: far from four times as many.
    assert four <= 4 + 23


def test_a_client_leaving_mid_reply_leaves_the_others_tokens_untouched(llm):
    whole, _, _, _ = replies(llm, QUESTIONS, 4)
    cut, ends, ids, _ = replies(llm, QUESTIONS, 4, cancel_after={1: 5})
    assert ends[ids[1]].ended == "cancelled" and len(cut[1]) == 5
    assert cut[1] == whole[1][:5]
    for i in (0, 2, 3):
        assert cut[i] == whole[i]


def test_a_long_prompt_holds_the_generating_sequences_for_one_chunk_at_most(llm):
    batch = SequenceBatch(llm.model, 512, 2, 2, n_batch=32)
    try:
        first: list[int] = []
        batch.add(prompt_of(llm, QUESTIONS[0]), GREEDY, first.append)
        while not first:
            batch.step()
        long_prompt = prompt_of(llm, "Summarise this: " + "the quick brown fox jumps over the lazy dog " * 30)
        assert len(long_prompt) > 5 * 32
        second: list[int] = []
        batch.add(long_prompt, GREEDY, second.append)
        steps = 0
        while not second:
            before = len(first)
            batch.step()
            steps += 1
            assert len(first) == before + 1  # every step gave the first sequence its next token
        assert steps == -(-len(long_prompt) // 31)  # the prompt read in chunks of what the batch had room for
    finally:
        batch.close()


def test_a_full_batch_refuses_until_a_sequence_ends_and_a_prompt_too_long_is_refused(llm):
    batch = SequenceBatch(llm.model, 64, 2, 2)
    try:
        tokens: list[int] = []
        batch.add(prompt_of(llm, "Hi"), GREEDY, tokens.append)
        second = batch.add(prompt_of(llm, "Hello"), GREEDY, tokens.append)
        with pytest.raises(SequencesFullError):
            batch.add(prompt_of(llm, "Hey"), GREEDY, tokens.append)
        batch.step()
        assert batch.cancel(second) is not None and batch.free == 1
        assert batch.add(prompt_of(llm, "Hey"), GREEDY, tokens.append) == second  # its cells were freed
        with pytest.raises(PromptTooLongError):
            batch.add(list(range(1, 65)), GREEDY, tokens.append)
    finally:
        batch.close()


def test_a_follow_up_restored_into_another_sequence_reads_only_its_new_tokens(llm):
    """A conversation's state kept when its reply ends goes into whichever sequence is free for its next turn
    (``llama_state_seq_*``): only the reply's last token and the new question are read, and the greedy reply is
    what a fresh read of the whole conversation gives (to the rounding bound of the first test)."""
    batch = SequenceBatch(llm.model, 512, 2, 2)
    try:
        first: list[int] = []
        batch.add(prompt_of(llm, "Hi"), GREEDY, first.append, keep=True)
        blocker: list[int] = []
        batch.add(prompt_of(llm, QUESTIONS[1]), GREEDY, blocker.append)
        (end,) = [e for e in batch.run() if e.seq_id == 0]
        assert end.state is not None and len(end.state.tokens) == len(prompt_of(llm, "Hi")) + 23
        follow_up = [*prompt_of(llm, "Hi"), *first, *llm.tokenize(b"<|im_end|>\n", add_bos=False, special=True)]
        follow_up += prompt_of(llm, "And in French?")
        restored: list[int] = []
        batch.add(prompt_of(llm, QUESTIONS[2]), GREEDY, blocker.append)  # another chat takes sequence 0 …
        seq = batch.add(follow_up, GREEDY, restored.append, restore=end.state)
        assert seq == 1  # … so the state moves to sequence 1
        (again,) = [e for e in batch.run() if e.seq_id == seq]
        assert again.reused == len(end.state.tokens)
        fresh, _, _, _ = replies_to_prompts(llm, [follow_up])
        shared = next((k for k, (a, b) in enumerate(zip(fresh[0], restored, strict=True)) if a != b), 24)
        assert shared >= 20, (fresh[0], restored)
    finally:
        batch.close()


def test_a_state_the_prompt_leaves_is_cut_back_to_what_they_share(llm):
    """An edited question: the state holds the old one; the sequence keeps the shared start and reads the rest."""
    batch = SequenceBatch(llm.model, 512, 1, 2)
    try:
        batch.add(prompt_of(llm, "Tell me about the moon."), GREEDY, lambda _t: None, keep=True)
        (end,) = batch.run()
        assert end.state is not None
        edited = prompt_of(llm, "Tell me about the sun.")
        shared = next(k for k, (a, b) in enumerate(zip(end.state.tokens, edited, strict=False)) if a != b)
        got: list[int] = []
        batch.add(edited, GREEDY, got.append, restore=end.state)
        (again,) = batch.run()
        assert again.reused == shared
        fresh, _, _, _ = replies_to_prompts(llm, [edited])
        assert got[:20] == fresh[0][:20]
    finally:
        batch.close()


def test_each_sequence_keeps_its_own_stop_strings_and_grammar(llm):
    """One sequence held to a JSON schema, one ending at its own stop string, one free: each as it would be alone
    (the free one's tokens unchanged beside the other two)."""
    import llama_cpp

    from fara_desktop.engine.reply_writing import ReplyWriting

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    schema = '{"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}'
    as_json = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=40, json_schema=schema)
    free, _, _, _ = replies(llm, QUESTIONS[3:], 1)
    writers = {
        name: ReplyWriting(vocab, sampling, stop, lambda _t: None, False, False, None)
        for name, sampling, stop in (("json", as_json, ()), ("stop", GREEDY, ("Paris",)), ("free", GREEDY, ()))
    }
    batch = SequenceBatch(llm.model, 256, 3, 2)
    try:
        ids = {
            name: batch.add(prompt_of(llm, question), sampling, lambda t, w=writers[name]: w.take(t, 1000))
            for name, question, sampling in (
                ("json", "Name a city as JSON.", as_json),
                ("stop", QUESTIONS[0], GREEDY),
                ("free", QUESTIONS[3], GREEDY),
            )
        }
        ends = {e.seq_id: e for e in batch.run()}
    finally:
        batch.close()
    assert ends[ids["json"]].ended == "stop"  # the grammar's object closed, then only the end of the turn was allowed
    assert isinstance(json.loads(writers["json"].text)["city"], str)
    assert ends[ids["stop"]].ended == "stop" and "Paris" not in writers["stop"].text
    assert list(ends[ids["free"]].tokens) == free[0]


def test_the_windows_prompt_is_read_before_the_prompts_that_came_first(llm):
    batch = SequenceBatch(llm.model, 512, 3, 2, n_batch=32)
    try:
        long_prompt = prompt_of(llm, "Summarise this: " + "the quick brown fox jumps over the lazy dog " * 20)
        api: list[int] = []
        batch.add(long_prompt, GREEDY, api.append)
        batch.step()  # the API client's prompt is being read
        window: list[int] = []
        batch.add(prompt_of(llm, "Hi"), GREEDY, window.append, first=True)
        batch.step()
        assert len(window) == 1 and not api  # the window's short prompt was read in the next step, whole
    finally:
        batch.close()


COPY = (
    "Repeat this text exactly: The harbour lights came on one by one as the fishing boats returned, and the old "
    "keeper climbed the stairs of the lighthouse to wind the clock that had told the town the hour for a century."
)


def test_proposals_from_the_sequences_own_text_give_the_same_reply_in_fewer_decodes(llm):
    """Issue 65's first method on the engine's sequences: a greedy reply that copies its prompt, with and without
    proposals from its own text — token for token the same, the proposals accepted, fewer decodes; beside another
    sequence that writes it proposes none, and that sequence is unchanged."""
    sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=48, ignore_eos=True)
    runs = {}
    for speculate in (False, True):
        for beside in (False, True):
            batch = SequenceBatch(llm.model, 512, 2, 2)
            try:
                copied: list[int] = []
                other: list[int] = []
                batch.add(prompt_of(llm, COPY), sampling, copied.append, speculate=speculate)
                if beside:
                    batch.add(prompt_of(llm, QUESTIONS[0]), sampling, other.append)
                batch.run()
                runs[speculate, beside] = (copied, other, batch.decodes, batch.proposed, batch.accepted)
            finally:
                batch.close()
    for beside in (False, True):
        plain, fast = runs[False, beside], runs[True, beside]
        assert fast[0] == plain[0] and fast[1] == plain[1]
        assert plain[3] == 0
    assert runs[True, False][4] > 0  # alone, its proposals are accepted
    # beside another sequence that writes, it proposes none: that sequence's tokens fill the decode, and they are
    # certain (proposals beside three clients cost 9 % of the writing through serve on the 1.7B shape)
    assert runs[True, True][3] == 0
    alone_plain, alone_fast = runs[False, False], runs[True, False]
    # each accepted proposal is a token the model wrote without a decode of its own
    assert alone_fast[2] <= alone_plain[2] - alone_fast[4] // 2, (alone_plain[2], alone_fast[2:])


def test_the_next_free_sequence_goes_to_the_window_then_to_the_clients_in_their_order(llm):
    """Two sequences, both taken by clients; a third client, then the window's chat, then a client that leaves
    while it waits: the first sequence to free goes to the window, the next to the third client, and the one that
    left never takes one. Every request ends."""
    from fara_desktop.engine.sequence_scheduler import SequenceRequest, SequenceScheduler

    short = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=6, ignore_eos=True)
    batch = SequenceBatch(llm.model, 256, 2, 2)
    scheduler = SequenceScheduler(batch)
    order: list[str] = []
    try:
        left = [False]

        def request(name: str, window: bool = False) -> SequenceRequest:
            def first_token(_token: int, name: str = name) -> None:
                if name not in order:
                    order.append(name)

            return SequenceRequest(prompt_of(llm, f"Say {name}."), short, first_token, window=window)

        tickets = {name: scheduler.submit(request(name)) for name in ("client 1", "client 2")}
        ends: dict[int, object] = dict(scheduler.step())  # both take a sequence
        assert scheduler.waiting == 0 and batch.active == 2
        tickets["client 3"] = scheduler.submit(request("client 3"))
        tickets["window"] = scheduler.submit(request("window", window=True))
        leaving = request("client 4")
        leaving.should_cancel = lambda: left[0]
        tickets["client 4"] = scheduler.submit(leaving)
        steps = 0
        while not scheduler.idle:
            if steps == 1:
                left[0] = True  # client 4 leaves while it waits
            assert batch.active <= 2
            ends.update(dict(scheduler.step()))
            steps += 1
        assert set(ends) == set(tickets.values())
        assert order[:2] == ["client 1", "client 2"] or order[:2] == ["client 2", "client 1"]
        assert order[2:] == ["window", "client 3"]
        assert ends[tickets["client 4"]].ended == "cancelled" and ends[tickets["client 4"]].tokens == ()
    finally:
        batch.close()
