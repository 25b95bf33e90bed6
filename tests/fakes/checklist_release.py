"""CheckList's *released* suite format, and CheckList's 2020 verdict semantics, without
the checklist or dill packages.

What ``python -m pickletools`` shows of ``release_suites/sentiment_suite.tar.gz`` (saved
by CheckList in April 2020 with dill 0.3.1, protocol 3), reproduced here opcode shape by
opcode shape:

* classes by reference: ``GLOBAL 'checklist.test_types MFT'``, then ``NEWOBJ`` and
  ``BUILD`` with the instance dict; ``OrderedDict()`` + ``SETITEMS`` for ``suite.tests``;
  ``collections defaultdict`` for ``suite.info`` (its factory a pickled lambda);
* a function by value: ``dill._dill._create_function(code, globals, name, defaults,
  closure, fdict, kwdefaults)``; its code ``dill._dill._load_type('CodeType')(argcount,
  kwonlyargcount, nlocals, stacksize, flags, co_code, consts, names, varnames, filename,
  name, firstlineno, lnotab, freevars, cellvars)`` (no ``_create_code``: that is dill
  >= 0.3.5); closure cells ``dill._dill._create_cell(value)``;
* a builtin function in a function's globals: ``dill._dill._get_attr('builtins', 'len')``
  (a *string* as the object: dill's ``_get_attr`` falls back to the builtins module);
  builtin types ``_load_type('list')``, ``_load_type('ClassType')`` for ``type``;
  modules ``dill._dill._import_module('numpy')``;
* ``checklist.expect.iter_with_optional`` and ``checklist.expect.Expect`` by reference;
* numpy arrays through ``_get_attr(_import_module('numpy.core._multiarray_umath'),
  '_reconstruct')``, ``GLOBAL 'numpy ndarray'``, ``GLOBAL 'numpy dtype'``.

``release_checklist()`` registers stand-in ``checklist.*``, ``munch`` and ``dill._dill``
modules only inside the block. Its ``Expect`` has CheckList 2020's function names, free
variables and semantics (written here, not copied): a result > 0 or True passes, <= 0 or
False fails, None does not count; a test case's results lose their Nones, then
``all_except_first`` drops the first, and it passes when all that is left passes; no
result left: None (filtered). ``checklist_stats`` gives ``AbstractTest.get_stats``'s
fails / filtered / fail rate. ``dump_release`` pickles a suite as the released files are.
"""

from __future__ import annotations

import builtins
import io
import pickle
import sys
import types
from contextlib import contextmanager
from typing import Any

import numpy as np

EXPECT_2020 = """
import itertools
import numpy as np

def iter_with_optional(data, preds, confs, labels, meta):
    if type(data) not in [list, np.array]:
        return [(data, preds, confs, labels, meta)]
    if type(meta) not in [list, np.array]:
        meta = itertools.repeat(meta)
    if type(labels) not in [list, np.array]:
        labels = itertools.repeat(labels)
    return zip(data, preds, confs, labels, meta)

class Expect:
    @staticmethod
    def testcase(fn):
        def expect(self):
            zipped = iter_with_optional(self.data, self.results.preds, self.results.confs, self.labels, self.meta)
            return [fn(x, pred, confs, labels, meta) for x, pred, confs, labels, meta in zipped]
        return expect

    @staticmethod
    def all(ignore_first=False):
        def tmp_fn(results):
            kept = results[1:] if ignore_first else results
            return bool(np.all(kept > 0))
        return tmp_fn

    @staticmethod
    def aggregate_testcase(expect_results, agg_fn='all'):
        if agg_fn == 'all':
            agg_fn = Expect.all()
        elif agg_fn == 'all_except_first':
            agg_fn = Expect.all(ignore_first=True)
        if expect_results is None:
            return None
        kept = [r for r in expect_results if r is not None]
        return agg_fn(np.array(kept, dtype=float)) if kept else None

    @staticmethod
    def aggregate(data, agg_fn='all'):
        return [Expect.aggregate_testcase(x, agg_fn) for x in data]

    @staticmethod
    def single(fn):
        def expect_fn(xs, preds, confs, label=None, meta=None):
            return [fn(x, p, c, l, m) for x, p, c, l, m in iter_with_optional(xs, preds, confs, label, meta)]
        return Expect.testcase(expect_fn)

    @staticmethod
    def pairwise(fn):
        def expect_fn(xs, preds, confs, labels=None, meta=None):
            orig_pred, orig_conf = preds[0], confs[0]
            rows = iter_with_optional(xs, preds, confs, labels, meta)
            return [fn(orig_pred, p, orig_conf, c, l, m) for _, p, c, l, m in rows]
        return Expect.testcase(expect_fn)

    @staticmethod
    def wrap_slice(expect_fn, slice_fn, agg_fn='all'):
        def wrapped(*args, **kwargs):
            ret = expect_fn(*args, **kwargs)
            keep = Expect.aggregate(slice_fn(*args, **kwargs), agg_fn)
            for i, k in enumerate(keep):
                if k is not True:
                    ret[i] = [None for _ in ret[i]] if type(ret[i]) in [list, np.array] else None
            return ret
        return wrapped

    @staticmethod
    def slice_orig(expect_fn, slice_fn, agg_fn='all'):
        new_fn = lambda orig, pred, *args, **kwargs: slice_fn(orig, pred)
        return Expect.slice_pairwise(expect_fn, new_fn, agg_fn)

    @staticmethod
    def slice_pairwise(expect_fn, slice_fn, agg_fn='all_except_first'):
        return Expect.wrap_slice(expect_fn, Expect.pairwise(slice_fn), agg_fn)

    @staticmethod
    def eq(val=None):
        def ret_fn(x, pred, conf, label=None, meta=None):
            gt = val if val is not None else label
            return True if pred == gt else -(1 - conf[gt])
        return Expect.single(ret_fn)

    @staticmethod
    def inv(tolerance=0):
        def expect(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
            if pred == orig_pred:
                return True
            moved = abs(conf[orig_pred] - orig_conf[orig_pred])
            return True if moved <= tolerance else -moved
        return Expect.pairwise(expect)

    @staticmethod
    def monotonic(label=None, increasing=True, tolerance=0.0):
        keep_label = label
        def expect(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
            label = keep_label if keep_label is not None else orig_pred
            before, after = orig_conf[label], conf[label]
            if increasing and before <= tolerance:
                return None
            if not increasing and before >= 1 - tolerance:
                return None
            diff = after - before
            if increasing:
                return True if diff + tolerance >= 0 else diff + tolerance
            return True if diff - tolerance <= 0 else -(diff - tolerance)
        return Expect.pairwise(expect)
"""

TYPES_2020 = """
from checklist.expect import Expect

class AbstractTest:
    def __init__(self, data, expect, labels=None, meta=None, agg_fn='all', templates=None,
                 print_first=None, name=None, capability=None, description=None):
        self.data = data
        self.expect = expect
        self.labels = labels
        self.meta = meta
        self.agg_fn = agg_fn
        self.templates = templates
        self.print_first = print_first
        self.run_idxs = None
        self.result_indexes = None
        self.name = name
        self.capability = capability
        self.description = description

class MFT(AbstractTest):
    def __init__(self, data, expect=None, labels=None, **kw):
        if expect is None:
            expect = Expect.eq()
        super().__init__(data, expect, labels=labels, **kw)

class INV(AbstractTest):
    def __init__(self, data, expect=None, threshold=0.1, **kw):
        if expect is None:
            expect = Expect.inv(threshold)
        super().__init__(data, expect, agg_fn='all_except_first', print_first=True, **kw)

class DIR(AbstractTest):
    def __init__(self, data, expect, **kw):
        super().__init__(data, expect, agg_fn='all_except_first', print_first=True, **kw)
"""

SUITE_2020 = """
from collections import OrderedDict, defaultdict

class TestSuite:
    def __init__(self):
        self.tests = OrderedDict()
        self.info = defaultdict(lambda: defaultdict(lambda: ''))

    def add(self, test, name, capability, description=''):
        test.name, test.capability, test.description = name, capability, description
        self.tests[name] = test
        self.info[name]['capability'] = capability
        self.info[name]['description'] = description
"""

_NAMES = (
    "checklist",
    "checklist.expect",
    "checklist.test_types",
    "checklist.test_suite",
    "munch",
    "dill",
    "dill._dill",
)


def _dill_module() -> types.ModuleType:
    """A stand-in ``dill._dill``: the helper names the released pickles call (never called here)."""
    mod = types.ModuleType("dill._dill")
    for name in ("_create_function", "_load_type", "_create_cell", "_get_attr", "_import_module"):

        def helper(*args, _name=name):
            raise AssertionError(f"stand-in dill._dill.{_name} is only pickled by name")

        helper.__module__, helper.__name__, helper.__qualname__ = "dill._dill", name, name
        setattr(mod, name, helper)
    return mod


@contextmanager
def release_checklist():
    """The stand-in modules, registered only inside the block (the real ones restored after)."""
    saved = {k: v for k, v in sys.modules.items() if k in _NAMES or k.startswith(("checklist.", "dill."))}
    for name in saved:
        del sys.modules[name]
    mods: dict[str, types.ModuleType] = {}
    for name, src in [
        ("checklist", ""),
        ("munch", "class Munch(dict):\n    pass\n"),
        ("checklist.expect", EXPECT_2020),
        ("checklist.test_types", TYPES_2020),
        ("checklist.test_suite", SUITE_2020),
    ]:
        mod = types.ModuleType(name)
        mod.__file__ = f"<release stand-in {name}>"
        sys.modules[name] = mods[name] = mod
        exec(compile(src, mod.__file__, "exec"), mod.__dict__)
        if "." in name:
            setattr(mods["checklist"], name.split(".")[1], mod)
    dill = types.ModuleType("dill")
    dill._dill = _dill_module()
    sys.modules["dill"], sys.modules["dill._dill"] = dill, dill._dill
    try:
        yield types.SimpleNamespace(
            Expect=mods["checklist.expect"].Expect,
            MFT=mods["checklist.test_types"].MFT,
            INV=mods["checklist.test_types"].INV,
            DIR=mods["checklist.test_types"].DIR,
            TestSuite=mods["checklist.test_suite"].TestSuite,
            Munch=mods["munch"].Munch,
            dill=dill._dill,
        )
    finally:
        for name in _NAMES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


class _Call:
    """``func(*args)`` as a pickle REDUCE; one instance per call, so pickle memoizes it."""

    def __init__(self, func: Any, args: tuple):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args

    def __call__(self, *args: Any) -> Any:  # pickle wants a callable in a reduce tuple
        raise AssertionError("a pickled call is never made here")


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


class ReleasePickler(pickle.Pickler):
    """Pickles like dill 0.3.1 ``dump(suite, recurse=True)``, protocol 3 (see the module
    docstring); use inside ``release_checklist()``."""

    def __init__(self, file, helpers: types.ModuleType):
        super().__init__(file, protocol=3)
        self.h = helpers
        self._calls: dict[tuple, _Call] = {}

    def call(self, func: Any, *args: Any) -> _Call:
        key = (func.__name__, args)
        if key not in self._calls:
            self._calls[key] = _Call(func, args)
        return self._calls[key]

    def reducer_override(self, obj: Any) -> Any:
        h = self.h
        if isinstance(obj, types.FunctionType):
            module = sys.modules.get(obj.__module__ or "")
            if module is not None and getattr(module, obj.__qualname__, None) is obj:
                return NotImplemented  # importable: GLOBAL, as iter_with_optional
            code = obj.__code__
            names = _code_names(code)
            globs = {k: v for k, v in obj.__globals__.items() if k in names}
            for name in sorted(names - set(globs)):
                builtin = getattr(builtins, name, None)
                if builtin is not None:
                    globs[name] = builtin
            closure = tuple(obj.__closure__) if obj.__closure__ else None
            return h._create_function, (code, globs, obj.__name__, obj.__defaults__, closure, {}, None)
        if isinstance(obj, types.CodeType):
            fields = (
                obj.co_argcount,
                obj.co_kwonlyargcount,
                obj.co_nlocals,
                obj.co_stacksize,
                obj.co_flags,
                obj.co_code,
                obj.co_consts,
                obj.co_names,
                obj.co_varnames,
                "/home/user/checklist/checklist/expect.py",
                obj.co_name,
                obj.co_firstlineno,
                b"\x00\x01",
                obj.co_freevars,
                obj.co_cellvars,
            )
            return self.call(h._load_type, "CodeType"), fields
        if isinstance(obj, types.CellType):
            return h._create_cell, (obj.cell_contents,)
        if isinstance(obj, types.BuiltinFunctionType) and getattr(obj, "__self__", None) is builtins:
            return h._get_attr, ("builtins", obj.__name__)
        if isinstance(obj, type) and obj.__module__ == "builtins":
            return h._load_type, ("ClassType" if obj is type else obj.__name__,)
        if isinstance(obj, types.ModuleType):
            return h._import_module, (obj.__name__,)
        if isinstance(obj, np.ndarray):
            _, args, state = obj.__reduce__()
            rebuild = self.call(
                h._get_attr, self.call(h._import_module, "numpy.core._multiarray_umath"), "_reconstruct"
            )
            return rebuild, args, state
        return NotImplemented


def dump_release(suite: Any, helpers: types.ModuleType) -> bytes:
    """``suite`` pickled as CheckList's released files are; call inside ``release_checklist()``."""
    buffer = io.BytesIO()
    ReleasePickler(buffer, helpers).dump(suite)
    return buffer.getvalue()


# -- CheckList's verdicts, computed with the stand-in Expect (the reference for checkray's) --


class _Results:
    def __init__(self, preds: list, confs: list):
        self.preds, self.confs = preds, confs


def checklist_passed(test: Any, preds: list, confs: list) -> list[bool | None]:
    """``test.results.passed`` as CheckList computes it: ``Expect.aggregate(expect(test),
    agg_fn)``; ``preds``/``confs`` shaped as ``test.data`` (a list per list test case)."""
    expect_module = sys.modules["checklist.expect"]
    test.results = _Results(preds, confs)
    try:
        return expect_module.Expect.aggregate(test.expect(test), test.agg_fn)
    finally:
        del test.results


def checklist_stats(passed: list[bool | None]) -> dict[str, Any]:
    """``AbstractTest.get_stats``: fails, filtered (None) and fail rate over the rest."""
    fails = sum(1 for p in passed if p is False)
    filtered = sum(1 for p in passed if p is None)
    kept = len(passed) - filtered
    return {"testcases": len(passed), "fails": fails, "filtered": filtered, "fail_rate": fails / kept if kept else None}
