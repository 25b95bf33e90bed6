"""What a generating job's report says about how far its cases can be trusted.

Every job that publishes a suite (``Job.suite_file``) also publishes
``validity_estimate.parquet``: per generator and capability, the cases kept, the
candidates the automatic checks rejected (its ``rejected.parquet``, when it has one) and
people's verdicts on sampled cases of that generator (label-valid, fluent, on-capability,
all three, with 95 % Wilson intervals; the shipped estimates of
``engine/data/validity_estimates.json``, built from the annotation batches by
``bench/bench_suite_validity.py --write-estimates``, except for generators people
reviewed in this very run with ``checkray review``: their reviews stand in). The report shows it first, and the
run index lists it with the job's other quality tables.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkray.engine.report import Section, table_html
from checkray.engine.rundir import RunDir
from checkray.engine.suite_validity import ESTIMATE_COLUMNS, generator_of, load_estimates

VALIDITY_FILE = "validity_estimate.parquet"
REJECTED_FILE = "rejected.parquet"
VALIDITY_COLUMNS = ("generator", "capability", "cases", "rejected", "judged", *ESTIMATE_COLUMNS)


def _counts(job: str, rows: list[dict[str, Any]]) -> Counter:
    counted: Counter = Counter()
    for row in rows:
        generator = generator_of(job, row)
        if generator is None:
            continue
        if job == "costello":  # a triple is one case: count its closer row only
            if row.get("relation") != "closer":
                continue
        counted[(generator, str(row.get("capability") or ""))] += 1
    return counted


def validity_rows(job: str, run: RunDir, suite_file: str, estimates: dict[str, Any] | None = None):
    """The rows of ``validity_estimate.parquet`` for ``job``'s published suite in ``run``."""
    from checkray.engine.suite_validity import estimate_rows

    suite = run.read_table(suite_file).to_pylist()
    rejected: Counter = Counter()
    if run.exists(REJECTED_FILE):
        for row in run.read_table(REJECTED_FILE).to_pylist():
            generator = generator_of(job, row)
            if generator is not None:
                rejected[(generator, str(row.get("capability") or ""))] += 1
    return estimate_rows(_counts(job, suite), rejected, load_estimates() if estimates is None else estimates)


def _percent(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if value is None:
        return "–"
    return f"{100 * value:.0f} % [{100 * row[f'{name}_low']:.0f}, {100 * row[f'{name}_high']:.0f}]"


def validity_section(rows: list[dict[str, Any]]) -> Section:
    """The report's "How far to trust these cases" section."""
    shown = [
        {
            "generator": r["generator"],
            "capability": r["capability"],
            "cases": r["cases"],
            "rejected by checks": r["rejected"],
            "people judged": f"{r['judged']} ({r['basis']}; {r['judged_on']})" if r["judged"] else "not yet",
            **{name.replace("_", " "): _percent(r, name) for name in ESTIMATE_COLUMNS},
        }
        for r in rows
    ]
    return Section(
        "How far to trust these cases",
        [table_html(shown)],
        summary=(
            "A failure on a wrong case is the model being right. Each row gives the share of "
            "sampled cases of this generator that careful readers found label-valid, fluent and "
            "on-capability (95 % interval; per capability where enough were judged, else the "
            "generator's figure), and how many candidates the automatic checks rejected "
            "(rejected.parquet). Read each failure rate with its row here."
        ),
    )


def run_estimates(run: RunDir) -> dict[str, Any] | None:
    """The shipped estimates with, for each generator people reviewed in this run
    (``checkray review apply`` recorded their verdicts in the run's manifest), this run's
    reviews in their place; None when the run has no reviews."""
    import json

    try:
        record = json.loads(run.read_text("manifest.json")).get("reviewed") if run.exists("manifest.json") else None
    except (OSError, ValueError):
        return None
    reviewed = (record or {}).get("estimates") if isinstance(record, dict) else None
    return {**load_estimates(), **reviewed} if isinstance(reviewed, dict) and reviewed else None


def publish_validity(job: str, run: RunDir, suite_file: str) -> Section | None:
    """Write ``validity_estimate.parquet`` for a published suite; its report section."""
    import pyarrow as pa

    if not run.exists(suite_file):
        return None
    rows = validity_rows(job, run, suite_file, run_estimates(run))
    table = pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.string()) for c in VALIDITY_COLUMNS})
    run.write_table(VALIDITY_FILE, table)
    return validity_section(rows)
