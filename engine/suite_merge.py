"""One suite from many methods' suites: duplicates across methods removed, every kept
case with its own method, capability and provenance.

Suites are merged in the order given (``checkray run`` gives the hand-written templates
first, then the generated suites): a case whose text, pair and expectation an earlier
method already tests is a duplicate and is dropped; a case whose text and pair an earlier
method tests with a *different* expected label is a conflict, kept (the two methods
disagree and a reader should see both) and counted. Only MFT cases are compared:
an INV/DIR case is judged against the case it perturbs, so it and its original stay
together. Pure: tables in, table and counts out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.errors import InputError
from checkray.engine.schema import TestType, normalize_text, validate_cases


@dataclass(frozen=True)
class MergeCount:
    """What the merge did with one method's suite."""

    method: str
    suite: str
    given: int
    kept: int
    duplicates: int  # dropped: an earlier method tests the same text with the same expectation
    conflicts: int  # kept: an earlier method expects another label for the same text


def _expectation(row: dict) -> tuple[str, ...]:
    labels = row.get("expected_labels") or ([row["expected_label"]] if row.get("expected_label") else [])
    return tuple(sorted(labels))


def _text_key(row: dict) -> tuple[str, str]:
    return normalize_text(row["text"]), normalize_text(row.get("text_pair") or "")


def _merge_one(table: pa.Table, seen: dict[tuple[str, str], set], counted: list[MergeCount]) -> pa.Table:
    """``table`` without the MFT cases an earlier suite already has; updates ``seen``."""
    rows = table.select(["test_type", "text", "text_pair", "expected_label", "expected_labels"]).to_pylist()
    referenced = set(pc.drop_null(table.column("perturbs")).to_pylist())
    ids = table.column("case_id").to_pylist()
    keep, duplicates, conflicts, mine = [], 0, 0, {}
    for case, row in zip(ids, rows, strict=True):
        if row["test_type"] != TestType.MFT.value or case in referenced:
            keep.append(True)
            continue
        key, expected = _text_key(row), _expectation(row)
        earlier = seen.get(key, set())
        if expected in earlier:
            duplicates += 1
            keep.append(False)
            continue
        conflicts += bool(earlier)
        mine.setdefault(key, set()).add(expected)
        keep.append(True)
    for key, expectations in mine.items():
        seen.setdefault(key, set()).update(expectations)
    kept = table.filter(pa.array(keep, pa.bool_())) if table.num_rows else table
    methods = sorted(set(table.column("method").to_pylist())) or ["-"]
    suites = sorted(set(table.column("suite").to_pylist())) or ["-"]
    counted.append(
        MergeCount("+".join(methods), "+".join(suites), table.num_rows, kept.num_rows, duplicates, conflicts)
    )
    return kept


def merge_suites(parts: Sequence[pa.Table]) -> tuple[pa.Table, list[MergeCount]]:
    """The merged suite and, per part (in order), what was kept and dropped."""
    if not parts:
        raise InputError("no suites to merge")
    seen: dict[tuple[str, str], set] = {}
    counted: list[MergeCount] = []
    kept = [_merge_one(validate_cases(part), seen, counted) for part in parts]
    merged = pa.concat_tables(kept)
    ids = merged.column("case_id")
    if len(pc.unique(ids)) != len(ids):
        repeated = pc.value_counts(ids).filter(pc.greater(pc.struct_field(pc.value_counts(ids), "counts"), 1))
        first = repeated[0]["values"].as_py()
        raise InputError(f"merged suite: case_id {first} appears in two suites (rename one suite)")
    return validate_cases(merged), counted
