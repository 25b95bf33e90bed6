"""The code layout holds: no import cycle anywhere, and the layering contracts
(tests/layering.py: pyproject.toml's [tool.importlinter] and one per layer from
checkray.jobs.registry.METHODS) are kept. Both read the source statically (imports inside
functions count), so a lazy import does not hide a circle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.layering import build_graph, method_contracts, module_files

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
    assert import_cycles(build_graph(ROOT)) == []


def test_the_graph_is_read_from_the_source_under_checkray_names(tmp_path):
    """Lazy, relative and ``from a import module`` imports are edges; attributes resolve
    to their module; imports of other packages are left out."""
    write(tmp_path / "checkray/__init__.py", "from checkray.engine import VERSION\n")
    write(tmp_path / "engine/__init__.py", "VERSION = 1\n")
    write(tmp_path / "engine/stages.py", "import numpy\nfrom . import lazy\nfrom .lang.words import WORDS\n")
    write(tmp_path / "engine/lazy.py", "def load():\n    import checkray.engine.lang.words as w\n")
    write(tmp_path / "engine/lang/__init__.py", "")
    write(tmp_path / "engine/lang/words.py", "WORDS = ()\n")
    write(tmp_path / "jobs/__init__.py", "")
    write(tmp_path / "jobs/cli.py", "from checkray.engine import stages, VERSION\n")
    graph = build_graph(tmp_path)
    edges = {(m, i) for m in graph.modules for i in graph.find_modules_directly_imported_by(m)}
    assert edges == {
        ("checkray", "checkray.engine"),
        ("checkray.engine.stages", "checkray.engine.lazy"),
        ("checkray.engine.stages", "checkray.engine.lang.words"),
        ("checkray.engine.lazy", "checkray.engine.lang.words"),
        ("checkray.jobs.cli", "checkray.engine.stages"),
        ("checkray.jobs.cli", "checkray.engine"),
    }


def test_layering_contracts_are_kept():
    proc = run_layering(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "BROKEN" not in proc.stdout and "Contracts: 4 kept" in proc.stdout
    for layer in ("Engine", "Actors", "Jobs"):
        assert f"{layer}: method packages are independent KEPT" in proc.stdout


def test_layering_check_fails_on_planted_violations(tmp_path):
    """A copy of the source with an engine module lazily importing a job and one method
    package importing another (relatively) breaks the two contracts."""
    for path in module_files(ROOT).values():
        write(tmp_path / path.relative_to(ROOT), path.read_text(encoding="utf-8"))
    with (tmp_path / "engine/stages.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _planted():\n    from checkray.jobs import cli\n")
    with (tmp_path / "jobs/topics/__init__.py").open("a", encoding="utf-8") as f:
        f.write("\nfrom ..mft import job\n")
    proc = run_layering(tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "Layers: jobs -> actors -> engine BROKEN" in proc.stdout
    assert "Jobs: method packages are independent BROKEN" in proc.stdout
    assert "Engine: method packages are independent KEPT" in proc.stdout
    assert "checkray.engine.stages -> checkray.jobs.cli" in proc.stdout


def test_method_contracts_cover_every_method_package_of_a_layer():
    from checkray.jobs.registry import METHODS

    contracts = {c["name"]: c["modules"] for c in method_contracts(build_graph(ROOT))}
    for layer in ("engine", "actors", "jobs"):
        present = [f"checkray.{layer}.{m}" for m in METHODS if (ROOT / layer / m / "__init__.py").is_file()]
        assert contracts[f"{layer.capitalize()}: method packages are independent"] == present


def run_layering(root: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tests.layering", "--root", str(root)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
