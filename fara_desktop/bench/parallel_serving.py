"""Several clients at once through ``fara-desktop serve --parallel 4``, each client a process of its own
(``bench.stream_client``: a prompt of its own, its reply streamed): aggregate generation with 4 clients against 1,
the 95th percentile of the time to the first token of 8 clients that arrive together against ``--parallel 1`` (one
sequence at a time), and the same runs against llama.cpp's own server (``llama-server -np 4``) when
``FARA_LLAMA_SERVER`` names its binary — built from the llama.cpp that llama-cpp-python carries, so the kernels are
the same. Rounds interleaved (ours, then llama.cpp's), medians; the machines drift ±10–20 %.

Aggregate generation: the tokens every client was sent, over the seconds from the first request to the last
reply's end (prompts included: what the clients see). Each server is started for its runs and stopped after them,
so no idle server or background measurement runs beside another's."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fara_desktop.system.process_end import stop_process

LLAMA_SERVER_ENV = "FARA_LLAMA_SERVER"
# llama-server in a process that refuses itself AMX tiles when this CPU has them, as the app's own kernel path does
# where llama.cpp's AMX matmul faults (``machine.amx_refusal``): the same kernels on both sides
AMX_REFUSED_LAUNCH = (
    "import os, sys\n"
    "from fara_desktop.machine.amx_refusal import can_refuse_amx, refuse_amx\n"
    "if can_refuse_amx():\n"
    "    refuse_amx()\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def _started(command: list[str], port: int | None) -> tuple[subprocess.Popen[str], str]:
    """A server process and its address once it answers: ``serve`` prints it first (``port`` None); llama-server
    listens on ``port`` and is asked until its model is loaded."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    if port is None:
        return process, process.stdout.readline().strip()
    import httpx

    address = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{address}/health", timeout=2).status_code == 200:
                return process, f"{address}/v1"
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # a benchmark's wait for a server to load, not a test's
    process.kill()
    raise RuntimeError(f"llama-server did not answer (status {process.poll()})")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ours(model: Path, parallel: int, context: int, speculation: str = "auto") -> tuple[list[str], int | None]:
    options = f"--port 0 --parallel {parallel} --context {context} --speculation {speculation}".split()
    return [sys.executable, "-m", "fara_desktop", "serve", *options, "--model", str(model)], None


def llama_cpps(binary: Path, model: Path, parallel: int, context: int, threads: int) -> tuple[list[str], int | None]:
    port = _free_port()
    options = f"--port {port} -np {parallel} -c {context * parallel} -t {threads} -tb {threads}".split()
    return [sys.executable, "-c", AMX_REFUSED_LAUNCH, str(binary), "-m", str(model), *options], port


def _clients(address: str, count: int, words: int, tokens: int) -> list[dict[str, Any]]:
    """``count`` clients started together, each a process; what each printed."""
    command = [sys.executable, "-m", "fara_desktop.bench.stream_client", address]
    processes = [
        subprocess.Popen([*command, str(seed), str(words), str(tokens)], stdout=subprocess.PIPE, text=True)
        for seed in range(count)
    ]
    return [json.loads(process.communicate()[0]) for process in processes]


def aggregate(results: list[dict[str, Any]]) -> float:
    tokens = sum(int(r["usage"].get("completion_tokens", 0)) for r in results)
    seconds = max(float(r["ended"]) for r in results) - min(float(r["started"]) for r in results)
    return tokens / max(seconds, 1e-9)


def generation(results: list[dict[str, Any]]) -> float:
    """The clients' writing speeds summed: each client's tokens after its first, over the seconds from its first
    to its end (its prompt's reading left out: how fast replies are written once they began)."""
    rates = [
        (int(r["usage"].get("completion_tokens", 0)) - 1) / max(float(r["ended"]) - float(r["first"]), 1e-9)
        for r in results
    ]
    return sum(rate for rate in rates if rate > 0)


def p95_first_token(results: list[dict[str, Any]]) -> float:
    waits = sorted(float(r["first"]) - float(r["started"]) for r in results)
    return waits[max(0, round(0.95 * len(waits)) - 1)]


def _runs(
    server: tuple[list[str], int | None], counts: tuple[int, ...], words: int, tokens: int
) -> dict[int, list[dict[str, Any]]]:
    """The server started, warmed (one short request), each count of clients run, stopped."""
    process, address = _started(*server)
    try:
        _clients(address, 1, 8, 4)
        return {count: _clients(address, count, words, tokens) for count in counts}
    finally:
        stop_process(process, 30)


def parallel_serving(
    model: Path, threads: int, words: int = 430, tokens: int = 128, rounds: int = 3, context: int = 1024
) -> dict[str, Any]:
    """The section's figures (see the module); ``words``: each prompt's (430 words: about 500 tokens)."""
    binary = os.environ.get(LLAMA_SERVER_ENV)
    # ours as users get it; ours without proposals from the text (the batching's own gain: proposals speed one
    # client more than four, whose decodes are fuller); llama.cpp's server
    servers = {"ours": ours(model, 4, context), "ours_plain": ours(model, 4, context, "off")}
    if binary:
        servers["llama_cpp"] = llama_cpps(Path(binary), model, 4, context, threads)
    figures: dict[str, dict[str, list[float]]] = {
        name: {"one": [], "four": [], "writing_one": [], "writing_four": [], "p95_8": []} for name in servers
    }
    for _ in range(rounds):
        for name, command in servers.items():
            clients = _runs(command, (1, 4) if name == "ours_plain" else (1, 4, 8), words, tokens)
            figures[name]["one"].append(aggregate(clients[1]))
            figures[name]["four"].append(aggregate(clients[4]))
            figures[name]["writing_one"].append(generation(clients[1]))
            figures[name]["writing_four"].append(generation(clients[4]))
            if 8 in clients:
                figures[name]["p95_8"].append(p95_first_token(clients[8]))
    one_at_a_time = p95_first_token(_runs(ours(model, 1, context), (8,), words, tokens)[8])  # measured once
    out: dict[str, Any] = {}
    for name, runs in figures.items():
        out[f"serving_{name}_tok_per_s_1"] = round(statistics.median(runs["one"]), 2)
        out[f"serving_{name}_tok_per_s_4"] = round(statistics.median(runs["four"]), 2)
        out[f"serving_{name}_gain_4"] = round(
            statistics.median(f / o for f, o in zip(runs["four"], runs["one"], strict=True)), 3
        )
        if runs["p95_8"]:
            out[f"serving_{name}_first_token_p95_8_s"] = round(statistics.median(runs["p95_8"]), 2)
        out[f"serving_{name}_writing_tok_per_s_1"] = round(statistics.median(runs["writing_one"]), 2)
        out[f"serving_{name}_writing_tok_per_s_4"] = round(statistics.median(runs["writing_four"]), 2)
        out[f"serving_{name}_writing_gain_4"] = round(
            statistics.median(f / o for f, o in zip(runs["writing_four"], runs["writing_one"], strict=True)), 3
        )
    out["serving_first_token_p95_8_one_at_a_time_s"] = round(one_at_a_time, 2)
    out["serving_first_token_p95_8_over_one_at_a_time"] = round(
        out["serving_ours_first_token_p95_8_s"] / max(one_at_a_time, 1e-9), 3
    )
    out["serving_rounds"] = {
        name: {k: [round(v, 2) for v in vs] for k, vs in runs.items()} for name, runs in figures.items()
    }
    return out
