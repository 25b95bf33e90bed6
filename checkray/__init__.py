"""checkray: behavioral test suites for NLP models, generated and run on Ray.

The repository's top-level ``engine/``, ``actors/`` and ``jobs/`` import as
``checkray.engine``, ``checkray.actors`` and ``checkray.jobs``, and only under those
names. In a wheel they are real subpackages of ``checkray``. In a source tree (a checkout,
or the working dir that ``ray job submit --working-dir .`` uploads) they sit beside this
package: importing ``checkray`` then puts a finder first on ``sys.meta_path`` that loads
them from the folders beside the ``checkray/`` it was loaded from, so an uploaded tree
runs its own code even where a node has another checkray installed.

The notebook API (``jobs/api.py``) is exposed lazily: ``import checkray`` imports
neither Ray nor torch until a job runs.

    import checkray
    res = checkray.benchmark("runs/zoo/zoo.yaml", ["suite.parquet"])
    res.summary, res.failures("tfidf_lr", "Negation"), res.to_html()
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from typing import TYPE_CHECKING, Any

_LAYERS = ("engine", "actors", "jobs")


class _LayerFinder:
    """Finds exactly ``checkray.engine``, ``checkray.actors`` and ``checkray.jobs`` in the
    folders of a source tree; their submodules then load through the package's ``__path__``."""

    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        package, _, layer = fullname.partition(".")
        if package != __name__ or layer not in _LAYERS:
            return None
        init = self.root / layer / "__init__.py"
        if not init.is_file():
            return None
        return spec_from_file_location(fullname, init, submodule_search_locations=[str(init.parent)])


def _install_layer_finder() -> None:
    here = Path(__file__).resolve().parent
    if (here / _LAYERS[0]).is_dir():  # a wheel: the layers are checkray's own subpackages
        return
    # First, ahead of any installed checkray's finder (an editable install maps these names too);
    # a previous copy of this module's finder (a re-import) is replaced, not stacked.
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__qualname__ != _LayerFinder.__qualname__]
    sys.meta_path.insert(0, _LayerFinder(here.parent))


_install_layer_finder()

from checkray.engine import __version__  # noqa: E402  (the finder above must be in place first)

__all__ = [
    "__version__",
    "run",
    "topics",
    "zoo",
    "benchmark",
    "open_run",
    "cli",
    "Run",
    "RunReport",
    "Results",
    "Models",
    "load_config",
]
API = frozenset(__all__) - {"__version__", "load_config"}

if TYPE_CHECKING:  # for editors and type checkers; at run time these load on first use
    from checkray.jobs.api import Models, Results, Run, RunReport, benchmark, cli, open_run, run, topics, zoo
    from checkray.jobs.config import load_config


def _job_functions() -> list[str]:
    """``checkray.mft``, ``checkray.costello``, ...: one per command of the job registry
    (``jobs/api.py: job_function``), besides the hand-written ones above."""
    from checkray.jobs.api import job_functions

    return [n for n in job_functions() if n not in API]


def __getattr__(name: str) -> Any:
    if name in API:
        from checkray.jobs import api

        return getattr(api, name)
    if name == "load_config":
        from checkray.jobs.config import load_config

        return load_config
    if not name.startswith("_") and name in _job_functions():
        from checkray.jobs.api import job_function

        return job_function(name)
    raise AttributeError(f"module 'checkray' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted([*__all__, *_job_functions()])
