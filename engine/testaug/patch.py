"""Patched failure rate (TestAug §5.2.1, Table 3), the pure part: which cases patch and
which test.

Per seed: merge the suites T_1..T_N, sample a common test set T_test from the merged
cases, and for every trainable zoo model and every suite n refit the model on its
original training data plus T_n minus T_test (``actors/testaug/patch.py``); the failure
rate of the refitted model on T_test is suite n's patched failure rate (lower: the suite
taught the model more, i.e. found more of its bugs). ``testaug_table3``
(``engine/testaug/tables.py``) reports it as mean ± std over the seeds.

A case whose label the model cannot produce (neutral for a binary model) is not used for
training, and by default (``patch.test_cases: trainable``) not for testing either:
patching a binary model with polar cases makes it surer, so its failures on neutral cases
under CheckList's band rule grow whichever suite patched it, which says nothing about the
suite. With ``test_cases: all`` they are tested by the band rule, as in the benchmark.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.schema import make_cases

# Table 3's suites, in its column order: T_CheckList, T_TestAug, T_TestAug without the
# generated cases (expansion only), T_TestAug without the expansion (generated only).
TABLE3_SUITES = ("T_CheckList", "T_TestAug", "T_TestAug\\T_GPT", "T_TestAug\\T_Expansion")
UNPATCHED = "Unpatched"  # the model as it is, on the same common test set


def table3_suites(suite: pa.Table, baseline: pa.Table, suite_name: str) -> dict[str, pa.Table]:
    """The suites Table 3 compares, from the TestAug suite (``<suite_name>-gpt`` and
    ``<suite_name>-expansion``) and the template-only baseline."""
    gpt = suite.filter(pc.equal(suite.column("suite"), f"{suite_name}-gpt"))
    expansion = suite.filter(pc.equal(suite.column("suite"), f"{suite_name}-expansion"))
    return dict(zip(TABLE3_SUITES, (baseline, suite, expansion, gpt)))


def case_key(row: Mapping) -> tuple:
    """A case, whichever suite holds it: its text, pair and expected label."""
    return row["text"], row["text_pair"], row["expected_label"]


def merged_cases(suites: Mapping[str, pa.Table]) -> dict[tuple, dict]:
    """The single-text cases of every suite, each once (the zoo's models read single texts)."""
    merged: dict[tuple, dict] = {}
    for table in suites.values():
        for row in table.to_pylist():
            if row["text_pair"] is None:
                merged.setdefault(case_key(row), row)
    return merged


@dataclass
class CommonTest:
    """One seed's split: the common test set and each suite's remainder to patch with."""

    test: pa.Table  # the test-case schema
    remainders: dict[str, list[dict]]  # suite name -> its single-text cases not in the test set


def common_test_split(
    suites: Mapping[str, pa.Table], merged: Mapping[tuple, dict], seed: int, test_fraction: float
) -> CommonTest:
    """``test_fraction`` of the merged cases (at least one), drawn with ``seed``."""
    keys = sorted(merged, key=str)
    rng = np.random.default_rng(seed)
    n_test = max(1, int(round(test_fraction * len(keys))))
    test_keys = {keys[i] for i in rng.choice(len(keys), size=n_test, replace=False)} if keys else set()
    test = make_cases([{**merged[k], "suite": "common-test", "case_id": None} for k in sorted(test_keys, key=str)])
    remainders = {
        name: [r for r in t.to_pylist() if r["text_pair"] is None and case_key(r) not in test_keys]
        for name, t in suites.items()
    }
    return CommonTest(test, remainders)


def cases_with_labels(test: pa.Table, labels: Collection[str]) -> pa.Table:
    """The cases whose expected label is one of ``labels`` (what a model can produce)."""
    wanted = set(labels)
    return test.filter(pa.array([g in wanted for g in test.column("expected_label").to_pylist()]))
