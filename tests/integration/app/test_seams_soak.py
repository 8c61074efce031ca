"""A soak of the seams between features (issue 50): 200 random operations through the Qt-free core against the real
llama.cpp — Gemma 3 270M with a synthetic projector beside it, so pictures are really encoded — send (with and
without pictures), stop, delete a chat, branch, attach and remove in the tray, import an export, *Delete saved
reading*, open another chat, switch to SmolLM2 (which cannot see) and back, quit and start again. Issue 61 added:
quitting at a random point of a reply (every job ended within the limit, no file half-written), `fara-desktop
import` running as a process of its own beside the app, a local API client streaming while its key is replaced,
and a message read ahead on a hybrid thinking model (a gated delta-net with Qwen3.5's template). Afterwards: every
picture a message shows is on disk, no saved reading belongs to a deleted chat, no temporary file is left, and the
process's open files and threads are back to their count at start."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from PIL import Image

from fara_desktop.chats.export import export_conversations, import_conversations
from fara_desktop.engine.types import (
    Cancelled,
    ConversationForgotten,
    Failed,
    Finished,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ReadAheadProgress,
)
from fara_desktop.files.paths import app_paths
from fara_desktop.planning.params import LoadParams
from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_projector
from tests.helpers.headless import HeadlessApp
from tests.helpers.hybrid_factory import write_tiny_hybrid
from tests.integration.engine.test_thinking_follow_up import QWEN35

pytestmark = pytest.mark.real_model
OPERATIONS = 200
SAMPLING = SamplingParams(temperature=0.0, max_tokens=4, stop_loops=False)
OPERATION_KINDS = ["send", "send", "send", "stop", "delete", "branch", "attach", "attach", "remove", "import", "forget",
                   "open", "switch", "restart", "quit", "import-process", "api-keys", "read-ahead"]  # fmt: skip
KEYS = ("soak-key-one", "soak-key-two")
WORDS = ["the cat", "a picture", "why is the sky blue", "tell me more", "and then?", "thanks"]


def png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (48, 32), colour).save(buffer, format="PNG")
    return buffer.getvalue()


class Soak:
    """The app under test, started and restarted as a user would, and what the random walk did."""

    def __init__(self, gemma3_path: Path, projector: Path, exports: Path, other_model: Path, hybrid: Path) -> None:
        self.model, self.projector, self.exports = gemma3_path, projector, exports
        self.other_model = other_model  # SmolLM2, which cannot see: a switch to it and back
        self.hybrid = hybrid  # a gated delta-net with Qwen3.5's template: its replies open with their reasoning
        self.seeing = True
        self.info: ModelInfo | None = None
        self.importers: list[subprocess.Popen[bytes]] = []  # `fara-desktop import` processes beside the app
        self.rng = random.Random(50)
        self.deleted: set[int] = set()
        self.pictures = [png((self.rng.randrange(256), self.rng.randrange(256), 40)) for _ in range(5)]
        self.tray: list[str] = []
        self.counts: dict[str, int] = {}
        self.app = self._start()

    def _start(self) -> HeadlessApp:
        app = HeadlessApp(app_paths(), sampling=SAMPLING)
        self._load(app, seeing=True)
        return app

    def _load(self, app: HeadlessApp, seeing: bool, hybrid: bool = False) -> None:
        if seeing:
            app.worker.load_model(self.model, LoadParams(n_ctx=2048, projector=str(self.projector), prefault=False))
        else:
            app.worker.load_model(self.hybrid if hybrid else self.other_model, LoadParams(n_ctx=2048, prefault=False))
        loaded = app.pump_until(lambda e: isinstance(e, (ModelLoaded, ModelLoadFailed)))
        assert isinstance(loaded, ModelLoaded) and bool(loaded.info.vision) == seeing, loaded
        self.seeing, self.info = seeing, loaded.info

    def _ended(self, event: object) -> bool:
        return isinstance(event, (Finished, Cancelled, Failed))

    def step(self, operation: str | None = None) -> None:
        core, turns = self.app.core, self.app.turns
        operation = operation or self.rng.choice(OPERATION_KINDS)
        self.counts[operation] = self.counts.get(operation, 0) + 1
        if operation in ("send", "stop"):
            if not self.seeing:  # a model that cannot see: the text goes, the tray's pictures wait (as the window)
                turns.send(self.rng.choice(WORDS))
            else:
                turns.send(self.rng.choice(WORDS), pictures=tuple(self.tray))
                self.tray = []
                core.pictures.hold("tray", ())
            if operation == "stop":
                turns.stop()
            over = self.app.pump_until(self._ended)
            assert not isinstance(over, Failed), over
        elif operation == "attach":
            picture = core.pictures.intake.take_bytes(self.rng.choice(self.pictures))
            if picture.digest not in self.tray:
                self.tray.append(picture.digest)
            core.pictures.hold("tray", self.tray)
        elif operation == "remove" and self.tray:
            self.tray.pop(self.rng.randrange(len(self.tray)))
            core.pictures.hold("tray", self.tray)
        elif operation == "delete":
            chats = [c.id for c in core.store.conversations("")]
            if chats:
                chosen = self.rng.choice(chats)
                core.delete_chat(chosen)
                self.deleted.add(chosen)
                self.app.pump_until(lambda e: isinstance(e, ConversationForgotten) and e.conversation == chosen)
        elif operation == "branch" and core.session.messages:
            core.session.branch_off(self.rng.randrange(len(core.session.messages)))
        elif operation == "import":
            chats = [c.id for c in core.store.conversations("")]
            if chats:
                folder = self.exports / f"export-{self.counts[operation]}"
                written = export_conversations(core.store, folder, ("json",), [self.rng.choice(chats)],
                                               picture_file=core.pictures.path)  # fmt: skip
                with core.pictures.importing() as take:
                    import_conversations(core.store, written[0], take_picture=take)
        elif operation == "forget":
            core.forget_saved_readings()
            self.app.pump_until(lambda e: isinstance(e, ConversationForgotten) and e.conversation is None)
        elif operation == "open":
            chats = [c.id for c in core.store.conversations("")]
            if chats:
                core.session.open(self.rng.choice(chats))
        elif operation == "switch":
            self._load(self.app, seeing=not self.seeing, hybrid=self.rng.random() < 0.5)
        elif operation in ("restart", "quit"):
            if operation == "quit":  # at a random point of a reply: the window's quit, within its limit
                turns.send(self.rng.choice(WORDS))
                wanted, seen = self.rng.randrange(6), [0]  # the reply's first events, or none, or all

                def enough(event: object) -> bool:
                    seen[0] += 1
                    return seen[0] >= wanted or self._ended(event)

                if wanted:
                    self.app.pump_until(enough)
            late = self.app.close(timeout=30.0)
            assert late == [], f"still running after the quit: {late}"
            states = app_paths().data / "chat-states"
            assert not [p for p in states.glob("*.tmp")] if states.exists() else True, "a state half-written"
            self._wait_for_importers()
            self.tray = []  # a tray is not kept across a restart (its pictures go at the next start's sweep)
            self.app = self._start()
        elif operation == "import-process":
            self._import_beside()
        elif operation == "api-keys":
            self._api_keys_while_streaming()
        elif operation == "read-ahead":
            self._read_ahead_then_send()

    def _import_beside(self) -> None:
        """`fara-desktop import` of an export, as a process of its own beside the app (it goes on meanwhile)."""
        core = self.app.core
        chats = [c.id for c in core.store.conversations("")]
        if not chats:
            return
        folder = self.exports / f"beside-{len(self.importers)}"
        chosen = [self.rng.choice(chats)]
        written = export_conversations(core.store, folder, ("json",), chosen, picture_file=core.pictures.path)
        command = [sys.executable, "-m", "fara_desktop", "import", str(written[0])]
        self.importers.append(subprocess.Popen(command, env=os.environ.copy(), stdout=subprocess.DEVNULL))

    def _wait_for_importers(self) -> None:
        for importer in self.importers:
            assert importer.wait(timeout=120) == 0, "fara-desktop import failed beside the app"
        self.importers.clear()

    def _api_keys_while_streaming(self) -> None:
        """A client streams a reply through the local API while its key is replaced in Settings: the stream ends
        whole, the old key is refused from then on and the new one taken."""
        import httpx

        info = self.info
        assert info is not None
        api = LocalApi(self.app.worker, lambda: info, lambda: SAMPLING, KEYS[0])
        server = ApiServer(api)
        address = server.start()
        asked = [{"role": "user", "content": self.rng.choice(WORDS)}]
        body = {"model": "soak", "stream": True, "max_tokens": 4, "temperature": 0.0, "messages": asked}
        try:
            with httpx.Client(timeout=120) as client:
                headers = {"Authorization": f"Bearer {KEYS[0]}"}
                with client.stream("POST", f"{address}/chat/completions", json=body, headers=headers) as stream:
                    assert stream.status_code == 200
                    lines = stream.iter_lines()
                    next(lines)  # the stream has begun
                    server.set_keys(KEYS[1])  # Settings ▸ Local API: the key replaced
                    assert any(line == "data: [DONE]" for line in lines)
                again = {**body, "stream": False}
                assert client.post(f"{address}/chat/completions", json=again, headers=headers).status_code == 401
                headers = {"Authorization": f"Bearer {KEYS[1]}"}
                assert client.post(f"{address}/chat/completions", json=again, headers=headers).status_code == 200
        finally:
            server.stop()

    def _read_ahead_then_send(self) -> None:
        """The message read ahead as it is typed, then sent (on the hybrid thinking model when it is loaded)."""
        if self.seeing:
            self._load(self.app, seeing=False, hybrid=True)
        session, text = self.app.core.session, self.rng.choice(WORDS)
        prompt = [*session.prompt_messages(), ChatMessage("user", text)]
        ahead = self.app.worker.read_ahead(prompt, SAMPLING, session.conversation_id, session.thinking)
        self.app.pump_until(lambda e: isinstance(e, ReadAheadProgress) and e.ahead_id == ahead and e.finished)
        self.app.turns.send(text)
        over = self.app.pump_until(self._ended)
        assert not isinstance(over, Failed), over

    def check(self) -> None:
        core = self.app.core
        shown = core.store.pictures_in_use()
        missing = [d for d in shown if not core.pictures.path(d).is_file()]
        assert not missing, f"{len(missing)} pictures that messages show are gone"
        assert all(core.pictures.path(d).is_file() for d in self.tray), "a picture in the tray is gone"


def open_files() -> set[str]:
    folder = Path("/proc/self/fd")
    found = set()
    for entry in folder.iterdir() if folder.exists() else ():
        try:
            found.add(f"{entry.name}:{entry.readlink()}")
        except OSError:
            continue
    return found


def test_two_hundred_random_operations_leave_the_seams_whole(fara_home, gemma3_path, smollm2_path, tmp_path):
    projector = write_projector(tmp_path / "mmproj-gemma-3-270m.gguf", n_embd=128, n_ff=256, n_layer=2)
    hybrid = write_tiny_hybrid(tmp_path / "qwen35-thinking.gguf", "qwen35", chat_template=QWEN35)
    soak = Soak(gemma3_path, projector, tmp_path / "exports", smollm2_path, hybrid)
    # once, each kind of operation: what a process starts once for good (multiprocessing's resource tracker, for
    # the sandbox's children) is there before the count at start is taken
    for operation in ("attach", "send", "import", "delete", "api-keys", "import-process", "read-ahead", "restart"):
        soak.step(operation)
    soak.app.close()
    process = psutil.Process()
    files_at_start, threads_at_start = process.num_fds(), threading.active_count()
    names_at_start = open_files()
    soak.app = soak._start()
    try:
        for _ in range(OPERATIONS):
            soak.step()
            soak.check()
    finally:
        soak.app.close()
        soak._wait_for_importers()
    kinds = ("restart", "switch", "delete", "import", "forget", "quit", "import-process", "api-keys", "read-ahead")
    assert min(soak.counts.get(kind, 0) for kind in kinds) >= 3, soak.counts
    states = app_paths().data / "chat-states"
    names = [p.name for p in states.iterdir()] if states.exists() else []
    assert not [n for n in names if n.endswith(".tmp")], "a temporary state file was left"
    leftovers = [n for n in names for chat in soak.deleted if n.startswith(f"c{chat}-")]
    assert not leftovers, f"saved readings of deleted chats: {leftovers}"
    assert threading.active_count() == threads_at_start, [t.name for t in threading.enumerate()]
    now_open = open_files()
    assert process.num_fds() == files_at_start, (
        f"open now, not at start: {now_open - names_at_start}; at start, not now: {names_at_start - now_open}"
    )
