"""The README, SECURITY.md and docs/ name only things that exist: repository paths (and
``path.symbol`` references to what a module defines), ``python -m`` modules, config
files, and the flags of the ``checkray`` commands they show; and they speak to users (no
internal notes: issue numbers, sessions, scratch paths)."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("engine", "actors", "jobs", "bench", "configs", "tests", "docs", "requirements", ".ci", "checkray")

# `engine/stages.py`, `configs/demo.yaml`, `actors/s2lct/parser.ParserActor`, `bench/`
_TOPS = "|".join(re.escape(t) for t in TOP)
_PATH = re.compile(r"(?<![\w/.$-])((?:" + _TOPS + r")/[\w./*{},…-]*)")
# Files a guide tells the reader to create (docs/architecture.md's "toy" method, a user's
# own config), and the wheel's layout (checkray/engine/ exists only in an installed wheel).
_EXAMPLES = re.compile(r"(?:^|/)(?:toy|my|your)[\w.]*(?:/|$)|toy_|^checkray/(?:engine|actors|jobs)/$")
OPTIONAL_MODULES = ("llama_cpp", "vllm")  # extras a user installs for a server (docs/llm.md)
_MODULE = re.compile(r"python -m ([\w.]+)")
_COMMAND = re.compile(r"(?:^|[\s`$(])checkray((?: [a-z][\w-]*)+)([^`\n|;&]*)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")


@cache
def defined_names(module: Path) -> frozenset[str]:
    """Top-level names a Python file defines (functions, classes, assignments)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names |= {
                    f"{node.name}.{n.name}" for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return frozenset(names)


def path_exists(ref: str) -> bool:
    """A repository path, or ``dir/module.symbol`` naming something a module defines."""
    ref = ref.rstrip(".,:;)")
    if (ROOT / ref).exists() or _EXAMPLES.search(ref):
        return True
    if any(ch in ref for ch in "*{…"):  # a pattern: something must match its fixed start
        prefix = re.split(r"[*{…]", ref, maxsplit=1)[0]
        folder = ROOT / prefix if prefix.endswith("/") else (ROOT / prefix).parent
        return any(str(p.relative_to(ROOT)).startswith(prefix.rstrip("/")) for p in folder.glob("*"))
    head, _, symbol = ref.partition(".")
    module = ROOT / f"{head}.py"
    if symbol and module.is_file():
        return symbol in defined_names(module)
    return False


def module_exists(name: str) -> bool:
    if name.split(".")[0] in OPTIONAL_MODULES:
        return True
    if name.split(".")[0] in ("pytest", "pip", "venv", "http", "checkray", "spacy", "ray"):
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            return False
    if (ROOT / Path(*name.split("."))).with_suffix(".py").is_file():
        return True
    return (ROOT / Path(*name.split("."))).is_dir()


@cache
def cli_flags() -> dict[tuple[str, ...], set[str]]:
    """Every command path of the ``checkray`` CLI and its options."""
    import typer.main

    from checkray.jobs.cli import app

    out: dict[tuple[str, ...], set[str]] = {}

    def walk(cmd, path: tuple[str, ...]) -> None:
        out[path] = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
        if hasattr(cmd, "list_commands"):  # a group (of whichever click typer uses), lazily loaded
            ctx = cmd.context_class(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), (*path, name))

    walk(typer.main.get_command(app), ())
    return out


GLOBAL = {"--help", "--verbose", "--trust-code", "--dry-run", "--version"}


def bad_flags(words: str, rest: str) -> list[str]:
    """The flags after ``checkray WORDS`` that its command does not take."""
    commands = cli_flags()
    path: tuple[str, ...] = ()
    for word in words.split():
        if (*path, word) not in commands:
            break
        path = (*path, word)
    if not path:
        return []  # not a command line (prose that starts with "checkray <word>")
    allowed = commands[path] | GLOBAL
    return [f for f in _FLAG.findall(rest) if f not in allowed]


def references(text: str) -> list[str]:
    """What a document names that does not exist, one line each."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for ref in _PATH.findall(line):
            if not path_exists(ref):
                found.append(f"line {number}: path {ref}")
        for name in _MODULE.findall(line):
            if not module_exists(name.rstrip(".")):
                found.append(f"line {number}: module {name}")
        for words, rest in _COMMAND.findall(line):
            for flag in bad_flags(words, rest):
                found.append(f"line {number}: checkray{words} has no {flag}")
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_name_only_what_exists(doc):
    assert references(doc.read_text(encoding="utf-8")) == []


_NOTES = re.compile(
    r"\b(?:[Ii]ssue \d+|[Ii]ssue #\d+|this session|[Tt]his round|other engineers|the issue)\b|/tmp/[\w-]+/|/work/"
)


@pytest.mark.parametrize("doc", [*DOCS, *sorted((ROOT / "configs").rglob("*.yaml"))], ids=lambda p: p.name)
def test_docs_speak_to_users(doc):
    lines = [
        f"line {n}: {line.strip()[:100]}"
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1)
        if _NOTES.search(line)
    ]
    assert lines == []


def test_the_checker_catches_what_it_should():
    text = "\n".join(
        [
            "see `engine/no_such.py` and `actors/s2lct/parser.NoSuchActor`",
            "python -m jobs.no_such_module",
            "checkray benchmark --models M --no-such-flag",
            "fine: `engine/stages.py`, `engine/stages.StageRunner`, `configs/demo.yaml`, `DIR/stages/x`",
            "checkray benchmark --models M --suites S --out DIR",
        ]
    )
    found = references(text)
    assert [f.split(":")[0] for f in found] == ["line 1", "line 1", "line 2", "line 3"], found


def test_the_readme_layout_matches_the_tree():
    """The README's layout block names every package folder of each layer and docs page,
    and nothing that is not there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## How it is built") :].split("```text", 1)[1].split("```", 1)[0]
    sections: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        head = line[:10].strip()
        if head.endswith("/"):
            current = head.rstrip("/")
        sections[current] = sections.get(current, "") + line[10:] + "\n"
    for layer in ("engine", "actors", "jobs"):
        named = set(re.findall(r"(?<![\w/.])([a-z0-9_]+)/", sections[layer]))
        actual = {p.name for p in (ROOT / layer).iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
        assert named == actual, (layer, sorted(named ^ actual))
    pages = set(re.findall(r"([\w-]+\.md)", sections["docs"]))
    assert pages == {p.name for p in (ROOT / "docs").glob("*.md")}
