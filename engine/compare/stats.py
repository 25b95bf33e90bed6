"""Paired statistics for two models judged on the same cases (pure, numpy/scipy).

* ``mcnemar_exact(b, c)``: McNemar's exact test. Only the discordant cases carry
  information about a difference in pass rates: ``b`` passed with the baseline and fail
  with the candidate, ``c`` the reverse. Under "no difference" each discordant case is
  a fair coin, so ``min(b, c)`` is Binomial(b + c, 1/2) and the two-sided p-value is
  ``min(1, 2 * P(X <= min(b, c)))`` (1 when there are no discordant cases). An unpaired
  test on the two pass rates ignores that both models saw the same cases and is far less
  sensitive (lm-evaluation-harness issue #3831).
* ``paired_bootstrap(base, cand, clusters, ...)``: a percentile interval of the pass-rate
  difference (candidate − baseline), resampling whole clusters (CheckList test cases:
  an INV/DIR original with its perturbations moves together) with replacement, the same
  draw for both models. Seeded: the same inputs and seed give the same interval.
* ``holm(pvalues)``: Holm's step-down adjustment for testing many capabilities at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` and ``c``."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    n = int(b) + int(c)
    if n == 0:
        return 1.0
    from scipy.stats import binom

    return float(min(1.0, 2.0 * binom.cdf(min(b, c), n, 0.5)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (NaN stays NaN and is not counted)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    if m == 0:
        return out.tolist()
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def group_seed(seed: int, key: str) -> np.random.Generator:
    """A generator for one group, from the run's seed and the group's name (independent of
    which other groups exist or in which order they are computed)."""
    h = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16)
    return np.random.default_rng([seed, h])


def paired_bootstrap(
    base: np.ndarray,
    cand: np.ndarray,
    clusters: np.ndarray | None = None,
    samples: int = 1000,
    level: float = 0.95,
    rng: np.random.Generator | None = None,
    max_block: int = 2_000_000,
) -> tuple[float, float]:
    """Percentile interval of mean(cand) − mean(base) over paired 0/1 verdicts.

    ``clusters`` (one label per case, any hashable values) makes whole clusters the
    resampling unit; None resamples single cases. Returns (nan, nan) for no cases."""
    base = np.asarray(base, dtype=float)
    cand = np.asarray(cand, dtype=float)
    if base.shape != cand.shape:
        raise ValueError("paired verdicts must have the same length")
    if base.size == 0 or samples <= 0:
        return float("nan"), float("nan")
    rng = rng or np.random.default_rng(0)
    if clusters is None:
        diff, size = cand - base, np.ones_like(base)
    else:
        _, inverse = np.unique(np.asarray(clusters), return_inverse=True)
        diff = np.bincount(inverse, weights=cand - base)
        size = np.bincount(inverse).astype(float)
    k = len(diff)
    if np.all(diff == 0):
        return 0.0, 0.0
    stats = np.empty(samples)
    block = max(1, max_block // k)
    for start in range(0, samples, block):
        rows = min(block, samples - start)
        idx = rng.integers(0, k, size=(rows, k))
        stats[start : start + rows] = diff[idx].sum(axis=1) / size[idx].sum(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return float(low), float(high)
