"""Opening a GGUF with llama.cpp for the backend: the ``Llama`` with the app's parameters, its chat format, what
the app shows of it, what its saved states are bound to, and whether a second model fits beside it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fara_desktop.engine.chat_format import ChatFormatter, formatter_for
from fara_desktop.engine.errors import LoadCancelledError, ModelLoadError
from fara_desktop.engine.ggml_types import GGML_TYPE_IDS
from fara_desktop.engine.kv_disk import StateIdentity
from fara_desktop.engine.llama_state import is_rewindable, start_prefault
from fara_desktop.engine.mtp_head import carries_mtp
from fara_desktop.engine.types import ModelInfo
from fara_desktop.machine.hardware import physical_cores, this_cpu_features, usable_cores
from fara_desktop.machine.kernels import first_batch, first_batch_needed, prepare_llama_load
from fara_desktop.machine.llama_build import route_llama_logs_to_logging
from fara_desktop.machine.llama_internals import load_progress, recurrent_rollback
from fara_desktop.models.architecture import LAZY_TABLES
from fara_desktop.models.gguf_file import GGUFHeader
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.models.metadata import header_display_name, metadata_from_header
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import (
    RECURRENT_SNAPSHOTS,
    default_threads,
    expected_prompt_tokens_per_second,
    fit_verdict,
    prompt_slowdown_span,
    size_class,
)
from fara_desktop.text.untrusted import one_line
from fara_desktop.vocabulary.errors import FaraError

if TYPE_CHECKING:
    from llama_cpp import Llama

PICTURE_BATCH = 512  # the least batch a model that sees pictures is loaded with


def open_model(
    path: Path,
    header: GGUFHeader,
    params: LoadParams,
    on_progress: Callable[[float], bool] | None,
    load_record: LoadRecord | None,
) -> tuple[Llama, ChatFormatter, ModelInfo, LoadParams]:
    """A ``Llama`` for ``path`` with ``params``, its chat format and what the app shows of it. A load that
    ``on_progress`` stops raises ``LoadCancelledError``; one llama.cpp refuses, ``ModelLoadError``. The load is
    recorded in ``load_record`` while it runs (a file that aborts the process is not loaded again)."""
    import llama_cpp
    from llama_cpp import Llama

    route_llama_logs_to_logging()
    trained = header.arch_int("context_length", 1, 1 << 24) or 0
    n_ctx = params.context_for(trained)
    threads = params.n_threads or default_threads(physical_cores(), usable_cores())
    size = size_class_of(header)
    kernels = prepare_llama_load(size, threads)
    threads_batch = params.n_threads_batch or threads
    kv_type = GGML_TYPE_IDS[params.kv_type]
    # a picture is decoded in one batch (Gemma 3's attends to itself both ways): room for a large one
    n_batch = max(params.n_batch, PICTURE_BATCH) if params.projector else params.n_batch
    n_ubatch = max(params.n_ubatch, PICTURE_BATCH) if params.projector else params.n_ubatch
    flash_attn = params.flash_attn or params.kv_type != "f16"  # a quantized V cache needs flash attention
    started = time.perf_counter()
    if params.prefault and not params.use_mmap:
        # llama.cpp reads the file tensor by tensor, repacking each before it reads on; a thread reading the
        # file ahead into the page cache overlaps the disk with that work: cold, an 8B model's first token
        # came after 10.2 s instead of 27.3 s (measured with `fara-desktop bench --section cold`)
        start_prefault(path)
    stopped: list[bool] = []
    record = load_record.loading(path) if load_record is not None else contextlib.nullcontext()
    try:
        lazy = any(t.name in LAZY_TABLES for t in header.tensors)
        snapshots = RECURRENT_SNAPSHOTS if params.speculate else 0  # none kept for an architecture that cannot
        mtp = params.speculate and carries_mtp(header)  # its MTP layers are skipped unless they are to propose
        with record, load_progress(on_progress, stopped, lazy, mtp), recurrent_rollback(snapshots):
            llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads_batch,
                n_batch=n_batch,
                n_ubatch=n_ubatch,
                use_mmap=params.use_mmap,
                use_mlock=params.use_mlock,
                flash_attn=flash_attn,
                type_k=kv_type,
                type_v=kv_type,
                verbose=False,
            )
    except (ValueError, RuntimeError, OSError) as exc:
        if stopped:
            raise LoadCancelledError(f"Loading {path.name} was stopped.") from exc
        raise ModelLoadError(
            f"llama.cpp could not load {path.name}: the file is damaged, its architecture "
            f"({header.architecture}) is not supported by this llama.cpp build, or there is not enough "
            f"memory ({exc})."
        ) from exc
    if first_batch_needed(kernels.path):
        with first_batch(kernels.path):
            first_multi_token_decode(llm)
    meta = llm.metadata
    architecture = one_line(meta.get("general.architecture", "unknown"), 64)
    try:
        formatter = formatter_for(
            meta.get("tokenizer.chat_template"),
            architecture,
            bos_token=token_text(llm, llm.token_bos()),
            eos_token=token_text(llm, llm.token_eos()),
        )
    except ModelLoadError:
        llm.close()
        raise
    info = ModelInfo(
        path=path,
        name=header_display_name(header),
        architecture=architecture,
        n_ctx=llm.n_ctx(),
        n_ctx_train=trained or llama_cpp.llama_model_n_ctx_train(llm.model),
        n_threads=threads,
        n_threads_batch=threads_batch,
        kv_type=params.kv_type,
        flash_attn=flash_attn,
        chat_format=formatter.name,
        load_seconds=time.perf_counter() - started,
        file_bytes=path.stat().st_size,
        thinking_switch=formatter.thinking_switch,
        thinking_default=formatter.thinking_default,
        tool_calls=formatter.tool_family.name if formatter.tool_family else "",
        expected_prompt_tok_per_s=expected_prompt_speed(header, threads_batch),
        prompt_span_tokens=prompt_span(header),
        rewindable=is_rewindable(llm),
        mtp=mtp,
        kernel_path=kernels.path.key,
        kernel_reason=kernels.reason,
        kernel_summary=kernels.summary,
        size_class=size or "",
    )
    return llm, formatter, info, params


def expected_prompt_speed(header: GGUFHeader, threads: int) -> float:
    """The prompt reading speed predicted for this model here (0: unknown)."""
    try:
        return expected_prompt_tokens_per_second(metadata_from_header(header), threads, this_cpu_features())
    except FaraError:
        return 0.0


def size_class_of(header: GGUFHeader) -> str | None:
    """The model-size class kernel speeds are measured for (None: the header says too little)."""
    try:
        return size_class(metadata_from_header(header))
    except FaraError:
        return None


def first_multi_token_decode(llm: Llama) -> None:
    """Two tokens decoded in one batch, then forgotten: where a kernel path that faults on this machine faults
    (llama.cpp's AMX matmul: every batch of two or more tokens), before any chat depends on it."""
    import llama_cpp

    token = max(llm.token_bos(), 0)
    llm.eval([token, token])
    llm.reset()
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
    llama_cpp.llama_perf_context_reset(llm.ctx)


def prompt_span(header: GGUFHeader) -> float:
    """Where a prompt token costs twice one at the start, for this model (0: unknown)."""
    try:
        return prompt_slowdown_span(metadata_from_header(header))
    except FaraError:
        return 0.0


def token_text(llm: Llama, token: int) -> str:
    """A special token's text as the vocabulary writes it ("" for none)."""
    import llama_cpp

    if token < 0:
        return ""
    text: bytes = llama_cpp.llama_vocab_get_text(llama_cpp.llama_model_get_vocab(llm.model), token)
    return text.decode("utf-8", errors="replace")


def state_identity(info: ModelInfo) -> StateIdentity | None:
    """What a saved state of this loaded model is bound to (None: a server's model, or the file is gone)."""
    import llama_cpp

    if not isinstance(info.path, Path):
        return None
    try:
        return StateIdentity.of(info.path, info.n_ctx, info.kv_type, info.flash_attn, llama_cpp.__version__)
    except OSError:
        return None


def fits_beside(header: GGUFHeader, params: LoadParams) -> bool:
    """Whether the new model fits in the memory left while the one in use stays loaded."""
    import psutil

    try:
        metadata = metadata_from_header(header)
    except FaraError:
        return False
    n_ctx = params.context_for(metadata.context_length)
    memory = psutil.virtual_memory()
    verdict = fit_verdict(metadata, n_ctx, memory.available, memory.total, params.kv_type, parallel=params.parallel)
    return verdict.verdict == "fits"
