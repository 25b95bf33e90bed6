"""Peak memory of a process tree, sampled in a thread: what a run's steps and the memory
benches report."""

from __future__ import annotations

import os
import threading


class TreeRssSampler:
    """Peak of the summed RSS of a process and all its descendants, sampled in a thread.

    For a local ``ray.init`` the GCS, raylet and every Ray worker are descendants of the
    driver, so this is the whole job's footprint and excludes anyone else's Ray (a driver
    attached to a running cluster measures only itself). RSS counts shared pages (object
    store, torch libraries) once per process, so the sum overstates the true footprint;
    it does so equally at every corpus size.
    """

    def __init__(self, pid: int | None = None, interval: float = 0.2):
        import psutil

        self.root = psutil.Process(pid or os.getpid())
        self.interval = interval
        self.peak_total = 0
        self.peak_driver = 0
        self.peak_workers = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checkray-rss-sampler", daemon=True)

    def sample(self) -> None:
        import psutil

        driver = 0
        workers = 0
        try:
            driver = self.root.memory_info().rss
            children = self.root.children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            try:
                workers += child.memory_info().rss
            except psutil.Error:
                pass  # exited between listing and reading
        self.peak_driver = max(self.peak_driver, driver)
        self.peak_workers = max(self.peak_workers, workers)
        self.peak_total = max(self.peak_total, driver + workers)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeRssSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def mib(nbytes: float) -> float:
    return nbytes / (1024 * 1024)


def release_memory() -> None:
    """Hand freed memory back to the OS after a model held in this process is dropped
    (an encoder run in the driver): a collection, then glibc's ``malloc_trim``, which
    returns the freed arenas the allocator would otherwise keep resident. No-op where
    there is no glibc."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
