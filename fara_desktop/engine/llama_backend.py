"""llama.cpp's side of the ``Backend`` protocol: load a GGUF, turn a conversation into a streamed reply.

The engine's other llama.cpp modules serve this one (its KV states, load progress, control tokens, the
embedder); the machine probe and the benchmark's measuring code are the only others that import llama_cpp, as the
forbid-by-default contract in pyproject.toml lists. Runs on the inference thread only; ``llama_cpp`` is imported
lazily so the rest of the core loads without it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fara_desktop.engine.backend import PreparedPrompt, PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.chat_format import ChatFormatter, RenderedPrompt
from fara_desktop.engine.context_states import ContextStates
from fara_desktop.engine.control_tokens import ControlTokenText
from fara_desktop.engine.draft_model import DraftBeside, draft_beside
from fara_desktop.engine.errors import (
    GenerationError,
    ModelFileNotFoundError,
    ModelLoadError,
    NoModelLoadedError,
    PromptTooLongError,
    tools_unsupported,
)
from fara_desktop.engine.ggml_types import GGML_TYPE_IDS
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.kv_states import KVStateCache
from fara_desktop.engine.llama_loading import fits_beside, open_model, state_identity
from fara_desktop.engine.llama_prompt import LlamaPrompt, checkpoint_at, llama_prompt, prompt_reporter, reasoning_tail
from fara_desktop.engine.llama_state import sliding_window, start_prefault
from fara_desktop.engine.llama_tokens import call_grammar, json_grammar, spelling, token_logprob
from fara_desktop.engine.mtp_head import MtpHead, mtp_beside
from fara_desktop.engine.own_tokens import longest_respelled_as_read
from fara_desktop.engine.parallel_replies import ParallelReplies
from fara_desktop.engine.projector_trial import trial_for
from fara_desktop.engine.reply_writing import Finish, ReplyWriting
from fara_desktop.engine.thread_calibration import measure_threads
from fara_desktop.engine.types import ModelInfo, ModelSource, RemoteModel
from fara_desktop.engine.vision import EncodingStopped, VisionModel, VisionPrompt, marked, open_vision, placed_pictures
from fara_desktop.engine.window_speculation import WindowSpeculation, plain_tokens
from fara_desktop.machine.llama_internals import cut_context
from fara_desktop.models.gguf_checks import check_loadable
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.planning.params import LoadParams
from fara_desktop.text.untrusted import one_line
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.stats import reply_stats
from fara_desktop.vocabulary.tools import ToolOffer

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

READ_AHEAD_FIRST_CHUNK = 32  # tokens read ahead at once before the speed is known (the composer's wait needs it)
# then as many as take this long, at least the floor: a busy CPU pays each batch's start dearly (1.7B, two other
# programs spinning: 9.6 tok/s in 16-token batches, 20.9 in 128, 29.8 in 512), and smaller batches made it slower
READ_AHEAD_CHUNK_S, READ_AHEAD_FLOOR = 4.0, 128


class LlamaBackend:
    """Owns one ``llama_cpp.Llama`` at a time; not thread-safe by design (the worker serialises calls)."""

    def __init__(self, load_record: LoadRecord | None = None, state_store: KVDiskStore | None = None) -> None:
        """``load_record``: where a load in progress is recorded, so a file that aborts llama.cpp (and the
        process) is known at the next start and not loaded again (see ``models.load_record``). ``state_store``:
        where chats' KV states are kept across restarts (none: they live in memory only)."""
        self._llm: Llama | None = None
        self._info: ModelInfo | None = None
        self._formatter: ChatFormatter | None = None
        self._control_text = ControlTokenText(())
        self._should_abort: Callable[[], bool] = lambda: False
        self._abort_cb: Any = None  # keeps the ctypes callback alive while llama.cpp holds it
        self._prompt_report: Callable[[], None] | None = None  # set while a long prompt is read
        self._load_record = load_record
        self._loaded_as: tuple[Path, LoadParams] | None = None  # what to load again when a switch fails
        self._states = ContextStates(state_store)  # whose chat is in the context, and the states kept for each
        self._vision: VisionModel | None = None  # the projector loaded beside the model: it sees pictures
        self._parallel: ParallelReplies | None = None  # the API's replies decoding together, when asked for
        self._speculation = WindowSpeculation(False)  # the window's replies checking proposals, where they may
        self.speculated = False  # whether the last reply was written checking proposals (``window_speculation``)
        self._draft: DraftBeside | None = None  # a draft model proposing the window's tokens, when one is paired
        self._mtp: MtpHead | None = None  # the model's own MTP head proposing them, when its file carries one

    # ------------------------------------------------------------------ loading

    @property
    def info(self) -> ModelInfo | None:
        return self._info

    def load(
        self, path: ModelSource, params: LoadParams, on_progress: Callable[[float], bool] | None = None
    ) -> ModelInfo:
        """Load ``path``; the model in use stays usable when this fails. It stays loaded while the new one loads
        when both fit in memory; otherwise it is unloaded first and, when the new one fails, loaded again (the
        failure's ``info`` then names it)."""
        if isinstance(path, RemoteModel):
            raise ModelLoadError("A server's model is not loaded by llama.cpp here.")
        path = Path(path)
        if not path.is_file():
            raise ModelFileNotFoundError(f"Model file not found: {path}")
        header = read_gguf_header(path)
        check_loadable(header)  # a file llama.cpp would abort on never reaches it
        crash = self._load_record.crash_of(path) if self._load_record is not None else None
        if crash is not None:
            raise ModelLoadError(f"{path.name} was not loaded: {crash.reason}.")
        if params.kv_type not in GGML_TYPE_IDS:
            raise ModelLoadError(f"Unknown KV cache type {params.kv_type!r}; use one of {', '.join(GGML_TYPE_IDS)}.")
        previous = self._loaded_as
        keep_previous = previous is not None and fits_beside(header, params)
        if not keep_previous:
            self.unload()
        try:
            opened = open_model(path, header, params, on_progress, self._load_record)
        except FaraError:
            if previous is not None and not keep_previous:
                self._reload(*previous)
            raise
        if keep_previous:
            self.unload()
        return self._install(*opened)

    def _install(self, llm: Llama, formatter: ChatFormatter, info: ModelInfo, params: LoadParams) -> ModelInfo:
        """The opened model becomes the one in use, whole or not at all: whatever fails on the way frees it (and its
        projector) and leaves no model, never half of one."""
        self._llm = llm
        try:
            self._formatter = formatter
            self._control_text = ControlTokenText.of(llm)
            self._install_abort_callback()
            if params.projector:
                projector = Path(params.projector)
                trial = partial(trial_for, Path(llm.model_path), projector, info.kernel_path, info.n_threads_batch)
                self._vision, info = open_vision(llm, info, projector, self._stop_asked, self._load_record, trial)
            if params.parallel > 1:
                self._parallel = ParallelReplies(
                    llm.model,
                    info.n_ctx,
                    params.parallel,
                    info.n_threads,
                    self._states,
                    spelling(llm),
                    llm.n_batch,
                    like=llm.context_params,
                    speculate=params.speculate,
                )
                info = replace(info, parallel=params.parallel)
            self._mtp = mtp_beside(llm, info.n_threads) if info.mtp else None  # the model's own, before a draft
            self._draft = draft_beside(llm, params, info.n_ctx) if params.speculate and not self._mtp else None
            draft = self._draft.model if self._draft is not None else None
            self._speculation = WindowSpeculation.of(llm, params.speculate, info.rewindable, draft, self._mtp)
            named, speculates = self._draft.name if self._draft else "", self._speculation.enabled
            info = replace(info, draft=named, speculates=speculates, mtp=self._mtp is not None)
            self._info = info
            self._loaded_as = (info.path, params) if isinstance(info.path, Path) else None
            self._states.attach(state_identity(info), info.rewindable, sliding_window(llm))
        except BaseException:
            self.unload()
            raise
        if params.use_mmap and params.prefault and isinstance(info.path, Path):
            start_prefault(info.path)
        return info

    @property
    def parallel(self) -> ParallelReplies | None:
        """The API's replies decoding together (None: the model was loaded for one at a time)."""
        return self._parallel

    @property
    def vision(self) -> VisionModel | None:
        """The projector loaded beside the model (None: it cannot see pictures)."""
        return self._vision

    def _reload(self, path: Path, params: LoadParams) -> None:
        """The model that was in use, back after a switch that failed; a failure here leaves no model."""
        try:
            header = read_gguf_header(path)
            self._install(*open_model(path, header, params, None, self._load_record))
            log.info("Loaded %s again after the switch away from it failed", one_line(path.name))
        except FaraError as exc:
            log.warning("Could not load %s again after a failed switch: %s", one_line(path.name), exc)

    def calibrate_threads(
        self, candidates: Sequence[int], tokens: int = 48, should_yield: Callable[[], bool] | None = None
    ) -> tuple[dict[int, float], bool]:
        """Generation tok/s at each thread count and whether other programs were busy meanwhile
        (``engine/thread_calibration``); the fastest stays in use."""
        import llama_cpp

        llm, _, info = self._require()
        self._states.set_aside(llm)  # the chat in the context is kept: calibrating empties it

        def restore() -> None:
            llama_cpp.llama_set_n_threads(llm.ctx, info.n_threads, info.n_threads_batch)
            llm.reset()

        results, busy = measure_threads(llm, candidates, tokens, info.n_threads_batch, should_yield, restore)
        best = max(results, key=lambda t: results[t])
        llama_cpp.llama_set_n_threads(llm.ctx, best, info.n_threads_batch)
        llm.reset()
        if self._parallel is not None:
            self._parallel.set_threads(best)
        self._info = replace(info, n_threads=best)
        return results, busy

    def close(self) -> None:
        self.unload()
        self._states.close()

    def unload(self) -> ModelSource | None:
        if self._llm is None:
            return None
        path = self._info.path if self._info else None
        parallel, self._parallel = self._parallel, None
        if parallel is not None:  # its context is over the model: freed first, its replies ended
            parallel.close()
        vision, self._vision = self._vision, None
        if vision is not None:
            vision.close()
        draft, self._draft, self._speculation = self._draft, None, WindowSpeculation(False)
        if draft is not None:  # its context is freed before the model its vocabulary was checked against
            draft.close()
        mtp, self._mtp = self._mtp, None
        if mtp is not None:  # its context is over the model's weights
            mtp.close()
        self._llm.close()
        self._llm = None
        self._info = None
        self._loaded_as = None
        self._states.detach()
        self._formatter = None
        self._abort_cb = None
        return path

    def forget_context(self, snapshots: bool = False) -> None:
        """Drop the evaluated tokens (with ``snapshots``, every saved state too): the benchmark's cold turns."""
        self._states.start_over(self._llm, snapshots)

    def _install_abort_callback(self) -> None:
        import llama_cpp

        assert self._llm is not None
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: self._abort_check())
        llama_cpp.llama_set_abort_callback(self._llm.ctx, self._abort_cb, None)

    def _abort_check(self) -> bool:
        """Called by llama.cpp while it computes (on this thread): the place to say how far a long prompt is."""
        report = self._prompt_report
        if report is not None:
            report()
        return bool(self._should_abort())

    # ------------------------------------------------------------------ prompts

    def _require(self) -> tuple[Llama, ChatFormatter, ModelInfo]:
        if self._llm is None or self._formatter is None or self._info is None:
            raise NoModelLoadedError("No model is loaded yet.")
        return self._llm, self._formatter, self._info

    def tokenize_prompt(
        self,
        messages: Sequence[ChatMessage],
        should_cancel: Callable[[], bool] | None = None,
        thinking: bool = True,
        tools: ToolOffer | None = None,
    ) -> LlamaPrompt:
        """Render and tokenize; ``messages`` must already be ``_quiet`` (see ``prepare``). Pictures go before their
        message's text, read by the projector; a model without one refuses a new message's pictures and is told
        of older ones in words."""
        llm, formatter, info = self._require()
        offered = tools.declared() if tools else ()
        if offered and formatter.tool_family is None:
            raise tools_unsupported(info.name)
        forced = tools.forced() if tools and offered else ()
        messages, pictures = placed_pictures(messages, self._vision is not None, info)
        rendered = formatter.render(messages, should_cancel, thinking, offered, forced)
        if pictures and self._vision is not None:
            rendered = replace(rendered, text=marked(rendered.text))  # markers for the pictures, and nothing else
            vision = self._vision.tokenize(rendered.text, pictures, rendered.add_bos)
            return LlamaPrompt(vision.tokens, rendered, vision)
        tokens = llm.tokenize(rendered.text.encode("utf-8"), add_bos=rendered.add_bos, special=True)
        return LlamaPrompt(tokens, rendered, reasoning_tail=reasoning_tail(llm, rendered, tokens))

    def _quiet(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The template's own markers become control tokens; the same text inside a message stays text."""
        quiet = self._control_text.neutralize
        return [
            replace(
                m,
                content=quiet(m.content),
                reasoning=quiet(m.reasoning) if m.reasoning else "",
                tool_calls=tuple(replace(c, arguments=quiet(c.arguments)) for c in m.tool_calls),
            )
            for m in messages
        ]

    def prepare_raw(self, text: str, reply_reserve: int) -> PreparedPrompt:
        llm, _, info = self._require()
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        room = info.n_ctx - reply_reserve
        if len(tokens) > room:
            raise PromptTooLongError(
                f"The prompt is {len(tokens):,} tokens; with room for the reply the context holds {room:,}."
            )
        return PreparedPrompt((ChatMessage("user", text),), detail=LlamaPrompt(tokens, RenderedPrompt(text, True, ())))

    def prepare(self, request: PromptRequest) -> PreparedPrompt:
        """Fit the conversation into the context window, dropping the oldest turns (never the system prompt).

        When trimming is needed it drops down to three quarters of the room, so the next few turns start from
        the same prefix and reuse the KV cache instead of being trimmed (and fully re-read) every time. The prompt
        shrinks as more turns are dropped, so the first start that fits is found by bisection: a handful of
        renders, not one per turn of a long chat.
        """
        _, _, info = self._require()
        should_cancel, thinking, tools = request.should_cancel, request.thinking, request.tools
        room = info.n_ctx - request.reply_reserve
        messages = self._quiet(request.messages)
        whole = self.tokenize_prompt(messages, should_cancel, thinking, tools)
        if whole.cells <= room:
            return llama_prompt(messages, 0, whole, tools)
        system = [m for m in messages if m.role == "system"]
        turns = [m for m in messages if m.role != "system"]
        starts = [i for i in range(1, len(turns)) if turns[i].role == "user"]  # kept history opens with the user
        tried: dict[int, LlamaPrompt] = {}

        def attempt(start: int) -> LlamaPrompt:
            if start not in tried:
                tried[start] = self.tokenize_prompt([*system, *turns[start:]], should_cancel, thinking, tools)
            return tried[start]

        def first_fitting(limit: int) -> int | None:
            low, high, found = 0, len(starts) - 1, None
            while low <= high:
                middle = (low + high) // 2
                if attempt(starts[middle]).cells <= limit:
                    found, high = starts[middle], middle - 1
                else:
                    low = middle + 1
            return found

        start = first_fitting(max(room * 3 // 4, 1))
        if start is None:
            start = first_fitting(room)
        if start is not None:
            return llama_prompt([*system, *turns[start:]], start, attempt(start), tools)
        shortest = attempt(starts[-1]).tokens if starts else whole.tokens
        raise PromptTooLongError(
            f"The message is too long for this model's context window ({len(shortest)} tokens of "
            f"{info.n_ctx}, with {request.reply_reserve} kept for the reply). Shorten it or raise the context length."
        )

    # ------------------------------------------------------------------ KV states (``ContextStates``)

    @property
    def kv_states(self) -> KVStateCache:
        """The chats' states kept in RAM."""
        return self._states.cache

    def save_to_disk(self, wait: bool = False) -> None:
        self._states.save_to_disk(self._llm, wait)

    def forget_conversation(self, conversation: Hashable | None) -> None:
        self._states.forget(self._llm, conversation)  # the sequences' kept states with the rest

    def read_ahead(
        self,
        prompt: PreparedPrompt,
        conversation: Hashable | None,
        should_stop: Callable[[], bool],
        on_progress: Callable[[int, int], None],
        abort: Callable[[], bool] | None = None,
    ) -> int:
        """Read the prompt into the KV cache (all but its last token, which the reply reads for its logits) in
        chunks of a few seconds; ``should_stop`` (Enter, another command) is checked between chunks — the chunk
        being read is part of what Enter sends, so it is finished rather than thrown away — and ``abort`` (the text
        changed before its end, Esc) by llama.cpp's abort callback inside one, so it takes effect within one
        layer's compute. Reports ``(tokens, cached)``; returns the tokens cached."""
        llm, _, _ = self._require()
        tokens = self._tokens_of(prompt)
        vision = self._vision_of(prompt)
        tokens, cached = self._restore(llm, conversation, tokens, vision)
        on_progress(len(tokens), cached)
        end = len(tokens) - 1
        if cached >= end or should_stop():
            return cached
        cut_context(llm, cached)  # eval drops the cells past it
        self._should_abort = abort or _never
        chunk, start = READ_AHEAD_FIRST_CHUNK, cached
        keep = checkpoint_at(prompt.detail, tokens)
        try:
            while start < end and not should_stop():
                picture = vision.picture_at(start) if vision is not None else None
                if picture is not None:  # encoded now, while the user types (a stop waits for the encoder)
                    self._require_vision().decode(llm, vision, picture)  # type: ignore[arg-type]
                    start = llm.n_tokens
                    on_progress(len(tokens), start)
                    continue
                began = time.perf_counter()
                stop_at = min(start + chunk, end, vision.next_picture(start) if vision else end)
                llm.eval(tokens[start : min(stop_at, keep) if start < keep else stop_at])
                self._states.restored_untried = None  # decoded on: whatever was restored holds
                if llm.n_tokens == keep:  # where the reply keeps its state too: the next prompt parts there
                    self._states.checkpoint(llm, self._states.owner)
                on_progress(len(tokens), llm.n_tokens)
                rate = (llm.n_tokens - start) / max(time.perf_counter() - began, 1e-6)
                start = llm.n_tokens
                chunk = int(min(llm.n_batch, max(READ_AHEAD_FLOOR, rate * READ_AHEAD_CHUNK_S)))
        except EncodingStopped:  # the picture being encoded is thrown away; what was read before it stays
            pass
        except RuntimeError as exc:  # llama.cpp aborted (stopped) the batch: the batches before it stay
            if should_stop() or not self._states.discard_restored(llm, str(exc)):
                self._states.batch_interrupted(llm)  # a recurrent state holding part of the batch is not continued
                log.info("Reading ahead stopped: %s", exc)
        finally:
            self._should_abort = _never
        return llm.n_tokens

    # ------------------------------------------------------------------ generation

    @staticmethod
    def _tokens_of(prompt: PreparedPrompt) -> list[int]:
        if not isinstance(prompt.detail, LlamaPrompt):
            raise GenerationError("This prompt was prepared for another model; prepare it again.")
        return prompt.detail.tokens

    def _stop_asked(self) -> bool:
        """Asked while a picture is encoded: the read being stopped (Esc, a newer command, quitting)."""
        return bool(self._should_abort())

    def _vision_of(self, prompt: PreparedPrompt) -> VisionPrompt | None:
        vision = prompt.detail.vision if isinstance(prompt.detail, LlamaPrompt) else None
        if vision is not None and self._vision is None:
            raise GenerationError("This prompt's pictures were prepared for another model; prepare it again.")
        return vision

    def _require_vision(self) -> VisionModel:
        return self._vision  # type: ignore[return-value]  # ``_vision_of`` checked it is there

    def _restore(
        self, llm: Llama, owner: Hashable | None, tokens: list[int], vision: VisionPrompt | None
    ) -> tuple[list[int], int]:
        """The prompt's tokens (spelled with those the model wrote where the chat's kept states spell the same
        text: ``own_tokens``) and the context at the longest prefix of them its principal may reuse; the projector's
        embeddings then its own."""
        if vision is None:
            kept = self._states.continuable_tokens(llm, owner, tokens)
            tokens = longest_respelled_as_read(tokens, kept, *spelling(llm)) or tokens
        cached = self._states.restore_longest_prefix(llm, owner, tokens)
        if self._vision is not None:
            self._vision.principal = self._states.principal
        return tokens, vision.resume_point(cached) if vision is not None else cached

    def _read_prompt(self, llm: Llama, vision: VisionPrompt, tokens: list[int], start: int, end: int) -> None:
        """Read ``start``..``end`` of a prompt with pictures: text by ``eval``, each picture decoded whole."""
        cut_context(llm, start)
        self._require_vision().evaluate(llm, vision, start, end, lambda a, b: llm.eval(tokens[a:b]))

    def reply(self, prompt: PreparedPrompt, request: ReplyRequest) -> ReplyResult:
        try:
            return self._reply(prompt, request)
        except _RestoredStateFailedError as failure:
            self._states.discard_restored(self._require()[0], str(failure))
            return self._reply(prompt, request, prefix_sent=True)

    def _reply(self, prompt: PreparedPrompt, request: ReplyRequest, prefix_sent: bool = False) -> ReplyResult:
        import llama_cpp

        sampling, should_cancel, on_text = request.sampling, request.should_cancel, request.on_text
        conversation, on_prompt_progress = request.conversation, request.on_prompt_progress
        llm, _, info = self._require()
        tokens = self._tokens_of(prompt)
        vision = self._vision_of(prompt)
        detail = prompt.detail
        tokens, reused = self._restore(llm, conversation, tokens, vision)
        extra_cells = vision.extra_cells if vision is not None else 0
        max_tokens = sampling.max_tokens or info.n_ctx
        forced = detail.rendered.forced_calls
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        grammar = call_grammar(vocab, forced, prompt.tools) if forced else json_grammar(vocab, sampling.json_schema)
        special = prompt.tool_family is not None  # call markers are often control tokens: their text is needed
        top = sampling.logprobs
        logprob_of = (lambda token, piece: token_logprob(llm, vocab, token, piece, top)) if top is not None else None
        loops_checked = not forced and sampling.json_schema is None
        writing = ReplyWriting(vocab, sampling, detail.rendered.stop, on_text, special, loops_checked, logprob_of)
        if detail.rendered.reply_prefix and not prefix_sent:
            on_text(detail.rendered.reply_prefix)  # the call's opening the prompt already wrote
        if sampling.seed is not None:
            llm.set_seed(sampling.seed)

        finish: Finish = "stop"
        started = time.perf_counter()
        first_token_at: float | None = None
        self._should_abort = should_cancel
        to_read = len(tokens) - reused
        if on_prompt_progress is not None and to_read > llm.n_batch:
            self._prompt_report = prompt_reporter(llm, reused, to_read, on_prompt_progress)
        # A recurrent model reads its prompt here up to the last token, whose state is kept (the point a Regenerate
        # goes back to); llama-cpp-python's own prefix matching would cut its state back, which it cannot be. A
        # prompt with pictures is read here too: llama-cpp-python cannot decode a picture.
        split = not self._states.rewindable or vision is not None
        between = request.between_chunks
        chunked = between is not None and not split and to_read > llm.n_batch  # read here, stepping between
        plain = vision is not None or grammar is not None or top is not None  # decoded as llama-cpp-python does
        speculating = None if plain else self._speculation.writing(llm, sampling)
        self.speculated = speculating is not None
        if speculating is not None:
            generator = speculating.tokens(tokens)
        else:
            generator = plain_tokens(
                llm, tokens[-1:] if split or chunked else tokens, sampling, grammar, not (split or chunked)
            )
        try:
            if split:
                self._read_to_the_last_token(llm, detail, tokens, reused)
            elif chunked and between is not None:
                self._read_between_chunks(llm, tokens, reused, between, should_cancel)
            elif speculating is not None:  # it reads the rest, its last token always (for the first's logits)
                cut_context(llm, min(reused, len(tokens) - 1))
            for token in generator:
                if first_token_at is None:
                    first_token_at = time.perf_counter()
                    self._states.restored_untried = None  # decoded on: whatever was restored holds
                    # The abort callback is for prompt processing; per token the loop checks by itself.
                    self._should_abort = _never
                    self._prompt_report = None
                if should_cancel():
                    finish = "cancelled"
                    break
                ended = writing.take(token, max_tokens)
                if ended is None and llm.n_tokens + extra_cells + 1 >= info.n_ctx:
                    ended = "context"
                if ended is not None:
                    finish = ended
                    break
        except EncodingStopped:
            finish = "cancelled"
        except RuntimeError as exc:
            if should_cancel():
                finish = "cancelled"
                self._states.batch_interrupted(llm)  # a recurrent state holding part of the batch is not continued
            elif first_token_at is None and self._states.restored_untried is not None:
                raise _RestoredStateFailedError(str(exc)) from exc
            else:
                raise GenerationError(f"llama.cpp failed while generating: {exc}") from exc
        finally:
            generator.close()
            self._should_abort = _never
            self._prompt_report = None
        if finish != "cancelled":
            writing.end(forced)
        times, cells = (started, first_token_at), llm.n_tokens + extra_cells
        stats = reply_stats(len(tokens), len(tokens) - reused, writing.tokens, times, cells, info.n_ctx)
        if speculating is not None:
            stats = replace(stats, draft_proposed=speculating.proposed, draft_accepted=speculating.accepted)
        return ReplyResult(writing.text, stats, finish, writing.shown_logprobs())

    @staticmethod
    def _read_between_chunks(
        llm: Llama, tokens: list[int], reused: int, between: Callable[[], None], should_cancel: Callable[[], bool]
    ) -> None:
        """The prompt up to its last token (``generate`` reads that one, for the first token's logits), a batch at a
        time as ``Llama.eval`` reads it, with ``between()`` after each batch."""
        for start in range(reused, len(tokens) - 1, llm.n_batch):
            if should_cancel():
                raise EncodingStopped
            llm.eval(tokens[start : min(start + llm.n_batch, len(tokens) - 1)])
            between()

    def _read_to_the_last_token(self, llm: Llama, detail: LlamaPrompt, tokens: list[int], reused: int) -> None:
        """A model that cannot cut back (or a prompt with pictures) reads its prompt here, not in llama-cpp-python's
        ``generate``: to where its state is kept for the next prompt (``checkpoint_at``), kept, then on to the last
        token, which ``generate`` reads for the first token's logits."""
        keep = checkpoint_at(detail, tokens)
        if detail.vision is not None:
            self._read_prompt(llm, detail.vision, tokens, reused, keep)
        elif reused < keep:
            llm.eval(tokens[reused:keep])
        self._states.checkpoint(llm, self._states.owner)
        if llm.n_tokens < len(tokens) - 1:
            llm.eval(tokens[llm.n_tokens : -1])


class _RestoredStateFailedError(Exception):
    """llama.cpp could not decode on a state just restored into the context (``reply`` discards it and reads the
    prompt again)."""


def _never() -> bool:
    return False
