"""Row-wise distances between embeddings (COSTELLO's L1, L2 and cosine): the one
definition the thresholds, the nearest-neighbour search and the verdicts share."""

from __future__ import annotations

import numpy as np

DISTANCES = ("l1", "l2", "cos")


def distance(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    """Row-wise distance between two (n, d) matrices, in their own precision (float32
    embeddings stay float32: row-wise einsum, no float64 copies, no (n, d) temporaries
    beyond the difference)."""
    dtype = np.result_type(np.asarray(a).dtype, np.asarray(b).dtype, np.float32)
    a, b = np.asarray(a, dtype=dtype), np.asarray(b, dtype=dtype)
    if metric == "l1":
        return np.abs(a - b).sum(axis=1, dtype=np.float64)
    if metric == "l2":
        diff = a - b
        return np.sqrt(np.einsum("ij,ij->i", diff, diff, dtype=np.float64))
    if metric == "cos":
        dot = np.einsum("ij,ij->i", a, b, dtype=np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", a, a, dtype=np.float64) * np.einsum("ij,ij->i", b, b, dtype=np.float64))
        return 1.0 - dot / np.where(norms > 0, norms, 1.0)
    raise ValueError(f"unknown distance '{metric}' (have: {', '.join(DISTANCES)})")
