"""Dimension reduction and clustering behind one small interface, CPU or GPU.

umap-learn and scikit-learn on CPU; cuML (same constructor arguments, same
``fit``/``transform``/``predict``) when Ray reports a GPU. Only the import differs, so
the CPU path that tests run is the GPU path's code too.

Large corpora: fit on a bounded random sample, then transform/predict every document
in chunks, so memory does not grow with the corpus (BERTopic's approach for big data).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from checkray.engine.config import ClustererConfig, ReducerConfig
from checkray.engine.openmp import nesting_kept
from checkray.engine.runtime import Device


class Reducer(Protocol):
    def fit_transform(self, X: np.ndarray) -> np.ndarray: ...
    def transform(self, X: np.ndarray) -> np.ndarray: ...


class Clusterer(Protocol):
    def fit(self, X: np.ndarray) -> Clusterer: ...
    def predict(self, X: np.ndarray) -> np.ndarray: ...


def make_reducer(
    cfg: ReducerConfig,
    device: Device,
    seed: int,
    n_components: int | None = None,
    knn: tuple[np.ndarray, np.ndarray] | None = None,
    n_epochs: int | None = None,
) -> Reducer:
    """UMAP on ``device``. ``knn``: the exact neighbour graph of the points it will be fitted
    on (``exact_knn``; CPU only), so umap-learn skips pynndescent's approximate search,
    and a model fitted so cannot ``transform`` new points. ``n_epochs``: None for the
    library's default."""
    kwargs = {} if n_epochs is None else {"n_epochs": n_epochs}
    if device == "gpu":
        from cuml.manifold import UMAP  # GPU image only (extra 'gpu-cluster')
    else:
        from umap import UMAP

        cache_numba_kernels()
        if knn is not None:
            import warnings

            kwargs["precomputed_knn"] = knn
            # umap-learn warns at fit that such a model cannot transform; it is never asked to
            warnings.filterwarnings("ignore", message=r"precomputed_knn\[2\]", category=UserWarning)
    umap = UMAP(
        n_components=n_components or cfg.n_components,
        n_neighbors=cfg.n_neighbors,
        min_dist=cfg.min_dist,
        metric=cfg.metric,
        random_state=seed,
        **kwargs,
    )
    return umap if device == "gpu" else NestingKeptReducer(umap)


class NestingKeptReducer:
    """umap-learn's UMAP with OpenMP nesting restored after each call (its numba kernels
    turn nesting on, which slows PyTorch in the same process: ``engine/openmp.py``)."""

    def __init__(self, umap):
        self.umap = umap

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        with nesting_kept():
            return self.umap.fit_transform(X)

    def transform(self, X: np.ndarray) -> np.ndarray:
        with nesting_kept():
            return self.umap.transform(X)


def exact_knn(X: np.ndarray, n_neighbors: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Every row's ``n_neighbors`` nearest rows by ``metric`` (brute force: matrix products
    for cosine, scikit-learn otherwise), itself first, as umap-learn's ``precomputed_knn`` wants them: (indices, distances).

    For a fit sample of up to ``ReducerConfig.exact_knn_below`` points this costs about a
    second on 2 cores, where pynndescent's search compiles a numba kernel that its cache
    cannot keep (``nn_descent`` uses dynamic globals) in every new process; and the graph
    is exact rather than approximate. A duplicate of a row may sort before the row itself:
    the row is put first, the duplicate kept as its nearest other point."""
    n = len(X)
    k = min(n_neighbors + 1, n)
    if metric == "cosine":
        dist, idx = _cosine_knn(np.asarray(X, dtype=np.float32), k)
    else:
        from sklearn.neighbors import NearestNeighbors

        dist, idx = NearestNeighbors(n_neighbors=k, metric=metric, algorithm="brute").fit(X).kneighbors(X)
    rows = np.arange(n)[:, None]
    others = np.argsort(idx == rows, axis=1, kind="stable")[:, : n_neighbors - 1]  # non-self first, in order
    indices = np.hstack([rows, np.take_along_axis(idx, others, axis=1)]).astype(np.int32)
    distances = np.hstack([np.zeros((n, 1)), np.take_along_axis(dist, others, axis=1)])
    return indices, np.clip(distances, 0.0, None).astype(np.float32)


_CACHED_PACKAGES = ("umap.", "pynndescent.")
_kernels_cached = False


def cache_numba_kernels() -> int:
    """Let numba keep umap-learn's and pynndescent's compiled kernels on disk.

    Both compile most of their numba kernels without ``cache=True``, so every new process
    compiled them again, which cost more than the layout itself (figures in docs/cache.md).
    ``Dispatcher.enable_caching`` is what ``@njit(cache=True)`` itself calls; the kernels
    land in numba's usual cache (``__pycache__`` beside the source, or ``NUMBA_CACHE_DIR``),
    keyed by numba on the source file and the CPU, so a changed package or machine
    recompiles. Kernels numba cannot cache (dynamic globals, functions passed as
    arguments) still compile. Returns how many kernels this call switched to caching.
    """
    global _kernels_cached
    if _kernels_cached:
        return 0
    import sys

    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    enabled = 0
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_CACHED_PACKAGES):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, Dispatcher) and isinstance(value._cache, NullCache):
                value.enable_caching()
                enabled += 1
    _kernels_cached = True
    return enabled


def make_clusterer(cfg: ClustererConfig, device: Device, seed: int) -> Clusterer:
    if device == "gpu":
        from cuml.cluster import KMeans
    else:
        from sklearn.cluster import KMeans
    return KMeans(n_clusters=cfg.n_clusters, n_init=cfg.n_init, random_state=seed)


def fit_sample_index(n: int, fit_sample: int, seed: int) -> np.ndarray:
    """Sorted positions of the documents a model is fitted on (all, if few enough)."""
    if n <= fit_sample:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=fit_sample, replace=False))


def to_numpy(values) -> np.ndarray:
    """cuML returns device arrays; bring them to host memory."""
    if hasattr(values, "get"):
        values = values.get()
    elif hasattr(values, "to_numpy"):
        values = values.to_numpy()
    return np.asarray(values)


def _cosine_knn(X: np.ndarray, k: int, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(distances, indices) of every row's ``k`` nearest rows by cosine distance, nearest
    first: one matrix product per ``chunk`` rows (a few hundred MB at most), then a
    partial sort of each row."""
    unit = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    dist, idx = np.empty((len(X), k), np.float64), np.empty((len(X), k), np.int64)
    for lo in range(0, len(X), chunk):
        d = 1.0 - unit[lo : lo + chunk] @ unit.T
        part = np.argpartition(d, k - 1, axis=1)[:, :k]
        near = np.take_along_axis(d, part, axis=1)
        order = np.argsort(near, axis=1, kind="stable")
        idx[lo : lo + chunk] = np.take_along_axis(part, order, axis=1)
        dist[lo : lo + chunk] = np.take_along_axis(near, order, axis=1)
    return dist, idx
