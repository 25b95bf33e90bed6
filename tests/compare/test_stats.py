"""McNemar's exact test, Holm, the paired bootstrap and the comparison table, by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from checkray.engine.compare.compare import compare_paired, flips
from checkray.engine.compare.stats import holm, mcnemar_exact, paired_bootstrap


def test_mcnemar_exact_hand_computed():
    # b=1, c=9: P(X <= 1) for X ~ Bin(10, 1/2) is (1 + 10) / 1024; two-sided doubles it.
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024, abs=1e-15)
    assert mcnemar_exact(1, 9) == pytest.approx(0.021484375, abs=1e-15)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0  # capped at 1
    assert mcnemar_exact(0, 9) == pytest.approx(2 / 512, abs=1e-15)
    for b, c in [(3, 17), (40, 60), (0, 1), (12, 12), (250, 310)]:
        exact = min(1.0, 2 * sum(math.comb(b + c, k) for k in range(min(b, c) + 1)) / 2 ** (b + c))
        assert mcnemar_exact(b, c) == pytest.approx(exact, rel=1e-9)
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(min(b, c), b + c, 0.5).pvalue, rel=1e-9)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_holm():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    out = holm([0.5, float("nan"), 0.01])
    assert out[0] == pytest.approx(0.5) and np.isnan(out[1]) and out[2] == pytest.approx(0.02)


def test_paired_bootstrap_is_seeded_and_brackets_the_difference():
    rng = np.random.default_rng(1)
    base = rng.random(400) < 0.7
    cand = base.copy()
    cand[:40] = ~cand[:40]  # 40 flips
    diff = cand.mean() - base.mean()
    one = paired_bootstrap(base, cand, samples=500, rng=np.random.default_rng(7))
    two = paired_bootstrap(base, cand, samples=500, rng=np.random.default_rng(7))
    other = paired_bootstrap(base, cand, samples=500, rng=np.random.default_rng(8))
    assert one == two and one != other
    assert one[0] <= diff <= one[1] and one[1] - one[0] < 0.1
    # Identical verdicts: no difference at all, whatever the draw.
    assert paired_bootstrap(base, base, samples=50) == (0.0, 0.0)
    assert all(np.isnan(paired_bootstrap(np.array([]), np.array([]))))


def test_cluster_bootstrap_moves_whole_test_cases():
    # One test case of 10 perturbations that all flip, among 10 single cases that do not:
    # resampling whole clusters gives a wider interval than resampling single rows.
    base = np.array([True] * 20)
    cand = np.array([False] * 10 + [True] * 10)
    clusters = np.array(["t0"] * 10 + [f"s{i}" for i in range(10)])
    rows = paired_bootstrap(base, cand, None, 2000, rng=np.random.default_rng(0))
    whole = paired_bootstrap(base, cand, clusters, 2000, rng=np.random.default_rng(0))
    assert (whole[1] - whole[0]) > (rows[1] - rows[0])


def _paired(b: int, c: int, both_pass: int, both_fail: int) -> pd.DataFrame:
    verdicts = [(True, False)] * b + [(False, True)] * c + [(True, True)] * both_pass + [(False, False)] * both_fail
    n = len(verdicts)
    return pd.DataFrame(
        {
            "suite": ["s"] * n,
            "capability": ["A"] * (b + c) + ["B"] * (both_pass + both_fail),
            "topic": [None] * n,
            "test_type": ["MFT"] * n,
            "case_id": [f"c{i}" for i in range(n)],
            "testcase": [f"c{i}" for i in range(n)],
            "text": [f"text <{i}>" for i in range(n)],
            "expected": ["positive"] * n,
            "base_pass": [v[0] for v in verdicts],
            "cand_pass": [v[1] for v in verdicts],
            "base_pred": ["positive"] * n,
            "cand_pred": ["negative"] * n,
        }
    )


def test_comparison_table_on_a_hand_computed_case():
    table = compare_paired(_paired(b=1, c=9, both_pass=5, both_fail=5), samples=300, seed=3).to_pylist()
    overall = next(r for r in table if r["level"] == "overall")
    assert (overall["n"], overall["pass_to_fail"], overall["fail_to_pass"]) == (20, 1, 9)
    assert (overall["both_pass"], overall["both_fail"]) == (5, 5)
    assert overall["baseline_pass_rate"] == pytest.approx(6 / 20)
    assert overall["candidate_pass_rate"] == pytest.approx(14 / 20)
    assert overall["diff"] == pytest.approx(0.4)
    assert overall["p_value"] == pytest.approx(0.021484375, abs=1e-15)
    assert overall["ci_low"] <= 0.4 <= overall["ci_high"]
    caps = {r["capability"]: r for r in table if r["level"] == "capability"}
    assert caps["A"]["p_value"] == pytest.approx(0.021484375) and caps["B"]["p_value"] == 1.0
    assert caps["A"]["p_holm"] == pytest.approx(2 * 0.021484375)  # two capabilities tested
    assert {r["level"] for r in table} == {"overall", "test_type", "capability", "test"}
    again = compare_paired(_paired(b=1, c=9, both_pass=5, both_fail=5), samples=300, seed=3)
    assert again.to_pylist() == table  # seeded
    flipped = flips(_paired(1, 9, 5, 5)).to_pylist()
    assert [r["direction"] for r in flipped] == ["pass->fail"] + ["fail->pass"] * 9
