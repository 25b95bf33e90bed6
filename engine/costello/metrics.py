"""COSTELLO validation (Algorithms 1 and 2) and its downstream ground truth (§5.1.3).

* Distances between embeddings (``distances.py``): L1, L2 and cosine (1 - cosine similarity).
* Adaptive thresholds (Algorithm 2): every dictionary word is embedded on its own, each
  word's distance to its nearest neighbour is taken, and theta is ``zero``, the ``min``
  of those distances, ``mu-2sigma`` or ``mu-sigma`` (sigma: the standard deviation; the
  authors' code subtracts 2*sqrt(sigma), which is not what the paper states). A negative
  threshold is clamped to 0, as the paper notes for NLPCloud. The nearest neighbours
  themselves: ``neighbours.py``.
* Verdict (Algorithm 1): a triple violates its CR when d(s, s+) - d(s, s-) > theta.
* Ground truth: n small MLPs (the authors' 14 architectures) trained on corpus embeddings of the model; per triple,
  F = |DC(e) - DC(e+)| and G = |DC(e) - DC(e-)| over the n classifiers (L1 over the
  class-probability vector), and one-tailed paired Wilcoxon signed-rank tests:
  GT_A (clearly buggy): F significantly greater than G (p < alpha);
  GT_B (potentially buggy): F not significantly less than G (p >= alpha).
* Precision P_A / P_B: share of reported violations that GT_A / GT_B call buggy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

THRESHOLDS = ("zero", "min", "mu-2sigma", "mu-sigma")


def single_blas_thread():
    """Small matrices: BLAS thread pools only spin against each other (and against the
    embedding actors); one thread was 13x faster for the MLPs on a busy 2-core machine."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def thresholds(nn: np.ndarray) -> dict[str, float]:
    """The four thresholds from nearest-neighbour distances; negatives clamp to 0."""
    mu, sigma = float(np.mean(nn)), float(np.std(nn))
    raw = {"zero": 0.0, "min": float(np.min(nn)), "mu-2sigma": mu - 2 * sigma, "mu-sigma": mu - sigma}
    return {name: max(0.0, value) for name, value in raw.items()}


def violates(d_pos: np.ndarray, d_neg: np.ndarray, theta: float) -> np.ndarray:
    return (np.asarray(d_pos) - np.asarray(d_neg)) > theta


# ------------------------------------------------------------------ ground truth


# The 14 downstream classifiers of the authors' code (DClassifier.CreateModel): hidden
# layers and activation ("identity": the purely linear stacks of simpleNet_1/2).
PAPER_CLASSIFIERS: tuple[tuple[tuple[int, ...], str], ...] = (
    ((256,), "identity"),
    ((512,), "identity"),
    ((256, 64), "identity"),
    ((512, 64), "identity"),
    ((256, 16), "relu"),
    ((512, 64), "relu"),
    ((256, 64), "relu"),
    ((1024,), "identity"),
    ((256, 32), "identity"),
    ((512, 32), "identity"),
    ((512, 256), "identity"),
    ((256, 16), "tanh"),
    ((512, 64), "tanh"),
    ((256, 64), "tanh"),
)


def classifier_layers(i: int) -> tuple[tuple[int, ...], str]:
    """The i-th downstream classifier: (hidden layers, activation), the paper's 14 in
    order, then again (with another seed) beyond 14."""
    return PAPER_CLASSIFIERS[i % len(PAPER_CLASSIFIERS)]


def train_classifiers(
    X: np.ndarray, y: Sequence[str], n: int, seed: int = 0, max_iter: int = 200, held_out: float = 0.2
) -> tuple[list, list[float]]:
    """n MLPs (the paper's 1-2 hidden-layer nets, Adam) on standardized embeddings;
    returns them and their accuracy on the held-out ``held_out`` share, which no
    classifier saw."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(y, dtype=object)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=held_out, random_state=seed, stratify=y)
    models, accs = [], []
    for i in range(n):
        layers, activation = classifier_layers(i)
        # Standardized inputs (a downstream user's first step; static vectors are ~0.1 in
        # scale and stall Adam otherwise); early stopping only when its 10 % split is large.
        clf = make_pipeline(
            StandardScaler(),
            MLPClassifier(
                hidden_layer_sizes=layers,
                activation=activation,
                max_iter=max_iter,
                early_stopping=len(ytr) >= 2000,
                n_iter_no_change=10,
                random_state=seed + i,
            ),
        )
        with warnings.catch_warnings(), single_blas_thread():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(Xtr, ytr)
            accs.append(float(clf.score(Xte, yte)))
        models.append(clf)
    return models, accs


def classifier_shifts(models: Sequence, seed: np.ndarray, other: np.ndarray) -> np.ndarray:
    """(n_classifiers, n_triples): |DC(e) - DC(e')| as the L1 norm of the probability change."""
    with single_blas_thread():
        return np.stack([np.abs(m.predict_proba(seed) - m.predict_proba(other)).sum(axis=1) for m in models])


def wilcoxon_pvalues(F: np.ndarray, G: np.ndarray, alternative: str) -> np.ndarray:
    """One-tailed paired Wilcoxon signed-rank p-value per triple (column), over the
    classifiers (rows). A triple where every classifier gives F == G has no evidence
    either way: p = 1."""
    from scipy.stats import wilcoxon

    F, G = np.asarray(F, dtype=np.float64), np.asarray(G, dtype=np.float64)
    p = np.ones(F.shape[1])
    informative = np.any(F != G, axis=0)
    if informative.any():
        res = wilcoxon(F[:, informative], G[:, informative], alternative=alternative, axis=0, zero_method="wilcox")
        p[informative] = np.nan_to_num(np.asarray(res.pvalue, dtype=np.float64), nan=1.0)
    return p


def ground_truth(F: np.ndarray, G: np.ndarray, alpha: float = 0.05) -> dict[str, np.ndarray]:
    p_greater = wilcoxon_pvalues(F, G, "greater")
    p_less = wilcoxon_pvalues(F, G, "less")
    return {"p_greater": p_greater, "p_less": p_less, "gt_a": p_greater < alpha, "gt_b": p_less >= alpha}


# ------------------------------------------------------------------ summaries


def precision(verdict: np.ndarray, gt: np.ndarray) -> float | None:
    verdict = np.asarray(verdict, dtype=bool)
    if not verdict.any():
        return None
    return float(np.asarray(gt, dtype=bool)[verdict].mean())


def fixing_rate(before: int, after: int) -> float | None:
    """Share of the violations (or GT-buggy triples) that the repair removed."""
    return None if before == 0 else (before - after) / before
