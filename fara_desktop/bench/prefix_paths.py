"""Every path that keeps part of a chat's context, checked against a fresh read (issue 41): a Regenerate, an Edit
in the middle, a Branch, a switch back to a chat kept in RAM, a read-ahead thrown away by a key, a local API
client's request between turns and its follow-up (another client's same words read whole), and a restart that
restores the chat from disk. The engine under test keeps its states in RAM and on disk as the app does; a second
engine reads every prompt from nothing. A recurrent model's state cannot be cut back to a prefix, so each path must
continue from a state saved exactly where its prompt leaves the old one, or read from the start — and its greedy
continuation must be the fresh read's."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fara_desktop.engine.backend import PreparedPrompt, PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.parallel_replies import ParallelReplies
from fara_desktop.engine.types import ApiClient
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

CONTINUATION_TOKENS = 10
GREEDY = SamplingParams(temperature=0.0, max_tokens=CONTINUATION_TOKENS, ignore_eos=True, repeat_penalty=1.0)
SHARED_START = "the cat sat on the mat. " * 30  # a long shared start, short turns after it
# The stop check is asked before the read-ahead, before its first batch, then by llama.cpp's abort callback many
# times inside each batch's graph: a stop at this call lands in the middle of the first batch.
STOP_AFTER_CALLS = 6


def stop_after(calls: int) -> Callable[[], bool]:
    """A stop check that says stop from its ``calls``-th question on (a key typed while llama.cpp reads)."""
    asked = [0]

    def should_stop() -> bool:
        asked[0] += 1
        return asked[0] >= calls

    return should_stop


@dataclass(frozen=True)
class PathResult:
    """One path: whether it continued as a fresh read, and how much of its prompt llama.cpp really decoded."""

    path: str
    same: bool
    read: int  # prompt tokens given to llama.cpp to decode (counted at ``Llama.eval``)
    prompt_tokens: int
    reported: int  # what the reply's figures say it read
    expect_reuse: bool  # the path should continue a saved state (read well under half of its prompt); else read
    # it whole (a first reply; a principal that may not reuse what another left)


class PrefixPaths:
    """The engine under test (states in RAM and on disk) beside a reference that reads every prompt anew."""

    def __init__(self, model: Path, params: LoadParams, store: KVDiskStore) -> None:
        self.model, self.params, self.store = model, params, store
        self.decoded = 0
        self.read = 0
        self.in_sequences = 0  # replies written as a sequence of the batch (a model loaded for several at once)
        self.tested = self._loaded()
        self.reference = LlamaBackend()
        self.reference.load(model, params)

    def _loaded(self) -> LlamaBackend:
        backend = LlamaBackend(state_store=self.store)
        backend.load(self.model, self.params)
        llm: Any = backend._llm
        original: Callable[[Any], None] = llm.eval

        def counted(tokens: Any) -> None:
            self.decoded += len(tokens)
            original(tokens)

        llm.eval = counted  # Llama.generate and the read-ahead both decode through it
        return backend

    def say(self, messages: list[ChatMessage], conversation: object) -> ReplyResult:
        prompt = self.tested.prepare(PromptRequest(messages, 64))
        request = ReplyRequest(GREEDY, lambda: False, lambda *_: None, conversation)
        parallel = self.tested.parallel
        if isinstance(conversation, ApiClient) and parallel is not None and parallel.takes(prompt, GREEDY):
            return self._say_in_a_sequence(parallel, prompt, request)
        before = self.decoded
        result = self.tested.reply(prompt, request)
        # of the prompt, really (a reply checking proposals writes its tokens with decodes of its own, not ``eval``)
        written_by_eval = 0 if self.tested.speculated else max(0, result.stats.completion_tokens - 1)
        self.read = self.decoded - before - written_by_eval
        return result

    def _say_in_a_sequence(
        self, parallel: ParallelReplies, prompt: PreparedPrompt, request: ReplyRequest
    ) -> ReplyResult:
        """An API client's request as the worker gives it to a model loaded for several at once: a sequence of the
        batch, beside another that writes all along (the context holds two)."""
        done: list[ReplyResult | FaraError] = []
        beside = self.tested.prepare(PromptRequest([ChatMessage("user", "the dog and the cat")], 64))
        long = replace(GREEDY, max_tokens=10_000)
        parallel.submit(beside, ReplyRequest(long, lambda: bool(done), lambda *_: None, None), lambda _r: None)
        before = parallel.batch.prompt_tokens_read
        parallel.submit(prompt, request, done.append)
        while not parallel.idle:
            parallel.step()
        (result,) = done
        assert isinstance(result, ReplyResult), result
        self.in_sequences += 1
        self.read = parallel.batch.prompt_tokens_read - before - len(beside.detail.tokens)
        return result

    def fresh(self, messages: list[ChatMessage]) -> str:
        self.reference.forget_context(snapshots=True)
        prompt = self.reference.prepare(PromptRequest(messages, 64))
        return self.reference.reply(prompt, ReplyRequest(GREEDY, lambda: False, lambda *_: None, None)).text

    def check(self, path: str, messages: list[ChatMessage], conversation: object, reuse: bool = True) -> PathResult:
        result = self.say(messages, conversation)
        same = result.text == self.fresh(messages)
        stats = result.stats
        self.last = result
        return PathResult(path, same, self.read, stats.prompt_tokens, stats.prompt_tokens_evaluated, reuse)

    def restart(self) -> None:
        self.tested.save_to_disk(wait=True)
        self.tested.unload()
        self.tested = self._loaded()

    def close(self) -> None:
        self.tested.unload()
        self.reference.unload()

    def walk(self) -> Iterator[PathResult]:
        """The paths, in the order a user might take them in one session."""
        system = ChatMessage("system", SHARED_START)
        first = [system, ChatMessage("user", "hello world")]
        yield self.check("first reply", first, 1, reuse=False)
        one = self.last.text
        yield self.check("regenerate", first, 1)
        said = [*first, ChatMessage("assistant", one)]
        yield self.check("follow-up", [*said, ChatMessage("user", "the dog")], 1)
        edited = [*said, ChatMessage("user", "a cat on a mat")]
        yield self.check("edit in the middle", edited, 1)
        yield self.check("branch", [*said, ChatMessage("user", "hello dog")], 2)
        later = [*edited, ChatMessage("assistant", "the cat"), ChatMessage("user", "dog")]
        yield self.check("back to the first chat (RAM)", later, 1)
        back = self.last.text
        asked_by_api = [system, ChatMessage("user", "a dog sat")]
        yield self.check("a local API request", asked_by_api, ApiClient("key-a"), reuse=False)
        followed_up = [*asked_by_api, ChatMessage("assistant", self.last.text), ChatMessage("user", "the cat")]
        yield self.check("the API client's follow-up", followed_up, ApiClient("key-a"))
        yield self.check("another API client, the same words", followed_up, ApiClient("key-b"), reuse=False)
        history = [*later, ChatMessage("assistant", back)]
        typed = self.tested.prepare(PromptRequest([*history, ChatMessage("user", "the mat the mat the")], 64))
        self.tested.read_ahead(typed, 1, lambda: False, lambda _total, _done: None)
        sent = [*history, ChatMessage("user", "the world")]  # the user went on typing: the read-ahead's end goes
        yield self.check("read-ahead thrown away", sent, 1)
        asked = [*sent, ChatMessage("assistant", self.last.text), ChatMessage("user", "the mat, the dog, the cat")]
        stop = stop_after(STOP_AFTER_CALLS)  # Esc, or the text changed: llama.cpp aborts the batch it reads
        self.tested.read_ahead(self.tested.prepare(PromptRequest(asked, 64)), 1, stop, lambda _t, _d: None, stop)
        yield self.check("read-ahead stopped inside a batch", asked, 1)  # llama.cpp's abort callback said stop
        self.restart()
        later_still = [*asked, ChatMessage("assistant", "a dog"), ChatMessage("user", "hi")]
        yield self.check("restored from disk", later_still, 1)

    def thinking_follow_up(self) -> tuple[PathResult, int] | None:
        """A follow-up to a reply whose reasoning the template drops from the next prompt (Qwen3.5's, most
        reasoning templates'): the path, and the tokens past the point where the prompts part — the last answer
        without its reasoning and the new words. None when this model's template opens no reasoning."""
        asked = [ChatMessage("system", SHARED_START), ChatMessage("user", "the cat and the dog")]
        first = self.tested.prepare(PromptRequest(asked, 64))
        if first.reasoning.opened is None:
            return None
        self.check("a thinking reply", asked, 3, reuse=False)
        follow = [*asked, ChatMessage("assistant", "the cat", reasoning=self.last.text), ChatMessage("user", "the mat")]
        tokens = self.tested.prepare(PromptRequest(follow, 64)).detail.tokens
        shared = next(
            (i for i, (a, b) in enumerate(zip(first.detail.tokens, tokens, strict=False)) if a != b),
            len(first.detail.tokens),
        )
        return self.check("its follow-up (reasoning dropped)", follow, 3), len(tokens) - shared


def split_stable(backend: LlamaBackend, messages: list[ChatMessage]) -> bool:
    """Whether this model's greedy continuation survives reading the same prompt in three batches instead of one,
    with no state saved or restored: Q4_K's kernels differ by batch size, and a random-weight model's near-ties
    then flip (6 of 6 prompts for LFM2-1.2B's shape here, 2 of 6 for SmolLM2-1.7B's; none at Q8_0). Where it does
    not, a path's different continuation says nothing about the path."""
    llm: Any = backend._llm
    tokens: list[int] = backend.prepare(PromptRequest(messages, 64)).detail.tokens
    continuations = []
    for splits in ([len(tokens) - 1], [len(tokens) - 27, len(tokens) - 17, len(tokens) - 1]):
        llm.reset()
        start = 0
        for end in splits:
            llm.eval(tokens[start:end])
            start = end
        generated = []
        for token in llm.generate(tokens[start:], temp=0.0, reset=False):
            generated.append(token)
            if len(generated) >= CONTINUATION_TOKENS:
                break
        continuations.append(generated)
    llm.reset()
    return continuations[0] == continuations[1]


def prefix_paths(model: Path, params: LoadParams) -> dict[str, Any]:
    """Every path on ``model``: the bench's figures."""
    with tempfile.TemporaryDirectory(prefix="fara-prefix-") as folder:
        paths = PrefixPaths(model, params, KVDiskStore(Path(folder), budget_bytes=1 << 40))
        try:
            results = list(paths.walk())
            thinking = paths.thinking_follow_up()
            stable = split_stable(paths.reference, [ChatMessage("system", SHARED_START), ChatMessage("user", "hi")])
        finally:
            paths.close()
    return {
        "prefix_paths_batch_split_stable": stable,
        "prefix_paths_same_tokens": all(r.same for r in results),
        "prefix_paths_figures_true": all(r.read == r.reported for r in results),
        "prefix_paths_reused": all(r.read < r.prompt_tokens / 2 for r in results if r.expect_reuse),
        "prefix_paths": {r.path: {"same": r.same, "read": r.read, "prompt": r.prompt_tokens} for r in results},
        # goal ≤ 1.2: the follow-up reads the last answer and the new words, not the chat (None: no reasoning)
        "thinking_followup_read_over_new": round(thinking[0].read / thinking[1], 3) if thinking else None,
        "thinking_followup_same_tokens": thinking[0].same if thinking else None,
    }
