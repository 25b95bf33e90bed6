"""The two Arrow schemas every checkray job speaks: corpus documents and test cases.

A test case is data (as in CheckList): one row of ``TEST_CASE_SCHEMA``. Every method
(clustering+prompting MFTs, TestAug, S²LCT, COSTELLO, templates) writes suites of this
shape, and the benchmark job reads any of them. See ``docs/schema.md``.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.errors import InputError


class TestType(str, Enum):
    """CheckList's three test types."""

    MFT = "MFT"  # minimum functionality: prediction must be ``expected_label`` (or in ``expected_labels``)
    INV = "INV"  # invariance: prediction must not change w.r.t. ``perturbs`` (within ``tolerance``)
    DIR = "DIR"  # directional: confidence must move as ``relation`` says w.r.t. ``perturbs``

    __test__ = False  # not a pytest test class


class Relation(str, Enum):
    """Expected relation of an INV/DIR case to the case it perturbs."""

    SAME = "same"  # INV: same predicted label
    UP = "up"  # DIR: probability of ``expected_label`` does not decrease
    DOWN = "down"  # DIR: probability of ``expected_label`` does not increase
    BECOMES = "becomes"  # DIR: the perturbed case is predicted ``expected_label`` (CheckList's Expect.eq in a DIR)
    RENAMED = "renamed"  # INV of answers: the original's answer with meta's [old, new] renaming (expect_same)
    CLOSER = "closer"  # contrastive (COSTELLO): text_pair closer than the negative
    FARTHER = "farther"


CORPUS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("label", pa.string(), nullable=True),
        pa.field("meta", pa.string(), nullable=True),  # JSON object of the other columns
    ]
)

PROVENANCE_TYPE = pa.struct(
    [
        pa.field("source_id", pa.string()),  # corpus document the case came from
        pa.field("template_id", pa.string()),  # prompt or template id
        pa.field("generator", pa.string()),  # model/backend or rule that produced it
        pa.field("seed", pa.int64()),
    ]
)

TEST_CASE_SCHEMA = pa.schema(
    [
        pa.field("case_id", pa.string(), nullable=False),
        pa.field("suite", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("capability", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=True),
        pa.field("text", pa.string(), nullable=False),
        pa.field("text_pair", pa.string(), nullable=True),
        pa.field("expected_label", pa.string(), nullable=True),
        pa.field("test_type", pa.string(), nullable=False),
        pa.field("perturbs", pa.string(), nullable=True),
        pa.field("relation", pa.string(), nullable=True),
        # CheckList expectations beyond one label (all nullable: older suites read unchanged)
        pa.field("expected_labels", pa.list_(pa.string()), nullable=True),  # MFT: any of these labels
        pa.field("tolerance", pa.float64(), nullable=True),  # INV/DIR probability tolerance
        pa.field("testcase", pa.string(), nullable=True),  # CheckList test case (group) the row belongs to
        # DIR: the score is P(expected_label) - P(versus_label) (CheckList's sentiment "positive_change")
        pa.field("versus_label", pa.string(), nullable=True),
        # INV/DIR: judged only when the original's predicted label is one of these (CheckList's
        # Expect.slice_pairwise/slice_orig on the original's prediction); otherwise no verdict
        pa.field("original_labels", pa.list_(pa.string()), nullable=True),
        pa.field("provenance", PROVENANCE_TYPE, nullable=True),
        pa.field("meta", pa.string(), nullable=True),  # JSON object
        # The automatic checks the case passed before it entered the suite (engine/case_checks.py)
        pa.field("checks", pa.list_(pa.string()), nullable=True),
        # What the case asks of a model: null = classify (a label, label set or ordering);
        # "qa" = answer ``text_pair`` (the question) from ``text`` (the context): the expected
        # answer is ``expected_label`` or any of ``expected_labels`` (engine/benchmark/qa.py)
        pa.field("task", pa.string(), nullable=True),
    ]
)

TASK_QA = "qa"
TASKS = (TASK_QA,)  # the tasks besides classification (null)

_CASE_DEFAULTS: dict[str, Any] = {
    "topic": None,
    "text_pair": None,
    "expected_label": None,
    "test_type": TestType.MFT.value,
    "perturbs": None,
    "relation": None,
    "expected_labels": None,
    "tolerance": None,
    "testcase": None,
    "versus_label": None,
    "original_labels": None,
    "provenance": None,
    "meta": None,
    "checks": None,
    "task": None,
}


def case_id(*parts: Any) -> str:
    """Stable id from the parts that make a case unique (same inputs, same id)."""
    digest = hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()
    return digest[:16]


def _meta_json(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def make_cases(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build a validated test-case table from dict rows.

    Missing optional fields take defaults; ``case_id`` defaults to a hash of
    suite, text, text_pair and expected label; ``meta`` may be a dict.
    """
    records = []
    for row in rows:
        rec = {**_CASE_DEFAULTS, **row}
        if isinstance(rec["test_type"], TestType):
            rec["test_type"] = rec["test_type"].value
        if isinstance(rec["relation"], Relation):
            rec["relation"] = rec["relation"].value
        rec["meta"] = _meta_json(rec["meta"])
        if rec.get("case_id") is None:
            rec["case_id"] = case_id(rec.get("suite"), rec.get("text"), rec["text_pair"], rec["expected_label"])
        records.append(rec)
    table = pa.Table.from_pylist(records, schema=TEST_CASE_SCHEMA)
    validate_cases(table)
    return table


def validate_cases(table: pa.Table) -> pa.Table:
    """Check a table against the test-case schema and its invariants; return it cast."""
    table = conform(table, TEST_CASE_SCHEMA, what="test-case table")
    types = set(table.column("test_type").to_pylist())
    unknown = types - {t.value for t in TestType}
    if unknown:
        raise InputError(f"test-case table: unknown test_type {sorted(unknown)}")
    for col in ("case_id", "suite", "method", "capability", "text"):
        if table.column(col).null_count:
            raise InputError(f"test-case table: column '{col}' has null values")
    ids = table.column("case_id")
    if len(ids) != len(pa.compute.unique(ids)):
        raise InputError("test-case table: case_id values are not unique")
    mft_perturbs = pc.and_(
        pc.equal(table.column("test_type"), TestType.MFT.value), pc.is_valid(table.column("perturbs"))
    )
    if pc.any(mft_perturbs).as_py():
        raise InputError("test-case table: an MFT case has a 'perturbs' id (only INV/DIR cases perturb another)")
    check_tasks(table)
    tolerance = table.column("tolerance")
    if (
        tolerance.null_count < len(tolerance)
        and not pc.all(pc.and_(pc.greater_equal(tolerance, 0.0), pc.less_equal(tolerance, 1.0))).as_py()
    ):
        raise InputError("test-case table: 'tolerance' values must lie in [0, 1]")
    return table


def check_tasks(table: pa.Table) -> None:
    """A task is null or one of ``TASKS``; a QA case has a question (``text_pair``)."""
    task = table.column("task")
    if task.null_count == len(task):
        return
    unknown = set(pc.unique(task.drop_null()).to_pylist()) - set(TASKS)
    if unknown:
        raise InputError(f"test-case table: unknown task {sorted(unknown)} (have: classify = null, {', '.join(TASKS)})")
    qa = pc.equal(task, TASK_QA)
    if pc.any(pc.and_(qa, pc.is_null(table.column("text_pair")))).as_py():
        raise InputError("test-case table: a QA case has no question: 'text_pair' is null (text = context)")


def conform(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """Select and cast ``table``'s columns to ``schema``; one-line error if impossible."""
    missing = [f.name for f in schema if f.name not in table.column_names and not f.nullable]
    if missing:
        raise InputError(f"{what}: missing column(s) {missing}")
    columns = []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name)
            try:
                columns.append(col.cast(field.type) if col.type != field.type else col)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise InputError(f"{what}: column '{field.name}' is not {field.type}: {exc}") from None
        else:
            columns.append(pa.nulls(len(table), field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def normalize_text(text: str) -> str:
    """The one comparison key of every generated suite (MFT, TestAug): case, accents,
    punctuation and spacing ignored."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^a-z0-9]+", " ", text).strip()
