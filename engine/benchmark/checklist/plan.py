"""What each imported CheckList test expects: label names and the expectation decision.

Precedence per test: an exact-name mapping entry > a glob entry > the recognised
``expect`` > the test type's default (MFT with labels: ``Expect.eq()``; INV: CheckList's
``INV(threshold=0.1)``). A mapping entry overrides field by field, so ``tolerance: 0.05``
alone changes only the tolerance of a recognised ``Expect.monotonic``. A test with no
usable expectation (a DIR whose ``expect`` is not recognised nor mapped, an MFT with
neither labels nor mapping) is "unmapped": not written, listed in the report.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from numbers import Integral, Real
from typing import Any

from checkray.engine.benchmark.checklist.expect import Recognised, Unrecognised
from checkray.engine.benchmark.checklist.mapping import Mapping, check_fields
from checkray.engine.benchmark.checklist.reader import TestRecord, plain
from checkray.engine.errors import InputError
from checkray.engine.labels import parse_label_map

INV_DEFAULT_TOLERANCE = 0.1  # CheckList's INV(threshold=0.1)


def _key(raw: Any) -> tuple[str, bool]:
    """(key, numeric) of a CheckList label: ints (and integral floats) by their digits."""
    raw = plain(raw)
    if isinstance(raw, str):
        return raw, False
    if isinstance(raw, Integral) and not isinstance(raw, bool):
        return str(int(raw)), True
    if isinstance(raw, Real) and not isinstance(raw, bool) and float(raw).is_integer():
        return str(int(raw)), True
    raise InputError(f"CheckList label {raw!r} is neither a class number nor a label name")


class LabelNames:
    """``--labels 0=negative,1=neutral,2=positive``: CheckList labels to the model's names.

    Without it, string labels are names already and numeric labels are an error."""

    def __init__(self, names: dict[str, str] | None = None):
        self.names = names

    @classmethod
    def parse(cls, spec: str | None) -> LabelNames:
        return cls(parse_label_map(spec))  # the same parser as the corpus's --labels

    def require(self, raws: Iterable[Any]) -> None:
        """Fail early, naming the labels found, when numbers come without ``--labels``."""
        if self.names is not None:
            return
        numeric = sorted({int(k) for k, is_num in map(_key, raws) if is_num})
        if numeric:
            example = ",".join(f"{n}=NAME{n}" for n in numeric)
            raise InputError(
                f"the suite's labels are numbers {numeric}: pass --labels to name them, e.g. --labels {example}"
            )

    def name(self, raw: Any, test: str) -> str:
        key, numeric = _key(raw)
        if self.names is None:
            if numeric:  # require() has been called; a safety net for direct callers
                raise InputError(f"test '{test}': label {key} is a number: pass --labels to name it")
            return key
        if key not in self.names:
            raise InputError(f"test '{test}': label {raw!r} is not in --labels ({', '.join(self.names)})")
        return self.names[key]


def raw_labels(test: TestRecord, rec: Recognised | Unrecognised) -> list[Any]:
    """Every CheckList label a test names (its labels, an eq/monotonic label)."""
    found: list[Any] = []

    def walk(value: Any) -> None:
        value = plain(value)
        if isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif value is not None:
            found.append(value)

    walk(test.labels)
    if isinstance(rec, Recognised) and rec.label is not None:
        found.append(rec.label)
    return found


@dataclass(frozen=True)
class Plan:
    """A usable expectation: how rows of this test are written."""

    test_type: str
    how: str  # "recognised: ...", "default: ...", "mapping '...'"
    label: str | None = None  # MFT: the one label; DIR: the label whose probability moves
    label_set: tuple[str, ...] | None = None  # MFT: any of these
    from_test_labels: bool = False  # MFT: the test's own labels (Expect.eq())
    relation: str | None = None  # INV: same; DIR: up/down
    tolerance: float | None = None
    note: str | None = None  # why a default was used
    versus: str | None = None  # DIR: score P(label) - P(versus)
    original_labels: tuple[str, ...] | None = None  # INV/DIR: judged only when the original predicts one
    label_sets: dict[str, tuple[str, ...]] | None = None  # MFT: a row labelled key passes with any of value
    unresolved_slice: str | None = None  # a slice function the mapping must translate


@dataclass(frozen=True)
class NoPlan:
    status: str  # "skipped" or "unmapped"
    reason: str


def _base(test: TestRecord, test_type: str, rec: Recognised | Unrecognised, names: LabelNames) -> Plan | NoPlan:
    """The expectation from the recognised ``expect`` or the type's default."""
    if isinstance(rec, Recognised):
        shown = names.name(rec.label, test.name) if rec.label is not None else None
        what = rec.describe(shown)
        if test_type == "MFT" and rec.kind == "eq":
            if shown is not None:
                return Plan("MFT", f"recognised: {what}", label=shown)
            if test.labels is not None:
                return Plan("MFT", f"recognised: {what}", from_test_labels=True)
            return NoPlan("unmapped", f"{what} compares with the test's labels, and it has none")
        if test_type == "INV" and rec.kind == "inv":
            return Plan(
                "INV", f"recognised: {what}", relation="same", tolerance=rec.tolerance, unresolved_slice=rec.slice
            )
        if test_type == "DIR" and rec.kind == "eq" and shown is not None:
            # Expect.eq(label) in a DIR: every perturbation must be predicted label
            return Plan("DIR", f"recognised: {what}", label=shown, relation="becomes", unresolved_slice=rec.slice)
        if test_type == "DIR" and rec.kind == "monotonic":
            way = "up" if rec.increasing else "down"
            return Plan(
                "DIR",
                f"recognised: {what}",
                label=shown,
                relation=way,
                tolerance=rec.tolerance,
                unresolved_slice=rec.slice,
            )
        reason = f"{what} does not fit a {test_type} test"
    else:
        reason = rec.reason
    if test_type == "MFT" and test.labels is not None:
        return Plan("MFT", "default: Expect.eq() (the test's labels)", from_test_labels=True, note=reason)
    if test_type == "INV":
        how = f"default: INV(threshold={INV_DEFAULT_TOLERANCE:g})"
        return Plan("INV", how, relation="same", tolerance=INV_DEFAULT_TOLERANCE, note=reason)
    hint = "give 'direction' for it in --mapping" if test_type == "DIR" else "give 'label' or 'labels' in --mapping"
    extra = "; the test has no labels" if test_type == "MFT" else ""
    return NoPlan("unmapped", f"expectation not recognised: {reason}{extra}; {hint}")


def _apply(entry: Any, how: str, base: Plan | NoPlan, test: TestRecord, test_type: str) -> Plan | NoPlan:
    """A mapping entry over the base expectation, field by field."""
    prior = base if isinstance(base, Plan) and base.test_type == test_type else None
    if test_type == "MFT":
        if entry.label_sets is not None:
            if test.labels is None:
                return NoPlan("unmapped", f"{how} gives 'label_sets' but the test has no labels")
            sets = {k: tuple(v) for k, v in entry.label_sets.items()}
            return Plan("MFT", f"{how}; Expect.eq() (the test's labels)", from_test_labels=True, label_sets=sets)
        if entry.labels is not None:
            return Plan("MFT", how, label_set=tuple(entry.labels))
        if entry.label is not None:
            return Plan("MFT", how, label=entry.label)
        if prior is not None:
            return replace(prior, how=f"{how}; {prior.how}")
        if test.labels is not None:
            return Plan("MFT", f"{how}; Expect.eq() (the test's labels)", from_test_labels=True)
        return NoPlan("unmapped", f"{how} names no label and the test has none")
    if test_type == "INV":
        tolerance = entry.tolerance if entry.tolerance is not None else (prior.tolerance if prior else None)
        tolerance = INV_DEFAULT_TOLERANCE if tolerance is None else tolerance
        relation = "renamed" if entry.answer_renamed else "same"
        return _sliced(Plan("INV", how, relation=relation, tolerance=tolerance), entry, prior)
    direction = entry.direction or (prior.relation if prior else None)
    if direction is None:
        return NoPlan("unmapped", f"{how} gives no 'direction' and the expectation was not recognised")
    label = entry.label if entry.label is not None else (prior.label if prior else None)
    tolerance = entry.tolerance if entry.tolerance is not None else (prior.tolerance if prior else None)
    versus = entry.versus if entry.versus is not None else (prior.versus if prior else None)
    plan = Plan("DIR", how, label=label, relation=direction, tolerance=tolerance, versus=versus)
    return _sliced(plan, entry, prior)


def _sliced(plan: Plan, entry: Any, prior: Plan | None) -> Plan:
    """The mapping's ``original_labels`` translate a recognised expectation's slice function."""
    if entry.original_labels is not None:
        base = f" over {prior.how}" if prior is not None and prior.unresolved_slice else ""
        return replace(plan, how=plan.how + base, original_labels=tuple(entry.original_labels))
    return replace(plan, unresolved_slice=prior.unresolved_slice if prior else None)


def decide(
    test: TestRecord, rec: Recognised | Unrecognised, mapping: Mapping | None, names: LabelNames
) -> Plan | NoPlan:
    """The expectation of ``test`` (see the module docstring for the precedence)."""
    found = mapping.lookup(test.name) if mapping is not None else None
    if found is not None and found[2].skip:
        why = f": {found[2].reason}" if found[2].reason else ""
        return NoPlan("skipped", f"skipped by mapping '{found[0]}'{why}")
    test_type = (found[2].type if found is not None else None) or test.kind
    if test_type is None:
        return NoPlan("unmapped", "the test is neither MFT, INV nor DIR by its class; give 'type' in --mapping")
    if found is None:
        return _resolved(_base(test, test_type, rec, names))
    key, match, entry = found
    try:
        check_fields(entry, test_type)
    except ValueError as exc:
        raise mapping.error(key, f"{exc} (test '{test.name}')") from None
    plan = _apply(
        entry,
        f"mapping '{key}'" + (" (glob)" if match == "glob" else ""),
        _base(test, test_type, rec, names),
        test,
        test_type,
    )
    if isinstance(plan, Plan) and plan.note is None and isinstance(rec, Unrecognised):
        plan = replace(plan, note=f"in place of the pickled code: {rec.reason}")  # for import.json
    return _resolved(plan)


def _resolved(plan: Plan | NoPlan) -> Plan | NoPlan:
    """A plan whose slice function no mapping translated is not written: without the slice
    its verdicts would differ from CheckList's."""
    if isinstance(plan, Plan) and plan.unresolved_slice is not None:
        return NoPlan(
            "unmapped",
            f"{plan.how}: the slice {plan.unresolved_slice} is code checkray does not run; give "
            "'original_labels' (the original predictions the slice keeps) in --mapping",
        )
    return plan
