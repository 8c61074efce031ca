"""Verified, resumable downloads from a stand-in hub on 127.0.0.1: listing, resume, pause, checksums, disk space."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fara_desktop.models import transfer
from fara_desktop.models.discovery import scan_models
from fara_desktop.models.hub import (
    DownloadError,
    RemoteNotFoundError,
    parse_model_reference,
    quant_tag,
    resolve_remote_file,
)
from fara_desktop.models.transfer import (
    ChecksumMismatchError,
    DownloadCancelled,
    Downloader,
    DownloadInterruptedError,
    NotEnoughDiskSpaceError,
)
from tests.conftest import wait_until
from tests.helpers.gguf_factory import write_projector, write_tiny_model
from tests.helpers.hub_server import COMMIT, HubServer
from tests.helpers.threads import capture_errors

REPO = "fara-tests/Tiny-Llama-GGUF"


FILE = "Tiny-Llama-Q8_0.gguf"


def fara(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fara_desktop", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_tiny_model(tmp_path_factory.mktemp("hub") / "tiny.gguf", n_embd=256, n_ff=512, n_layer=4)
    data = path.read_bytes()
    assert len(data) > 3 * transfer.CHUNK_BYTES  # several reads, so pause and resume happen mid-file
    return data


@pytest.fixture
def hub(model_bytes: bytes):
    with HubServer() as server:
        server.add(REPO, FILE, model_bytes)
        server.add(REPO, "Tiny-Llama-Q4_K_M.gguf", model_bytes[: len(model_bytes) // 2])
        yield server


def test_full_download_is_verified_and_found_by_discovery(hub, hf_cache, model_bytes, tmp_path):
    remote = resolve_remote_file(REPO, FILE, endpoint=hub.url)
    assert (remote.size, remote.sha256) == (len(model_bytes), hashlib.sha256(model_bytes).hexdigest())
    seen: list[int] = []
    path = Downloader(remote, hf_cache, on_progress=lambda p: seen.append(p.done)).run()
    assert path == hf_cache / "models--fara-tests--Tiny-Llama-GGUF" / "snapshots" / COMMIT / FILE
    assert path.read_bytes() == model_bytes
    assert path.is_symlink() and path.resolve().name == remote.sha256  # huggingface_hub's own cache layout
    assert (path.parents[2] / "refs" / "main").read_text() == COMMIT
    assert seen == sorted(seen) and seen[-1] == len(model_bytes)
    assert not list(hf_cache.rglob("*.incomplete"))

    scan = scan_models(tmp_path / "models", tmp_path / "cache")
    found = [m for m in scan.usable if Path(m.path) == path]
    assert found and found[0].source.startswith("Hugging Face")
    # What huggingface_hub itself sees in its cache.
    from huggingface_hub import try_to_load_from_cache

    assert Path(try_to_load_from_cache(REPO, FILE, cache_dir=hf_cache)) == path


def test_pause_keeps_the_partial_file_and_resume_uses_a_range_request(hub, hf_cache, model_bytes):
    hub.state.throttle_bytes = 256 * 1024
    hub.state.gate = threading.Semaphore(3)
    remote = resolve_remote_file(REPO, FILE, endpoint=hub.url)
    downloader = Downloader(remote, hf_cache)
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            downloader.run()
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: downloader.partial_bytes() > 0, 60, "the first pieces")
    downloader.pause()  # the server is stalled: pause must not wait for it
    thread.join(10)
    assert not thread.is_alive()
    assert isinstance(outcome[0], DownloadCancelled) and outcome[0].kept_partial
    kept = downloader.partial_bytes()
    assert 0 < kept < len(model_bytes)

    hub.open_gate()
    path = Downloader(remote, hf_cache).run()
    assert path.read_bytes() == model_bytes
    ranges = [r for p, r in hub.state.requests if p.startswith("/cdn/") and r]
    assert ranges == [f"bytes={kept}-"]


def test_cancel_deletes_the_partial_file(hub, hf_cache):
    hub.state.throttle_bytes = 256 * 1024
    hub.state.gate = threading.Semaphore(2)
    downloader = Downloader(resolve_remote_file(REPO, FILE, endpoint=hub.url), hf_cache)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: capture_errors(downloader.run, errors))
    thread.start()
    wait_until(lambda: downloader.partial_bytes() > 0, 30, "some bytes")
    downloader.cancel()
    thread.join(10)
    assert isinstance(errors[0], DownloadCancelled) and not errors[0].kept_partial
    assert not downloader.partial.exists()
    assert not downloader.target.exists()


def test_resume_after_the_process_was_killed(hub, hf_cache, model_bytes, tmp_path):
    """`fara-desktop download` is killed with SIGKILL mid-transfer; the next run continues from the partial file."""
    hub.state.throttle_bytes = 128 * 1024
    hub.state.gate = threading.Semaphore(4)
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(hf_cache), "FARA_HOME": str(tmp_path / "f")}
    child = subprocess.Popen(
        [sys.executable, "-m", "fara_desktop", "download", REPO, "--file", FILE],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    remote = resolve_remote_file(REPO, FILE, endpoint=hub.url)
    partial = Downloader(remote, hf_cache).partial
    wait_until(lambda: partial.exists() and partial.stat().st_size > 0, 60, "a partial file")
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=10)
    kept = partial.stat().st_size
    assert 0 < kept < len(model_bytes)

    hub.open_gate()
    result = fara("download", REPO, "--file", FILE, env=env)
    assert result.returncode == 0, result.stderr
    assert "resuming after" in result.stderr and "verified sha256" in result.stderr
    path = Path(result.stdout.strip())
    assert path.read_bytes() == model_bytes
    assert [r for p, r in hub.state.requests if p.startswith("/cdn/") and r] == [f"bytes={kept}-"]


def test_checksum_mismatch_deletes_the_file_and_says_so(hub, hf_cache, model_bytes):
    hub.add(REPO, "Damaged-Q8_0.gguf", model_bytes, published_sha256="ab" * 32)
    downloader = Downloader(resolve_remote_file(REPO, "Damaged-Q8_0.gguf", endpoint=hub.url), hf_cache)
    with pytest.raises(ChecksumMismatchError, match="arrived damaged"):
        downloader.run()
    assert not downloader.partial.exists() and not downloader.blob.exists() and not downloader.target.exists()


def test_missing_repository_and_file_are_typed_errors(hub, hf_cache):
    with pytest.raises(RemoteNotFoundError, match="no repository fara-tests/Nope"):
        resolve_remote_file("fara-tests/Nope", endpoint=hub.url)
    with pytest.raises(RemoteNotFoundError, match=r"offers: Tiny-Llama-Q8_0\.gguf"):
        resolve_remote_file(REPO, "Other-Q2_K.gguf", endpoint=hub.url)
    remote = resolve_remote_file(REPO, FILE, endpoint=hub.url)
    del hub.state.repos[REPO][FILE]  # listed a moment ago, gone now: the file URL answers 404
    with pytest.raises(RemoteNotFoundError, match="HTTP 404"):
        Downloader(remote, hf_cache).run()


def test_dropped_connection_keeps_the_partial_and_the_next_attempt_finishes(hub, hf_cache, model_bytes):
    hub.state.drop_after_bytes = 1_500_000
    remote = resolve_remote_file(REPO, FILE, endpoint=hub.url)
    downloader = Downloader(remote, hf_cache)
    with pytest.raises(DownloadInterruptedError, match="kept"):
        downloader.run()
    assert downloader.partial_bytes() == 1_500_000
    assert downloader.run().read_bytes() == model_bytes


def test_server_that_ignores_range_restarts_cleanly(hub, hf_cache, model_bytes):
    hub.state.drop_after_bytes = 700_000
    remote = resolve_remote_file(REPO, FILE, endpoint=hub.url)
    with pytest.raises(DownloadInterruptedError):
        Downloader(remote, hf_cache).run()
    hub.state.ignore_range = True
    assert Downloader(remote, hf_cache).run().read_bytes() == model_bytes


def test_not_enough_disk_space_refuses_before_downloading(hub, hf_cache, monkeypatch):
    monkeypatch.setattr(transfer, "free_bytes", lambda _folder: 10 * 1024 * 1024)
    remote = resolve_remote_file(REPO, FILE, endpoint=hub.url)
    with pytest.raises(NotEnoughDiskSpaceError, match=r"only 10\.0 MiB is free"):
        Downloader(remote, hf_cache).run()
    assert not [p for p, _ in hub.state.requests if p.startswith("/cdn/")]


def test_unreachable_hub_is_a_clear_error(hf_cache):
    with pytest.raises(DownloadError, match=r"127\.0\.0\.1:9 refused the connection"):
        resolve_remote_file(REPO, FILE, endpoint="http://127.0.0.1:9")


def test_quantization_tag_picks_the_file_when_names_drift(hub):
    assert resolve_remote_file(REPO, "tiny-llama-q4_k_m.gguf", endpoint=hub.url).filename == "Tiny-Llama-Q4_K_M.gguf"
    assert resolve_remote_file(REPO, None, "Q8_0", endpoint=hub.url).filename == FILE
    assert quant_tag("Qwen2.5-1.5B-Instruct-IQ4_XS.gguf") == "IQ4_XS"
    assert quant_tag("qwen2.5-0.5b-instruct-q4_k_m.gguf") == "Q4_K_M"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bartowski/Llama-3.2-1B-Instruct-GGUF", ("bartowski/Llama-3.2-1B-Instruct-GGUF", None, None, None)),
        (
            "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF",
            ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", None, None, "https://huggingface.co"),
        ),
        (
            "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_k_m.gguf",
            ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", "qwen2.5-0.5b-instruct-q4_k_m.gguf", "main", "https://huggingface.co"),
        ),
        (
            "https://hf-mirror.com/a/b/blob/v1.0/sub/dir/model-Q4_0.gguf?download=true",
            ("a/b", "sub/dir/model-Q4_0.gguf", "v1.0", "https://hf-mirror.com"),
        ),
    ],
)
def test_pasted_references(text, expected):
    ref = parse_model_reference(text)
    assert (ref.repo_id, ref.filename, ref.revision, ref.endpoint) == expected


@pytest.mark.parametrize("text", ["not a repo", "ftp://example.com/a/b", "https://example.com/only-one-part"])
def test_bad_references_are_typed_errors(text):
    with pytest.raises(DownloadError):
        parse_model_reference(text)


def test_download_command_reports_progress_on_stderr_and_the_path_on_stdout(hub, hf_cache, model_bytes, tmp_path):
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(hf_cache), "FARA_HOME": str(tmp_path / "f")}
    result = fara("download", f"{hub.url}/{REPO}/resolve/main/{FILE}", env=env)
    assert result.returncode == 0, result.stderr
    assert "100.0 %" in result.stderr
    assert Path(result.stdout.strip()).read_bytes() == model_bytes

    missing = fara("download", "fara-tests/Nope", env=env)
    assert missing.returncode == 1
    assert "no repository fara-tests/Nope" in missing.stderr and "Traceback" not in missing.stderr


def test_catalog_command_lists_verdicts_and_one_recommendation(tmp_path):
    env = {**os.environ, "FARA_HOME": str(tmp_path / "f"), "HF_HUB_CACHE": str(tmp_path / "hf")}
    result = fara("catalog", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert len(data["options"]) >= 30
    assert sum(option["recommended"] for option in data["options"]) == 1
    assert data["recommended"]["fit"]["verdict"] == "fits"
    assert {option["fit"]["verdict"] for option in data["options"]} <= {"fits", "tight", "too_big"}


def test_catalog_command_names_the_new_models_with_their_sources(tmp_path):
    """Issue 54: `fara-desktop catalog` lists Fara1.5 4B/9B with where their figures come from, and says that a
    model that sees brings its projector."""
    env = {**os.environ, "FARA_HOME": str(tmp_path / "f"), "HF_HUB_CACHE": str(tmp_path / "hf")}
    result = fara("catalog", env=env)
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("\nFara1.5 4B  (")[1].split("\n\n")[0]
    assert "https://github.com/microsoft/fara" in block and "https://huggingface.co/bartowski/Fara1.5-4B-GGUF" in block
    assert "mmproj-Fara1.5-4B-f16.gguf" in block
    assert "\nFara1.5 9B  (" in result.stdout
    data = json.loads(fara("catalog", "--json", env=env).stdout)
    fara15 = next(o for o in data["options"] if o["id"] == "fara1.5-4b")
    assert fara15["projector"] == "mmproj-Fara1.5-4B-f16.gguf" and fara15["sources"]


def test_downloading_a_catalog_model_that_sees_brings_its_projector(hf_cache, model_bytes, tmp_path):
    projector = write_projector(tmp_path / "mmproj.gguf").read_bytes()
    with HubServer() as server:
        server.add("unsloth/Qwen3.5-0.8B-GGUF", "Qwen3.5-0.8B-Q4_K_M.gguf", model_bytes)
        server.add("unsloth/Qwen3.5-0.8B-GGUF", "mmproj-F16.gguf", projector)
        env = {**os.environ, "HF_ENDPOINT": server.url, "HF_HUB_CACHE": str(hf_cache), "FARA_HOME": str(tmp_path / "f")}
        result = fara("download", "unsloth/Qwen3.5-0.8B-GGUF", "--file", "Qwen3.5-0.8B-Q4_K_M.gguf", env=env)
    assert result.returncode == 0, result.stderr
    model = Path(result.stdout.strip())
    assert model.read_bytes() == model_bytes
    assert (model.parent / "mmproj-F16.gguf").read_bytes() == projector
    assert "its projector mmproj-F16.gguf" in result.stderr
