"""CheckList-format suite pickles without the checklist package.

CheckList (marcotcr/checklist) saves a ``TestSuite`` with ``dill.dump(suite, recurse=True)``:
classes by reference (``checklist.test_types.MFT`` ...), expectation closures by value.
``fake_checklist()`` registers stand-in ``checklist.*`` and ``munch`` modules (CheckList's
class and attribute names; an ``Expect`` whose static methods build closures with
CheckList's function names and free variables) only inside the block, so a loader that
imported them (or ran the pickled code) after it would fail. Used by the import tests
and ``bench/checklist_suite.py``.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager

FAKE_EXPECT = """
import numpy as np

def iter_with_optional(data, preds, confs, labels, meta):
    return zip(data, preds, confs, labels, meta)

class Expect:
    # Same function names and free variables as checklist/expect.py; simpler bodies.
    @staticmethod
    def testcase(fn):
        def expect(self):
            rows = iter_with_optional(self.data, self.results.preds, self.results.confs, self.labels, self.meta)
            return [fn(x, p, c, l, m) for x, p, c, l, m in rows]
        return expect

    @staticmethod
    def single(fn):
        def expect_fn(xs, preds, confs, label=None, meta=None):
            return np.array([fn(x, p, c, l, m) for x, p, c, l, m in iter_with_optional(xs, preds, confs, label, meta)])
        return Expect.testcase(expect_fn)

    @staticmethod
    def pairwise(fn):
        def expect_fn(xs, preds, confs, labels=None, meta=None):
            orig_pred, orig_conf = preds[0], confs[0]
            rows = iter_with_optional(xs, preds, confs, labels, meta)
            return np.array([fn(orig_pred, p, orig_conf, c, l, m) for _, p, c, l, m in rows])
        return Expect.testcase(expect_fn)

    @staticmethod
    def eq(val=None):
        def ret_fn(x, pred, conf, label=None, meta=None):
            return pred == (val if val is not None else label)
        return Expect.single(ret_fn)

    @staticmethod
    def inv(tolerance=0):
        def expect(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
            return pred == orig_pred or abs(conf[orig_pred] - orig_conf[orig_pred]) <= tolerance
        return Expect.pairwise(expect)

    @staticmethod
    def monotonic(label=None, increasing=True, tolerance=0.0):
        keep_label = label
        def expect(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
            label = keep_label if keep_label is not None else orig_pred
            diff = conf[label] - orig_conf[label]
            return diff + tolerance >= 0 if increasing else diff - tolerance <= 0
        return Expect.pairwise(expect)
"""

FAKE_TYPES = """
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
        if labels is not None and expect is None:
            expect = Expect.eq()
        super().__init__(data, expect, labels=labels, **kw)

class INV(AbstractTest):
    def __init__(self, data, expect=None, threshold=0.1, agg_fn='all_except_first', **kw):
        if expect is None:
            expect = Expect.inv(threshold)
        super().__init__(data, expect, agg_fn=agg_fn, print_first=True, **kw)

class DIR(AbstractTest):
    def __init__(self, data, expect, agg_fn='all_except_first', **kw):
        super().__init__(data, expect, agg_fn=agg_fn, print_first=True, **kw)
"""

FAKE_SUITE = """
from collections import OrderedDict, defaultdict

class TestSuite:
    def __init__(self, format_example_fn=None, print_fn=None):
        self.tests = OrderedDict()
        self.info = defaultdict(lambda: defaultdict(lambda: ''))
        self.format_example_fn = format_example_fn
        self.print_fn = print_fn
        self.test_ranges = {}

    def add(self, test, name=None, capability=None, description=None):
        test.name = name or test.name
        test.capability = capability or test.capability
        test.description = description or test.description
        self.tests[test.name] = test
        self.info[test.name]['capability'] = test.capability
        self.info[test.name]['type'] = type(test).__name__
        if test.description:
            self.info[test.name]['description'] = test.description
"""

FAKE_MUNCH = "class Munch(dict):\n    pass\n"
FAKE_NAMES = ("checklist", "checklist.expect", "checklist.test_types", "checklist.test_suite", "munch")


@contextmanager
def fake_checklist(by_reference: bool = True):
    """The fake CheckList modules, registered only inside the block. ``by_reference``
    makes them importable by dill (so classes pickle by name, as real suites do);
    otherwise dill pickles the classes by value."""
    saved = {k: v for k, v in sys.modules.items() if k in FAKE_NAMES or k.startswith("checklist.")}
    for name in saved:
        del sys.modules[name]
    mods = {}
    for name, src in [
        ("checklist", ""),
        ("munch", FAKE_MUNCH),
        ("checklist.expect", FAKE_EXPECT),
        ("checklist.test_types", FAKE_TYPES),
        ("checklist.test_suite", FAKE_SUITE),
    ]:
        mod = types.ModuleType(name)
        mod.__file__ = f"<fake {name}>"
        sys.modules[name] = mod
        exec(compile(src, mod.__file__, "exec"), mod.__dict__)
        mods[name] = mod
        if by_reference and "." in name:
            setattr(mods["checklist"], name.split(".")[1], mod)
    try:
        yield types.SimpleNamespace(
            Expect=mods["checklist.expect"].Expect,
            MFT=mods["checklist.test_types"].MFT,
            INV=mods["checklist.test_types"].INV,
            DIR=mods["checklist.test_types"].DIR,
            TestSuite=mods["checklist.test_suite"].TestSuite,
            Munch=mods["munch"].Munch,
        )
    finally:
        for name in FAKE_NAMES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def dump_suite(suite, path) -> None:
    """Pickle ``suite`` as CheckList's ``TestSuite.save`` does (dill, ``recurse=True``);
    call it inside ``fake_checklist()``."""
    import dill

    with open(path, "wb") as fh:
        dill.dump(suite, fh, recurse=True)
