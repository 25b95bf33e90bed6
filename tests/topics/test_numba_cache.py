"""umap-learn's and pynndescent's numba kernels are compiled once per machine, not per process."""

import subprocess
import sys


def test_cpu_reducer_switches_the_kernels_to_numba_caching():
    # A fresh interpreter: whether caching is on is process state (nothing is compiled here).
    code = (
        "from numba.core.caching import NullCache\n"
        "from checkray.engine.config import ReducerConfig\n"
        "from checkray.engine.topics.reduce import cache_numba_kernels, make_reducer\n"
        "import umap.umap_\n"
        "assert isinstance(umap.umap_.smooth_knn_dist._cache, NullCache)\n"
        "make_reducer(ReducerConfig(), 'cpu', 0)\n"
        "assert not isinstance(umap.umap_.smooth_knn_dist._cache, NullCache)\n"
        "assert cache_numba_kernels() == 0  # once per process\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_exact_knn_puts_each_row_first_and_matches_brute_force():
    import numpy as np

    from checkray.engine.topics.reduce import exact_knn

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8)).astype(np.float32)
    X[7] = X[3]  # a duplicate: distance 0 to row 3, which may sort before row 7 itself
    idx, dist = exact_knn(X, 5, "cosine")
    assert idx.shape == dist.shape == (60, 5) and idx.dtype == np.int32 and dist.dtype == np.float32
    assert (idx[:, 0] == np.arange(60)).all() and (dist[:, 0] == 0).all()
    assert idx[7, 1] == 3 and idx[3, 1] == 7 and dist[7, 1] < 1e-6  # the duplicate is the nearest other
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    cos = 1 - unit @ unit.T
    np.fill_diagonal(cos, -1)  # self first
    want = np.argsort(cos, axis=1, kind="stable")[:, :5]
    assert all(set(a) == set(b) for a, b in zip(idx[[0, 10, 40]], want[[0, 10, 40]]))
    assert (np.diff(dist, axis=1) >= -1e-6).all()  # nearest first
