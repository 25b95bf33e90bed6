"""The reproducibility record of a benchmark run: ``DIR/provenance.json``.

What was tested, by content: every model's registry entry with the digest of each file,
directory or module it names (and its revision when the entry pins one), the versions of
checkray and of the packages that decide predictions, every suite file's digest and, per
suite name, the number of cases and the digest of its (case id, content digest) pairs
(``checkray.engine.benchmark.provenance``), and the settings that decide verdicts. ``checkray
compare`` reads it to say exactly what it compared and to refuse a suite that changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from checkray.engine.benchmark.provenance import environment, model_identity, suite_digests
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.review import is_reviewed_file
from checkray.engine.stages import RunDir, path_digest
from checkray.jobs.benchmark.config import BenchmarkConfig

PROVENANCE = "provenance.json"


def benchmark_provenance(
    specs: Sequence[ModelSpec],
    cases: pa.Table,
    suite_files: Sequence[str] | None,
    bench: BenchmarkConfig,
    models: pa.Table | None = None,
) -> dict[str, Any]:
    """The record (see the module docstring). ``cases`` is the cases stage's table (with
    ``part`` and ``case_digest``); ``suite_files`` the files in part order, if known."""
    from checkray.engine import __version__

    status = {r["model"]: r for r in (models.to_pylist() if models is not None else [])}
    parts = cases.column("part").to_pylist()
    suites, ids, digests = (cases.column(c).to_pylist() for c in ("suite", "case_id", "case_digest"))
    files = []
    for index in sorted(set(parts)):
        rows = [i for i, p in enumerate(parts) if p == index]
        path = suite_files[index] if suite_files and index < len(suite_files) else None
        files.append(
            {
                "file": path or f"(table {index + 1}, given in memory)",
                "file_digest": path_digest(path) if path else None,
                # read in its reviewed version (``checkray review apply``): people's decisions applied
                "reviewed": bool(path) and is_reviewed_file(path),
                "suites": suite_digests([suites[i] for i in rows], [ids[i] for i in rows], [digests[i] for i in rows]),
            }
        )
    model_rows = []
    for spec in specs:
        identity = model_identity(spec.model_dump(mode="json"))
        row = status.get(spec.name)
        identity["status"] = "not run" if row is None else ("failed: " + row["error"] if row["error"] else "ok")
        identity["inputs_scored"] = None if row is None else row["rows"]
        identity["accuracy"] = spec.accuracy
        model_rows.append(identity)
    return {
        "job": "benchmark",
        "checkray": __version__,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environment": environment(),
        "models": model_rows,
        "suite_files": files,
        "suites": suite_digests(suites, ids, digests),
        "settings": {
            "max_cases_per_model": bench.max_cases_per_model,
            "sample_seed": bench.sample_seed,
            "neutral_label": bench.neutral_label,
            "positive_label": bench.positive_label,
            "negative_label": bench.negative_label,
            "neutral_band": list(bench.neutral_band),
            "dir_tolerance": bench.dir_tolerance,
        },
    }


def read_provenance(run: RunDir) -> dict[str, Any] | None:
    """A benchmark run's record, or None for a run made before checkray wrote one."""
    if not run.exists(PROVENANCE):
        return None
    try:
        data = json.loads(run.read_text(PROVENANCE))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{run.uri}/{PROVENANCE}: unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{run.uri}/{PROVENANCE}: not a JSON object")
    return data


def model_record(provenance: dict[str, Any] | None, model: str) -> dict[str, Any] | None:
    """One model's identity from a run's record."""
    for row in (provenance or {}).get("models", []):
        if row.get("name") == model:
            return row
    return None


def describe_model(record: dict[str, Any] | None, model: str) -> str:
    """One line: the model, its family and path, its content digest and revision."""
    if record is None:
        return f"{model} (no provenance record: a run made before checkray recorded one)"
    bits = [f"{model} [{record.get('family')}]"]
    if record.get("path"):
        bits.append(str(record["path"]))
    bits.append(f"digest {record.get('digest')}")
    if record.get("revision"):
        bits.append(f"revision {record['revision']}")
    return " ".join(bits)
