"""The app as pip installs it: a wheel built from this tree, installed non-editable into a venv of its own.

CI (``.ci/run``) first runs the README's install command verbatim in a copy of the checkout and hands that venv
over in ``FARA_INSTALLED_APP``; its dependencies then come from PyPI as a user's would. Without it (a developer's
run), the wheel is built here and installed with ``--no-deps`` into a fresh venv that borrows the test venv's
installed dependencies (a ``.pth`` line: nothing is downloaded, and the editable install of this tree is not
visible there). Either way ``fara_desktop`` is imported from the venv's own site-packages, which the tests check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".grimp_cache", "*.gguf"
)


@dataclass(frozen=True)
class InstalledApp:
    """A venv holding the app as a wheel: its interpreter and its ``fara-desktop`` command."""

    venv: Path
    wheel: Path | None  # None when CI installed it with the README's command

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def command(self) -> Path:
        return self.venv / "bin" / "fara-desktop"

    def env(self, home: Path) -> dict[str, str]:
        """As a user's shell would have it: no test settings, a home and data folder of its own, run from $HOME."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FARA_", "PYTEST", "PYTHON"))}
        home.mkdir(parents=True, exist_ok=True)
        return {**env, "HOME": str(home), "FARA_HOME": str(home / "fara"), "PATH": f"{self.venv / 'bin'}:{env['PATH']}"}

    def run(self, *args: str, home: Path, timeout: float = 300, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.command), *args], capture_output=True, text=True, timeout=timeout, cwd=home,
            env=self.env(home), **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip


def build_wheel(out: Path) -> Path:
    """The wheel of a copy of this tree (a build in the tree itself could pick up stale files from build/)."""
    source = out / "source"
    shutil.copytree(REPO_ROOT, source, ignore=_NOT_COPIED)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = out.glob("fara_desktop-*.whl")
    return wheel


@pytest.fixture(scope="session")
def installed_app(tmp_path_factory: pytest.TempPathFactory) -> InstalledApp:
    given = os.environ.get("FARA_INSTALLED_APP")
    if given:
        return InstalledApp(Path(given), None)
    out = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(out)
    venv = out / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
         "--no-index", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    # The test venv's dependencies, after the venv's own site-packages: a path line, so the .pth files there (the
    # editable install of this tree among them) are not run.
    Path(site, "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return InstalledApp(venv, wheel)
