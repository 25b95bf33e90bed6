"""``checkray report-index DIR``: one page linking every report of a run directory.

Built from what is on disk, so it works on any run directory (a demo, one job's run, or a
folder holding several runs): every directory below ``DIR`` with a ``manifest.json`` is a
finished job run (``jobs/base.py``). For each run the page shows

* links to the HTML pages it published (``report.html``, the benchmark's ``leaderboard.html``);
* the wall time of each stage, read from the stage's commit marker
  (``stages/<name>/_SUCCESS.json``: the seconds of the run that computed it; a stage a
  later run reused keeps that time) and whether a stage is incomplete;
* the suite-quality gates the job recorded: the MFT gates of Li et al. (cases kept and
  dropped at every gate), TestAug's validity decisions per description, S²LCT's label
  consistency, and the pass/fail checks of a ``--gate`` file (``junit.xml``);

and, once for the directory, the resolved config (runs that share one are grouped), the
models (the benchmark's ``provenance.json``, a zoo's ``zoo.yaml``, the models a config
names) and the package versions (those a benchmark recorded, and this environment's).

The quality tables are read from the runs' stage outputs, read-only: the index is a view
of the runs, never an input of a job. ``checkray demo`` writes the index at its end.
"""

from __future__ import annotations

import json
import posixpath
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import typer
import yaml

from engine.errors import InputError
from engine.rundir import MARKER, STAGES, RunDir
from engine.stages import SUCCESS

INDEX = "index.html"
MANIFEST = "manifest.json"  # jobs.base.MANIFEST (not imported: base pulls in Ray's runtime)
DEMO_TIMINGS = "timings.json"  # written by the demo: the wall time of each step
GENERATOR = "checkray report-index"  # <meta name="generator">: an index this command may replace
SKIP_DIRS = {STAGES, "logs"}
MAX_DEPTH = 4  # a demo nests runs two deep (costello/repair, testaug/benchmark)

# (stage, output, title, columns shown; None: all) per job: the gates each job records.
QUALITY_TABLES: dict[str, list[tuple[str, str, str, tuple[str, ...] | None]]] = {
    "mft": [
        (
            "generate",
            "gates",
            "MFT gates (Li et al.): cases kept and dropped at each gate",
            ("split", "version", "gate", "kept", "dropped", "note"),
        )
    ],
    "testaug": [
        (
            "validity",
            "decisions",
            "TestAug validity filter (§4.2) per description",
            ("key", "generated", "annotated_by", "valid_share", "threshold", "filter", "kept", "dropped"),
        )
    ],
    "s2lct": [("consistency", "summary", "S²LCT label consistency per capability", None)],
}
MAX_QUALITY_ROWS = 60


@dataclass
class Quality:
    title: str
    rows: list[dict[str, Any]]
    summary: str = ""


@dataclass
class RunInfo:
    rel: str  # path below the indexed directory ("" for the directory itself)
    job: str
    pages: list[str] = field(default_factory=list)  # published HTML pages, relative to the index
    stages: list[dict[str, Any]] = field(default_factory=list)
    incomplete: dict[str, str] = field(default_factory=dict)
    quality: list[Quality] = field(default_factory=list)
    config: dict[str, Any] | None = None
    checkray: str | None = None  # the version the run's marker records
    updated: str | None = None
    files: list[str] = field(default_factory=list)  # published files other than pages
    wall: float | None = None  # the last run's wall time (manifest "seconds"), if recorded

    @property
    def seconds(self) -> float:
        return round(sum(float(s["seconds"] or 0.0) for s in self.stages), 1)


class _Tree:
    """Reads below one root on any pyarrow filesystem."""

    def __init__(self, uri: str):
        self.run = RunDir(uri)
        self.fs = self.run.fs

    def path(self, rel: str, *parts: str) -> str:
        return self.run.path(*[p for p in (rel, *parts) if p])

    def kind(self, rel: str, *parts: str) -> pafs.FileType:
        return self.fs.get_file_info(self.path(rel, *parts)).type

    def text(self, rel: str, *parts: str) -> str | None:
        if self.kind(rel, *parts) != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(self.path(rel, *parts)) as src:
            return src.read().decode("utf-8", errors="replace")

    def json(self, rel: str, *parts: str) -> Any:
        text = self.text(rel, *parts)
        if text is None:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return None

    def subdirs(self, rel: str) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.path(rel), allow_not_found=True))
        return sorted(
            i.base_name
            for i in infos
            if i.type == pafs.FileType.Directory
            and i.base_name not in SKIP_DIRS
            and not i.base_name.startswith(".")
            and not i.base_name.endswith(".parts")
        )


def find_runs(uri: str) -> list[RunInfo]:
    """Every finished job run at or below ``uri`` (a directory with ``manifest.json``),
    depth first in name order; a demo's own directory comes first when it has a report."""
    tree = _Tree(uri)
    if tree.kind("") != pafs.FileType.Directory:
        raise InputError(f"{uri}: not a directory")
    runs: list[RunInfo] = []

    def walk(rel: str, depth: int) -> None:
        manifest = tree.json(rel, MANIFEST)
        marker = tree.json(rel, MARKER) or {}
        if isinstance(manifest, dict) and manifest.get("job"):
            runs.append(_run_info(tree, rel, manifest, marker))
        elif marker.get("job") and tree.kind(rel, "report.html") == pafs.FileType.File:
            # a run without a manifest but with a report: the demo's combined report
            info = RunInfo(rel, str(marker["job"]), pages=[_join(rel, "report.html")], **_marker(marker))
            steps = _steps(tree, rel)
            info.wall = round(sum(float(s["seconds"]) for s in steps), 1) if steps else None
            runs.append(info)
        if depth < MAX_DEPTH:
            for name in tree.subdirs(rel):
                walk(_join(rel, name), depth + 1)

    walk("", 0)
    return runs


def _steps(tree: _Tree, rel: str) -> list[dict[str, Any]]:
    """The demo's steps and their wall times (``timings.json``), if this is a demo."""
    timings = tree.json(rel, DEMO_TIMINGS)
    steps = timings.get("steps") if isinstance(timings, dict) else None
    if not isinstance(steps, list):
        return []
    return [
        {"step": str(s.get("step")), "seconds": f"{float(s['seconds']):.1f}"}
        for s in steps
        if isinstance(s, dict) and isinstance(s.get("seconds"), int | float)
    ]


def _join(*parts: str) -> str:
    return posixpath.join(*[p for p in parts if p])


def _marker(marker: dict[str, Any]) -> dict[str, Any]:
    return {"checkray": marker.get("checkray"), "updated": marker.get("updated") or marker.get("created")}


def _run_info(tree: _Tree, rel: str, manifest: dict[str, Any], marker: dict[str, Any]) -> RunInfo:
    published = [p for p in manifest.get("published", []) if isinstance(p, str)]
    info = RunInfo(rel, str(manifest["job"]), config=manifest.get("config"), **_marker(marker))
    if isinstance(manifest.get("seconds"), int | float):
        info.wall = float(manifest["seconds"])
    for name in published:
        if tree.kind(rel, name) != pafs.FileType.File:
            continue
        (info.pages if name.endswith(".html") else info.files).append(_join(rel, name))
    incomplete = manifest.get("incomplete") or {}
    for stage in manifest.get("stages") or {}:
        done = tree.json(rel, STAGES, stage, SUCCESS) or {}
        seconds = done.get("seconds")
        info.stages.append(
            {
                "stage": stage,
                "seconds": f"{seconds:.1f}" if isinstance(seconds, int | float) else None,
                "rows": ", ".join(f"{k} {v}" for k, v in (done.get("outputs") or {}).items()),
                "incomplete": incomplete.get(stage) or "",
            }
        )
    info.incomplete = {str(k): str(v) for k, v in incomplete.items()}
    info.quality = _quality(tree, rel, info.job, published)
    return info


def _quality(tree: _Tree, rel: str, job: str, published: list[str]) -> list[Quality]:
    out = []
    for stage, output, title, columns in QUALITY_TABLES.get(job, []):
        path = tree.path(rel, STAGES, stage, f"{output}.parquet")
        if tree.kind(rel, STAGES, stage, f"{output}.parquet") != pafs.FileType.File:
            continue
        try:
            table = pq.read_table(path, filesystem=tree.fs)
        except OSError:
            continue
        keep = [c for c in (columns or table.column_names) if c in table.column_names]
        rows = table.select(keep).to_pylist()
        more = f" (first {MAX_QUALITY_ROWS} of {len(rows)} rows)" if len(rows) > MAX_QUALITY_ROWS else ""
        out.append(Quality(title, rows[:MAX_QUALITY_ROWS], f"stages/{stage}/{output}.parquet{more}"))
    if "junit.xml" in published:
        gate = _junit(tree.text(rel, "junit.xml"))
        if gate is not None:
            out.append(gate)
    return out


def _junit(text: str | None) -> Quality | None:
    """The checks of a ``--gate`` file, from the junit.xml the run published."""
    if not text:
        return None
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    rows = []
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            failed = case.find("failure") is not None or case.find("error") is not None
            detail = case.find("failure") if failed else case.find("system-out")
            message = (detail.get("message") or detail.text or "") if detail is not None else ""
            rows.append(
                {
                    "status": "FAIL" if failed else "pass",
                    "suite": (suite.get("name") or "").removeprefix("checkray.gate."),
                    "check": case.get("name") or "",
                    "detail": " ".join(message.split())[:200],
                }
            )
    failed = sum(r["status"] == "FAIL" for r in rows)
    verdict = "FAILED" if failed else "PASSED"
    return Quality("Gate checks (--gate file)", rows, f"{verdict}: {len(rows) - failed} of {len(rows)} checks pass")


# ---------------------------------------------------------------------- models, versions
def _config_models(config: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, value) of every model a config names (``...model``, ``...encoder``)."""
    found = []
    if isinstance(config, dict):
        for key, value in config.items():
            where = f"{prefix}.{key}" if prefix else str(key)
            if key in ("model", "encoder", "judge", "generator") and isinstance(value, str) and value:
                found.append((where, value))
            else:
                found += _config_models(value, where)
    return found


def model_rows(tree: _Tree, runs: list[RunInfo]) -> list[dict[str, Any]]:
    rows, seen = [], set()

    def add(row: dict[str, Any]) -> None:
        key = (row["model"], row["identity"])
        if key not in seen:
            seen.add(key)
            rows.append(row)

    for info in runs:
        where = info.rel or "."
        prov = tree.json(info.rel, "provenance.json") if _join(info.rel, "provenance.json") in info.files else None
        for m in (prov or {}).get("models", []) if isinstance(prov, dict) else []:
            add(
                {
                    "model": m.get("name"),
                    "family": m.get("family"),
                    "identity": f"digest {m.get('digest')}"
                    + (f", revision {m['revision']}" if m.get("revision") else ""),
                    "accuracy": m.get("accuracy"),
                    "status": m.get("status"),
                    "from": f"{where}/provenance.json",
                }
            )
        if info.job == "zoo" and _join(info.rel, "zoo.yaml") in info.files:
            try:
                zoo = yaml.safe_load(tree.text(info.rel, "zoo.yaml") or "") or {}
            except yaml.YAMLError:
                zoo = {}
            for m in zoo.get("models", []) if isinstance(zoo, dict) else []:
                if isinstance(m, dict):
                    meta = m.get("meta") or {}
                    add(
                        {
                            "model": m.get("name"),
                            "family": m.get("family"),
                            "identity": f"built by the zoo: {meta.get('kind', '?')}, seed {meta.get('seed', '?')}",
                            "accuracy": m.get("accuracy"),
                            "status": "",
                            "from": f"{where}/zoo.yaml",
                        }
                    )
        for key, value in _config_models(info.config):
            add(
                {
                    "model": value,
                    "family": "",
                    "identity": f"config {key}",
                    "accuracy": None,
                    "status": "",
                    "from": where,
                }
            )
    return rows


def package_rows(tree: _Tree, runs: list[RunInfo]) -> tuple[list[str], list[dict[str, Any]]]:
    """Package versions: this environment's, and those each benchmark run recorded."""
    from engine.benchmark.provenance import PACKAGES, package_versions

    names = list(dict.fromkeys([*PACKAGES, "ray", "pyarrow", "llama_cpp_python", "jinja2", "plotly"]))
    columns = {"this environment": package_versions(names)}
    for info in runs:
        if _join(info.rel, "provenance.json") in info.files:
            prov = tree.json(info.rel, "provenance.json") or {}
            recorded = (prov.get("environment") or {}).get("packages") if isinstance(prov, dict) else None
            if isinstance(recorded, dict):
                columns[f"{info.rel or '.'} (at run time)"] = recorded
    rows = []
    for name in dict.fromkeys([*names, *(n for col in columns.values() for n in col)]):
        versions = {col: vals.get(name) for col, vals in columns.items()}
        if any(versions.values()):
            rows.append({"package": name, **{k: v or "-" for k, v in versions.items()}})
    return ["package", *columns], rows


def config_groups(runs: list[RunInfo]) -> list[dict[str, Any]]:
    """One entry per distinct config, with the runs that used it."""
    groups: dict[str, dict[str, Any]] = {}
    for info in runs:
        if info.config is None:
            continue
        key = json.dumps(info.config, sort_keys=True, default=str)
        group = groups.setdefault(key, {"yaml": yaml.safe_dump(info.config, sort_keys=False), "runs": []})
        group["runs"].append(info.rel or ".")
    return list(groups.values())


# ---------------------------------------------------------------------- the page
def render_index(uri: str, runs: list[RunInfo], title: str = "") -> str:
    import platform
    import sys

    from engine.report import render_template

    tree = _Tree(uri)
    steps = _steps(tree, "")
    package_columns, packages = package_rows(tree, runs)
    return render_template(
        "index.html.j2",
        title=title or f"checkray · {posixpath.basename(uri.rstrip('/')) or uri}",
        uri=uri,
        generator=GENERATOR,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        runs=runs,
        href=lambda rel: quote(rel),
        steps=steps or None,
        configs=config_groups(runs),
        models=model_rows(tree, runs),
        package_columns=package_columns,
        packages=packages,
        python=f"{sys.version.split()[0]} on {platform.platform()}",
        table=_table,
    )


def _table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    from engine.report import table_html

    return table_html(rows, columns)


def write_index(run: RunDir, title: str = "") -> str:
    """Write ``index.html`` into ``run`` (a run this process holds, or a plain folder of
    runs) atomically; returns its path. An ``index.html`` this command did not write is
    never replaced."""
    runs = find_runs(run.uri)
    if not runs:
        raise InputError(f"{run.uri}: no finished checkray run here (no {MANIFEST} at most {MAX_DEPTH} levels down)")
    if run.exists(INDEX) and f'content="{GENERATOR}"' not in (run.read_text(INDEX)[:2000]):
        raise InputError(f"{run.uri}: {INDEX} exists and was not written by {GENERATOR}; refusing to overwrite it")
    page = render_index(run.uri, runs, title)
    return run.write_text(INDEX, page)  # in a claimed run, recorded as the run's own file


def index_command(
    directory: str = typer.Argument(..., help="A run directory (a demo, a job's run, or a folder of runs)."),
):
    """Write DIR/index.html: every report of a run directory, its config, versions, stage times and gates."""
    from jobs.console import console

    run = RunDir(directory)
    marker = _Tree(directory).json("", MARKER) if run.exists(MARKER) else None
    if isinstance(marker, dict) and marker.get("job"):  # a run: claimed and locked as its own job would
        job = str(marker["job"])
        run.claim(job)
        with run.lock(job):
            path = write_index(run)
    else:
        path = write_index(run)
    console.print(f"index: {path}", markup=False, highlight=False, soft_wrap=True)
