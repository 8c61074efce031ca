"""Links and hubs from strangers: the token stays with the configured hub, redirects and listings are checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from fara_desktop import __version__
from fara_desktop.models import hub as hub_client
from fara_desktop.models.hub import (
    DownloadError,
    RemoteFile,
    list_gguf_files,
    parse_model_reference,
    resolve_remote_file,
)
from fara_desktop.models.transfer import DownloadCancelled, Downloader, DownloadInterruptedError
from tests.conftest import wait_until
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.hub_server import COMMIT, HubServer
from tests.helpers.threads import capture_errors

REPO = "fara-tests/Tiny-GGUF"


FILE = "Tiny-Q8_0.gguf"


TOKEN = "hf_secretsecretsecretsecret"


@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_tiny_model(tmp_path_factory.mktemp("hub") / "tiny.gguf", n_embd=128, n_ff=256).read_bytes()


@pytest.fixture
def hub(model_bytes: bytes, monkeypatch: pytest.MonkeyPatch):
    """The configured hub (HF_ENDPOINT), with the user's token in the environment."""
    with HubServer() as server:
        server.add(REPO, FILE, model_bytes)
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield server


@pytest.fixture
def other_host(model_bytes: bytes):
    """Another server: a pasted link's host, or a CDN the hub redirects to."""
    with HubServer() as server:
        server.add(REPO, FILE, model_bytes)
        yield server


def _authorizations(server: HubServer) -> list[str]:
    return [h.get("authorization", "") for _, h in server.state.headers if "authorization" in h]


ALLOWED = ("/api/models", "/cdn/")  # search, listing, the file (and its redirect target)


def _unasked(server: HubServer) -> list[str]:
    return [p for p, _ in server.state.requests if not (p.startswith(ALLOWED) or "/resolve/" in p)]


def test_the_token_goes_to_the_configured_hub_only(hub, other_host, hf_cache):
    Downloader(resolve_remote_file(REPO, FILE), hf_cache).run()
    assert _authorizations(hub) and all(TOKEN in a for a in _authorizations(hub))
    ref = parse_model_reference(f"{other_host.url}/{REPO}/resolve/main/{FILE}")
    remote = resolve_remote_file(ref.repo_id, ref.filename, None, ref.revision, ref.endpoint)
    Downloader(remote, hf_cache / "second").run()
    assert other_host.state.headers, "the pasted host was not asked"
    assert _authorizations(other_host) == []


def test_a_redirect_to_another_origin_drops_the_token(hub, other_host, hf_cache):
    hub.state.cdn_base = other_host.url  # the hub sends the file from "its CDN" on another port
    path = Downloader(resolve_remote_file(REPO, FILE), hf_cache).run()
    assert path.is_file()
    cdn = [h for p, h in other_host.state.headers if p.startswith("/cdn/")]
    assert cdn and all("authorization" not in h for h in cdn)
    assert any(TOKEN in h.get("authorization", "") for p, h in hub.state.headers if "/resolve/" in p)


@pytest.mark.parametrize(
    ("name", "commit"),
    [
        ("../../../../outside/evil.gguf", COMMIT),
        ("/tmp/evil.gguf", COMMIT),
        ("sub/../../evil.gguf", COMMIT),
        ("ok.gguf", "../../../outside"),
        ("ok.gguf", "main"),
    ],
)
def test_a_listing_cannot_place_files_outside_the_cache(hub, hf_cache, tmp_path, name, commit):
    sha = "a" * 64
    hub.state.listing_override = {
        "id": REPO,
        "sha": commit,
        "siblings": [{"rfilename": name, "size": 10, "lfs": {"sha256": sha, "size": 10, "pointerSize": 134}}],
    }
    if commit == COMMIT:
        assert list_gguf_files(REPO) == []  # the entry is dropped, with a warning in the log
    else:
        with pytest.raises(DownloadError, match="commit"):
            list_gguf_files(REPO)
    with pytest.raises(DownloadError):
        Downloader(RemoteFile(REPO, name, commit, 10, sha, hub.url), hf_cache)
    assert not (tmp_path / "outside").exists()


def test_a_206_for_other_bytes_than_asked_is_not_spliced_in(hub, hf_cache, model_bytes):
    remote = resolve_remote_file(REPO, FILE)
    downloader = Downloader(remote, hf_cache)
    downloader.partial.parent.mkdir(parents=True)
    downloader.partial.write_bytes(model_bytes[:1000])
    hub.state.content_range_shift = 7
    with pytest.raises(DownloadInterruptedError, match="other than those asked"):
        downloader.run()
    hub.state.content_range_shift = 0
    assert Downloader(remote, hf_cache).run().read_bytes() == model_bytes


def test_a_blob_of_the_right_size_but_wrong_bytes_is_downloaded_again(hub, hf_cache, model_bytes):
    remote = resolve_remote_file(REPO, FILE)
    downloader = Downloader(remote, hf_cache)
    downloader.blob.parent.mkdir(parents=True)
    downloader.blob.write_bytes(b"\0" * len(model_bytes))
    assert downloader.run().read_bytes() == model_bytes


def test_pause_interrupts_a_server_that_has_not_answered_yet(hub, hf_cache):
    hub.state.stall_headers = threading.Event()
    downloader = Downloader(resolve_remote_file(REPO, FILE), hf_cache)
    outcome: list[BaseException] = []
    thread = threading.Thread(target=lambda: capture_errors(downloader.run, outcome))
    thread.start()
    wait_until(lambda: any(p.startswith("/cdn/") for p, _ in hub.state.requests), 10, "the file request")
    downloader.pause()
    thread.join(5)
    stalled = thread.is_alive()
    hub.state.stall_headers.set()
    thread.join(10)
    assert not stalled, "pause waited for the server's headers"
    assert isinstance(outcome[0], DownloadCancelled)


def test_the_cli_download_sends_only_what_the_download_needs(hub, hf_cache, tmp_path):
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(hf_cache), "FARA_HOME": str(tmp_path / "f"),
           "HF_HOME": str(tmp_path / "hf-home")}  # fmt: skip
    env.pop("HF_HUB_DISABLE_TELEMETRY", None)
    done = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "download", REPO, "--file", FILE],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _unasked(hub) == []
    agents = {h.get("user-agent") for _, h in hub.state.headers}
    assert agents == {f"fara-desktop/{__version__}"}
    assert not (tmp_path / "hf-home" / ".agent_harnesses.json").exists()


def test_the_get_models_dialog_sends_only_what_search_listing_and_download_need(qtbot, hub, hf_cache, tmp_path):
    from fara_desktop.ui.dialogs.models_dialog import GetModelsDialog

    dialog = GetModelsDialog(lambda: (_ for _ in ()).throw(RuntimeError("no catalog here")), endpoint=hub.url,
                             cache_dir=hf_cache)  # fmt: skip
    qtbot.addWidget(dialog)
    dialog.search_edit.setText("Tiny")
    dialog.search()
    qtbot.waitUntil(lambda: dialog.results.count() > 0, timeout=10000)
    dialog.show_repo_files(REPO)
    qtbot.waitUntil(lambda: any(p.startswith(f"/api/models/{REPO}") for p, _ in hub.state.requests), timeout=10000)
    row = dialog.download_remote(resolve_remote_file(REPO, FILE))
    qtbot.waitUntil(lambda: row.path is not None, timeout=30000)
    assert _unasked(hub) == []
    assert {h.get("user-agent") for _, h in hub.state.headers} == {f"fara-desktop/{__version__}"}


def test_telemetry_is_off_in_the_hub_client():
    from huggingface_hub import constants

    hub_client.configured_endpoint()
    assert constants.HF_HUB_DISABLE_TELEMETRY is True
    assert json.dumps(hub_client.user_agent()) == json.dumps(f"fara-desktop/{__version__}")


def test_a_pasted_link_to_another_host_is_asked_about_and_declining_requests_nothing(qtbot, hub, other_host, hf_cache):
    from fara_desktop.ui.dialogs.models_dialog import GetModelsDialog

    dialog = GetModelsDialog(lambda: (_ for _ in ()).throw(RuntimeError("no catalog")), cache_dir=hf_cache)
    qtbot.addWidget(dialog)
    asked: list[str] = []
    dialog.confirm_host = lambda host: asked.append(host) or False  # type: ignore[method-assign]
    dialog.paste_edit.setText(f"{other_host.url}/{REPO}/resolve/main/{FILE}")
    dialog.get_pasted()
    assert asked == [other_host.url.removeprefix("http://")]
    assert other_host.state.requests == []
    dialog.confirm_host = lambda host: True  # type: ignore[method-assign]
    dialog.get_pasted()
    qtbot.waitUntil(lambda: dialog.rows and dialog.rows[-1].path is not None, timeout=30000)
    assert f"from {other_host.url.removeprefix('http://')}" in dialog.rows[-1].title.text()
    assert _authorizations(other_host) == []


def test_the_cli_refuses_another_host_unless_allowed(hub, other_host, hf_cache, tmp_path):
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(hf_cache), "FARA_HOME": str(tmp_path / "f"),
           "HF_TOKEN": TOKEN}  # fmt: skip
    url = f"{other_host.url}/{REPO}/resolve/main/{FILE}"
    refused = subprocess.run([sys.executable, "-m", "fara_desktop", "download", url],
                             env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert refused.returncode == 1 and "--allow-host" in refused.stderr
    assert other_host.state.requests == []
    host = other_host.url.removeprefix("http://")
    allowed = subprocess.run([sys.executable, "-m", "fara_desktop", "download", url, "--allow-host", host],
                             env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert _authorizations(other_host) == []
