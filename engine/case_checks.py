"""Automatic checks of generated cases: nothing silently dropped, nothing silently kept.

Every generator (S²LCT, COSTELLO, MFT, TestAug, templates) runs its candidate cases
through named checks before they enter a suite. A check looks at a batch of candidate
rows and says, for each, nothing (passed) or why it fails (one line). ``apply_checks``
runs the checks in order: a candidate that passes them all is kept with the names of the
checks it passed (the suite's ``checks`` column); one that fails is kept too, in the
*rejected* table, with the check that failed and its reason (the job publishes it as
``rejected.parquet`` and its report counts the rejections per check).

Checks are batch functions because several need the whole batch (duplicates) or are
cheaper batched (a language model scoring sentences).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

# A check: candidate rows -> per row None (passed) or the one-line reason it fails.
BatchCheck = Callable[[Sequence[Mapping[str, Any]]], Sequence[str | None]]

REJECTED_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("suite", pa.string()),
        ("capability", pa.string()),
        ("text", pa.string()),
        ("text_pair", pa.string()),
        ("expected_label", pa.string()),
        ("check", pa.string()),  # the check that rejected the case
        ("reason", pa.string()),  # why, in one line
        ("source", pa.string()),  # what the case was made from (seed sentence, template, prompt)
        ("meta", pa.string()),  # the candidate's meta (JSON), as the generator wrote it
    ]
)


@dataclass(frozen=True)
class Check:
    """A named check; ``name`` is what the suite's ``checks`` column and ``rejected.parquet`` record."""

    name: str
    fn: BatchCheck
    description: str = ""

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> list[str | None]:
        verdicts = list(self.fn(rows))
        if len(verdicts) != len(rows):
            raise ValueError(f"check '{self.name}' returned {len(verdicts)} verdicts for {len(rows)} rows")
        return verdicts


def row_check(name: str, fn: Callable[[Mapping[str, Any]], str | None], description: str = "") -> Check:
    """A check that looks at one row at a time."""
    return Check(name, lambda rows: [fn(r) for r in rows], description)


@dataclass
class CheckOutcome:
    """What ``apply_checks`` decided: the kept rows (each with its ``checks`` list) and the
    rejected rows (each with ``check`` and ``reason``)."""

    kept: list[dict[str, Any]]
    rejected: list[dict[str, Any]]

    def rejected_counts(self) -> dict[str, int]:
        return dict(Counter(r["check"] for r in self.rejected))


def apply_checks(rows: Iterable[Mapping[str, Any]], checks: Sequence[Check]) -> CheckOutcome:
    """Run ``checks`` in order over ``rows``; a row leaves at the first check it fails."""
    alive = [dict(r) for r in rows]
    for row in alive:
        row["checks"] = list(row.get("checks") or [])
    rejected: list[dict[str, Any]] = []
    for check in checks:
        if not alive:
            break
        verdicts = check(alive)
        still = []
        for row, why in zip(alive, verdicts):
            if why:
                rejected.append({**row, "check": check.name, "reason": " ".join(str(why).split())})
            else:
                row["checks"].append(check.name)
                still.append(row)
        alive = still
    return CheckOutcome(alive, rejected)


def rejected_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """``rejected.parquet``'s rows from rejected candidates (missing fields are null)."""
    import json

    def as_text(value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)

    records = [
        {
            **{name: as_text(r.get(name)) for name in REJECTED_SCHEMA.names},
            "source": as_text(r.get("source")),
        }
        for r in rows
    ]
    return pa.Table.from_pylist(records, schema=REJECTED_SCHEMA)


def empty_rejected() -> pa.Table:
    return REJECTED_SCHEMA.empty_table()


def rejection_summary(rejected: pa.Table, kept: int) -> list[dict[str, Any]]:
    """Per check: how many candidates it rejected, for a report (the kept count first)."""
    counts = Counter(rejected.column("check").to_pylist()) if rejected.num_rows else Counter()
    total = kept + rejected.num_rows
    rows = [{"check": "(kept)", "cases": kept, "share": round(kept / total, 3) if total else None}]
    rows += [
        {"check": name, "cases": n, "share": round(n / total, 3) if total else None} for name, n in counts.most_common()
    ]
    return rows
