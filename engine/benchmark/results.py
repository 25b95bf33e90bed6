"""One model's per-case results and example failures (pure: Arrow in, Arrow out).

``model_results`` turns a model's probabilities on the unique inputs into one row per
case with CheckList's verdict (``checkray.engine.benchmark.expectations``); the benchmark writes
these tables one model at a time, so ``results.parquet`` streams to disk and memory does
not grow with models x cases. ``example_failures`` keeps a few failing cases per test.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.benchmark.expectations import ExpectationSettings, case_groups, evaluate_cases
from checkray.engine.benchmark.provenance import case_digests
from checkray.engine.benchmark.qa import judge_answers
from checkray.engine.schema import TASK_QA

RESULTS_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("suite", pa.string()),
        pa.field("version", pa.string()),
        pa.field("case_id", pa.string()),
        pa.field("case_digest", pa.string()),  # the case's content digest (engine.benchmark.provenance)
        pa.field("testcase", pa.string()),  # CheckList test case: the MFT example or the INV/DIR original
        pa.field("capability", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("test_type", pa.string()),
        pa.field("text", pa.string()),
        pa.field("expected_label", pa.string()),
        pa.field("expected_labels", pa.list_(pa.string())),
        pa.field("perturbs", pa.string()),
        pa.field("predicted", pa.string()),
        pa.field("probabilities", pa.list_(pa.float32())),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("pass", pa.bool_()),
        pa.field("error", pa.string()),
        pa.field("text_pair", pa.string()),  # the second text of a pair; a QA case's question
    ]
)
_COPIED = ["suite", "version", "case_id", "capability", "topic", "test_type", "text", "expected_label"]

EXAMPLES_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("suite", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("test_type", pa.string()),
        pa.field("text", pa.string()),
        pa.field("original", pa.string()),  # the text an INV/DIR case was compared with
        pa.field("expected", pa.string()),
        pa.field("predicted", pa.string()),
        pa.field("probabilities", pa.string()),
    ]
)


def model_results(
    cases: pa.Table,
    model: str,
    labels: list[str],
    error: str | None,
    probs: np.ndarray | None,
    settings: ExpectationSettings,
) -> pa.Table:
    """Per-case verdicts of one model. ``cases`` carry ``part`` and ``input_key`` columns
    (``checkray.engine.benchmark.inputs.prepare_cases``); ``probs[k]`` is the model's output on
    input k (NaN rows: not run), or for an answering model (no ``labels``) its answer.
    ``error`` (the model failed) marks every case."""
    n = cases.num_rows
    predicted = np.full(n, None, dtype=object)
    passed = np.full(n, None, dtype=object)
    errors: list[str | None] = [error] * n
    probs_col = pa.nulls(n, pa.list_(pa.float32()))
    if error is None and probs is not None:
        _judge(cases, probs, labels, settings, predicted, passed, errors)
    if error is None and probs is not None and labels:
        keys = cases.column("input_key").to_numpy()
        unscored = np.isnan(probs[keys]).any(axis=1) & np.array([e is None for e in errors])
        predicted[unscored], passed[unscored] = None, None  # spec and loaded labels disagree
        for i in np.flatnonzero(unscored):
            errors[i] = "model was not run on this input: its loaded labels differ from the spec's"
        width = len(labels)
        offsets = pa.array(np.arange(0, n * width + 1, width, dtype=np.int32))
        probs_col = pa.ListArray.from_arrays(offsets, pa.array(probs[keys].reshape(-1)))
    columns = {
        "model": pa.array([model] * n, pa.string()),
        **{c: cases.column(c) for c in _COPIED[:3]},
        "case_digest": cases.column("case_digest") if "case_digest" in cases.column_names else case_digests(cases),
        "testcase": pa.array(case_groups(cases), pa.string()),
        **{c: cases.column(c) for c in _COPIED[3:]},
        "expected_labels": cases.column("expected_labels"),
        "perturbs": cases.column("perturbs"),
        "predicted": pa.array(predicted.tolist(), pa.string()),
        "probabilities": probs_col,
        "labels": pa.array([labels] * n, pa.list_(pa.string())),
        "pass": pa.array(passed.tolist(), pa.bool_()),
        "error": pa.array(errors, pa.string()),
        "text_pair": cases.column("text_pair"),
    }
    return pa.table(columns, schema=RESULTS_SCHEMA)


def _judge(
    cases: pa.Table,
    outputs: np.ndarray,
    labels: list[str],
    settings: ExpectationSettings,
    predicted: np.ndarray,
    passed: np.ndarray,
    errors: list[str | None],
) -> None:
    """Fill each case's prediction, verdict and error: answers judged as CheckList's SQuAD
    suite (engine/benchmark/qa.py), probabilities by CheckList's expectations; a case of
    the other task is an error (a classifier has no answer, an answerer no label)."""
    keys = cases.column("input_key").to_numpy()
    parts = cases.column("part").to_numpy()
    task = np.asarray(cases.column("task").to_pylist() if "task" in cases.column_names else [None] * len(keys))
    answering = not labels
    for part in np.unique(parts):  # ``perturbs`` ids resolve within one suite file
        in_part = parts == part
        mine = np.flatnonzero(in_part & ((task == TASK_QA) == answering))
        other = np.flatnonzero(in_part & ((task == TASK_QA) != answering))
        for i in other.tolist():
            errors[i] = (
                "not a question-answering case: this model answers questions (family qa_*)"
                if answering
                else "a question-answering case (task qa): it needs a model that answers (family qa_*)"
            )
        if not len(mine):
            continue
        subset = cases.take(mine)
        if answering:
            got = outputs[keys[mine]].tolist()
            verdicts, why = judge_answers(subset, got)
            predicted[mine], passed[mine] = np.asarray(got, dtype=object), verdicts
        else:
            ev = evaluate_cases(subset, outputs[keys[mine]], labels, settings)
            predicted[mine], passed[mine], why = ev.predicted, ev.passed, ev.error
        for i, e in zip(mine.tolist(), why):
            errors[i] = e


def joined(text: str, pair: str | None) -> str:
    """A case's input as one line: a pair (a QA case's context and question) joined by " || "."""
    return text if pair is None else f"{text} || {pair}"


def example_failures(results: pa.Table, per_test: int) -> pa.Table:
    """Up to ``per_test`` failing cases per model x test (suite, capability, topic, type)."""
    if per_test <= 0 or results.num_rows == 0:
        return EXAMPLES_SCHEMA.empty_table()
    failing = results.filter(pc.equal(results.column("pass"), False))
    if failing.num_rows == 0:
        return EXAMPLES_SCHEMA.empty_table()
    pairs = results.column("text_pair").to_pylist() if "text_pair" in results.column_names else [None] * len(results)
    text_of = dict(zip(results.column("case_id").to_pylist(), zip(results.column("text").to_pylist(), pairs)))
    rows, taken = [], {}
    for r in failing.to_pylist():
        cell = (r["model"], r["suite"], r["capability"], r["topic"], r["test_type"])
        if taken.get(cell, 0) >= per_test:
            continue
        taken[cell] = taken.get(cell, 0) + 1
        probs = dict(zip(r["labels"] or [], r["probabilities"] or []))
        expected = "|".join(r["expected_labels"]) if r["expected_labels"] else r["expected_label"]
        rows.append(
            {
                "model": r["model"],
                "suite": r["suite"],
                "capability": r["capability"],
                "topic": r["topic"],
                "test_type": r["test_type"],
                "text": joined(r["text"], r.get("text_pair")),
                "original": joined(*text_of[r["perturbs"]]) if r["perturbs"] in text_of else None,
                "expected": expected,
                "predicted": r["predicted"],
                "probabilities": ", ".join(f"{k}={v:.2f}" for k, v in probs.items()),
            }
        )
    return pa.Table.from_pylist(rows, schema=EXAMPLES_SCHEMA)
