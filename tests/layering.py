"""The import layering of docs/architecture.md, checked by import-linter: ``python -m tests.layering``.

import-linter reads a project through grimp, and grimp walks a package's folder:
``engine/``, ``actors/`` and ``jobs/`` sit beside ``checkray/``, not in it, so grimp
would see ``checkray/__init__.py`` alone. This module builds the same graph from the
source instead, every layer's file under its ``checkray.*`` name, every import statement
counted (inside functions and ``TYPE_CHECKING`` blocks too, relative ones resolved), and
hands it to import-linter's own checker through its graph-builder setting.

The contracts are pyproject.toml's ``[tool.importlinter]`` (the layers jobs -> actors ->
engine) plus one made here per layer from ``checkray.jobs.registry.METHODS``: the papers'
method packages of a layer import each other not at all, so a new method package is
covered without editing any contract. ``make lint`` and tests/core/test_layout.py run it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "checkray"
LAYERS = ("engine", "actors", "jobs")


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the source tree at ``root``, by its one import name."""
    modules = {PACKAGE: root / PACKAGE / "__init__.py"}
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((PACKAGE, *parts))] = path
    return modules


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int, str]]:
    """(name, line number, line) of every import statement in ``path``, anywhere in it:
    ``import a.b`` gives ``a.b``, ``from a import b`` gives ``a.b`` (module or attribute)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, lines[node.lineno - 1].strip()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: `from ..mft import job` in package a.b is a.mft.job
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno, lines[node.lineno - 1].strip()


def imported_module(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ``modules`` that importing ``name`` names: itself, else its nearest
    ancestor that is one (``a.b.SomeClass`` is module ``a.b``); None outside them."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def build_graph(root: Path = ROOT) -> grimp.ImportGraph:
    """The import graph of the source tree at ``root``, read statically (imports of
    packages other than checkray are left out, as grimp leaves out external packages)."""
    modules = module_files(root)
    graph = grimp.ImportGraph()
    for module in modules:
        graph.add_module(module)
    for module, path in modules.items():
        for name, line_number, line in imported_names(module, path):
            imported = imported_module(name, modules)
            if imported is not None and imported != module:
                graph.add_import(importer=module, imported=imported, line_number=line_number, line_contents=line)
    return graph


def method_contracts(graph: grimp.ImportGraph) -> list[dict[str, object]]:
    """One independence contract per layer over the method packages it has (METHODS)."""
    from checkray.jobs.registry import METHODS

    contracts: list[dict[str, object]] = []
    for layer in LAYERS:
        packages = [f"{PACKAGE}.{layer}.{method}" for method in METHODS]
        present = [package for package in packages if package in graph.modules]
        if len(present) > 1:
            name = f"{layer.capitalize()}: method packages are independent"
            contracts.append({"name": name, "type": "independence", "modules": present})
    return contracts


def lint(root: Path = ROOT, config: Path = ROOT / "pyproject.toml") -> bool:
    """Run import-linter over the source tree at ``root``: True when every contract is kept."""
    from importlinter import configuration
    from importlinter.adapters.user_options import TomlFileUserOptionReader
    from importlinter.application import use_cases
    from importlinter.application.app_config import settings
    from importlinter.application.ports.building import GraphBuilder

    graph = build_graph(root)

    class SourceGraphBuilder(GraphBuilder):
        """Hands import-linter the graph read from the source (its options do not apply)."""

        def build(self, root_package_names, cache_dir, include_external_packages=False, **options):
            return graph

    class ContractsWithMethods(TomlFileUserOptionReader):
        """pyproject.toml's contracts plus the generated method-independence ones."""

        def _read_config_filename(self, config_filename):
            options = super()._read_config_filename(config_filename)
            if options is not None:
                options.contracts_options.extend(method_contracts(graph))
            return options

    configuration.configure()
    settings.configure(GRAPH_BUILDER=SourceGraphBuilder(), USER_OPTION_READERS={"toml": ContractsWithMethods()})
    return use_cases.lint_imports(config_filename=str(config), cache_dir=None, no_logo=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.layering", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the source tree to check (default: this repository)")
    args = parser.parse_args(argv)
    if not (args.root / PACKAGE / "__init__.py").is_file():
        parser.error(f"{args.root} holds no {PACKAGE}/__init__.py: not a checkray source tree")
    return 0 if lint(args.root.resolve()) else 1


if __name__ == "__main__":
    sys.exit(main())
