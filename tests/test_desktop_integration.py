"""Double-click launch: assets, the launcher entry, one instance per user, remembered window, clear Qt failures."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from PySide6.QtGui import QGuiApplication, QImage

from fara_desktop import APP_ID, resources
from fara_desktop.cli.desktop_entry import install_desktop_entry, render_entry, uninstall_desktop_entry
from fara_desktop.paths import app_paths
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.ui.single_instance import SingleInstance
from tests.fakes import FakeBackend

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fara_desktop", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


# ---------------------------------------------------------------------- assets


def test_every_icon_size_is_shipped_at_its_size():
    for size in resources.ICON_SIZES:
        image = QImage(str(resources.icon_png(size)))
        assert (image.width(), image.height()) == (size, size)
        assert image.hasAlphaChannel()
    for name in ("fara-desktop.svg", "fara-desktop.desktop.in", "icons/fara-desktop.ico", "icons/fara-desktop.icns"):
        assert resources.asset_path(name).stat().st_size > 0, name


def test_the_wheel_ships_every_asset():
    """Every file under assets/ matches the package-data patterns that put it into the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["fara_desktop.assets"]
    assert config["tool"]["setuptools"]["package-dir"]["fara_desktop.assets"] == "assets"
    files = [p.relative_to(ROOT / "assets").as_posix() for p in (ROOT / "assets").rglob("*") if p.is_file()]
    assert len(files) >= 14
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert missing == []


def test_asset_helper_prefers_the_frozen_bundle(tmp_path, monkeypatch):
    bundle = tmp_path / "_internal"
    shutil.copytree(resources.assets_dir(), bundle / "fara_desktop" / "assets")
    monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)
    assert resources.assets_dir() == bundle / "fara_desktop" / "assets"
    assert resources.icon_png(48).is_file()
    assert resources.bundled_models_dir() == bundle / "models"


def test_asset_helper_says_what_is_wrong_when_assets_are_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "_PACKAGE_DIR", tmp_path / "pkg")
    with pytest.raises(FileNotFoundError, match="assets folder is missing"):
        resources.assets_dir()


# ---------------------------------------------------------------------- launcher entry


def test_install_desktop_entry_from_the_command_line(tmp_path):
    data_home = tmp_path / "share"
    env = {**os.environ, "XDG_DATA_HOME": str(data_home), "FARA_HOME": str(tmp_path / "fara")}
    result = cli("install-desktop-entry", env=env)
    assert result.returncode == 0, result.stderr
    entry = data_home / "applications" / f"{APP_ID}.desktop"
    text = entry.read_text(encoding="utf-8")
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    program = exec_line.removeprefix("Exec=").split(" ")[0]
    assert os.access(program, os.X_OK), exec_line
    assert f"Icon={APP_ID}\n" in text and f"StartupWMClass={APP_ID}\n" in text
    for size in resources.ICON_SIZES:
        icon = data_home / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png"
        assert QImage(str(icon)).width() == size
    assert (data_home / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg").is_file()

    result = cli("install-desktop-entry", "--uninstall", env=env)
    assert result.returncode == 0, result.stderr
    assert not entry.exists()
    assert not list((data_home / "icons").rglob(f"{APP_ID}.*"))


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils is not installed")
@pytest.mark.parametrize(
    "command",
    [None, ["/opt/Fara Desktop/FaraDesktop"], ["/usr/bin/python3", "-m", "fara_desktop"]],
    ids=["this-install", "path-with-space", "python-module"],
)
def test_desktop_entry_passes_desktop_file_validate(tmp_path, command):
    result = install_desktop_entry(tmp_path, command)
    check = subprocess.run(["desktop-file-validate", str(result.entry)], capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.strip() == "", check.stdout
    uninstall_desktop_entry(tmp_path)
    assert not result.entry.exists()


def test_exec_line_quotes_reserved_characters():
    text = render_entry(['/opt/My "Apps"/Fara$1/FaraDesktop'])
    assert 'Exec="/opt/My \\"Apps\\"/Fara\\$1/FaraDesktop"' in text


def test_window_announces_the_entry_id(qapp):
    from fara_desktop.ui.application import create_application

    create_application()
    assert QGuiApplication.desktopFileName() == APP_ID
    assert not QGuiApplication.windowIcon().isNull()


# ---------------------------------------------------------------------- one instance


def test_second_launch_brings_the_first_window_forward(qtbot, fara_home):
    paths = app_paths().ensure()
    first = SingleInstance(paths.data)
    assert first.acquire()
    try:
        env = {**os.environ, "FARA_HOME": str(fara_home), "QT_QPA_PLATFORM": "offscreen"}
        second = subprocess.Popen(
            [sys.executable, "-m", "fara_desktop"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        with qtbot.waitSignal(first.activationRequested, timeout=30_000):
            pass
        qtbot.waitUntil(lambda: second.poll() is not None, timeout=30_000)
        out, err = second.communicate()
        assert second.returncode == 0, err
        assert "already running" in out
    finally:
        first.release()


def test_lock_of_a_crashed_instance_is_taken_over(fara_home):
    paths = app_paths().ensure()
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(child.stdout)
    (paths.data / "instance.lock").write_text(f"{dead_pid}\nfara-desktop\n{os.uname().nodename}\n")
    instance = SingleInstance(paths.data)
    assert instance.acquire()
    later = SingleInstance(paths.data)
    assert not later.acquire()
    instance.release()


def test_a_lock_that_cannot_be_written_does_not_stop_the_app(tmp_path):
    missing = tmp_path / "no-such-folder"  # stands for a read-only data folder: the lock file cannot be created
    instance = SingleInstance(missing)
    assert instance.acquire()
    instance.release()


def test_instances_with_separate_data_folders_do_not_meet(tmp_path):
    assert SingleInstance(tmp_path / "a").name != SingleInstance(tmp_path / "b").name


# ---------------------------------------------------------------------- window state


def test_window_size_position_and_splitter_are_remembered(qtbot):
    first = MainWindow(backend=FakeBackend())
    qtbot.addWidget(first)
    first.show()
    first.resize(700, 660)  # the offscreen screen is 800 px wide: restoring clamps anything larger
    first.move(11, 17)
    first.splitter.setSizes([150, 350, 200])
    qtbot.waitUntil(lambda: first.size().width() == 700)
    geometry, sizes = first.geometry(), first.splitter.sizes()
    first.close()

    second = MainWindow(backend=FakeBackend())
    qtbot.addWidget(second)
    second.show()
    assert second.size() == geometry.size()
    # The offscreen screen is 600 px high, so Qt nudges the 660-px window to keep its frame visible.
    assert abs(second.x() - geometry.x()) <= 8 and abs(second.y() - geometry.y()) <= 8
    assert second.splitter.sizes() == sizes
    second.close()


def test_unreadable_window_state_falls_back_to_defaults(qtbot):
    paths = app_paths().ensure()
    (paths.config / "window.json").write_text("{not json")
    window = MainWindow(backend=FakeBackend())
    qtbot.addWidget(window)
    assert (window.width(), window.height()) == (1280, 780)
    window.close()


# ---------------------------------------------------------------------- Qt cannot start


def test_broken_qt_platform_plugin_gives_a_clear_message(fara_home):
    env = {**os.environ, "FARA_HOME": str(fara_home), "QT_QPA_PLATFORM": "no-such-platform"}
    result = cli(env=env)
    assert result.returncode == 2
    assert "display plugin failed to start" in result.stderr
    assert "libxcb-cursor0" in result.stderr
    assert "Traceback" not in result.stderr and "Aborted" not in result.stderr


# ---------------------------------------------------------------------- frozen build (the build itself: packaging/)


def test_build_script_and_spec_are_consistent():
    script = (ROOT / "packaging" / "build.sh").read_text(encoding="utf-8")
    assert subprocess.run(["bash", "-n", str(ROOT / "packaging" / "build.sh")]).returncode == 0
    for flag in ("-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON"):
        assert flag in script
    assert "env -i" in script and '"$APP_EXE" smoke' in script
    spec = (ROOT / "packaging" / "FaraDesktop.spec").read_text(encoding="utf-8")
    compile(spec, "FaraDesktop.spec", "exec")
    for needed in (
        "console=False",
        "BUNDLE(",
        "VSVersionInfo",
        "catalog.json",
        '"fara_desktop/assets"',
        "llama_cpp/lib",
    ):
        assert needed in spec, needed
    for icon in ("fara-desktop.ico", "fara-desktop.icns", "fara-desktop-256.png"):
        assert icon in spec and resources.asset_path(f"icons/{icon}").is_file()


def test_native_build_needs_no_backend_loading(tmp_path):
    from fara_desktop.machine import llama_build as llama_runtime

    lib = llama_runtime.llama_lib_dir()
    assert (lib / "libllama.so").is_file() or list(lib.glob("*llama*"))
    for name in ("libggml-cpu-haswell.so", "libggml-cpu-zen4.so", "libggml.so"):
        (tmp_path / name).touch()
    assert [p.name for p in llama_runtime.cpu_variant_files(tmp_path)] == [
        "libggml-cpu-haswell.so",
        "libggml-cpu-zen4.so",
    ]
    if not llama_runtime.cpu_variant_files(lib):  # the development install is a native build
        llama_runtime.load_ggml_cpu_library()
        assert llama_runtime.loaded_ggml_cpu_variant() is None
