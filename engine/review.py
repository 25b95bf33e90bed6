"""People review generated cases: review units, stratified samples, decisions, the running
validity estimate, Cohen's kappa, and the reviewed suite (``checkray review``, docs/review.md).

A **unit** is what a person judges: one case of a published suite (templates, MFT, TestAug,
S²LCT), or one COSTELLO triple (three rows joined by ``meta.triple``) judged as a whole.
A **decision** is one row of ``reviews.parquet`` in the run directory: who decided what on
which unit, when, with the unit's revision. Decisions are appended, never rewritten: the
current decision of a reviewer on a unit is their row of the highest revision, and an
``undo`` row takes it back. Each decision also records the three verdicts of the
annotation guide (docs/validity.md: label-valid, fluent, on-capability), so reviews and
the project's annotation batches are the same kind of data.

Nothing here serves pages or parses arguments (``jobs/review/``); everything is pure or
reads and writes a run directory through ``RunDir`` (atomic writes, ownership).
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkray.engine.errors import InputError
from checkray.engine.rundir import MARKER, RunDir
from checkray.engine.suite_validity import GENERATORS, VERDICTS, Share, generator_of

REVIEWS_FILE = "reviews.parquet"
REVIEW_LOCK = ".checkray-review.lock"
MANIFEST = "manifest.json"
# The suite each job publishes whose cases people review.
SUITE_OF_JOB = {
    "templates": "suite.parquet",
    "mft": "suite.parquet",
    "testaug": "suite.parquet",
    "s2lct": "suite.parquet",
    "costello": "triples.parquet",
}
REVIEWED_PREFIX = "reviewed_"  # suite.parquet -> reviewed_suite.parquet


def is_reviewed_file(path: str) -> bool:
    """A suite file ``checkray review apply`` wrote (local path or URI)."""
    return path.rstrip("/").rsplit("/", 1)[-1].startswith(REVIEWED_PREFIX)


# What a person decides, and the verdicts each decision stands for (label-valid, fluent,
# on-capability); a reject's verdicts come from its reason.
DECISIONS = ("accept", "reject", "relabel", "edit", "skip", "undo")
REASONS = {
    "wrong label": (0, 1, 1),
    "not fluent": (1, 0, 1),
    "off capability": (1, 1, 0),
    "unusable": (0, 0, 0),
}
OTHER_REASON = (0, 1, 1)  # a free-text reason: the case is not a valid test as it stands
VERDICTS_OF = {"accept": (1, 1, 1), "relabel": (0, 1, 1), "edit": (1, 0, 1)}

REVIEW_SCHEMA = pa.schema(
    [
        pa.field("case_id", pa.string(), nullable=False),
        pa.field("run", pa.string()),  # the job run (relative to the reviewed directory)
        pa.field("job", pa.string()),
        pa.field("generator", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("reviewer", pa.string(), nullable=False),
        pa.field("decision", pa.string(), nullable=False),
        pa.field("label_valid", pa.int8()),
        pa.field("fluent", pa.int8()),
        pa.field("on_capability", pa.int8()),
        pa.field("new_label", pa.string()),
        pa.field("new_text", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("time", pa.string(), nullable=False),
        pa.field("revision", pa.int64(), nullable=False),
    ]
)


# --- units ---------------------------------------------------------------------------------


def _meta(row: Mapping[str, Any]) -> dict[str, Any]:
    raw = row.get("meta")
    try:
        out = json.loads(raw) if isinstance(raw, str) and raw else {}
    except json.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


def expectation(row: Mapping[str, Any]) -> str:
    """The expectation a case carries, as a reader sees it."""
    labels = row.get("expected_labels")
    if labels:
        return " or ".join(labels)
    if row.get("test_type") in ("INV", "DIR") and row.get("relation"):
        return f"{row['relation']} vs {row.get('perturbs')}"
    return str(row.get("expected_label"))


def _source(job: str, row: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    prov = row.get("provenance") or {}
    if job == "templates":
        return f"template: {meta.get('template')}"
    if job == "mft":
        src = meta.get("representative") or meta.get("source_text") or prov.get("source_id")
        return f"prompt {prov.get('template_id')} (version {meta.get('version')}, {meta.get('split')}); from: {src}"
    if job == "testaug":
        if meta.get("template") is not None:  # an expansion case: its new template and the case it came from
            return f"expansion of {json.dumps(meta['template'])} from: {meta.get('source')}"
        return f"prompt {meta.get('prompt')} for: {meta.get('description')}"
    if job == "s2lct":
        if meta.get("kind") == "expansion":
            return f"expansion of {meta.get('masked')} -> {meta.get('words')}"
        return f"rules {meta.get('rules')} on {prov.get('source_id')}; label from {meta.get('label_source')}"
    return json.dumps(meta)[:200]


def case_description(row: Mapping[str, Any]) -> str:
    """What a case tests, in words: its generator's description (TestAug), else its topic."""
    return str(_meta(row).get("description") or row.get("topic") or "")


def case_units(job: str, rows: Sequence[Mapping[str, Any]], run: str = ".") -> list[dict[str, Any]]:
    """The cases of one published suite (not COSTELLO's) as review units."""
    out = []
    for row in rows:
        generator = generator_of(job, row)
        if generator is None:
            continue
        meta = _meta(row)
        description = case_description(row)
        out.append(
            {
                "case_id": row["case_id"],
                "run": run,
                "job": job,
                "generator": generator,
                "capability": str(row.get("capability") or ""),
                "description": description,
                "test_type": row.get("test_type"),
                "text": row["text"],
                "text_pair": row.get("text_pair"),
                "expected": expectation(row),
                "expected_label": row.get("expected_label"),
                "source": _source(job, row, meta),
                "kind": "case",
            }
        )
    return out


def triple_units(rows: Sequence[Mapping[str, Any]], run: str = ".") -> list[dict[str, Any]]:
    """COSTELLO triples (seed, closer, farther rows joined by ``meta.triple``) as units."""
    by_triple: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        role = "seed" if row.get("relation") is None else row["relation"]
        by_triple.setdefault(_meta(row).get("triple") or row["case_id"], {})[role] = row
    out = []
    for tid, parts in by_triple.items():
        if not {"seed", "closer", "farther"} <= set(parts):
            continue
        seed, closer, farther = parts["seed"], parts["closer"], parts["farther"]
        generator = generator_of("costello", closer)
        if generator is None:
            continue

        def joined(r: Mapping[str, Any]) -> str:
            return r["text"] + (f" [SEP] {r['text_pair']}" if r.get("text_pair") else "")

        out.append(
            {
                "case_id": tid,
                "run": run,
                "job": "costello",
                "generator": generator,
                "capability": str(closer.get("capability") or ""),
                "description": str(_meta(closer).get("mutation") or closer.get("topic") or ""),
                "test_type": "triple",
                "text": joined(seed),
                "text_pair": None,
                "closer": joined(closer),
                "farther": joined(farther),
                "expected": "closer nearer the seed than farther",
                "expected_label": "closer",
                "source": _source("costello", closer, {k: v for k, v in _meta(closer).items() if k != "triple"}),
                "kind": "triple",
            }
        )
    return out


def job_runs(root: Path) -> Iterator[tuple[str, Path]]:
    """(job, directory) of every finished job run at or below ``root`` that published a suite."""
    manifests = [root / MANIFEST] if (root / MANIFEST).is_file() else []
    manifests += [m for m in sorted(root.rglob(MANIFEST)) if m.parent != root]
    for manifest in manifests:
        rel = manifest.relative_to(root).parts
        if "stages" in rel:
            continue
        try:
            meta = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        job = str(meta.get("job"))
        suite = SUITE_OF_JOB.get(job)
        if suite and suite in meta.get("published", []) and (manifest.parent / suite).is_file():
            yield job, manifest.parent


def units_of_run(root: str | Path) -> list[dict[str, Any]]:
    """Every review unit of every suite published at or below ``root`` (a job's run or a
    demo's); a one-line error when there is none."""
    import pyarrow.parquet as pq

    root = Path(root)
    units: list[dict[str, Any]] = []
    for job, run in job_runs(root):
        rows = pq.read_table(run / SUITE_OF_JOB[job]).to_pylist()
        rel = run.relative_to(root).as_posix() or "."
        units += triple_units(rows, rel) if job == "costello" else case_units(job, rows, rel)
    if not units:
        raise InputError(f"{root}: no published suite to review (templates, mft, testaug, s2lct or costello runs)")
    return units


# --- sampling ------------------------------------------------------------------------------


def stratum(unit: Mapping[str, Any], by: str) -> str:
    return unit["generator"] if by == "generator" else f"{unit['generator']} / {unit['capability']}"


def stratified_sample(units: Sequence[dict[str, Any]], n: int | None, by: str = "generator", seed: int = 0):
    """``n`` units (all when None) in review order: strata (``by`` generator or capability)
    take turns, each in random order, so the first reviews reach every stratum and every
    prefix of the list is as balanced as the strata's sizes allow."""
    if by not in ("generator", "capability"):
        raise InputError(f"--by {by!r}: expected generator or capability")
    rng = random.Random(seed)
    groups: dict[str, list[dict[str, Any]]] = {}
    for unit in units:
        groups.setdefault(stratum(unit, by), []).append(unit)
    queues = []
    for key in sorted(groups):
        items = list(groups[key])
        rng.shuffle(items)
        queues.append(items)
    order: list[dict[str, Any]] = []
    total = len(units) if n is None else min(n, len(units))
    while len(order) < total:
        for queue in queues:
            if queue and len(order) < total:
                order.append(queue.pop())
    return order


# --- decisions -----------------------------------------------------------------------------


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def verdicts_of(decision: str, reason: str | None = None) -> tuple[int, int, int] | None:
    """The three verdicts (label-valid, fluent, on-capability) a decision stands for; None
    for skip and undo (no verdict)."""
    if decision == "reject":
        return REASONS.get((reason or "").strip(), OTHER_REASON)
    return VERDICTS_OF.get(decision)


class ReviewConflict(InputError):
    """A decision made on an older revision of a unit than the one on disk (a stale page)."""


def check_decision(unit: Mapping[str, Any] | None, case_id: str, decision: Mapping[str, Any], labels: Iterable[str]):
    """A one-line error for a decision that cannot be recorded."""
    if unit is None:
        raise InputError(f"unknown case id {case_id!r}")
    kind = decision.get("decision")
    if kind not in DECISIONS:
        raise InputError(f"case {case_id}: unknown decision {kind!r} (have: {', '.join(DECISIONS)})")
    if kind == "relabel":
        if unit.get("test_type") in ("INV", "DIR"):
            raise InputError(f"case {case_id}: an {unit['test_type']} case expects a relation, not a label: reject it")
        new = decision.get("new_label")
        allowed = {"farther"} if unit.get("kind") == "triple" else set(labels)
        if not new or new not in allowed:
            raise InputError(f"case {case_id}: relabel to {new!r}: expected one of {', '.join(sorted(allowed))}")
    if kind == "edit" and not str(decision.get("new_text") or "").strip():
        raise InputError(f"case {case_id}: edit without a new text")
    if kind == "reject" and not str(decision.get("reason") or "").strip():
        raise InputError(f"case {case_id}: reject without a reason")


class ReviewStore:
    """``reviews.parquet`` of one run directory: read, and appended to atomically under a
    lock, so two servers (two reviewers) on the same run never lose each other's rows.

    The directory must be a checkray run (its ``.checkray-run.json``); a ``reviews.parquet``
    there that the run's marker does not list as the run's own is refused, never replaced."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise InputError(f"{self.root}: no such run directory")
        self.run = RunDir(str(self.root))
        marker = self.run._read_marker()
        if marker is None:
            raise InputError(f"{self.root}: not a directory checkray wrote (no {MARKER}); refusing to review it")
        self.run.claim(str(marker.get("job")))
        if self.run.exists(REVIEWS_FILE) and REVIEWS_FILE not in set(marker.get("owned", [])):
            raise InputError(f"{self.root}: {REVIEWS_FILE} exists and checkray did not write it; refusing to use it")
        # the file is the run's from now on: a second store opened before the first
        # decision is written (another reviewer's server) must find it its own too
        self.run.record_owned([REVIEW_LOCK, REVIEWS_FILE])

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.root / REVIEW_LOCK, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def rows(self) -> list[dict[str, Any]]:
        if not self.run.exists(REVIEWS_FILE):
            return []
        return self.run.read_table(REVIEWS_FILE).to_pylist()

    def append(self, new: Sequence[dict[str, Any]], expected: Mapping[tuple[str, str], int] | None = None):
        """Append decisions (each gets the next revision of its case and reviewer); with
        ``expected``, refuse (``ReviewConflict``) a case whose revision on disk is not the one
        the caller saw. Returns the rows written."""
        with self._locked():
            rows = self.rows()
            revs = revisions(rows)
            written = []
            for item in new:
                key = (item["case_id"], item["reviewer"])
                if expected is not None and revs.get(key, 0) != expected.get(key, 0):
                    raise ReviewConflict(
                        f"case {item['case_id']}: {item['reviewer']} decided it again elsewhere "
                        f"(revision {revs.get(key, 0)}, this page saw {expected.get(key, 0)}); reload"
                    )
                revs[key] = revs.get(key, 0) + 1
                row = {f.name: item.get(f.name) for f in REVIEW_SCHEMA}
                row["revision"], row["time"] = revs[key], item.get("time") or now()
                written.append(row)
            table = pa.Table.from_pylist(rows + written, schema=REVIEW_SCHEMA)
            self.run.write_table(REVIEWS_FILE, table)  # temporary name, then rename
        return written


def decision_row(unit: Mapping[str, Any], reviewer: str, decision: Mapping[str, Any]) -> dict[str, Any]:
    """A ``reviews.parquet`` row (no revision yet) for a checked decision on ``unit``."""
    kind = decision["decision"]
    verdicts = verdicts_of(kind, decision.get("reason"))
    return {
        "case_id": unit["case_id"],
        "run": unit.get("run"),
        "job": unit.get("job"),
        "generator": unit.get("generator"),
        "capability": unit.get("capability"),
        "reviewer": reviewer,
        "decision": kind,
        **dict(zip(VERDICTS, verdicts or (None, None, None), strict=True)),
        "new_label": decision.get("new_label") if kind == "relabel" else None,
        "new_text": decision.get("new_text") if kind == "edit" else None,
        "reason": (decision.get("reason") or None) if kind in ("reject", "relabel", "edit") else None,
        "time": decision.get("time"),
    }


def revisions(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """The highest revision of each (case, reviewer)."""
    out: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r["case_id"], r["reviewer"])
        out[key] = max(out.get(key, 0), int(r["revision"]))
    return out


def current(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each reviewer's standing decision per case: the row of the highest revision, unless
    that is an ``undo`` (then the one before it, skipping undone ones; none if all undone)."""
    history: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        history.setdefault((r["case_id"], r["reviewer"]), []).append(r)
    out = {}
    for key, items in history.items():
        items = sorted(items, key=lambda r: int(r["revision"]))
        stack: list[Mapping[str, Any]] = []
        for r in items:
            if r["decision"] == "undo":
                if stack:
                    stack.pop()
            else:
                stack.append(r)
        if stack:
            out[key] = dict(stack[-1])
    return out


def per_case(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One standing decision with verdicts per case (the latest in time over reviewers):
    what the validity estimate and the reviewed suite use."""
    out: dict[str, dict[str, Any]] = {}
    for (case_id, _), row in sorted(current(rows).items(), key=lambda kv: (kv[1]["time"], kv[1]["revision"])):
        if row["decision"] != "skip":
            out[case_id] = row
    return out


# --- the estimate and agreement -------------------------------------------------------------


def estimate(
    rows: Iterable[Mapping[str, Any]],
    units: Sequence[Mapping[str, Any]],
    shipped: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The running validity estimate: per generator, then per capability of it, the units
    reviewed and the share label-valid, fluent, on-capability and all three (95 % Wilson
    intervals; ``engine/suite_validity.py``). With ``shipped`` (``load_estimates()``), each
    generator's row also gives the shipped estimate of all three, for comparison."""
    decided = per_case(rows)
    total: Counter = Counter()
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for unit in units:
        total[(unit["generator"], "")] += 1
        total[(unit["generator"], unit["capability"])] += 1
        row = decided.get(unit["case_id"])
        if row is not None:
            groups.setdefault((unit["generator"], ""), []).append(row)
            groups.setdefault((unit["generator"], unit["capability"]), []).append(row)
    order = {g: i for i, g in enumerate(GENERATORS)}
    out = []
    for generator, capability in sorted(total, key=lambda k: (order.get(k[0], 99), k[0], k[1] != "", k[1])):
        mine = groups.get((generator, capability), [])
        shares = {v: Share(sum(int(r[v]) for r in mine), len(mine)) for v in VERDICTS}
        shares["all_three"] = Share(sum(all(int(r[v]) for v in VERDICTS) for r in mine), len(mine))
        row: dict[str, Any] = {
            "generator": generator,
            "capability": capability,
            "units": total[(generator, capability)],
            "reviewed": len(mine),
        }
        for name, share in shares.items():
            row[name] = share.rate
            row[f"{name}_text"] = share.text()
            row[f"{name}_low"], row[f"{name}_high"] = share.interval if share.n else (None, None)
        known = ((shipped or {}).get(generator) or {}).get("overall") or {}
        row["shipped_all_three_text"] = (
            f"{100 * known['all_three']:.1f} % [{100 * known['all_three_low']:.1f}, "
            f"{100 * known['all_three_high']:.1f}] of {known.get('n')}"
            if capability == "" and known.get("all_three") is not None
            else ""
        )
        out.append(row)
    return out


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa of two raters' labels on the same items; None without items, 1.0 when
    both always agree on one category (no disagreement possible to correct for)."""
    if len(a) != len(b):
        raise ValueError("kappa needs the same items rated by both")
    n = len(a)
    if not n:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    chance = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if chance >= 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - chance) / (1 - chance)


def agreement(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per pair of reviewers: the cases both decided (skips aside), and Cohen's kappa on
    the decision (accept / reject / relabel / edit) and on each verdict."""
    by_reviewer: dict[str, dict[str, Mapping[str, Any]]] = {}
    for (case_id, reviewer), row in current(rows).items():
        if row["decision"] != "skip":
            by_reviewer.setdefault(reviewer, {})[case_id] = row
    names = sorted(by_reviewer)
    out = []
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            both = sorted(set(by_reviewer[x]) & set(by_reviewer[y]))
            rx, ry = [by_reviewer[x][c] for c in both], [by_reviewer[y][c] for c in both]
            row: dict[str, Any] = {"reviewers": f"{x} / {y}", "cases": len(both)}
            row["decision_kappa"] = cohen_kappa([r["decision"] for r in rx], [r["decision"] for r in ry])
            row["agree"] = sum(p["decision"] == q["decision"] for p, q in zip(rx, ry, strict=True))
            for v in (*VERDICTS, "all_three"):

                def value(r: Mapping[str, Any], v: str = v) -> int:
                    return int(all(int(r[w]) for w in VERDICTS)) if v == "all_three" else int(r[v])

                row[f"{v}_kappa"] = cohen_kappa([value(r) for r in rx], [value(r) for r in ry])
            out.append(row)
    return out


# --- export / import -----------------------------------------------------------------------

EXPORT_COLUMNS = (
    "case_id",
    "generator",
    "capability",
    "description",
    "text",
    "text_pair",
    "closer",
    "farther",
    "expected",
    "source",
    "decision",
    "reason",
    "new_label",
    "new_text",
)


def export_units(units: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Write units for reviewers elsewhere: CSV (``.csv``) or JSON Lines (``.jsonl``), with
    empty ``decision``, ``reason``, ``new_label`` and ``new_text`` columns to fill."""
    rows = [{c: unit.get(c) for c in EXPORT_COLUMNS} for unit in units]
    if path.suffix == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=EXPORT_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
        text = buf.getvalue()
    elif path.suffix in (".jsonl", ".ndjson"):
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    else:
        raise InputError(f"{path}: export to .csv or .jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def read_reviewed_file(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of every row of a filled export (CSV or JSON Lines)."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    if path.suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or "case_id" not in reader.fieldnames or "decision" not in reader.fieldnames:
            raise InputError(f"{path}: needs columns case_id and decision (the file `review export` writes)")
        return [(i, dict(r)) for i, r in enumerate(reader, start=2)]
    if path.suffix in (".jsonl", ".ndjson"):
        out = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{i}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{i}: not a JSON object")
            out.append((i, row))
        return out
    raise InputError(f"{path}: import a .csv or .jsonl file")


def decisions_from_file(path: Path, units: Mapping[str, Mapping[str, Any]], labels: Iterable[str]):
    """The decisions of a filled export, checked: an unknown case id, an unknown decision, a
    case decided twice with different decisions is a one-line error naming the line.
    Rows with an empty decision are not reviewed yet and are left out."""
    labels = list(labels)
    seen: dict[str, tuple[int, dict[str, Any]]] = {}
    for line, row in read_reviewed_file(path):
        case_id = str(row.get("case_id") or "").strip()
        kind = str(row.get("decision") or "").strip().lower()
        if not kind:
            continue
        decision = {
            "decision": kind,
            "reason": str(row.get("reason") or "").strip() or None,
            "new_label": str(row.get("new_label") or "").strip() or None,
            "new_text": str(row.get("new_text") or "") or None,
        }
        try:
            if kind in ("undo",):
                raise InputError(f"case {case_id}: 'undo' is not a decision to import")
            check_decision(units.get(case_id), case_id, decision, labels)
        except InputError as exc:
            raise InputError(f"{path}:{line}: {exc}") from None
        if case_id in seen:
            first_line, first = seen[case_id]
            if first != decision:
                raise InputError(
                    f"{path}:{line}: case {case_id} decided '{kind}' here and '{first['decision']}' "
                    f"on line {first_line}: conflicting decisions"
                )
            continue
        seen[case_id] = (line, decision)
    return {case_id: decision for case_id, (_, decision) in seen.items()}


# --- the reviewed suite -----------------------------------------------------------------------


def apply_reviews(job: str, table: pa.Table, decided: Mapping[str, Mapping[str, Any]]) -> tuple[pa.Table, Counter]:
    """The reviewed suite: rejected units out, relabelled and edited ones changed, every
    reviewed row with its review in ``meta.review``. COSTELLO: a unit is a triple (all three
    rows); relabel to ``farther`` swaps closer and farther, an edit replaces the seed text.
    INV/DIR rows that perturb a rejected case leave with it."""
    rows = table.to_pylist()
    kept, counts = [], Counter()
    for row in rows:
        meta = _meta(row)
        key = (meta.get("triple") or row["case_id"]) if job == "costello" else row["case_id"]
        review = decided.get(key)
        if review is None:
            kept.append(row)
            continue
        kind = review["decision"]
        counts[kind] += 1 if job != "costello" or row.get("relation") == "closer" else 0
        if kind == "reject":
            continue
        if kind == "relabel":
            if job == "costello":
                swap = {"closer": "farther", "farther": "closer"}
                row["relation"] = swap.get(row.get("relation"), row.get("relation"))
            else:
                meta["original_expected_label"] = row.get("expected_label")
                row["expected_label"], row["expected_labels"] = review["new_label"], None
        elif kind == "edit" and (job != "costello" or row.get("relation") is None):
            meta["original_text"] = row["text"]
            row["text"] = review["new_text"]
        meta["review"] = {
            k: review.get(k) for k in ("decision", "reviewer", "time", "reason", "new_label", *VERDICTS, "revision")
        }
        row["meta"] = json.dumps(meta, ensure_ascii=False, sort_keys=True)
        kept.append(row)
    kept, orphans = without_orphans(rows, kept)
    if orphans:
        counts["dropped with their original"] += orphans
    return pa.Table.from_pylist(kept, schema=table.schema), counts


def without_orphans(rows: Sequence[dict[str, Any]], kept: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``kept`` without the INV/DIR rows whose original (of ``rows``) is no longer in it:
    a perturbation of a case that was dropped tests nothing. Returns them and how many left."""
    ids = {r["case_id"] for r in rows}
    dropped = 0
    while True:
        present = {r["case_id"] for r in kept}
        orphans = [r for r in kept if r.get("perturbs") in ids and r.get("perturbs") not in present]
        if not orphans:
            return kept, dropped
        dropped += len(orphans)
        kept = [r for r in kept if r not in orphans]


def write_reviewed(root: str | Path) -> list[dict[str, Any]]:
    """``checkray review apply``: for each job run below ``root`` whose units were reviewed,
    write ``reviewed_<suite>.parquet`` beside its suite and list it in the run's manifest
    (``reviewed``: the file and the counts). Returns one line of counts per job run."""
    import pyarrow.parquet as pq

    store = ReviewStore(root)
    rows = store.rows()
    if not rows:
        raise InputError(f"{root}: no reviews yet ({REVIEWS_FILE}); run `checkray review {root}` first")
    decided = per_case(rows)
    out = []
    for job, path in job_runs(Path(root)):
        rel = path.relative_to(Path(root)).as_posix() or "."
        mine = {k: v for k, v in decided.items() if (v.get("run") or ".") == rel}
        if not mine:
            continue
        suite = SUITE_OF_JOB[job]
        table, counts = apply_reviews(job, pq.read_table(path / suite), mine)
        run = RunDir(str(path))
        run.claim(job)
        name = REVIEWED_PREFIX + suite
        validity = pa.Table.from_pylist(reviewed_validity(job, table, mine.values()))
        with run.lock(job):
            run.write_table(name, table)
            run.write_table(REVIEWED_VALIDITY, validity)
            manifest = json.loads(run.read_text(MANIFEST))
            for new in (name, REVIEWED_VALIDITY):
                if new not in manifest.get("published", []):
                    manifest["published"] = [*manifest.get("published", []), new]
            manifest["reviewed"] = {
                "file": name,
                "of": suite,
                "of_sha256": hashlib.sha256((path / suite).read_bytes()).hexdigest(),  # stale after a rerun
                "validity": REVIEWED_VALIDITY,
                "reviews": str((Path(root) / REVIEWS_FILE).resolve()),
                # people's verdicts on this run's cases: the job's next report shows them
                # in place of the shipped estimates (jobs/validity_estimate.publish_validity)
                "estimates": review_estimates(mine.values()),
                **counts,
            }
            run.write_text(MANIFEST, json.dumps(manifest, indent=1, default=str))
        out.append({"run": rel, "job": job, "file": str(path / name), "rows": table.num_rows, **counts})
    return out


REVIEWED_VALIDITY = "reviewed_validity.parquet"


def review_estimates(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Standing decisions (``per_case`` rows) as estimates in the shape of the shipped ones
    (``engine/suite_validity.build_estimates``): per generator, its verdict shares and those
    of each capability with enough reviewed cases."""
    from checkray.engine.suite_validity import MIN_CAPABILITY_CASES, Judged, summarize

    judged = [
        Judged(r["case_id"], r["generator"], r["capability"] or "", {v: int(r[v]) for v in VERDICTS})
        for r in rows
        if r.get("generator") in GENERATORS and r.get("label_valid") is not None
    ]
    out: dict[str, Any] = {}
    table = summarize(judged, by_capability=True)
    for generator in dict.fromkeys(r.generator for r in table):
        mine = [r for r in table if r.generator == generator]
        out[generator] = {
            "judged_on": {"code_version": "this run", "part": "reviews"},
            "overall": mine[0].as_dict(),
            "capabilities": {r.capability: r.as_dict() for r in mine[1:] if r.n >= MIN_CAPABILITY_CASES},
        }
    return out


def reviewed_validity(job: str, table: pa.Table, decided: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ``reviewed_validity.parquet``: the reviewed suite's cases per generator and
    capability, with people's verdict shares from this run's reviews (the columns of
    ``validity_estimate.parquet``; ``engine/suite_validity.estimate_rows``)."""
    from checkray.engine.suite_validity import estimate_rows

    counts: Counter = Counter()
    for row in table.to_pylist():
        generator = generator_of(job, row)
        if generator is None or (job == "costello" and row.get("relation") != "closer"):
            continue
        counts[(generator, str(row.get("capability") or ""))] += 1
    return estimate_rows(counts, {}, review_estimates(decided))


def labels_of(units: Iterable[Mapping[str, Any]]) -> list[str]:
    """The labels a case may be relabelled to: every expected label of the suites."""
    found = {str(u["expected_label"]) for u in units if u.get("kind") == "case" and u.get("expected_label")}
    return sorted(found | {"negative", "positive"} if found <= {"negative", "positive", "neutral"} else found)


# --- reviews as training data for a validity filter ------------------------------------------


def training_rows(root: str | Path, generators: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The reviewed cases below ``root`` as rows of a validity classifier's training set
    (the shape ``engine/testaug/validity.read_annotations`` returns): each case's text, pair
    and description with ``validity`` 1 when its standing decision found it label-valid,
    fluent and on capability, else 0; an edited case adds its new text as a valid one.
    ``generators``: only these generators' cases (a filter is trained per generator, as
    TestAug trains one per description). COSTELLO triples are judged as a whole, not as a
    text a classifier reads, so they are never rows."""
    unknown = sorted(set(generators) - set(GENERATORS))
    if unknown:
        raise InputError(f"--generator {unknown[0]}: no such generator (have: {', '.join(GENERATORS)})")
    units = {u["case_id"]: u for u in units_of_run(root) if u["kind"] == "case"}
    out = []
    for case_id, row in per_case(ReviewStore(root).rows()).items():
        unit = units.get(case_id)
        if unit is None or row.get("label_valid") is None or (generators and unit["generator"] not in generators):
            continue
        base = {"text_pair": unit.get("text_pair"), "description": unit.get("description") or None}
        out.append({**base, "text": unit["text"], "validity": int(all(int(row[v]) for v in VERDICTS))})
        if row["decision"] == "edit" and row.get("new_text"):
            out.append({**base, "text": row["new_text"], "validity": 1})
    if not out:
        which = f" of {', '.join(generators)}" if generators else ""
        raise InputError(f"{root}: no reviewed case{which} with a verdict (skips and COSTELLO triples are not)")
    return out


# --- reviews as an annotation batch -----------------------------------------------------------


def batch_rows(rows: Iterable[Mapping[str, Any]], units: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The reviewed units as rows of an annotation batch (docs/validity.md; the format
    ``engine/suite_validity.read_batch`` reads): each unit once, with its standing decision's
    three verdicts, the reason as the note and who decided."""
    by_id = {u["case_id"]: u for u in units}
    out = []
    for case_id, row in per_case(rows).items():
        unit = by_id.get(case_id)
        if unit is None:
            continue
        item = {
            k: unit.get(k) for k in ("case_id", "generator", "capability", "text", "text_pair", "expected", "source")
        }
        if unit.get("kind") == "triple":
            item["closer"], item["farther"] = unit.get("closer"), unit.get("farther")
        item.update({v: int(row[v]) for v in VERDICTS})
        note = [row["decision"]] + [str(row[k]) for k in ("reason", "new_label", "new_text") if row.get(k)]
        item["note"] = ": ".join(note)
        item["reviewer"] = row["reviewer"]
        out.append(item)
    return out


def write_batch(rows: Iterable[Mapping[str, Any]], units: Sequence[Mapping[str, Any]], out: Path, meta: dict) -> int:
    """Write the reviews as an annotation batch ``out`` (``.jsonl``) and its ``.meta.json``."""
    from checkray.engine.suite_validity import meta_path

    if out.suffix != ".jsonl":
        raise InputError(f"{out}: an annotation batch is a .jsonl file")
    items = batch_rows(rows, units)
    if not items:
        raise InputError("no reviewed case with a verdict to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    reviewers = sorted({i["reviewer"] for i in items})
    meta = {**meta, "annotator": ", ".join(reviewers), "sample": {"n": len(items), "how": "checkray review"}}
    meta_path(out).write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return len(items)
