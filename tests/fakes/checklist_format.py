"""Writing CheckList-format suite pickles without the checklist package.

CheckList (marcotcr/checklist) saves a ``TestSuite`` with ``dill.dump(suite, recurse=True)``:
classes by reference (``checklist.test_types.MFT`` ...), expectation closures by value.
``checklist_modules()`` writes a stand-in ``checklist`` package to a temporary folder
(classes with CheckList's attribute names; an ``Expect`` whose builders return closures
with CheckList's function names and free variables), imports it, and removes it from
``sys.modules`` and ``sys.path`` afterwards, so a reader under test cannot import it.
Used by the import tests and ``bench/bench_benchmark.py``.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXPECT = """
class Expect:
    @staticmethod
    def testcase(fn):
        def expect(self):
            return [fn(x) for x in self.data]
        return expect

    @staticmethod
    def single(fn):
        def expect_fn(xs, preds, confs, labels=None, meta=None):
            return [fn(x, p, c, labels, meta) for x, p, c in zip(xs, preds, confs)]
        return Expect.testcase(expect_fn)

    @staticmethod
    def pairwise(fn):
        def expect_fn(xs, preds, confs, labels=None, meta=None):
            return [fn(preds[0], p, confs[0], c, labels, meta) for p, c in zip(preds, confs)]
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
            lbl = keep_label if keep_label is not None else orig_pred
            diff = conf[lbl] - orig_conf[lbl]
            return diff + tolerance >= 0 if increasing else diff - tolerance <= 0
        return Expect.pairwise(expect)
"""

TEST_TYPES = """
from .expect import Expect

class AbstractTest:
    def __init__(self, data, expect, labels=None, meta=None, agg_fn="all", name=None, capability=None,
                 description=None):
        self.data, self.expect, self.labels, self.meta, self.agg_fn = data, expect, labels, meta, agg_fn
        self.templates, self.print_first, self.run_idxs, self.result_indexes = None, None, None, None
        self.name, self.capability, self.description = name, capability, description

class MFT(AbstractTest):
    def __init__(self, data, expect=None, labels=None, **kw):
        super().__init__(data, expect or Expect.eq(), labels=labels, **kw)

class INV(AbstractTest):
    def __init__(self, data, expect=None, threshold=0.1, **kw):
        super().__init__(data, expect or Expect.inv(threshold), agg_fn="all_except_first", **kw)

class DIR(AbstractTest):
    def __init__(self, data, expect, **kw):
        super().__init__(data, expect, agg_fn="all_except_first", **kw)
"""

TEST_SUITE = """
from collections import OrderedDict

class TestSuite:
    def __init__(self):
        self.tests, self.info = OrderedDict(), {}

    def add(self, test, name, capability, description=""):
        test.name, test.capability, test.description = name, capability, description
        self.tests[name] = test
        self.info[name] = {"capability": capability, "description": description, "type": type(test).__name__.lower()}
"""

NAMES = ("checklist", "checklist.expect", "checklist.test_types", "checklist.test_suite")


@contextmanager
def checklist_modules() -> Iterator[types.SimpleNamespace]:
    """The stand-in ``checklist`` package, importable only inside the block."""
    saved = {name: sys.modules.pop(name, None) for name in NAMES}
    with tempfile.TemporaryDirectory(prefix="fake-checklist-") as root:
        package = Path(root) / "checklist"
        package.mkdir()
        for name, text in (
            ("__init__", ""),
            ("expect", EXPECT),
            ("test_types", TEST_TYPES),
            ("test_suite", TEST_SUITE),
        ):
            (package / f"{name}.py").write_text(text)
        sys.path.insert(0, root)
        importlib.invalidate_caches()
        try:
            expect = importlib.import_module("checklist.expect")
            test_types = importlib.import_module("checklist.test_types")
            yield types.SimpleNamespace(
                Expect=expect.Expect,
                MFT=test_types.MFT,
                INV=test_types.INV,
                DIR=test_types.DIR,
                TestSuite=importlib.import_module("checklist.test_suite").TestSuite,
            )
        finally:
            sys.path.remove(root)
            for name, old in saved.items():
                sys.modules.pop(name, None)
                if old is not None:
                    sys.modules[name] = old


def dump_suite(suite, path) -> None:
    """Pickle ``suite`` as CheckList does (dill, ``recurse=True``), inside ``checklist_modules``."""
    import dill

    with open(path, "wb") as fh:
        dill.dump(suite, fh, recurse=True)
