"""A digest of the code a stage runs, for its fingerprint.

A checkpoint made by older code must not be reused after the code changed. The digest of
a stage is the hash of the source of the module that defines its function and of every
checkray module that module imports, transitively (imports inside functions included:
jobs import their actors lazily), plus the package data those modules read (prompt
files), plus the installed package version. So editing ``engine/costello/metrics.py``
reruns the COSTELLO stages that import it, and no topics stage.

The closure is found statically (``ast``), once per process per module.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Callable
from functools import cache
from pathlib import Path

# engine/, actors/ and jobs/ import as checkray.engine, ...; the top package itself is the
# lazy notebook API (checkray/__init__.py), not code any stage runs.
FIRST_PARTY = "checkray."
# Files outside .py that a module reads and that change what its stages compute.
_ROOT = Path(__file__).resolve().parent.parent
# A folder counts with every file below it.
DATA_OF_MODULE: dict[str, tuple[Path, ...]] = {
    "checkray.engine.prompts": (_ROOT / "jobs" / "prompts",),
    "checkray.engine.costello.substitutes": (_ROOT / "engine" / "data" / "costello_substitutes.yaml",),
}


def _is_first_party(name: str) -> bool:
    return name.startswith(FIRST_PARTY)


@cache
def _source(module: str) -> tuple[str, str] | None:
    """(path, source) of a first-party module, or None if it has no source here."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        return spec.origin, Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return None


@cache
def _imports(module: str) -> tuple[str, ...]:
    """First-party modules ``module`` imports anywhere in its body."""
    found = _source(module)
    if found is None:
        return ()
    path, text = found
    is_package = path.endswith("__init__.py")
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(text, filename=path)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from engine import stages`
    return tuple(sorted(n for n in names if n and _is_first_party(n) and _source(n) is not None))


@cache
def module_closure(module: str) -> tuple[str, ...]:
    """``module`` and every first-party module it imports, transitively, sorted."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or _source(name) is None:
            continue
        seen.add(name)
        todo.extend(_imports(name))
        parent = name.rpartition(".")[0]
        if _is_first_party(parent):  # importing a.b.c runs a/__init__.py and a/b/__init__.py
            todo.append(parent)
    return tuple(sorted(seen))


@cache
def _module_digest(module: str) -> str:
    from checkray.engine import __version__

    h = hashlib.sha256(f"checkray {__version__}\n".encode())
    for name in module_closure(module):
        found = _source(name)
        if found is None:
            continue
        h.update(f"{name}\n".encode())
        h.update(found[1].encode("utf-8"))
        for data in DATA_OF_MODULE.get(name, ()):
            files = [data] if data.is_file() else sorted(p for p in data.rglob("*") if p.is_file())
            for file in files:
                h.update(f"{file.relative_to(data.parent if data.is_file() else data)}\n".encode())
                h.update(file.read_bytes())
    return h.hexdigest()[:20]


def code_digest(fn: Callable) -> str:
    """Digest of the checkray version and of the code ``fn`` runs (see the module docstring).
    A function from outside checkray (a test's, a user's) is digested by its own module."""
    module = getattr(fn, "__module__", None) or ""
    if not _is_first_party(module):
        return _foreign_digest(fn)
    return _module_digest(module)


def _foreign_digest(fn: Callable) -> str:
    """A function defined outside checkray: its own source file's text, else its bytecode."""
    import inspect

    from checkray.engine import __version__

    h = hashlib.sha256(f"checkray {__version__}\n".encode())
    try:
        h.update(Path(inspect.getsourcefile(fn) or "").read_bytes())
    except (TypeError, OSError):
        _hash_code(getattr(fn, "__code__", None), h)
    return h.hexdigest()[:20]


def _hash_code(code, h) -> None:
    if code is None:
        return
    h.update(code.co_code)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _hash_code(const, h)
        else:
            h.update(repr(const).encode())
