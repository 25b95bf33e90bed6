"""CheckList expectations: did a model pass each test case? (pure; numpy in, numpy out)

The rules follow CheckList's ``expect.py`` (``Expect.eq``, ``Expect.inv``,
``Expect.monotonic``) case by case; ``docs/checklist.md`` lists them.

* MFT: the predicted label is ``expected_label``, or one of ``expected_labels`` when that
  set is given (CheckList's "not negative" = positive or neutral).
* INV: the predicted label equals the prediction on the case named in ``perturbs``; when
  it changed, the case still passes if the probability of the original prediction's label
  moved by at most ``tolerance`` (CheckList's ``INV(threshold=0.1)``; null: 0, exact).
* DIR (``relation`` up/down): the probability of the label (``expected_label``, or the
  perturbed case's predicted label when null, as ``Expect.monotonic(label=None)``) does
  not decrease (up) / increase (down) by more than ``tolerance`` (null: the config's
  ``dir_tolerance``, 0.1 as in CheckList's released suites). A case that cannot fail
  (up with P_before <= tolerance, down with P_before >= 1 - tolerance) is not counted,
  as CheckList returns None for it.
* DIR ``becomes``: the perturbed case is predicted ``expected_label`` (or one of
  ``expected_labels``): CheckList's ``Expect.eq(label)`` in a DIR test (QQP's "change a
  name in one question" tests expect not-duplicate).
* DIR with ``versus_label``: the score is P(expected_label) - P(versus_label), as the
  custom ``diff_up``/``diff_down`` of CheckList's sentiment suite (``positive_change``:
  P(positive) - P(negative)); up passes when change + tolerance >= 0, down when
  change - tolerance <= 0; such a case can always fail (no "cannot fail" rule).
* INV/DIR with ``original_labels``: the case is judged only when the original's predicted
  label is one of them, else it has no verdict (CheckList's ``Expect.slice_pairwise`` /
  ``slice_orig`` on the original's prediction, e.g. "pred != neutral").
* An INV/DIR case without ``perturbs`` is the original of its test case: the model scores
  it and the perturbations are compared with it, but it has no verdict of its own
  (CheckList's ``agg_fn='all_except_first'``).

Binary models meet "neutral" expectations by CheckList's convention: a model with a
positive and a negative label predicts neutral when P(positive) lies inside the neutral
band (default [1/3, 2/3]). The rule applies only to suites that expect the neutral label
(elsewhere a binary model predicts by argmax), so the same model's predictions on a
binary suite are unaffected. For DIR on "neutral" the score is 1 - 2|P(positive) - 1/2|
(highest at the band's centre). A suite expecting a label the model cannot produce and
no rule covers is a label-map mismatch: every case of that suite gets the error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

MFT, INV, DIR = "MFT", "INV", "DIR"
UP, DOWN, SAME, BECOMES = "up", "down", "same", "becomes"


@dataclass(frozen=True)
class ExpectationSettings:
    neutral_label: str = "neutral"
    positive_label: str = "positive"
    negative_label: str = "negative"
    neutral_band: tuple[float, float] = (1 / 3, 2 / 3)  # inclusive P(positive) range
    dir_tolerance: float = 0.1


@dataclass
class Evaluation:
    """Per-case outcome for one model on a table of cases (aligned with its rows)."""

    predicted: np.ndarray  # object array of label strings (None where errored)
    passed: np.ndarray  # object array of True/False/None (None: could not be evaluated)
    error: list[str | None]


def neutral_rule_applies(expected: Iterable[str], model_labels: Sequence[str], s: ExpectationSettings) -> bool:
    """True when a binary positive/negative model must meet neutral expectations."""
    labels = set(model_labels)
    return (
        s.neutral_label in set(expected)
        and s.neutral_label not in labels
        and len(labels) == 2
        and {s.positive_label, s.negative_label} == labels
    )


def label_map_error(
    suite: str, expected: Iterable[str], model_labels: Sequence[str], s: ExpectationSettings
) -> str | None:
    """One-line error when the suite expects labels the model cannot produce, else None."""
    expected = set(expected)
    missing = expected - set(model_labels)
    if neutral_rule_applies(expected, model_labels, s):
        missing.discard(s.neutral_label)
    if not missing:
        return None
    return (
        f"label-map mismatch: suite '{suite}' expects {sorted(missing)} but the model's labels are {list(model_labels)}"
    )


def predict_labels(
    probs: np.ndarray, model_labels: Sequence[str], *, neutral: bool, s: ExpectationSettings
) -> np.ndarray:
    """Predicted label per row: argmax, or the neutral band rule for binary models."""
    labels = np.asarray(list(model_labels), dtype=object)
    predicted = labels[np.argmax(probs, axis=1)]
    if neutral:
        p_pos = probs[:, list(model_labels).index(s.positive_label)]
        lo, hi = s.neutral_band
        predicted = np.where((p_pos >= lo) & (p_pos <= hi), s.neutral_label, predicted).astype(object)
    return predicted


def label_scores(
    probs: np.ndarray, model_labels: Sequence[str], wanted: np.ndarray, s: ExpectationSettings
) -> np.ndarray:
    """P(wanted[i]) for each row i; NaN where the model has no such label or rule."""
    index = {label: j for j, label in enumerate(model_labels)}
    scores = np.full(len(wanted), np.nan)
    for label in set(wanted.tolist()) - {None}:
        rows = wanted == label
        if label in index:
            scores[rows] = probs[rows, index[label]]
        elif label == s.neutral_label and s.positive_label in index and len(index) == 2:
            scores[rows] = 1.0 - 2.0 * np.abs(probs[rows, index[s.positive_label]] - 0.5)
    return scores


def wanted_labels(cases: pa.Table) -> dict[str, set[str]]:
    """Per suite, every label its cases name (``expected_label``, ``expected_labels``,
    ``versus_label``, ``original_labels``)."""
    wanted: dict[str, set[str]] = {}
    for suite, label, labels, versus, originals in zip(
        cases.column("suite").to_pylist(),
        cases.column("expected_label").to_pylist(),
        cases.column("expected_labels").to_pylist(),
        _column(cases, "versus_label"),
        _column(cases, "original_labels"),
    ):
        bucket = wanted.setdefault(suite, set())
        bucket.update(x for x in (label, versus) if x is not None)
        bucket.update(labels or ())
        bucket.update(originals or ())
    return wanted


def _column(cases: pa.Table, name: str) -> list:
    """A column as a list; all None when the table predates it."""
    return cases.column(name).to_pylist() if name in cases.column_names else [None] * cases.num_rows


@dataclass
class _CaseColumns:
    """The columns of a case table the rules read, as arrays aligned with its rows."""

    suites: np.ndarray
    expected: np.ndarray  # expected_label (None where null)
    label_sets: list[list[str] | None]  # expected_labels
    test_type: np.ndarray
    relation: np.ndarray
    tolerance: np.ndarray  # NaN where null
    perturbs: list[str | None]
    versus: np.ndarray  # versus_label (None where null)
    original_sets: list[list[str] | None]  # original_labels
    ref: np.ndarray  # row of the case each row perturbs; -1: none, or not in the table

    @classmethod
    def read(cls, cases: pa.Table) -> _CaseColumns:
        ids = {cid: i for i, cid in enumerate(cases.column("case_id").to_pylist())}
        perturbs = cases.column("perturbs").to_pylist()
        return cls(
            suites=np.asarray(cases.column("suite").to_pylist(), dtype=object),
            expected=np.asarray(cases.column("expected_label").to_pylist(), dtype=object),
            label_sets=cases.column("expected_labels").to_pylist(),
            test_type=np.asarray(cases.column("test_type").to_pylist(), dtype=object),
            relation=np.asarray(cases.column("relation").to_pylist(), dtype=object),
            tolerance=cases.column("tolerance").to_numpy(zero_copy_only=False).astype(float),
            perturbs=perturbs,
            versus=np.asarray(_column(cases, "versus_label"), dtype=object),
            original_sets=_column(cases, "original_labels"),
            ref=np.array([ids.get(p, -1) if p is not None else -1 for p in perturbs], dtype=np.int64),
        )


def evaluate_cases(
    cases: pa.Table, probs: np.ndarray, model_labels: Sequence[str], s: ExpectationSettings
) -> Evaluation:
    """Evaluate one model on ``cases`` (TEST_CASE_SCHEMA rows; ``perturbs`` ids resolve
    within this table). ``probs[i]`` is the model's output on row i."""
    n = cases.num_rows
    columns = _CaseColumns.read(cases)
    result = Evaluation(
        predicted=np.full(n, None, dtype=object), passed=np.full(n, None, dtype=object), error=[None] * n
    )
    _predict_per_suite(result, cases, columns, probs, model_labels, s)
    usable = np.array([e is None for e in result.error], dtype=bool)
    _judge_mft(result, columns, np.flatnonzero((columns.test_type == MFT) & usable))
    pairwise = _pairwise_rows(result, columns, usable)
    inv = pairwise[columns.test_type[pairwise] == INV]
    dirs = pairwise[columns.test_type[pairwise] == DIR]
    _judge_inv(result, columns, inv, probs, model_labels, s)
    _judge_dir(result, columns, dirs, probs, model_labels, s)
    return result


def _settle(result: Evaluation, rows: np.ndarray, ok: np.ndarray) -> None:
    """Record the verdicts ``ok`` of ``rows``, except where a row errored or cannot fail (None)."""
    for i, value in zip(rows.tolist(), ok.tolist()):
        if result.error[i] is None and value is not None:
            result.passed[i] = bool(value)


def _predict_per_suite(
    result: Evaluation,
    cases: pa.Table,
    columns: _CaseColumns,
    probs: np.ndarray,
    model_labels: Sequence[str],
    s: ExpectationSettings,
) -> None:
    """Predicted labels suite by suite (the neutral rule applies per suite); every case of
    a suite whose labels the model cannot produce gets the label-map error."""
    for suite, wanted in wanted_labels(cases).items():
        rows = np.flatnonzero(columns.suites == suite)
        problem = label_map_error(suite, wanted, model_labels, s)
        if problem:
            for i in rows:
                result.error[i] = problem
            continue
        neutral = neutral_rule_applies(wanted, model_labels, s)
        result.predicted[rows] = predict_labels(probs[rows], model_labels, neutral=neutral, s=s)


def _judge_mft(result: Evaluation, columns: _CaseColumns, mft: np.ndarray) -> None:
    """MFT: the predicted label is the expected one, or one of the expected set."""
    for i in mft.tolist():
        label_set, expected = columns.label_sets[i], columns.expected[i]
        wanted = set(label_set) if label_set else ({expected} if expected is not None else None)
        if wanted is None:
            result.error[i] = "MFT case has no expected label"
        else:
            result.passed[i] = result.predicted[i] in wanted


def _pairwise_rows(result: Evaluation, columns: _CaseColumns, usable: np.ndarray) -> np.ndarray:
    """INV/DIR rows that perturb a case which could be evaluated; the others get their error.
    INV/DIR originals (no ``perturbs``) are scored but not judged."""
    perturbs = columns.perturbs
    has_original = np.array([p is not None for p in perturbs], dtype=bool)
    pairwise = np.flatnonzero((columns.test_type != MFT) & usable & has_original)
    ref = columns.ref
    for i in pairwise[ref[pairwise] < 0]:
        result.error[i] = f"perturbed case '{perturbs[i]}' is not in the suite"
    pairwise = pairwise[ref[pairwise] >= 0]
    for i in pairwise[[result.error[r] is not None for r in ref[pairwise]]]:
        result.error[i] = f"perturbed case '{perturbs[i]}' could not be evaluated"
    return pairwise[[result.error[i] is None for i in pairwise]]


def _judge_inv(
    result: Evaluation,
    columns: _CaseColumns,
    inv: np.ndarray,
    probs: np.ndarray,
    model_labels: Sequence[str],
    s: ExpectationSettings,
) -> None:
    """INV: the same prediction as the original, or its label's probability moved by at
    most the tolerance."""
    relation = columns.relation
    for i in inv[[r not in (None, SAME) for r in relation[inv]]]:
        result.error[i] = f"INV case has relation '{relation[i]}' (expected 'same' or none)"
    inv = inv[[r in (None, SAME) for r in relation[inv]]]
    if not len(inv):
        return
    ref = columns.ref[inv]
    same = result.predicted[inv] == result.predicted[ref]
    label = result.predicted[ref]
    moved = np.abs(label_scores(probs[inv], model_labels, label, s) - label_scores(probs[ref], model_labels, label, s))
    tol = np.nan_to_num(columns.tolerance[inv], nan=0.0)
    ok = (same | (moved <= tol)).astype(object)
    _slice_by_original(result, columns, inv, ok)
    _settle(result, inv, ok)


def _slice_by_original(result: Evaluation, columns: _CaseColumns, rows: np.ndarray, ok: np.ndarray) -> None:
    """No verdict (None in ``ok``) where the original's predicted label is not in the row's
    ``original_labels`` (CheckList's slice on the original's prediction)."""
    for k, i in enumerate(rows.tolist()):
        allowed = columns.original_sets[i]
        if allowed is not None and result.predicted[columns.ref[i]] not in allowed:
            ok[k] = None


def _judge_dir(
    result: Evaluation,
    columns: _CaseColumns,
    dirs: np.ndarray,
    probs: np.ndarray,
    model_labels: Sequence[str],
    s: ExpectationSettings,
) -> None:
    """DIR: the label's probability does not move against ``relation`` by more than the tolerance."""
    relation = columns.relation
    for i in dirs[[r not in (UP, DOWN, BECOMES) for r in relation[dirs]]]:
        result.error[i] = (
            f"DIR case has relation '{relation[i]}': a classifier can only be tested with 'up', 'down' or 'becomes'"
        )
    becomes = dirs[[r == BECOMES for r in relation[dirs]]]
    if len(becomes):
        _judge_becomes(result, columns, becomes)
    dirs = dirs[[r in (UP, DOWN) for r in relation[dirs]]]
    if not len(dirs):
        return
    ref = columns.ref[dirs]
    expected = columns.expected[dirs]
    label = np.where(expected != None, expected, result.predicted[ref])  # noqa: E711
    after = label_scores(probs[dirs], model_labels, label, s)
    before = label_scores(probs[ref], model_labels, label, s)
    versus = columns.versus[dirs]
    margin = versus != None  # noqa: E711
    if margin.any():  # P(label) - P(versus_label): CheckList's sentiment positive_change
        after[margin] -= label_scores(probs[dirs[margin]], model_labels, versus[margin], s)
        before[margin] -= label_scores(probs[ref[margin]], model_labels, versus[margin], s)
    tolerance = columns.tolerance[dirs]
    tol = np.where(np.isnan(tolerance), s.dir_tolerance, tolerance)
    up = relation[dirs] == UP
    diff = after - before
    ok = np.where(up, diff + tol >= 0, diff - tol <= 0).astype(object)
    cannot_fail = np.where(up, before <= tol, before >= 1 - tol) & ~margin
    ok[cannot_fail] = None  # CheckList's monotonic: "can't fail", not counted
    _slice_by_original(result, columns, dirs, ok)
    unscored = np.isnan(after) | np.isnan(before)
    for i, lbl, vs in zip(dirs[unscored], label[unscored], versus[unscored]):
        result.error[i] = f"model cannot score label '{lbl}'" + (f" minus '{vs}'" if vs is not None else "")
    _settle(result, dirs, ok)


def _judge_becomes(result: Evaluation, columns: _CaseColumns, rows: np.ndarray) -> None:
    """DIR ``becomes``: the perturbed case is predicted ``expected_label`` (or one of
    ``expected_labels``), as CheckList's ``Expect.eq(label)`` used in a DIR test (the
    original is not judged: ``all_except_first``)."""
    ok = np.full(len(rows), None, dtype=object)
    for k, i in enumerate(rows.tolist()):
        label_set, expected = columns.label_sets[i], columns.expected[i]
        wanted = set(label_set) if label_set else ({expected} if expected is not None else None)
        if wanted is None:
            result.error[i] = "DIR 'becomes' case has no expected label"
        else:
            ok[k] = result.predicted[i] in wanted
    _slice_by_original(result, columns, rows, ok)
    _settle(result, rows, ok)


def case_groups(cases: pa.Table) -> list[str]:
    """The CheckList test case (group) of each row: ``testcase`` when given, else the
    original an INV/DIR case perturbs, else the case itself."""
    return [
        tc if tc is not None else (p if p is not None else cid)
        for tc, p, cid in zip(
            cases.column("testcase").to_pylist(),
            cases.column("perturbs").to_pylist(),
            cases.column("case_id").to_pylist(),
        )
    ]
