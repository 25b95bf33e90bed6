"""Nearest-neighbour distances over a whole dictionary (COSTELLO's Algorithm 2, lines 6-9).

Every dictionary word's embedding is compared with every other one, a block of rows at a
time, so memory stays at ``block x n`` whatever the vocabulary size (30k tokens for the
BERT-family tokenizers: a full 30k x 30k float32 matrix would be 3.6 GB).

* L2 and cosine: one matrix product per block (``|x|^2 + |y|^2 - 2 x.y``; cosine on
  unit rows) in torch, on whatever device the caller names (``cpu`` or ``cuda``): the
  CPU and the GPU path are the same code. The product only *chooses* each row's nearest
  neighbour; the distance to it is then recomputed exactly in float64, so the float32
  cancellation of the expansion never reaches the thresholds.
* L1 has no matrix-product form. On a GPU it is ``torch.cdist(p=1)``; on a CPU a numba
  kernel (row-parallel, vectorised inner loop; about 9x torch's CPU ``cdist`` here).

Zero vectors (words a static-vector model does not know) are left out, as before.
``nearest_neighbour_distances(X, metric, rows=(a, b))`` computes rows ``a:b`` only, so a
pool of actors can split one dictionary between them (``actors/costello/neighbours.py``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from checkray.engine.costello.distances import distance

METRICS = ("l1", "l2", "cos")


def usable_rows(vectors: np.ndarray) -> np.ndarray:
    """The dictionary without zero vectors (unknown words of a static-vector model)."""
    X = np.ascontiguousarray(vectors, dtype=np.float32)
    X = X[np.linalg.norm(X, axis=1) > 0]
    if len(X) < 2:
        raise ValueError("the threshold dictionary needs at least two embeddable words")
    return X


@lru_cache(maxsize=1)
def _l1_kernel():
    from numba import njit, prange

    @njit(parallel=True, fastmath=True, cache=False)
    def l1_min(X, start, stop, out_dist, out_idx):  # pragma: no cover - compiled
        n, d = X.shape
        for ii in prange(stop - start):
            i = start + ii
            best = np.float32(np.inf)
            arg = -1
            xi = X[i]
            for j in range(n):
                xj = X[j]
                s = np.float32(0.0)
                for k in range(d):
                    s += abs(xi[k] - xj[k])
                if s < best and j != i:
                    best = s
                    arg = j
            out_dist[ii] = best
            out_idx[ii] = arg

    return l1_min


def _argmin_block(X, start: int, stop: int, metric: str, device: str):
    """Index of each row's nearest other row, for rows start:stop (torch, any device)."""
    import torch

    block = X[start:stop]
    if metric == "l2":
        sq = (X * X).sum(dim=1)
        score = sq[start:stop, None] + sq[None, :] - 2.0 * (block @ X.T)
    elif metric == "cos":
        unit = X / X.norm(dim=1, keepdim=True)
        score = -(unit[start:stop] @ unit.T)
    elif metric == "l1":
        score = torch.cdist(block, X, p=1)
    else:
        raise ValueError(f"unknown distance '{metric}' (have: {', '.join(METRICS)})")
    score[torch.arange(stop - start, device=score.device), torch.arange(start, stop, device=score.device)] = float(
        "inf"
    )
    return score.argmin(dim=1).cpu().numpy()


def exact_distances(X: np.ndarray, rows: np.ndarray, other: np.ndarray, metric: str) -> np.ndarray:
    """float64 distances between X[rows] and X[other], row by row."""
    A = np.asarray(X[rows], dtype=np.float64)
    B = np.asarray(X[other], dtype=np.float64)
    return distance(A, B, metric)


def nearest_neighbour_distances(
    vectors: np.ndarray,
    metric: str,
    device: str = "cpu",
    rows: tuple[int, int] | None = None,
    block: int = 1024,
    threads: int | None = None,
    *,
    prepared: bool = False,
) -> np.ndarray:
    """For every row in ``rows`` (default: all) of the dictionary, the distance to its
    nearest other row. ``prepared``: ``vectors`` already went through ``usable_rows``."""
    import torch

    X = vectors if prepared else usable_rows(vectors)
    start, stop = rows or (0, len(X))
    if threads:
        torch.set_num_threads(threads)
    out = np.empty(stop - start)
    if metric == "l1" and not device.startswith("cuda"):
        import numba

        if threads:
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        dist = np.empty(stop - start, dtype=np.float32)
        idx = np.empty(stop - start, dtype=np.int64)
        from checkray.engine.openmp import nesting_kept

        with nesting_kept():  # numba's OpenMP layer would leave nesting on for PyTorch
            _l1_kernel()(X, start, stop, dist, idx)
        return exact_distances(X, np.arange(start, stop), idx, metric)
    T = torch.from_numpy(np.array(X, copy=True)).to(device)  # object-store arrays are read-only
    with torch.no_grad():
        for a in range(start, stop, block):
            b = min(a + block, stop)
            nearest = _argmin_block(T, a, b, metric, device)
            out[a - start : b - start] = exact_distances(X, np.arange(a, b), nearest, metric)
    return out


def brute_force(vectors: np.ndarray, metric: str) -> np.ndarray:
    """The same by a full pairwise matrix in float64 (tests and small dictionaries)."""
    X = usable_rows(vectors).astype(np.float64)
    n = len(X)
    out = np.empty(n)
    for i in range(n):
        d = distance(np.repeat(X[i : i + 1], n, axis=0), X, metric)
        d[i] = np.inf
        out[i] = d.min()
    return out
