"""The shape of the code is enforced, not hoped for: layers and the Qt/llama.cpp fences (import-linter), no
import cycles, a type checker that passes (mypy, strict outside ui/), and a core that imports without Qt."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import grimp

import fara_desktop
from tests.helpers.paths import REPO_ROOT

ROOT = REPO_ROOT


BIN = Path(sys.executable).parent


def import_cycles(package: str) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm over the direct imports)."""
    graph = grimp.build_graph(package)
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in modules:
        if module not in index:
            visit(module)
    return groups


def test_import_contracts_are_kept():
    result = subprocess.run([BIN / "lint-imports"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_a_new_package_that_imports_qt_or_llama_cpp_breaks_the_fences(tmp_path):
    """The fences forbid by default: a package nobody listed (here a copy of ours with one more) is checked too
    (issue 28; the contracts used to name 21 modules, and a new one passed)."""
    import shutil

    shutil.copytree(ROOT / "fara_desktop", tmp_path / "fara_desktop", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "fara_desktop" / "newpart").mkdir()
    (tmp_path / "fara_desktop" / "newpart" / "__init__.py").write_text("")
    (tmp_path / "fara_desktop" / "newpart" / "view.py").write_text("from PySide6.QtWidgets import QLabel\n")
    (tmp_path / "fara_desktop" / "newpart" / "infer.py").write_text("import llama_cpp\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([BIN / "lint-imports"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode != 0
    assert "fara_desktop.newpart.view -> PySide6" in result.stdout.replace("\n", " ")
    assert "fara_desktop.newpart.infer -> llama_cpp" in result.stdout.replace("\n", " ")


def test_no_dead_code():
    """vulture over the package; what it cannot see being used is listed, with why, in the allow-list."""
    result = subprocess.run(
        [BIN / "vulture", "fara_desktop", "tests/dead_code_allowlist.py", "--min-confidence", "60"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout == "", result.stdout[-4000:] + result.stderr[-2000:]


def test_mypy_passes():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_module_imports_itself_through_others():
    assert import_cycles("fara_desktop") == []


def test_the_cycle_check_finds_a_cycle(tmp_path, monkeypatch):
    package = tmp_path / "cyclic_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic_pkg import b\n")
    (package / "b.py").write_text("def f():\n    from cyclic_pkg import a\n")
    (package / "c.py").write_text("from cyclic_pkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclic_pkg") == [["cyclic_pkg.a", "cyclic_pkg.b"]]


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
        if (
            info.name.startswith("fara_desktop.ui.")
            or info.name == "fara_desktop.ui"
            or info.name
            in (
                "fara_desktop.main",
                "fara_desktop.bench.qt_probe",
                "fara_desktop.__main__",
            )
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


def test_every_file_a_docstring_names_exists():
    """Docstrings named ``app.py`` and ``ui/bench_app.py`` long after they were gone (issue 28)."""
    import re

    named = re.compile(r"``([\w/]+\.py)``")
    missing = []
    for module in sorted((ROOT / "fara_desktop").rglob("*.py")):
        for name in named.findall(module.read_text(encoding="utf-8")):
            places = (ROOT / name, ROOT / "fara_desktop" / name, module.parent / name, module.parent.parent / name)
            if not any(place.is_file() for place in places):
                missing.append(f"{module.relative_to(ROOT)} names {name}")
    assert missing == []


def test_every_file_the_readme_names_exists():
    """The README's Layout and its message flow name files hop by hop; a file moved or split must be renamed there."""
    import re

    text = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    named = set(re.findall(r"`([\w/]+\.py)`", text))
    assert {"chats/turn.py", "engine/worker.py", "ui/engine_bridge.py"} <= named
    missing = [n for n in sorted(named) if not (ROOT / n).is_file() and not (ROOT / "fara_desktop" / n).is_file()]
    assert missing == []


def test_every_modules_tests_can_be_found_from_its_name():
    """A module is imported by a test by its name, or ``tests/module_index.py`` says through which test it is
    tested (and that test uses the word given); every package has its folder of tests."""
    import re

    from tests.module_index import TESTED_THROUGH

    texts = {p: p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py") if p.name != "module_index.py"}
    everything = "\n".join(texts.values())
    modules = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in (ROOT / "fara_desktop").rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py")]  # fmt: skip

    def imported(module: str) -> bool:
        package, _, name = module.rpartition(".")
        return bool(re.search(re.escape(module) + r"\b", everything)
                    or re.search(rf"from {re.escape(package)} import [^\n]*\b{name}\b", everything))  # fmt: skip

    unfound = [m for m in modules if not imported(m) and m not in TESTED_THROUGH]
    assert unfound == [], "import them in a test, or say in tests/module_index.py through which test they are tested"
    stale = [m for m in TESTED_THROUGH if m not in modules or imported(m)]
    assert stale == [], "tested by name now (or gone): remove them from tests/module_index.py"
    for module, (test, word) in TESTED_THROUGH.items():
        assert (ROOT / test).is_file() and word in texts[ROOT / test], (module, test, word)
    packages = {m.split(".")[1] for m in modules if m.count(".") >= 2}
    folders = [ROOT / "tests/unit", ROOT / "tests/integration"]
    assert [p for p in sorted(packages) if not any((folder / p).is_dir() for folder in folders)] == []


def test_no_module_is_above_600_lines():
    """A module that grows past this does more than one job: split it where its jobs part."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "fara_desktop").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}  # fmt: skip
    assert long == {}
