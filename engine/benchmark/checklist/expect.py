"""Recognise CheckList's own expectation constructors in a pickled ``expect``, as data.

The unpickler leaves a dill-pickled function as the recorded call
``_create_function(code, globals, name, defaults, closure, ...)``, its closure cells as
``_create_cell(value)`` records (dill >= 0.3.5 leaves the value to a later recorded
``setattr(cell, 'cell_contents', value)``), and its code as a ``_create_code(...)``
record whose arguments include the free-variable names. CPython orders closure cells
by free-variable name. So CheckList's constructors have these shapes:

* ``Expect.testcase(fn)``: function ``expect`` closing over ``(fn,)``;
* ``Expect.single(fn)`` / ``Expect.pairwise(fn)``: ``testcase(expect_fn)``, ``expect_fn``
  closing over ``(fn,)`` (the inner ``fn`` tells which);
* ``Expect.eq(val)``: ``single(ret_fn)``, ``ret_fn`` closing over ``(val,)``;
* ``Expect.inv(tolerance)``: ``pairwise(expect)``, closing over ``(tolerance,)``;
* ``Expect.monotonic(label, increasing, tolerance)``: ``pairwise(expect)``, closing over
  ``(increasing, keep_label, tolerance)``.

Only these exact shapes (name, free variables, value types) are recognised; anything
else (a lambda, ``Expect.combine``, a slice) is "unrecognised" with the reason. Nothing
here is ever called.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from checkray.engine.benchmark.checklist.reader import plain
from checkray.engine.benchmark.checklist.unpickle import Opaque

_EMPTY = object()  # an empty closure cell


@dataclass(frozen=True)
class Recognised:
    """A CheckList expectation: ``kind`` is "eq", "inv" or "monotonic"."""

    kind: str
    label: Any = None  # eq: val; monotonic: label (raw: an int or a string, or None)
    increasing: bool | None = None
    tolerance: float | None = None
    # Expect.slice_*(expectation, slice_fn): the slice function, which is code, described;
    # the mapping must say what it keeps ('original_labels')
    slice: str | None = None

    def describe(self, label_name: str | None = None) -> str:
        """``Expect.monotonic(label=positive, increasing, tolerance=0.1)`` and the like."""
        shown = label_name if label_name is not None else ("None" if self.label is None else str(self.label))
        if self.kind == "eq":
            text = "Expect.eq()" if self.label is None else f"Expect.eq({shown})"
        elif self.kind == "inv":
            text = f"Expect.inv(tolerance={self.tolerance:g})"
        else:
            way = "increasing" if self.increasing else "decreasing"
            text = f"Expect.monotonic(label={shown}, {way}, tolerance={self.tolerance:g})"
        return text if self.slice is None else f"{self.slice}({text}, ...)"


@dataclass(frozen=True)
class Unrecognised:
    reason: str


@dataclass(frozen=True)
class _Function:
    name: str
    cells: tuple[Any, ...]
    strings: frozenset[str]  # every string of the code record
    name_tuples: frozenset[tuple[str, ...]]  # its tuples of strings (free variables among them)


def _is(record: Any, builder: str) -> bool:
    return isinstance(record, Opaque) and record.name.startswith("dill.") and record.name.endswith("." + builder)


def _cell_value(cell: Any) -> Any:
    if not _is(cell, "_create_cell"):
        return _EMPTY
    if "cell_contents" in cell.attrs:
        return cell.attrs["cell_contents"]
    if not cell.args or (isinstance(cell.args[0], type) and issubclass(cell.args[0], Opaque)):
        return _EMPTY  # _create_cell(_CELL_EMPTY), or no value
    return cell.args[0]


def _code_strings(code: Any) -> tuple[frozenset[str], frozenset[tuple[str, ...]]]:
    strings: set[str] = set()
    tuples: set[tuple[str, ...]] = set()
    # dill >= 0.3.5 records _create_code(...); dill 0.3.1 (CheckList's released suites,
    # 2020) calls the type itself: _load_type('CodeType')(argcount, ..., freevars, cellvars).
    if _is(code, "_create_code") or (isinstance(code, Opaque) and code.name.endswith("._load_type:CodeType")):
        for arg in code.args:
            if isinstance(arg, str):
                strings.add(arg)
            elif isinstance(arg, tuple) and all(isinstance(a, str) for a in arg):
                strings.update(arg)
                tuples.add(arg)
    return frozenset(strings), frozenset(tuples)


def function(record: Any) -> _Function | None:
    """The name, closure values and code strings of a dill-pickled function, else None."""
    if not _is(record, "_create_function") or len(record.args) < 3 or not isinstance(record.args[2], str):
        return None
    closure = record.args[4] if len(record.args) > 4 else None
    if closure is None:
        closure = ()
    if not isinstance(closure, tuple):
        return None
    strings, tuples = _code_strings(record.args[0])
    return _Function(record.args[2], tuple(plain(_cell_value(c)) for c in closure), strings, tuples)


def _shape(fn: _Function | None, name: str, freevars: tuple[str, ...]) -> bool:
    """``fn`` is a function called ``name`` closing over exactly ``freevars``."""
    return (
        fn is not None
        and fn.name == name
        and len(fn.cells) == len(freevars)
        and freevars in fn.name_tuples
        and all(v is not _EMPTY for v in fn.cells)
    )


def _label(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, Integral) and not isinstance(value, bool))


def _tolerance(value: Any) -> float | None:
    if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value)):
        return float(value)
    return None


def _describe(record: Any) -> str:
    fn = function(record)
    if fn is not None:
        return f"function '{fn.name}'"
    if isinstance(record, type) and issubclass(record, Opaque):
        return f"a reference to '{record.target}'"
    if isinstance(record, Opaque):
        return f"a '{record.name}' object"
    return f"a {type(record).__name__}"


def recognise(expect: Any) -> Recognised | Unrecognised:
    """Which of ``Expect.eq``/``inv``/``monotonic`` ``expect`` is, read from the records."""
    if expect is None:
        return Unrecognised("the test has no expectation")
    sliced = _wrap_slice(expect)
    if sliced is not None:
        return sliced
    outer = function(expect)
    if not _shape(outer, "expect", ("fn",)):
        return Unrecognised(f"{_describe(expect)} is not built by Expect.eq/inv/monotonic")
    middle = function(outer.cells[0])
    if not _shape(middle, "expect_fn", ("fn",)):
        return Unrecognised(f"Expect.testcase({_describe(outer.cells[0])}) is not Expect.eq/inv/monotonic")
    # single and pairwise both wrap "expect_fn" closing over (fn,); the inner function
    # tells which (ret_fn only comes from eq, the two "expect" shapes from inv/monotonic).
    inner_record = middle.cells[0]
    inner = function(inner_record)
    if _shape(inner, "ret_fn", ("val",)) and _label(inner.cells[0]):
        return Recognised("eq", label=inner.cells[0])
    if _shape(inner, "expect", ("tolerance",)):
        tolerance = _tolerance(inner.cells[0])
        if tolerance is not None:
            return Recognised("inv", tolerance=tolerance)
    if _shape(inner, "expect", ("increasing", "keep_label", "tolerance")):
        increasing, label, tolerance = inner.cells[0], inner.cells[1], _tolerance(inner.cells[2])
        if isinstance(increasing, bool) and _label(label) and tolerance is not None:
            return Recognised("monotonic", label=label, increasing=increasing, tolerance=tolerance)
    # For the message only: CheckList's pairwise names orig_pred, its single a "label" argument.
    if "orig_pred" in middle.strings:
        wrapper = "Expect.pairwise"
    elif "label" in middle.strings:
        wrapper = "Expect.single"
    else:
        wrapper = "Expect.single/pairwise"
    return Unrecognised(f"{wrapper}({_describe(inner_record)}) is not Expect.eq/inv/monotonic")


def _wrap_slice(expect: Any) -> Recognised | Unrecognised | None:
    """``Expect.wrap_slice(expect_fn, slice_fn, agg_fn)`` (what ``slice_pairwise``,
    ``slice_orig``, ``slice_single`` and ``slice_testcase`` build): a function ``wrapped``
    closing over (agg_fn, expect_fn, slice_fn). The inner expectation is recognised as
    usual; the slice function is code, so it is only described. None: not this shape."""
    wrapped = function(expect)
    if not _shape(wrapped, "wrapped", ("agg_fn", "expect_fn", "slice_fn")):
        return None
    agg_fn, inner_expect, slice_fn = wrapped.cells
    inner = recognise(inner_expect)
    if isinstance(inner, Unrecognised):
        return Unrecognised(f"Expect.wrap_slice over an expectation that is not recognised: {inner.reason}")
    outer = function(slice_fn)
    testcase_fn = outer.cells[0] if _shape(outer, "expect", ("fn",)) else None
    middle = function(testcase_fn)
    if _shape(middle, "expect_fn", ("fn",)):
        way = "Expect.slice_pairwise" if "orig_pred" in middle.strings else "Expect.slice_single"
        inner_slice = _describe(middle.cells[0])
    else:
        way = "Expect.slice_testcase"
        inner_slice = _describe(testcase_fn if testcase_fn is not None else slice_fn)
    agg = agg_fn if isinstance(agg_fn, str) else "a custom agg_fn"
    return Recognised(
        inner.kind,
        label=inner.label,
        increasing=inner.increasing,
        tolerance=inner.tolerance,
        slice=f"{way}[{inner_slice}, agg_fn={agg}]",
    )
