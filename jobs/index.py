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
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import typer
import yaml

from checkray.engine.errors import InputError
from checkray.engine.rundir import MARKER, RunDir
from checkray.jobs.index_runs import (
    DEMO_TIMINGS,
    INDEX,
    MANIFEST,
    MAX_DEPTH,
    RunInfo,
    RunTree,
    demo_steps,
    find_runs,
    join_rel,
)

__all__ = ["DEMO_TIMINGS", "GENERATOR", "INDEX", "find_runs", "index_command", "render_index", "write_index"]

GENERATOR = "checkray report-index"  # <meta name="generator">: an index this command may replace


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


def reference_identity(value: str) -> str:
    """What a model reference in a config is: a builtin's package and installed version, a
    local path's digest (size and mtime of its files), else a name loaded as given."""
    if value.startswith("builtin:"):
        from importlib import metadata

        from checkray.actors.assets import ASSETS

        alias = value.removeprefix("builtin:")
        for (kind, name), asset in ASSETS.items():
            if name == alias:
                install = re.sub(r"\{([^,}.]+)[^}]*\}", r"\1", asset.install)  # part{1,2} -> part1
                found = []
                for dist, pinned in re.findall(r"([A-Za-z0-9_.\-]+)==([\w.+]+)", install):
                    try:
                        found.append(f"{dist} {metadata.version(dist)}")
                    except metadata.PackageNotFoundError:
                        found.append(f"{dist} (not installed; pinned {pinned})")
                return f"builtin {kind}: " + (", ".join(found) or asset.install)
        return "unknown builtin"
    if "://" not in value and Path(value).exists():
        from checkray.engine.stages import path_digest

        return f"local path, digest {path_digest(value)[:16]}"
    return "loaded by name (hub id or package)"


def model_rows(tree: RunTree, runs: list[RunInfo]) -> list[dict[str, Any]]:
    rows, seen = [], set()

    def add(row: dict[str, Any]) -> None:
        key = (row["model"], row["identity"])
        if key not in seen:
            seen.add(key)
            rows.append(row)

    for info in runs:
        where = info.rel or "."
        prov = tree.json(info.rel, "provenance.json") if join_rel(info.rel, "provenance.json") in info.files else None
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
        if info.job == "zoo" and join_rel(info.rel, "zoo.yaml") in info.files:
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
                    "identity": reference_identity(value),
                    "accuracy": None,
                    "status": "",
                    "from": f"{where}: config {key}",
                }
            )
    return rows


def package_rows(tree: RunTree, runs: list[RunInfo]) -> tuple[list[str], list[dict[str, Any]]]:
    """Package versions: this environment's, and those each benchmark run recorded."""
    from checkray.engine.benchmark.provenance import PACKAGES, package_versions

    names = list(dict.fromkeys([*PACKAGES, "ray", "pyarrow", "llama_cpp_python", "jinja2", "plotly"]))
    columns = {"this environment": package_versions(names)}
    for info in runs:
        if join_rel(info.rel, "provenance.json") in info.files:
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

    from checkray.engine.report import render_template

    tree = RunTree(uri)
    steps = demo_steps(tree, "")
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
        suite_rows=[
            {"run": r.rel or ".", "job": r.job, **r.suite, "page": ", ".join(r.pages)} for r in runs if r.suite
        ],
        stage_rows=[{"run": r.rel or ".", "job": r.job, **stage} for r in runs for stage in r.stages],
        configs=config_groups(runs),
        models=model_rows(tree, runs),
        package_columns=package_columns,
        packages=packages,
        python=f"{sys.version.split()[0]} on {platform.platform()}",
        table=_table,
    )


def _table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    from checkray.engine.report import table_html

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
    from checkray.jobs.console import console

    run = RunDir(directory)
    marker = RunTree(directory).json("", MARKER) if run.exists(MARKER) else None
    if isinstance(marker, dict) and marker.get("job"):  # a run: claimed and locked as its own job would
        job = str(marker["job"])
        run.claim(job)
        with run.lock(job):
            path = write_index(run)
    else:
        path = write_index(run)
    console.print(f"index: {path}", markup=False, highlight=False, soft_wrap=True)
