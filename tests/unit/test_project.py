"""Project hygiene: CI runs the README's test command verbatim, the code is ruff-clean, assets ship, the build
script and spec agree."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from fara_desktop.files import resources
from fara_desktop.files.resources import asset_path
from tests.helpers.paths import REPO_ROOT

ROOT = REPO_ROOT


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.DOTALL)


def test_readme_has_exactly_two_quick_start_commands_and_ci_runs_the_test_one():
    commands = quick_start_commands()
    assert len(commands) == 2
    run_command, test_command = commands
    assert "fara-desktop" in run_command and "pytest" in test_command
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci_lines


@pytest.mark.skipif(
    shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists(),
    reason="ruff is not installed",
)
def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    result = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(
    shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists(),
    reason="ruff is not installed",
)
def test_the_package_is_as_the_formatter_writes_it_with_no_line_packed_past_it():
    """Modules meet the 600-line check by being split by job, never by packing lines that `# fmt: skip` hides."""
    sources = sorted(str(p) for p in (ROOT / "fara_desktop").rglob("*.py"))
    packed = [s for s in sources if "fmt: skip" in Path(s).read_text(encoding="utf-8")]
    assert packed == []
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    result = subprocess.run([ruff, "format", "--check", *sources], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_assets_are_found():
    assert asset_path("style.qss").read_text(encoding="utf-8").strip()
    assert asset_path("fara-desktop.svg").read_text(encoding="utf-8").startswith("<svg")


def test_every_icon_size_is_shipped_at_its_size():
    for size in resources.ICON_SIZES:
        image = QImage(str(resources.icon_png(size)))
        assert (image.width(), image.height()) == (size, size)
        assert image.hasAlphaChannel()
    for name in ("fara-desktop.svg", "fara-desktop.desktop.in", "icons/fara-desktop.ico", "icons/fara-desktop.icns"):
        assert resources.asset_path(name).stat().st_size > 0, name


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
