"""docs/architecture.md's "Add a method" and "Add a model backend", followed to the letter
on a copy of the repository: the CLI, the config file, the layering contracts and the run
index must pick the new method up, and the new model family must load, with no other file
edited. If the guide goes stale (a registration moves, a step is missing), this fails."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("checkray", "engine", "actors", "jobs", "tests/__init__.py", "tests/layering.py", "pyproject.toml")

TOY_CONFIG = """
from typing import ClassVar

from checkray.engine.config import JobSection


class ToyConfig(JobSection):
    key: ClassVar[str] = "toy"

    word: str = "good"
    copies: int = 3
"""

TOY_RULES = """
import pyarrow as pa


def toy_cases(word: str, copies: int) -> pa.Table:
    return pa.table({"text": [f"a {word} film {i}" for i in range(copies)]})


def toy_quality(cases: pa.Table) -> pa.Table:
    return pa.table({"check": ["has a word"], "kept": [cases.num_rows]})
"""

TOY_JOB = '''
from pathlib import Path
from typing import Optional

import typer

from checkray.engine.report import Section
from checkray.engine.stages import Stage
from checkray.engine.toy.config import ToyConfig
from checkray.engine.toy.rules import toy_cases, toy_quality
from checkray.jobs.base import Job, QualityTable, run_job
from checkray.jobs.config import load_config


class ToyJob(Job[ToyConfig]):
    name, title, section = "toy", "checkray · toy", ToyConfig
    published = ("cases.parquet", "quality.parquet")
    quality = (QualityTable("quality.parquet", "Toy checks"),)
    uses_ray = False

    def stages(self):
        conf = self.conf
        yield Stage("cases", lambda ctx: {"data": toy_cases(conf.word, conf.copies)}, config=conf)
        yield Stage("quality", lambda ctx: {"data": toy_quality(ctx.input("cases"))}, inputs=("cases",))

    def publish(self, runner):
        runner.run.write_table("cases.parquet", runner.output("cases"))
        runner.run.write_table("quality.parquet", runner.output("quality"))
        return [Section("Toy", [], f"{runner.output('cases').num_rows} cases")]


def toy_command(
    out: str = typer.Option(..., "--out"),
    config: Optional[Path] = typer.Option(None, "--config"),
    word: Optional[str] = typer.Option(None, "--word"),
):
    """Make toy cases."""
    cfg = load_config(config, {"toy.word": word, "out": out})
    run_job(ToyJob(cfg))
    typer.echo("toy done")
'''

TOY_MODEL = """
import numpy as np


class ToyModel:
    def __init__(self, spec):
        self.name, self.labels = spec.name, list(spec.labels)

    def predict_proba(self, texts, pairs=None):
        return np.array([[0.2, 0.8] if "good" in t else [0.8, 0.2] for t in texts], dtype=np.float32)


def load_toy(spec):
    return ToyModel(spec)
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def _insert_after(path: Path, anchor: str, line: str) -> None:
    """Add ``line`` to a registration table, right after the entry ``anchor`` (the guide's
    "one line in the table")."""
    text = path.read_text(encoding="utf-8")
    assert anchor in text, f"{path}: the guide's table entry {anchor!r} is gone: update docs/architecture.md"
    path.write_text(text.replace(anchor, anchor + "\n" + line, 1), encoding="utf-8")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the source with the toy method and the toy model family added as the guide says."""
    root = tmp_path_factory.mktemp("guide") / "repo"
    for rel in COPIED:
        src, dst = ROOT / rel, root / rel
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    # Add a method, steps 1, 3 and 4
    _write(root / "engine/toy/__init__.py", "")
    _write(root / "engine/toy/config.py", TOY_CONFIG)
    _write(root / "engine/toy/rules.py", TOY_RULES)
    _write(root / "jobs/toy/__init__.py", "")
    _write(root / "jobs/toy/job.py", TOY_JOB)
    registry = root / "jobs/registry.py"
    _insert_after(
        registry,
        '("cache", "checkray.engine.cache:CacheConfig"),',
        '    ("toy", "checkray.engine.toy.config:ToyConfig"),',
    )
    _insert_after(
        registry, "for _cmd in [", '    Command("toy", "checkray.jobs.toy.job:toy_command", "Make toy cases."),'
    )
    text = registry.read_text()
    assert 'METHODS = ("topics", "mft", "s2lct", "costello", "testaug")' in text
    registry.write_text(text.replace('"costello", "testaug")', '"costello", "testaug", "toy")', 1))
    # Add a model backend, steps 1 and 2
    _write(root / "actors/models/toy_model.py", TOY_MODEL)
    _insert_after(
        root / "engine/benchmark/families.py",
        "for _family in [",
        '    ModelFamily("toy", "checkray.actors.models.toy_model:load_toy"),',
    )
    return root


def _python(tree: Path, code: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``code`` with the copy's checkray first on the path (the working directory)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tree, capture_output=True, text=True, timeout=timeout
    )


def _cli(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return _python(tree, "import sys; from checkray.jobs.cli import main; main(sys.argv[1:])", *args)


def test_the_cli_lists_and_runs_the_new_method(tree, tmp_path):
    helped = _cli(tree, "--help")
    assert helped.returncode == 0 and "Make toy cases." in helped.stdout, helped.stderr[-2000:]
    out = tmp_path / "toy"
    ran = _cli(tree, "--trust-code", "toy", "--out", str(out), "--word", "fine")
    assert ran.returncode == 0, ran.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["job"] == "toy" and manifest["quality"][0]["title"] == "Toy checks"
    indexed = _cli(tree, "report-index", str(tmp_path))
    assert indexed.returncode == 0, indexed.stderr[-2000:]
    page = (tmp_path / "index.html").read_text()
    assert "Toy checks" in page and "toy/report.html" in page


def test_a_config_file_validates_the_new_section(tree, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("toy:\n  word: fine\n  copies: 2\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("toy:\n  wrod: fine\n")
    code = (
        "import sys\n"
        "from checkray.engine.toy.config import ToyConfig\n"
        "from checkray.jobs.config import load_config\n"
        "from checkray.engine.errors import ConfigError\n"
        "cfg = load_config(sys.argv[1])\n"
        "assert cfg.section(ToyConfig).copies == 2\n"
        "try:\n    load_config(sys.argv[2])\nexcept ConfigError as exc:\n    print(exc)\n"
    )
    proc = _python(tree, code, str(good), str(bad))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "toy.wrod: unknown field" in proc.stdout


def test_the_layering_contracts_cover_the_new_method(tree):
    kept = _python(
        tree, "import runpy, sys; sys.argv = ['layering']; runpy.run_module('tests.layering', run_name='__main__')"
    )
    assert kept.returncode == 0, kept.stdout[-3000:] + kept.stderr[-2000:]
    rules = tree / "engine/toy/rules.py"
    original = rules.read_text()
    rules.write_text("from checkray.engine.s2lct import spec  # noqa: F401\n" + original)
    try:
        broken = _python(
            tree, "import runpy, sys; sys.argv = ['layering']; runpy.run_module('tests.layering', run_name='__main__')"
        )
    finally:
        rules.write_text(original)
    assert broken.returncode != 0 and "checkray.engine.toy" in broken.stdout + broken.stderr


def test_the_new_model_family_loads_through_the_registry(tree):
    code = (
        "from checkray.actors.models import load_model\n"
        "from checkray.engine.benchmark.families import family_of\n"
        "from checkray.engine.benchmark.registry import ModelSpec\n"
        "spec = ModelSpec(name='t', family='toy')\n"
        "assert family_of(spec).heavy is False\n"
        "probs = load_model(spec).predict_proba(['a good film', 'a dull film'])\n"
        "print(probs.argmax(axis=1).tolist())\n"
    )
    proc = _python(tree, code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[1, 0]"
