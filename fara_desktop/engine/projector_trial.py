"""A projector's first picture is encoded in a child process before this process encodes with it.

A projector passes the static check (``models.gguf_checks``: its type, its tensors' names, types and sizes) and still
takes the process down on its first picture where a matrix's shape does not fit the graph clip.cpp builds for it
(``GGML_ASSERT ggml_can_mul_mat``, ``ggml_can_repeat``) or where its type names another layout's graph (SIGSEGV):
6 of 11 shape mutations of a Gemma-3-layout projector did. Reading every multiplication as clip.cpp's graph makes
it, for every projector type a build accepts (over fifty, each its own graph in ``tools/mtmd/models``), would be a
second clip.cpp to keep in step with llama.cpp's; a trial in a child runs clip.cpp's own graph, whatever the build,
and is complete by construction: what would abort here aborts there. As the kernel check does: the child loads
the text model's vocabulary and hyperparameters only (no weights), the projector beside it, tokenizes a grey picture
and encodes it, on the kernel path this process uses. Its verdict is kept per (projector file, text model file,
llama.cpp build) in ``cache/projector-trials.json``: a new file or a new build is tried again.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fara_desktop.files.atomic import read_cache_file, save_cache_file
from fara_desktop.machine.kernel_check import run_child
from fara_desktop.text.untrusted import one_line

log = logging.getLogger(__name__)

TRIAL_SECONDS = 600.0  # a real projector on a slow laptop encodes its first picture in well under a minute
RECORD_FILE = "projector-trials.json"
MAX_RECORD_BYTES = 4 * 1024 * 1024
_record_lock = threading.Lock()


@dataclass(frozen=True)
class TrialRequest:
    """What the child needs: the text model, the projector, the kernel path and threads to use."""

    model: str
    projector: str
    kernel_path: str
    threads: int


@dataclass(frozen=True)
class TrialVerdict:
    """Whether the projector encoded its trial picture in the child, and why not."""

    usable: bool
    reason: str = ""


def _identity(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


def trial_key(model: Path, projector: Path) -> str:
    """The files and the build a verdict holds for: a changed file or a rebuilt llama.cpp is tried again."""
    import llama_cpp

    from fara_desktop.machine.llama_internals import libllama

    library = Path(getattr(libllama(), "_name", "") or "libllama")
    build = _identity(library) if library.is_file() else str(library)
    return f"{llama_cpp.__version__}|{build}|{_identity(projector)}|{_identity(model)}"


def projector_trial(model: Path, projector: Path, kernel_path: str, threads: int, folder: Path) -> TrialVerdict | None:
    """The projector's verdict, from the record or tried now in a child; None when the trial was stopped (the
    process is ending: the projector is not used, and no verdict is kept)."""
    try:
        key = trial_key(model, projector)
    except OSError as exc:
        return TrialVerdict(False, f"cannot be read ({exc.strerror or exc})")
    record_file = folder / RECORD_FILE
    with _record_lock:
        known = read_cache_file(record_file, MAX_RECORD_BYTES, "projector trials")
        kept = known.get(key)
        if isinstance(kept, dict) and isinstance(kept.get("usable"), bool):
            return TrialVerdict(kept["usable"], str(kept.get("reason", "")))
    request = TrialRequest(str(model), str(projector), kernel_path, threads)
    kind, value = run_child(request, TRIAL_SECONDS, target=trial_main, name="fara-projector-trial")
    if kind == "stopped":
        return None
    if kind == "done":
        verdict = TrialVerdict(True)
    elif kind == "failed":
        verdict = TrialVerdict(False, one_line(str(value), 300))
    elif kind == "died":
        verdict = TrialVerdict(False, f"its first picture ended llama.cpp ({value}) when tried in a separate process")
    else:
        verdict = TrialVerdict(False, f"its first picture took more than {TRIAL_SECONDS / 60:.0f} minutes")
    log.info("Projector trial of %s: %s", one_line(projector.name), verdict)
    with _record_lock:
        known = read_cache_file(record_file, MAX_RECORD_BYTES, "projector trials")
        known[key] = {"usable": verdict.usable, "reason": verdict.reason}
        save_cache_file(record_file, known)  # not kept (a full disk): tried again next time
    return verdict


def trial_main(conn: Connection, request: TrialRequest) -> None:
    """The child's entry point (multiprocessing, spawn): one answer sent, then the process ends."""
    try:
        with open(os.devnull, "w") as sink:  # llama.cpp and clip.cpp print to stderr: not for the app's terminal
            os.dup2(sink.fileno(), 2)
        conn.send(("done", _encode_one_picture(request)))
    except Exception as exc:  # what failed is reported (an error the app's own load would meet too)
        conn.send(("failed", f"{type(exc).__name__}: {exc}"[:500]))
    finally:
        conn.close()


def _encode_one_picture(request: TrialRequest) -> str:
    from llama_cpp import Llama

    from fara_desktop.engine.vision import VisionModel
    from fara_desktop.machine.kernel_paths import BY_KEY, DEFAULT, use_path
    from fara_desktop.machine.llama_build import load_ggml_cpu_library, route_llama_logs_to_logging

    route_llama_logs_to_logging()
    load_ggml_cpu_library()
    use_path(BY_KEY.get(request.kernel_path, DEFAULT))  # AMX, refused in the app, is refused here too (inherited)
    llm: Any = Llama(request.model, vocab_only=True, verbose=False)
    vision = VisionModel(Path(request.projector), llm, request.threads)
    try:
        vision.encode_probe()
    finally:
        vision.close()
    return "encoded"


def trial_for(model: Path, projector: Path, kernel_path: str, threads: int) -> tuple[bool, str] | None:
    """``projector_trial`` for ``engine.vision.open_vision``: its verdict kept in the kernel record's folder."""
    from fara_desktop.machine.kernels import kernel_cache_file

    verdict = projector_trial(model, projector, kernel_path, threads, kernel_cache_file().parent)
    return (verdict.usable, verdict.reason) if verdict is not None else None
