"""numba's parallel kernels must not leave OpenMP nesting on for PyTorch in the same process.

In a demo process a UMAP layout left the shared libgomp at 255 nested levels, and every
PyTorch forward pass after it ran about 20 times slower (engine/openmp.py)."""

import subprocess
import sys


def test_nesting_kept_restores_a_level_the_block_changed():
    import ctypes

    import sklearn.cluster  # noqa: F401  (loads scikit-learn's OpenMP runtime)

    from checkray.engine.openmp import nesting_kept, nesting_levels, openmp_runtimes

    paths = openmp_runtimes()
    assert paths, "no OpenMP runtime loaded"
    before = nesting_levels()
    with nesting_kept():
        for path in paths:
            ctypes.CDLL(path).omp_set_nested(1)
            ctypes.CDLL(path).omp_set_max_active_levels(7)
        assert {nested for _, nested in nesting_levels().values()} == {1}
    assert nesting_levels() == before


def test_umap_layout_leaves_every_openmp_runtime_as_it_found_it():
    # A fresh interpreter: which runtime numba binds, and its levels, are process state.
    code = (
        "import numpy as np, torch\n"
        "from checkray.engine.config import ReducerConfig\n"
        "from checkray.engine.openmp import nesting_levels\n"
        "from checkray.engine.topics.reduce import make_reducer\n"
        "before = nesting_levels()\n"
        "X = np.random.default_rng(0).normal(size=(300, 16)).astype(np.float32)\n"
        "make_reducer(ReducerConfig(n_neighbors=10), 'cpu', 0, n_components=2).fit_transform(X)\n"
        "after = nesting_levels()\n"
        "changed = {p: (before.get(p), v) for p, v in after.items() if v != before.get(p, (v[0], 0))}\n"
        "assert not changed, changed\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
