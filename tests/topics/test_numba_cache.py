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
