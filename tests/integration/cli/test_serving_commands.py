"""`fara-desktop serve` and `fara-desktop smoke --server`, as a person or a script runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import openai
import pytest

from fara_desktop.bench.api_cache import bakery_chat, followed_up
from tests.conftest import wait_until
from tests.helpers.openai_servers import LlamaCppServer


def end(process: subprocess.Popen[str]) -> None:
    """The server process never outlives its test, and its pipes are closed."""
    if process.poll() is None:
        process.kill()
        process.wait(10)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


# ``python -m fara_desktop`` with every import of Qt refused: serve is built on the Qt-free core, not on the window.
WITHOUT_QT = """
import runpy, sys
class RefuseQt:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("PySide6", "shiboken6"):
            raise ImportError("Qt is blocked in this test: " + name)
sys.meta_path.insert(0, RefuseQt())
sys.argv[0] = "fara-desktop"
runpy.run_module("fara_desktop", run_name="__main__", alter_sys=True)
"""


@pytest.mark.real_model
def test_serve_prints_its_address_first_answers_the_openai_client_and_stops_on_sigterm(fara_home, smollm2_path):
    """Run with Qt's imports blocked: the local API without a window needs no part of the GUI."""
    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", WITHOUT_QT, "serve", "--port", "0", "--model", str(smollm2_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        address = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert address.startswith("http://127.0.0.1:") and address.endswith("/v1"), address
        client = openai.OpenAI(base_url=address, api_key="none", max_retries=0)
        reply = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Which planet do we live on?"}], temperature=0,
            max_tokens=24,
        )  # fmt: skip
        # Not "Earth": the 135M model's greedy answer depends on the CPU's kernels (AVX2 machines say "Earth", an
        # AVX-only one "Kepler-41B"); what this test checks is the path, not the model's knowledge.
        assert reply.choices[0].message.content.strip() and reply.usage.completion_tokens > 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, process.stderr.read()  # type: ignore[union-attr]
    finally:
        end(process)


@pytest.mark.real_model
def test_serve_measures_its_threads_once_as_the_window_does(fara_home, smollm2_path):
    """Issue 50: the plan → load → calibrate loop is the core's (``app.model_loading``); serve ran only the plan and
    kept the untested thread count for ever. Now the first start measures it (giving way to a request) and keeps
    it for this machine; the next start has nothing to measure."""
    import json

    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model", str(smollm2_path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        address = process.stdout.readline().strip()  # type: ignore[union-attr]
        with openai.OpenAI(base_url=address, api_key="none", max_retries=0) as client:
            reply = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=4)  # fmt: skip
        assert reply.usage.completion_tokens > 0
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
        reader.start()
        wait_until(lambda: any("measured fastest for this model" in line for line in lines), 120, "the measurement")
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        end(process)
    machine = json.loads((fara_home / "cache" / "machine.json").read_text(encoding="utf-8"))
    assert "threads" in json.dumps(machine)
    again = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        again.stdout.readline()  # type: ignore[union-attr]
        again.stdout.readline()  # type: ignore[union-attr]  # "serving …"
        again.send_signal(signal.SIGTERM)
        assert again.wait(30) == 0
        assert "measured fastest" not in again.stdout.read()  # type: ignore[union-attr]
    finally:
        end(again)


@pytest.mark.real_model
def test_serve_stopped_as_soon_as_it_printed_its_address_ends_cleanly(fara_home, smollm2_path):
    """A script that reads the address and stops serve at once got a traceback (the signal closed the socket before
    uvicorn took it: exit 1) or death by SIGTERM (the handlers came after the address)."""
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    for lines_read in (1, 2):
        process = subprocess.Popen(
            [sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model", str(smollm2_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            for _ in range(lines_read):
                process.stdout.readline()  # type: ignore[union-attr]
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0, process.stderr.read()[-2000:]  # type: ignore[union-attr]
        finally:
            end(process)


@pytest.mark.real_model
def test_serve_beyond_this_computer_without_a_key_is_refused(fara_home, smollm2_path):
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "serve", "--host", "0.0.0.0", "--port", "0", "--model",
         str(smollm2_path)], capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1 and "API key" in result.stderr and "Traceback" not in result.stderr


def _serve_with_key(env: dict[str, str], *args: str, right: str, wrong: tuple[str, ...] = ("nope",)
                    ) -> tuple[int, str, list[int]]:  # fmt: skip
    """Start serve, ask /models without a key, with each ``wrong`` one and with the ``right`` one; returns exit
    code, stderr, statuses."""
    import httpx

    process = subprocess.Popen(
        [sys.executable, "-m", "fara_desktop", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        address = process.stdout.readline().strip()  # type: ignore[union-attr]
        statuses = [
            httpx.get(f"{address}/models", headers=headers, timeout=30).status_code
            for headers in ({}, *({"authorization": f"Bearer {key}"} for key in (*wrong, right)))
        ]
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
        return code, process.stderr.read(), statuses  # type: ignore[union-attr]
    finally:
        end(process)


@pytest.mark.real_model
def test_serve_takes_its_key_from_the_environment_or_a_file_and_warns_about_argv(fara_home, smollm2_path, tmp_path):
    """Issue 62, item 3: a key is never split at a comma or a space into keys each valid alone ("x7Qp2" was let in
    by ``FARA_API_KEY='x7Qp2,zR9mK4vT8wL3nB6'``, "my" by a key file holding "my secret key")."""
    base = {**os.environ, "FARA_HOME": str(fara_home)}
    model = ("--model", str(smollm2_path))
    whole = "x7Qp2,zR9mK4vT8wL3nB6"
    code, stderr, statuses = _serve_with_key({**base, "FARA_API_KEY": whole}, *model, right=whole,
                                             wrong=("nope", "x7Qp2", "zR9mK4vT8wL3nB6"))  # fmt: skip
    assert (code, statuses) == (0, [401, 401, 401, 401, 200]) and "process list" not in stderr
    key_file = tmp_path / "key.txt"
    key_file.write_text("my secret key\nsk-second-app-key\n", encoding="utf-8")
    code, stderr, statuses = _serve_with_key(base, "--api-key-file", str(key_file), *model, right="my secret key",
                                             wrong=("my", "secret", "key"))  # fmt: skip
    assert (code, statuses) == (0, [401, 401, 401, 401, 200])
    phrase = "correct horse battery staple"
    code, stderr, statuses = _serve_with_key(base, "--api-key", phrase, *model, right=phrase, wrong=("horse",))
    assert statuses == [401, 401, 200] and "visible to every user of this computer" in stderr


@pytest.mark.parametrize("key", ["k3y", "clé-très-secrète"])
def test_serve_refuses_a_key_too_short_or_not_ascii_with_the_reason(fara_home, key):
    env = {**os.environ, "FARA_HOME": str(fara_home), "FARA_API_KEY": key}
    result = subprocess.run([sys.executable, "-m", "fara_desktop", "serve", "--port", "0"], capture_output=True,
                            text=True, env=env, timeout=120)  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("at least 8" if key == "k3y" else "ASCII") in result.stderr and key not in result.stderr


@pytest.mark.real_model
def test_serve_keeps_each_keys_conversation_and_never_lends_it_to_another_key(fara_home, smollm2_path, tmp_path):
    """Issue 52: a client's follow-up reads only its new words (as ``usage.prompt_tokens_details.cached_tokens``
    says, and as llama-server's slots do); a second key sending the first key's exact conversation reads it
    whole. Through ``fara-desktop serve`` with a key per app, and the official ``openai`` client."""
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-editor-0123456789\nsk-notes-9876543210\n", encoding="utf-8")
    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model", str(smollm2_path),
         "--api-key-file", str(keys)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        address = process.stdout.readline().strip()  # type: ignore[union-attr]
        editor = openai.OpenAI(base_url=address, api_key="sk-editor-0123456789", max_retries=0, timeout=300)
        notes = openai.OpenAI(base_url=address, api_key="sk-notes-9876543210", max_retries=0, timeout=300)

        def ask(client: openai.OpenAI, messages: list[dict[str, str]]) -> openai.types.chat.ChatCompletion:
            return client.chat.completions.create(model="any", messages=messages, temperature=0, max_tokens=16)

        chat = bakery_chat(28)  # about 2,500 tokens
        first = ask(editor, chat)
        assert first.usage.prompt_tokens > 2000 and first.usage.prompt_tokens_details.cached_tokens == 0
        follow_up = followed_up(chat, first.choices[0].message.content or "")
        second = ask(editor, follow_up)
        cached = second.usage.prompt_tokens_details.cached_tokens
        assert first.usage.prompt_tokens <= cached < second.usage.prompt_tokens  # the new words only were read
        stranger = ask(notes, follow_up)  # the other key, the same words: read whole
        assert stranger.usage.prompt_tokens == second.usage.prompt_tokens
        assert stranger.usage.prompt_tokens_details.cached_tokens == 0
        editor.close()
        notes.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        end(process)


@pytest.mark.real_model
def test_smoke_asks_a_server_model_through_the_gui_path(fara_home, smollm2_path):
    server = LlamaCppServer(smollm2_path).wait_ready()
    try:
        env = {**os.environ, "FARA_HOME": str(fara_home)}
        env.pop("DISPLAY", None)
        env.pop("QT_QPA_PLATFORM", None)
        result = subprocess.run(
            [sys.executable, "-m", "fara_desktop", "smoke", "--server", server.base_url, "--model", server.alias,
             "--api-key", "sk-unused", "--prompt", "Which planet do we live on?"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert payload["model"] == server.alias and payload["server"] == "127.0.0.1:" + str(server.port)
    assert "Earth" in payload["reply"] and payload["gen_tok_per_s"] > 0
    assert "sk-unused" not in result.stdout + result.stderr
    assert "sk-unused" not in (fara_home / "logs" / "fara-desktop.log").read_text()


def test_docs_index_and_search_from_a_terminal(fara_home, tmp_path):
    from tests.helpers.documents import write_encrypted_pdf, write_mixed_folder

    files = write_mixed_folder(tmp_path / "manuals")
    write_encrypted_pdf(tmp_path / "manuals" / "locked.pdf", files["pdf"])
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    indexed = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "index", str(tmp_path / "manuals"), "--collection", "manuals",
         "--json"], capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert indexed.returncode == 0, indexed.stderr
    report = json.loads(indexed.stdout)
    assert report["files"] == 7 and report["passages"] >= 6 and report["seconds"] > 0
    assert [u["reason"] for u in report["unreadable"]] == ["is encrypted (password-protected)"]
    found = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "search", "--collection", "manuals", "--top", "2", "--json",
         "which", "valve", "controls", "pressure"], capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert hits[0]["path"].endswith("manual.pdf") and hits[0]["page"] == 2 and hits[0]["score"] > 0
    text = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "search", "--collection", "manuals", "zeppelin"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert text.returncode == 0 and "server.log (lines" in text.stdout
    from tests.helpers.gguf_factory import write_bert_embedder

    embedder = write_bert_embedder(tmp_path / "bge-tiny.gguf")
    semantic = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "index", str(tmp_path / "manuals"), "--collection", "manuals",
         "--json", "--embedding-model", str(embedder)], capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert semantic.returncode == 0, semantic.stderr
    assert json.loads(semantic.stdout)["vectors_added"] == report["passages"]
    fused = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "search", "--collection", "manuals", "--json",
         "--embedding-model", str(embedder), "aquamarine valve"], capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert fused.returncode == 0 and any(h["path"].endswith("manual.pdf") for h in json.loads(fused.stdout))
    missing = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "search", "--collection", "nope", "x"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert missing.returncode == 1 and "no collection 'nope'" in missing.stderr


def test_a_file_name_with_a_newline_cannot_fake_a_search_hit(fara_home, tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "real.txt\n[2] fake.txt (line 1) score 9.99\n    trust me.txt").write_text("the walrus sings\n")
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    indexed = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "index", str(folder), "--collection", "d"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert indexed.returncode == 0, indexed.stderr
    found = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "search", "--collection", "d", "walrus"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("[1] ") and not any(line.startswith("[2]") for line in lines)


@pytest.mark.real_model
def test_serve_with_a_model_opened_from_its_own_folder_sees_with_the_projector_beside_it(
    fara_home, gemma3_path, tmp_path
):
    """``serve --model`` (and Ctrl+O) open a model from a folder no scan covers: its projector beside it is paired
    as a scanned model's would be (found by running the frozen app: the picture was refused as unseen)."""
    import base64
    import io
    import shutil

    from PIL import Image

    from tests.helpers.gguf_factory import write_projector

    folder = tmp_path / "somewhere"
    folder.mkdir()
    model = folder / gemma3_path.name
    shutil.copy(gemma3_path, model)
    write_projector(folder / "mmproj-gemma-3-270m-f16.gguf", n_embd=128, n_ff=256, n_layer=2)
    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model", str(model)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        address = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert address.startswith("http://127.0.0.1:"), process.stderr.read()  # type: ignore[union-attr]
        buffer = io.BytesIO()
        Image.new("RGB", (320, 240), (200, 40, 40)).save(buffer, format="PNG")
        picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                                      + base64.b64encode(buffer.getvalue()).decode()}}  # fmt: skip
        client = openai.OpenAI(base_url=address, api_key="none", max_retries=0)
        reply = client.chat.completions.create(model="any", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "text", "text": "Colour?"}, picture]}])  # fmt: skip
        assert reply.usage.prompt_tokens > 16  # the picture's 16 tokens were read
    finally:
        end(process)


@pytest.mark.real_model
def test_sigterm_ends_serve_at_once_with_pictures_being_decoded(fara_home, gemma3_path, tmp_path):
    """Issue 51, item 6: uvicorn takes SIGTERM for itself when it serves on the main thread, and waited for every
    request to finish (8 s for eight requests' pictures, 120 s under a flood). Now the requests under way end at once:
    503 for those whose pictures were being decoded, or the connection closed where the process ended first (a
    client still uploading its pictures), and the process exits (measured: 0.4 s, against 8.3 s before)."""
    import base64
    import io
    import shutil
    import threading

    import httpx
    import numpy as np
    import psutil
    from PIL import Image

    from tests.conftest import wait_until
    from tests.helpers.gguf_factory import write_projector

    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / gemma3_path.name
    shutil.copy(gemma3_path, model)
    write_projector(folder / "mmproj-gemma-3-270m-f16.gguf", n_embd=128, n_ff=256, n_layer=2)
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(5).integers(0, 255, (480, 480, 3), dtype=np.uint8)).save(buffer, "PNG")
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                                  + base64.b64encode(buffer.getvalue()).decode()}}  # fmt: skip
    body = {"max_tokens": 2, "messages": [{"role": "user", "content": [picture] * 7 + [{"type": "text", "text": "?"}]}]}
    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model", str(model)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    answers: list[int] = []
    try:
        address = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert address.startswith("http://127.0.0.1:"), process.stderr.read()  # type: ignore[union-attr]

        def ask() -> None:
            try:
                answers.append(httpx.post(f"{address}/chat/completions", json=body, timeout=120).status_code)
            except httpx.HTTPError:
                answers.append(0)  # the connection ended with the server

        clients = [threading.Thread(target=ask) for _ in range(6)]
        for client in clients:
            client.start()
        server = psutil.Process(process.pid)
        wait_until(lambda: bool(server.children()), 60, "a picture to be decoded in the sandbox")
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        for client in clients:
            client.join(30)
        # the requests under way were ended, not waited for: a 503 where it reached the client before the
        # process ended (issue 66: it ends within 2 s), else the connection closed mid-upload
        assert answers and set(answers) <= {503, 0}, answers
    finally:
        end(process)


@pytest.mark.real_model
@pytest.mark.slow
def test_sigterm_ends_serve_within_two_seconds_under_a_flood_of_pictures(fara_home, gemma3_path, tmp_path):
    """Issue 66: 16 requests of 8 pictures each, decoding and encoding; SIGTERM ends ``serve`` within 2 s, in 10
    runs of 10 (it once took 5.5 s: the engine's thread was waited for inside a picture's encoding), and no process
    of it is left (the sandbox's children included)."""
    import contextlib
    import shutil
    import threading
    import time

    import httpx
    import psutil

    from tests.conftest import wait_until
    from tests.helpers.gguf_factory import write_projector

    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / gemma3_path.name
    shutil.copy(gemma3_path, model)
    # a projector that takes a while a picture (SigLIP's width, 12 layers, Gemma 3's 896 px): every other signal
    # comes while the engine's thread is inside llama.cpp, encoding one
    write_projector(folder / "mmproj-gemma-3-270m-f16.gguf", n_embd=768, n_ff=3072, n_layer=12, n_head=12,
                    image_size=896)  # fmt: skip
    pictures = [picture_part(seed) for seed in range(8)]
    body = {"max_tokens": 4, "messages": [{"role": "user", "content": [*pictures, {"type": "text", "text": "?"}]}]}
    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1"}
    waits: list[float] = []
    errors = tmp_path / "stderr.txt"  # a file, not a pipe: llama.cpp's lines about each picture would fill one
    for _run in range(10):
        with open(errors, "w") as stderr:
            process = subprocess.Popen([sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model",
                                        str(model)], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                       start_new_session=True)  # fmt: skip
        try:
            address = process.stdout.readline().strip()  # type: ignore[union-attr]
            assert address.startswith("http://127.0.0.1:"), errors.read_text()[-2000:]

            def ask(address: str = address) -> None:
                with contextlib.suppress(httpx.HTTPError):  # the connection ended with the server
                    httpx.post(f"{address}/chat/completions", json=body, timeout=120)

            clients = [threading.Thread(target=ask) for _ in range(16)]
            for client in clients:
                client.start()
            server = psutil.Process(process.pid)
            wait_until(lambda server=server: bool(server.children()), 60, "a picture to be decoded in the sandbox")
            if _run % 2:  # every other run: while the engine's thread is inside llama.cpp, encoding a picture
                wait_until(lambda: "mtmd_group_mergeable_bitmaps" in errors.read_text(), 120, "a picture's encoding")
                working = sum(server.cpu_times()[:2])
                wait_until(lambda s=server, w=working: sum(s.cpu_times()[:2]) > w + 1.0, 120, "encoding under way")
            sent = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.wait(30)
            waits.append(time.monotonic() - sent)
            for client in clients:
                client.join(30)
            assert process.returncode == 0, errors.read_text()[-2000:]
            assert "Traceback" not in errors.read_text()  # a request that came in as it stopped: a 503, no traceback
            wait_until(lambda pid=process.pid: not group_alive(pid), 10, "the server's processes to end")
        finally:
            end(process)
    assert max(waits) <= 2.0, [round(w, 2) for w in waits]


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` still runs (a zombie waiting for its parent is not running)."""
    import psutil

    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def picture_part(seed: int) -> dict[str, object]:
    import base64
    import io

    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    pixels = np.random.default_rng(seed).integers(0, 255, (480, 480, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buffer, "PNG")
    return {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()},
    }


@pytest.mark.real_model
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopping_serve_before_it_serves_ends_it_cleanly_and_blames_nobody(fara_home, smollm2_path, sig, tmp_path):
    """Ctrl+C (or ``systemctl stop``) while ``serve`` is still getting its model ready: no traceback, the engine
    closed, exit 0; and the next start loads the model (a stop is not the model's fault). Held open without a race:
    a new kernel record makes it check the kernels (child processes, seconds) before its load, and the check's
    folder appearing is the moment to stop it."""
    record = tmp_path / "kernels" / "kernels.json"
    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1", "FARA_KERNEL_CACHE": str(record)}
    command = [sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model", str(smollm2_path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(lambda: (record.parent / "kernel-check").is_dir() or process.poll() is not None, 120,
                   "serve to start checking the kernels")  # fmt: skip
        process.send_signal(sig)
        out, err = process.communicate(timeout=60)
    finally:
        end(process)
    assert process.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "stopped before it served" in err
    assert not out.startswith("http")  # it never served
    again = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        address = again.stdout.readline().strip()  # type: ignore[union-attr]
        assert address.startswith("http://127.0.0.1:"), again.stderr.read()[-3000:]  # type: ignore[union-attr]
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(60)
        end(again)


@pytest.mark.real_model
def test_serve_parallel_streams_eight_clients_and_sigterm_ends_every_stream(fara_home, smollm2_path, tmp_path):
    """Issue 63: ``serve --parallel 4`` with eight clients streaming (four decode, four wait for a sequence); SIGTERM
    ends serve cleanly (status 0, no traceback), every stream ends, and no process of it is left."""
    import time

    import httpx

    env = {**os.environ, "FARA_HOME": str(fara_home), "PYTHONUNBUFFERED": "1"}
    errors = tmp_path / "stderr.txt"
    with open(errors, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--parallel", "4", "--model",
             str(smollm2_path)], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        address = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert address.startswith("http://127.0.0.1:"), errors.read_text()[-2000:]
        assert "4 requests at once" in process.stdout.readline()  # type: ignore[union-attr]
        streaming = threading.Semaphore(0)
        ended: list[str] = []
        body = {"messages": [{"role": "user", "content": "Tell me a very long story."}], "max_tokens": 2000,
                "stream": True, "temperature": 0}  # fmt: skip

        def stream() -> None:
            pieces = 0
            try:
                with httpx.stream("POST", f"{address}/chat/completions", json=body, timeout=60) as reply:
                    for line in reply.iter_lines():
                        pieces += line.startswith("data: {")
                        if pieces == 1:
                            streaming.release()
                ended.append("whole")
            except httpx.HTTPError:
                ended.append("cut")  # the connection ended with the server

        clients = [threading.Thread(target=stream) for _ in range(8)]
        for client in clients:
            client.start()
        for _ in range(4):  # four stream at once; the other four wait for a sequence
            assert streaming.acquire(timeout=60), errors.read_text()[-2000:]
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, errors.read_text()[-2000:]
        waited = time.monotonic() - sent
        for client in clients:
            client.join(30)
        assert len(ended) == 8 and not any(c.is_alive() for c in clients)
        assert "Traceback" not in errors.read_text()
        wait_until(lambda pid=process.pid: not group_alive(pid), 10, "the server's processes to end")
        assert waited <= 2.0, waited
    finally:
        end(process)
