"""The shape of the code is enforced, not hoped for: layers and Qt/llama.cpp fences (import-linter), no import
cycles between modules, and a type checker that passes (mypy, strict outside ui/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_import_contracts_are_kept():
    result = subprocess.run([BIN / "lint-imports"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_mypy_passes():
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


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
