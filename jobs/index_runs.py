"""What ``checkray report-index`` reads of a run directory (``jobs/index.py`` renders it).

Every directory at or below the indexed one that holds a ``manifest.json`` is a finished
job run: its published pages, the seconds and rows of each stage and its incomplete
stages (the manifest's ``stage_records``), and the suite-quality tables the job published
and listed in its manifest (``Job.quality``: MFT gates, TestAug validity decisions, S²LCT
label consistency ...) or published as ``junit.xml`` (a ``--gate`` file's checks). The
index is a view of the runs, never an input of a job, and reads only what a run published:
never its private ``stages/`` directory.
"""

from __future__ import annotations

import json
import posixpath
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from checkray.engine.errors import InputError
from checkray.engine.report import ASSET_DIR
from checkray.engine.rundir import MARKER, STAGES, RunDir
from checkray.engine.suite_validity import wilson

INDEX = "index.html"
MANIFEST = "manifest.json"  # jobs.base.MANIFEST (not imported: base pulls in Ray's runtime)
DEMO_TIMINGS = "timings.json"  # written by the demo: the wall time of each step
SKIP_DIRS = {STAGES, "logs", ASSET_DIR}
MAX_DEPTH = 4  # a demo nests runs two deep (costello/repair, testaug/benchmark)

MAX_QUALITY_ROWS = 60
WORST = 2  # capabilities named as a model's worst on the index


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
    models: list[dict[str, Any]] = field(default_factory=list)  # a benchmark's models, best first
    suite: dict[str, Any] | None = None  # a generated suite's size and estimated validity

    @property
    def seconds(self) -> float:
        return round(sum(float(s["seconds"] or 0.0) for s in self.stages), 1)


class RunTree:
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
    tree = RunTree(uri)
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
            info = RunInfo(rel, str(marker["job"]), pages=[join_rel(rel, "report.html")], **_marker(marker))
            steps = demo_steps(tree, rel)
            info.wall = round(sum(float(s["seconds"]) for s in steps), 1) if steps else None
            runs.append(info)
        if depth < MAX_DEPTH:
            for name in tree.subdirs(rel):
                walk(join_rel(rel, name), depth + 1)

    walk("", 0)
    return runs


def demo_steps(tree: RunTree, rel: str) -> list[dict[str, Any]]:
    """The demo's steps and their wall times (``timings.json``), if this is a demo."""
    timings = tree.json(rel, DEMO_TIMINGS)
    steps = timings.get("steps") if isinstance(timings, dict) else None
    if not isinstance(steps, list):
        return []
    return [
        {
            "step": str(s.get("step")),
            "seconds": f"{float(s['seconds']):.1f}",
            **{
                shown: str(s[key])
                for key, shown in (("peak_rss_mib", "peak RSS (MiB)"), ("driver_peak_rss_mib", "driver alone (MiB)"))
                if isinstance(s.get(key), int)
            },
        }
        for s in steps
        if isinstance(s, dict) and isinstance(s.get("seconds"), int | float)
    ]


def join_rel(*parts: str) -> str:
    return posixpath.join(*[p for p in parts if p])


def _marker(marker: dict[str, Any]) -> dict[str, Any]:
    when = marker.get("updated") or marker.get("created")
    return {"checkray": marker.get("checkray"), "updated": str(when).replace("T", " ")[:16] if when else None}


def _run_info(tree: RunTree, rel: str, manifest: dict[str, Any], marker: dict[str, Any]) -> RunInfo:
    published = [p for p in manifest.get("published", []) if isinstance(p, str)]
    info = RunInfo(rel, str(manifest["job"]), config=manifest.get("config"), **_marker(marker))
    if isinstance(manifest.get("seconds"), int | float):
        info.wall = float(manifest["seconds"])
    for name in published:
        if tree.kind(rel, name) != pafs.FileType.File:
            continue
        (info.pages if name.endswith(".html") else info.files).append(join_rel(rel, name))
    incomplete = manifest.get("incomplete") or {}
    records = manifest.get("stage_records") or {}
    for stage in manifest.get("stages") or {}:
        done = records.get(stage) if isinstance(records.get(stage), dict) else {}
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
    info.quality = _quality(tree, rel, manifest, published)
    info.models = _model_answers(tree, rel, published)
    info.suite = _suite_answer(tree, rel, manifest, published)
    return info


def _share(k: float, n: float) -> str:
    low, high = wilson(int(k), int(n))
    return f"{k / n:.1%} [{low:.0%}, {high:.0%}]"


def _model_answers(tree: RunTree, rel: str, published: list[str]) -> list[dict[str, Any]]:
    """Per model of a benchmark run (its published summary.parquet, small): the overall
    failure rate with its 95 % Wilson interval and the worst capabilities, best first."""
    if "summary.parquet" not in published or tree.kind(rel, "summary.parquet") != pafs.FileType.File:
        return []
    try:
        table = pq.read_table(
            tree.path(rel, "summary.parquet"), filesystem=tree.fs, columns=["model", "capability", "n", "failures"]
        )
    except (OSError, KeyError, ValueError):
        return []
    totals: dict[str, list[int]] = {}
    cells: dict[tuple[str, str], list[int]] = {}
    for r in table.to_pylist():
        n, k = int(r["n"] or 0), int(r["failures"] or 0)
        for bucket, key in ((totals, r["model"]), (cells, (r["model"], r["capability"] or "(none)"))):
            acc = bucket.setdefault(key, [0, 0])
            acc[0] += n
            acc[1] += k
    rows = []
    for model, (n, k) in totals.items():
        if not n:
            rows.append({"model": model, "failure rate [95 % CI]": "nothing evaluated", "cases": 0, "_rate": 2.0})
            continue
        # ranked by the interval's bound, so a capability of 2 cases is not called the worst for 1 failure
        caps = [(c, ck, cn, wilson(ck, cn)) for (m, c), (cn, ck) in cells.items() if m == model and cn]
        worst = sorted((x for x in caps if x[1]), key=lambda x: (-x[3][0], str(x[0])))[:WORST]
        best = min(caps, key=lambda x: (x[3][1], str(x[0]))) if len(caps) > WORST else None
        rows.append(
            {
                "model": model,
                "failure rate [95 % CI]": _share(k, n),
                "worst capabilities": ", ".join(f"{c} {ck / cn:.0%} of {cn}" for c, ck, cn, _ in worst)
                or "none failed",
                "best capability": f"{best[0]} {best[1] / best[2]:.0%} of {best[2]}" if best else "",
                "cases": n,
                "_rate": k / n,
            }
        )
    rows.sort(key=lambda r: (r["_rate"], str(r["model"])))
    for rank, r in enumerate(rows, 1):
        r.pop("_rate")
        r["rank"] = rank
    return [{"rank": r.pop("rank"), **r} for r in rows]


def _suite_answer(tree: RunTree, rel: str, manifest: dict[str, Any], published: list[str]) -> dict[str, Any] | None:
    """A generated suite's size and people's estimate of its validity (the run's
    ``validity_estimate.parquet``: per generator and capability, cases and the share judged
    label-valid, fluent and on-capability), weighted by cases; else the suite's size only."""
    from checkray.jobs.validity_estimate import VALIDITY_FILE

    listed = [e.get("file") for e in manifest.get("quality") or [] if isinstance(e, dict)]
    if VALIDITY_FILE in listed and VALIDITY_FILE in published and tree.kind(rel, VALIDITY_FILE) == pafs.FileType.File:
        try:
            rows = pq.read_table(tree.path(rel, VALIDITY_FILE), filesystem=tree.fs).to_pylist()
        except OSError:
            rows = []
        cases = sum(int(r.get("cases") or 0) for r in rows)
        judged = [r for r in rows if r.get("all_three") is not None and r.get("cases")]
        weight = sum(int(r["cases"]) for r in judged)
        answer: dict[str, Any] = {
            "cases": cases,
            "rejected": sum(int(r.get("rejected") or 0) for r in rows),
            "generators": ", ".join(sorted({str(r.get("generator")) for r in rows})),
        }
        if weight:

            def mean(name: str) -> float:
                return sum(float(r[name]) * int(r["cases"]) for r in judged) / weight

            answer["valid (all three)"] = (
                f"{mean('all_three'):.0%} [{mean('all_three_low'):.0%}, {mean('all_three_high'):.0%}]"
            )
            answer["estimated on"] = f"{weight} of {cases} cases' generators/capabilities"
            worst = min(judged, key=lambda r: float(r["all_three"]))
            answer["least valid"] = (
                f"{worst.get('capability') or worst.get('generator')} {float(worst['all_three']):.0%}"
            )
        else:
            answer["valid (all three)"] = "not judged"
        return answer
    for name in ("suite.parquet", "triples.parquet"):
        if name in published and tree.kind(rel, name) == pafs.FileType.File:
            try:
                n = pq.read_metadata(tree.path(rel, name), filesystem=tree.fs).num_rows
            except OSError:
                continue
            return {"cases": n, "valid (all three)": "not estimated (no validity_estimate.parquet)"}
    return None


def _quality(tree: RunTree, rel: str, manifest: dict[str, Any], published: list[str]) -> list[Quality]:
    """The quality tables the run's manifest lists (``Job.quality``), then its gate checks."""
    out = []
    for entry in manifest.get("quality") or []:
        if not isinstance(entry, dict) or entry.get("file") not in published:
            continue
        name = str(entry["file"])
        if tree.kind(rel, name) != pafs.FileType.File:
            continue
        try:
            table = pq.read_table(tree.path(rel, name), filesystem=tree.fs)
        except OSError:
            continue
        columns = entry.get("columns") or table.column_names
        keep = [c for c in columns if c in table.column_names]
        rows = table.select(keep).to_pylist()
        more = f" (first {MAX_QUALITY_ROWS} of {len(rows)} rows)" if len(rows) > MAX_QUALITY_ROWS else ""
        out.append(Quality(str(entry.get("title") or name), rows[:MAX_QUALITY_ROWS], f"{name}{more}"))
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
