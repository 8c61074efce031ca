"""A stranger's model cannot take the app down twice, and a failed switch keeps the model in use.

The abort is real: a copy of SmolLM2 with ``llama.block_count`` = 4,000,000,000 makes llama.cpp call abort()
(SIGABRT, the whole process). The header checks refuse that file now, so to test the second layer (the load
record) the child processes here switch the header checks off — standing in for a file that slips past them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import gguf
import pytest

from fara_desktop.engine.types import Finished, ModelLoaded, ModelLoadFailed
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.files.paths import app_paths
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.planning.planner import plan_startup
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import EventLog
from tests.helpers.gguf_factory import rewrite_gguf, write_tiny_model
from tests.helpers.paths import REPO_ROOT

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

WITHOUT_HEADER_CHECKS = (
    "import fara_desktop.models.gguf_checks as checks\n"
    "checks.check_loadable = lambda *args, **kwargs: None  # a file that slips past the header checks\n"
)


@pytest.fixture
def crashing_model(smollm2_path: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "strangers-models"
    folder.mkdir()
    return rewrite_gguf(
        smollm2_path, folder / "smollm2-edited.gguf", {"llama.block_count": (gguf.GGUFValueType.UINT32, 4_000_000_000)}
    )


def run_child(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO_ROOT, env=env)  # fmt: skip


def test_the_file_really_aborts_llama_cpp_without_the_checks(crashing_model: Path, fara_home: Path, monkeypatch):
    code = WITHOUT_HEADER_CHECKS + textwrap.dedent(f"""
        from pathlib import Path
        from fara_desktop.engine.llama_backend import LlamaBackend
        from fara_desktop.models.load_record import LoadRecord
        from fara_desktop.planning.params import LoadParams
        LlamaBackend(LoadRecord(Path({str(fara_home / "data")!r}))).load(Path({str(crashing_model)!r}), LoadParams())
    """)
    done = run_child(code)
    assert done.returncode == -signal.SIGABRT, done.stderr[-2000:]
    # The next start knows which file it was, says so once, and never chooses it again, even when the user had
    # (the header checks stay off here too: this is the second layer on its own).
    from fara_desktop.models import metadata

    monkeypatch.setattr(metadata, "check_loadable", lambda *args, **kwargs: None)
    paths = app_paths()
    plan = plan_startup(paths, preferred=crashing_model, extra_folders=[crashing_model.parent])
    assert [Path(c.path) for c in plan.crashed_now] == [crashing_model]
    assert plan.model is not None and Path(plan.model.path) != crashing_model
    assert "stopped the app while loading" in plan.reason
    listed = next(m for m in plan.scan.models if Path(m.path) == crashing_model)
    assert not listed.usable and "stopped the app" in (listed.problem or "")
    again = plan_startup(paths, preferred=crashing_model, extra_folders=[crashing_model.parent])
    assert again.crashed_now == [] and again.model is not None and Path(again.model.path) != crashing_model
    # Asked for by name in a terminal, it is refused with the reason rather than swapped for another model.
    serve = run_child(WITHOUT_HEADER_CHECKS + (
        "import sys\nfrom fara_desktop.main import main\n"
        f"sys.exit(main(['serve', '--port', '0', '--model', {str(crashing_model)!r}]))\n"
    ))  # fmt: skip
    assert serve.returncode == 1 and "smollm2-edited.gguf was not loaded" in serve.stderr, serve.stderr[-2000:]
    assert "stopped the app while loading" in serve.stderr


def test_a_model_that_aborts_llama_cpp_no_longer_bricks_the_app(crashing_model: Path, tmp_path: Path):
    """Chosen once in Settings, the file was loaded at every start, and every start aborted."""
    home = tmp_path / "fara"
    config = home / "config"
    config.mkdir(parents=True)
    (config / "settings.json").write_text(json.dumps({"model_path": str(crashing_model)}), encoding="utf-8")
    env = {**__import__("os").environ, "FARA_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    start = WITHOUT_HEADER_CHECKS + (
        "import sys\nfrom fara_desktop.main import main\n"
        "sys.exit(main(['smoke', '--prompt', 'Say hello', '--max-tokens', '8', '--timeout', '240']))\n"
    )
    first = run_child(start, env)
    assert first.returncode == -signal.SIGABRT, first.stderr[-2000:]  # what users saw at every start
    second = run_child(start, env)
    assert second.returncode == 0, second.stderr[-3000:]
    result = json.loads(second.stdout.strip().splitlines()[-1])
    assert result["model_path"] != str(crashing_model) and result["reply"].strip()
    told = " ".join(result["notices"])
    assert "stopped last time while llama.cpp was loading smollm2-edited.gguf" in told
    assert "Started with" in told and "Replace or delete the file" in told
    third = run_child(start, env)  # and it stays usable, without telling the story again
    assert third.returncode == 0, third.stderr[-3000:]
    assert "stopped last time" not in " ".join(json.loads(third.stdout.strip().splitlines()[-1])["notices"])


@pytest.fixture
def worker(event_log: EventLog, fara_home: Path):
    worker = InferenceWorker(event_log, load_record=LoadRecord(fara_home / "data")).start()
    yield worker
    assert worker.shutdown(timeout=30)


def _broken_but_plausible(tmp_path: Path) -> Path:
    """A model that passes the header checks but that llama.cpp refuses (a tensor it needs is missing)."""
    good = write_tiny_model(tmp_path / "tiny.gguf")
    return rewrite_gguf(good, tmp_path / "missing-tensor.gguf", {}, drop_tensors=("output_norm.weight",))


def _still_answers(worker: InferenceWorker, event_log: EventLog) -> Finished:
    worker.generate([ChatMessage("user", "Hi")], SamplingParams(temperature=0.0, max_tokens=4))
    finished = event_log.next_of(Finished)
    assert isinstance(finished, Finished)
    return finished


@pytest.mark.parametrize("room_for_both", [True, False])
def test_a_failed_switch_keeps_the_model_in_use(
    worker: InferenceWorker, event_log: EventLog, smollm2_path: Path, tmp_path: Path, room_for_both: bool, monkeypatch
):
    from fara_desktop.engine import llama_backend

    if not room_for_both:  # the old model must go first; it is loaded again when the new one fails
        monkeypatch.setattr(llama_backend, "fits_beside", lambda header, params: False)
    worker.load_model(smollm2_path)
    loaded = event_log.next_of(ModelLoaded, ModelLoadFailed)
    assert isinstance(loaded, ModelLoaded)
    worker.load_model(_broken_but_plausible(tmp_path))
    failed = event_log.next_of(ModelLoaded, ModelLoadFailed)
    assert isinstance(failed, ModelLoadFailed), failed
    assert "missing-tensor.gguf" in failed.message
    assert failed.still_loaded is not None and failed.still_loaded.path == smollm2_path
    assert _still_answers(worker, event_log).text.strip()


def test_a_file_refused_from_its_header_never_unloads_the_model_in_use(
    worker: InferenceWorker, event_log: EventLog, smollm2_path: Path, crashing_model: Path
):
    worker.load_model(smollm2_path)
    assert isinstance(event_log.next_of(ModelLoaded, ModelLoadFailed), ModelLoaded)
    worker.load_model(crashing_model)
    failed = event_log.next_of(ModelLoaded, ModelLoadFailed)
    assert isinstance(failed, ModelLoadFailed) and "block_count is 4,000,000,000" in failed.message
    assert failed.still_loaded is not None and failed.still_loaded.path == smollm2_path
    assert _still_answers(worker, event_log).text.strip()
