"""Everything outside ui/ and app.py imports with PySide6 unavailable: the core stays Qt-free."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import fara_desktop

BLOCKER = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "PySide6" or name.startswith("PySide6.") or name.startswith("shiboken6"):
            raise ImportError(f"{name} is blocked: the core must not import Qt")
sys.meta_path.insert(0, Block())
import importlib
for module in sys.argv[1:]:
    importlib.import_module(module)
print("imported", len(sys.argv) - 1)
"""


def core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(fara_desktop.__path__, "fara_desktop."):
        if info.name.startswith("fara_desktop.ui.") or info.name == "fara_desktop.ui" or info.name in (
            "fara_desktop.main",
            "fara_desktop.bench.qt_probe",
            "fara_desktop.__main__",
        ):
            continue
        names.append(info.name)
    return names


def test_core_imports_without_qt():
    modules = core_modules()
    assert "fara_desktop.engine.worker" in modules and "fara_desktop.machine.hardware" in modules
    result = subprocess.run([sys.executable, "-c", BLOCKER, *modules], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"imported {len(modules)}" in result.stdout


def test_core_does_not_import_llama_cpp_eagerly():
    code = "import sys, fara_desktop.engine.worker; print('llama_cpp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
