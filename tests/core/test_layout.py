"""The code layout holds: no import cycle anywhere, and the layering contracts of
pyproject.toml ([tool.importlinter]) are kept. Both read the source statically (imports
inside functions count), so a lazy import does not hide a circle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def import_cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), i.e. import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.find_modules_directly_imported_by(v):
                cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_cycle_finder_finds_a_planted_cycle():
    class Graph:  # a -> b -> c -> a, d -> a
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
        modules = set(edges)

        def find_modules_directly_imported_by(self, m):
            return self.edges[m]

    assert import_cycles(Graph()) == [["a", "b", "c"]]


def test_no_import_cycles():
    grimp = pytest.importorskip("grimp")
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("checkray", include_external_packages=False)
    assert import_cycles(graph) == []


def test_layering_contracts_are_kept():
    pytest.importorskip("importlinter")
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "BROKEN" not in proc.stdout and "Contracts: 4 kept" in proc.stdout
