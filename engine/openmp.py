"""Keep numba's OpenMP nesting from leaking into PyTorch in the same process.

numba's OpenMP threading layer turns nested parallelism on (``omp_set_nested`` /
``omp_set_max_active_levels``) in the runtime it binds, and leaves it on. Where PyTorch
resolved the same ``libgomp`` (which one a process binds depends on load order), every
MKL ``sgemm`` PyTorch calls inside its own parallel region then opens a nested team and
creates its threads anew: on 2 cores a MiniLM forward pass ran about 20 times slower
after a UMAP layout in the same process. ``nesting_kept`` puts every loaded OpenMP
runtime's level back as it was before the block (and at one level for a runtime the
block loaded), for the calling thread, whose settings numba changed.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator


def openmp_runtimes() -> list[str]:
    """Paths of the OpenMP runtimes loaded in this process (GNU, LLVM or Intel)."""
    from threadpoolctl import threadpool_info

    return sorted({info["filepath"] for info in threadpool_info() if info.get("user_api") == "openmp"})


def _runtime(path: str):
    try:
        lib = ctypes.CDLL(path)
    except OSError:  # a runtime that cannot be opened again by path: nothing to restore
        return None
    needed = ("omp_get_max_active_levels", "omp_set_max_active_levels", "omp_get_nested", "omp_set_nested")
    return lib if all(hasattr(lib, name) for name in needed) else None


Nesting = tuple[int, int]  # (max active levels, nested flag)


def nesting_levels() -> dict[str, Nesting]:
    """Each loaded runtime's (``omp_get_max_active_levels()``, ``omp_get_nested()``) for the
    calling thread. Both are kept: older libgomp holds the nested flag apart from the levels
    (its default is unlimited levels with nesting off), newer libgomp derives one from the other."""
    levels = {}
    for path in openmp_runtimes():
        lib = _runtime(path)
        if lib is not None:
            levels[path] = (int(lib.omp_get_max_active_levels()), int(lib.omp_get_nested()))
    return levels


def set_nesting_levels(levels: dict[str, Nesting], default: Nesting = (1, 0)) -> None:
    """Set each loaded runtime's nesting from ``levels`` (``default``, off, for one not in it);
    the flag first, since setting it on newer libgomp also sets the levels."""
    for path in openmp_runtimes():
        lib = _runtime(path)
        if lib is not None:
            max_levels, nested = levels.get(path, default)
            lib.omp_set_nested(ctypes.c_int(nested))
            lib.omp_set_max_active_levels(ctypes.c_int(max_levels))


@contextlib.contextmanager
def nesting_kept() -> Iterator[None]:
    """Run a block that may call numba's parallel kernels; restore OpenMP nesting after it."""
    before = nesting_levels()
    try:
        yield
    finally:
        set_nesting_levels(before)
