"""CheckList test records -> checkray test-case rows (``TEST_CASE_SCHEMA``) and a report.

One row per example. A CheckList test case (one entry of ``test.data``) is a string, a
``(text, text_pair)`` tuple, or a list of those; its rows share ``testcase``. An MFT row
carries its expected label(s). An INV/DIR test case's first example is the original
(``perturbs`` null, no verdict of its own, as CheckList's ``agg_fn='all_except_first'``);
every other example perturbs it. Ids hash (suite, test, testcase, example) because the
same sentence appears in many test cases.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, Field

from checkray.engine.benchmark.checklist.expect import recognise
from checkray.engine.benchmark.checklist.mapping import Mapping
from checkray.engine.benchmark.checklist.plan import LabelNames, NoPlan, Plan, decide, raw_labels
from checkray.engine.benchmark.checklist.reader import SuiteRecord, TestRecord, plain
from checkray.engine.schema import TASK_QA, case_id, make_cases


class TestReport(BaseModel):
    """What became of one CheckList test."""

    __test__ = False  # not a pytest test class

    suite: str
    name: str
    type: str | None
    capability: str
    status: Literal["written", "skipped", "unmapped"]
    expectation: str  # how it was decided, or why the test was not written
    note: str | None = None  # e.g. why a default was used
    testcases: int = 0  # written
    rows: int = 0
    dropped_testcases: int = 0  # INV/DIR test cases without a perturbation, empty ones


class TypeCount(BaseModel):
    tests: int = 0
    testcases: int = 0
    rows: int = 0


class ImportReport(BaseModel):
    """``DIR/import.json``: every test of every imported suite, and the totals."""

    sources: list[str]
    suites: list[str]
    labels: dict[str, str] | None = None
    mapping: str | None = None
    task: str | None = None  # "qa": the labels are answers to (context, question) pairs
    rows: int = 0
    counts: dict[str, TypeCount] = Field(default_factory=dict)
    tests: list[TestReport] = Field(default_factory=list)
    unused_mapping: list[str] = Field(default_factory=list)  # entries that matched no test

    def by_status(self, status: str) -> list[TestReport]:
        return [t for t in self.tests if t.status == status]

    def defaulted(self) -> list[TestReport]:
        return [t for t in self.by_status("written") if t.expectation.startswith("default:")]


class _Unsupported(Exception):
    """A test case this importer cannot turn into text rows; the test is skipped."""


def _text(example: Any, where: str) -> tuple[str, str | None]:
    example = plain(example)
    if isinstance(example, str):
        return example, None
    if isinstance(example, tuple) and len(example) == 2 and all(isinstance(plain(e), str) for e in example):
        return plain(example[0]), plain(example[1])
    kind = f"a tuple of {len(example)}" if isinstance(example, tuple) else f"a {type(example).__name__}"
    raise _Unsupported(f"{where} is {kind}; only strings and (text, text_pair) pairs are imported")


def _jsonable(value: Any) -> Any:
    value = plain(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def _per(value: Any, index: int, count: int, what: str) -> Any:
    """``value[index]`` when ``value`` is a per-item list of ``count`` items, else ``value``."""
    value = plain(value)
    if isinstance(value, list):
        if len(value) != count:
            raise _Unsupported(f"{what} has {len(value)} entries for {count} items")
        return value[index]
    return value


def _why_empty(plan: Any, entry: Any) -> str:
    """Why a test wrote no row: every test case of an INV/DIR held one input (CheckList's
    ``keep_original=False`` with one perturbation), so there was nothing to compare it with
    (CheckList passes such a test case whatever the model says), or the test was empty."""
    if entry.dropped_testcases and plan.test_type in ("INV", "DIR"):
        return (
            f"each of its {entry.dropped_testcases} test cases holds fewer than two inputs, so the {plan.test_type} "
            "test has nothing to compare (CheckList passes a one-input test case whatever the model says)"
        )
    return "no test case left"


def _test_rows(
    suite: SuiteRecord, test: TestRecord, plan: Plan, names: LabelNames, task: str | None = None
) -> tuple[list[dict], int, int]:
    """(rows, test cases written, test cases dropped) of one test."""
    rows: list[dict] = []
    written = dropped = 0
    n = len(test.data)
    for i, testcase in enumerate(test.data):
        testcase = plain(testcase)
        examples = testcase if isinstance(testcase, list) else [testcase]
        pairwise = plan.test_type != "MFT"
        if not examples or (pairwise and len(examples) < 2):
            dropped += 1
            continue
        group = case_id(suite.name, test.name, i)
        tc_labels = _per(test.labels, i, n, "labels") if plan.from_test_labels else None
        tc_meta = _per(test.meta, i, n, "meta") if isinstance(plain(test.meta), list) else test.meta
        built = []
        for j, example in enumerate(examples):
            text, pair = _text(example, f"test case {i} example {j}")
            meta = {
                "description": test.description,
                "checklist_test": test.name,
                "checklist_type": test.kind,
                "testcase_index": i,
                "example_index": j,
            }
            if tc_meta is not None:
                item = tc_meta[j] if isinstance(tc_meta, list) and len(tc_meta) == len(examples) else tc_meta
                meta["checklist_meta"] = _jsonable(item)
            row: dict[str, Any] = {
                "case_id": case_id(suite.name, test.name, i, j),
                "suite": suite.name,
                "method": "checklist",
                "capability": test.capability,
                "topic": test.name,
                "text": text,
                "text_pair": pair,
                "test_type": plan.test_type,
                "testcase": group,
                "task": task,
                "provenance": {"source_id": suite.source, "template_id": None, "generator": "checklist", "seed": None},
            }
            if plan.test_type == "MFT":
                if plan.from_test_labels:
                    raw = _per(tc_labels, j, len(examples), f"labels of test case {i}")
                    if raw is None:
                        raise _Unsupported(f"test case {i} example {j} has no label")
                    meta["checklist_label"] = _jsonable(raw)
                    if task == TASK_QA and isinstance(plain(raw), list | tuple):  # any of these answers
                        row["expected_labels"] = [str(plain(a)) for a in plain(raw)]
                        built.append({**row, "meta": meta})
                        continue
                    own = names.name(raw, test.name)
                    if plan.label_sets is not None and own in plan.label_sets:
                        row["expected_labels"] = list(plan.label_sets[own])
                    else:
                        row["expected_label"] = own
                elif plan.label_set is not None:
                    row["expected_labels"] = list(plan.label_set)
                else:
                    row["expected_label"] = plan.label
            elif j > 0:
                row.update(
                    perturbs=case_id(suite.name, test.name, i, 0),
                    relation=plan.relation,
                    tolerance=plan.tolerance,
                    expected_label=plan.label if plan.test_type == "DIR" else None,
                    versus_label=plan.versus if plan.test_type == "DIR" else None,
                    original_labels=list(plan.original_labels) if plan.original_labels else None,
                )
            row["meta"] = meta
            built.append(row)
        rows.extend(built)
        written += 1
    return rows, written, dropped


def for_task(plan: Plan | NoPlan, task: str | None) -> Plan | NoPlan:
    """A QA suite's plan: answers are compared as strings (CheckList's SQuAD suite: an MFT's
    answer equals its label, an INV's answer does not change), so a DIR test, a tolerance or
    a slice on the original's label means nothing there."""
    if isinstance(plan, NoPlan):
        return plan
    if task != TASK_QA:
        if plan.relation == "renamed":
            return NoPlan("unmapped", f"'answer_renamed' compares answers: import with --task qa (was: {plan.how})")
        return plan
    if plan.test_type == "DIR":
        return NoPlan("skipped", f"a DIR test is not defined for answers (was: {plan.how})")
    if plan.original_labels:
        return NoPlan("skipped", f"a slice on the original's label is not defined for answers (was: {plan.how})")
    return replace(plan, tolerance=None)


def convert(
    suites: list[SuiteRecord], names: LabelNames, mapping: Mapping | None = None, task: str | None = None
) -> tuple[pa.Table, ImportReport]:
    """All suites' rows as one validated test-case table (empty when no test could be
    imported: see ``why_empty``), and the import report. ``task="qa"``: every example is a
    (context, question) pair and the labels are answers (CheckList's SQuAD suite)."""
    recognised = {(s.name, t.name): recognise(t.expect) for s in suites for t in s.tests}
    names.require(label for s in suites for t in s.tests for label in raw_labels(t, recognised[(s.name, t.name)]))
    report = ImportReport(
        sources=sorted({s.source for s in suites}),
        suites=[s.name for s in suites],
        labels=names.names,
        mapping=mapping.path if mapping is not None else None,
        task=task,
    )
    rows: list[dict] = []
    for suite in suites:
        for test in suite.tests:
            plan = for_task(decide(test, recognised[(suite.name, test.name)], mapping, names), task)
            entry = TestReport(
                suite=suite.name,
                name=test.name,
                type=test.kind,
                capability=test.capability,
                status="written",
                expectation="",
            )
            if isinstance(plan, NoPlan):
                entry.status, entry.expectation = plan.status, plan.reason
            else:
                entry.type, entry.expectation, entry.note = plan.test_type, plan.how, plan.note
                try:
                    test_rows, entry.testcases, entry.dropped_testcases = _test_rows(suite, test, plan, names, task)
                except _Unsupported as exc:
                    entry.status, entry.expectation = "skipped", f"{exc} (was: {plan.how})"
                    test_rows = []
                if entry.status == "written" and not test_rows:
                    entry.status, entry.expectation = "skipped", f"{_why_empty(plan, entry)} (was: {plan.how})"
                entry.rows = len(test_rows)
                rows.extend(test_rows)
                if entry.status == "written":
                    count = report.counts.setdefault(plan.test_type, TypeCount())
                    count.tests += 1
                    count.testcases += entry.testcases
                    count.rows += entry.rows
            report.tests.append(entry)
    report.rows = len(rows)
    report.unused_mapping = mapping.unused() if mapping is not None else []
    return make_cases(rows), report


def why_empty(report: ImportReport) -> str:
    """One line on why no row was written (the caller raises it)."""
    if not report.tests:
        return f"no test case imported from {', '.join(report.sources)}: the suite has no tests"
    first = report.tests[0]
    return (
        f"no test case imported from {', '.join(report.sources)}: {len(report.tests)} test(s) not written, "
        f"e.g. '{first.name}': {first.expectation}"
    )


def report_json(report: ImportReport) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
