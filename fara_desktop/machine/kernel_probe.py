"""What runs in the kernel check's child process: llama.cpp on one kernel path, where a fault cannot hurt the app.

``check``: small models, one per quantization type that llama.cpp's AMX and repacking code handle (Q4_0, Q4_1,
Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS), each read in one batch of 48 tokens and then one token more; the logits come
back. The models are written here, not cut from the user's: a 2-layer llama of width 256 (every matrix a
multiple of 256 wide, so the K-quants and the AMX tiles take them), F32 weights written with ``gguf`` and
quantized by llama.cpp's own quantizer. They are the same on every machine, take about a second to make, and do
not depend on which model the user has (a model cut to a few layers would need a GGUF cutter per architecture).

``measure``: the user's model on one path, prompt and generation speed (one sample; the parent interleaves).

A test can inject a fault into this child only (``FARA_KERNEL_FAULT=<path>:<signal|nan|drift|hang>``): the parent
must then leave that path out. It is read here and nowhere else.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

BATCH_TOKENS = 48
CHECK_WIDTH = 256
CHECK_FF = 512
CHECK_VOCAB = 512
CHECK_LAYERS = 2
# llama.cpp's file types (llama.h) whose tensors cover the types its AMX and repack kernels take
CHECK_FILE_TYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q4_K_M": 15, "Q5_K_M": 17, "IQ4_XS": 30}
FAULT_VARIABLE = "FARA_KERNEL_FAULT"


@dataclass(frozen=True)
class ProbeRequest:
    """What one child does: ``mode`` "check" (the check models in ``folder``) or "measure" (``model``)."""

    mode: str
    path_key: str
    extra_buffers: bool
    refuse_amx: bool
    threads: int
    folder: str = ""
    model: str = ""
    prompt_tokens: int = 128
    reply_tokens: int = 32


def child_main(conn: Connection, request: ProbeRequest) -> None:
    """The child's entry point (multiprocessing, spawn): one answer sent, then the process ends."""
    try:
        with open(os.devnull, "w") as sink:  # ggml prints to stderr ("AMX is not ready to be used!"): not for the app's
            os.dup2(sink.fileno(), 2)
        from fara_desktop.machine.llama_build import route_llama_logs_to_logging

        route_llama_logs_to_logging()  # llama.cpp's chatter stays out of the app's terminal
        if request.refuse_amx:
            from fara_desktop.machine.amx_refusal import refuse_amx

            if not refuse_amx():
                conn.send(("refused", "AMX cannot be refused on this system"))
                return
        fault = _injected_fault(request.path_key)
        if request.mode == "check":
            conn.send(("done", _check(request, fault)))
        else:
            conn.send(("done", _measure(request, fault)))
    except Exception as exc:  # whatever failed here is reported, never raised into the parent
        conn.send(("failed", f"{type(exc).__name__}: {exc}"[:500]))
    finally:
        conn.close()


def _injected_fault(path_key: str) -> str:
    value = os.environ.get(FAULT_VARIABLE, "")
    for item in value.split(","):
        key, _, kind = item.partition(":")
        if key == path_key:
            return kind
    return ""


def _params(request: ProbeRequest) -> Any:
    import llama_cpp.llama_cpp as raw

    params = raw.llama_model_default_params()
    params.use_extra_bufts = request.extra_buffers
    return params


def _check(request: ProbeRequest, fault: str) -> dict[str, Any]:
    import llama_cpp

    from fara_desktop.machine.llama_build import load_ggml_cpu_library

    load_ggml_cpu_library()
    folder = Path(request.folder)
    files = check_models(folder)
    results: dict[str, Any] = {}
    for label, file in files.items():
        model = llama_cpp.llama_model_load_from_file(str(file).encode(), _params(request))
        if not model:
            raise RuntimeError(f"the check model {label} did not load")
        try:
            results[label] = _decode(model, request.threads, fault)
        finally:
            llama_cpp.llama_model_free(model)
    return {"logits": results, "system_info": llama_cpp.llama_print_system_info().decode(errors="replace")}


def _decode(model: Any, threads: int, fault: str) -> list[list[float]]:
    """The logits of the batch's last 4 tokens and of one token decoded after it."""
    import llama_cpp

    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = 128
    cparams.n_batch = 64
    cparams.n_ubatch = 64
    cparams.n_threads = threads
    cparams.n_threads_batch = threads
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        raise RuntimeError("no context")
    batch = llama_cpp.llama_batch_init(64, 0, 1)
    try:
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        tokens = [(7 + 37 * i) % (n_vocab - 10) + 5 for i in range(BATCH_TOKENS + 1)]
        rows: list[list[float]] = []
        for start, count in ((0, BATCH_TOKENS), (BATCH_TOKENS, 1)):
            batch.n_tokens = count
            for i in range(count):
                batch.token[i] = tokens[start + i]
                batch.pos[i] = start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = i >= count - 4
            if fault == "signal" and count > 1:
                os.kill(os.getpid(), signal.SIGSEGV)  # as llama.cpp's AMX matmul does on some Xeons
            if fault == "hang" and count > 1:
                time.sleep(3600)
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
            for i in range(max(0, count - 4), count):
                pointer = llama_cpp.llama_get_logits_ith(ctx, i)
                row = [float(pointer[j]) for j in range(n_vocab)]
                if fault == "nan":
                    row[3] = math.nan
                elif fault == "drift":
                    row = [v + (0.5 if j % 2 else -0.5) for j, v in enumerate(row)]
                rows.append([round(v, 5) if math.isfinite(v) else v for v in row])
        return rows
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)


def _measure(request: ProbeRequest, fault: str) -> dict[str, float]:
    """Prompt tok/s (a batch of ``prompt_tokens``) and generation tok/s (``reply_tokens`` one at a time)."""
    import llama_cpp

    from fara_desktop.machine.llama_build import load_ggml_cpu_library

    load_ggml_cpu_library()
    model = llama_cpp.llama_model_load_from_file(request.model.encode(), _params(request))
    if not model:
        raise RuntimeError("the model did not load")
    cparams = llama_cpp.llama_context_default_params()
    n = request.prompt_tokens + request.reply_tokens + 8
    cparams.n_ctx = n
    cparams.n_batch = request.prompt_tokens
    cparams.n_ubatch = request.prompt_tokens
    cparams.n_threads = request.threads
    cparams.n_threads_batch = request.threads
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    batch = llama_cpp.llama_batch_init(request.prompt_tokens, 0, 1)
    try:
        if not ctx:
            raise RuntimeError("no context")
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))

        def decode(start: int, count: int) -> None:
            batch.n_tokens = count
            for i in range(count):
                batch.token[i] = (11 + 53 * (start + i)) % max(n_vocab - 10, 1) + 5
                batch.pos[i] = start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = i == count - 1
            if fault == "signal" and count > 1:
                os.kill(os.getpid(), signal.SIGSEGV)
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")

        decode(0, 2)  # page the weights in and start the threads: not what is measured
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        started = time.perf_counter()
        decode(0, request.prompt_tokens)
        prompt_seconds = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(request.reply_tokens):
            decode(request.prompt_tokens + i, 1)
        reply_seconds = time.perf_counter() - started
        own = os.times()
        return {
            "prompt": request.prompt_tokens / prompt_seconds,
            "reply": request.reply_tokens / reply_seconds,
            "cpu_seconds": own.user + own.system,
        }
    finally:
        llama_cpp.llama_batch_free(batch)
        if ctx:
            llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)


# ---------------------------------------------------------------- the check models


def check_models(folder: Path) -> dict[str, Path]:
    """The check models in ``folder``, written the first time (each file appears whole or not at all)."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "check-f32.gguf"
    if not source.is_file():
        _write_f32(source)
    files = {}
    for label, file_type in CHECK_FILE_TYPES.items():
        target = folder / f"check-{label}.gguf"
        if not target.is_file():
            _quantize(source, target, file_type)
        files[label] = target
    return files


def _write_f32(path: Path) -> None:
    import gguf
    import numpy as np

    rng = np.random.default_rng(20261206)
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name("Fara kernel check")
    writer.add_context_length(1024)
    writer.add_embedding_length(CHECK_WIDTH)
    writer.add_block_count(CHECK_LAYERS)
    writer.add_feed_forward_length(CHECK_FF)
    writer.add_head_count(4)
    writer.add_head_count_kv(4)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_file_type(0)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3] + [6] * 256
    tokens += [f"▁w{i}" for i in range(CHECK_VOCAB - len(tokens))]
    types += [1] * (CHECK_VOCAB - len(types))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(CHECK_VOCAB - 259)])
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)

    def weight(rows: int, cols: int) -> Any:
        return (rng.standard_normal((rows, cols)) / math.sqrt(cols)).astype(np.float32)

    ones = np.ones(CHECK_WIDTH, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(CHECK_VOCAB, CHECK_WIDTH))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weight(CHECK_VOCAB, CHECK_WIDTH))
    for i in range(CHECK_LAYERS):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{blk}.{name}.weight", weight(CHECK_WIDTH, CHECK_WIDTH))
        writer.add_tensor(f"{blk}.ffn_norm.weight", ones)
        writer.add_tensor(f"{blk}.ffn_gate.weight", weight(CHECK_FF, CHECK_WIDTH))
        writer.add_tensor(f"{blk}.ffn_up.weight", weight(CHECK_FF, CHECK_WIDTH))
        writer.add_tensor(f"{blk}.ffn_down.weight", weight(CHECK_WIDTH, CHECK_FF))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(partial, path)


def _quantize(source: Path, target: Path, file_type: int) -> None:
    import llama_cpp

    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = file_type
    params.nthread = 1
    result = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
    if result != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp could not quantize the check model to file type {file_type}")
    os.replace(partial, target)
