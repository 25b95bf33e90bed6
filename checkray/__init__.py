"""checkray: behavioral test suites for NLP models, generated and run on Ray.

The repository's ``engine/``, ``actors/`` and ``jobs/`` import as ``checkray.engine``,
``checkray.actors`` and ``checkray.jobs`` (symlinks here; real copies in a wheel).
The notebook API (``jobs/api.py``) is exposed lazily: ``import checkray`` imports
neither Ray nor torch until a job runs.

    import checkray
    res = checkray.benchmark("runs/zoo/zoo.yaml", ["suite.parquet"])
    res.summary, res.failures("tfidf_lr", "Negation"), res.to_html()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkray.engine import __version__

__all__ = ["__version__", "topics", "zoo", "benchmark", "open_run", "cli", "Run", "Results", "Models", "load_config"]
API = frozenset(__all__) - {"__version__", "load_config"}

if TYPE_CHECKING:  # for editors and type checkers; at run time these load on first use
    from checkray.jobs.api import Models, Results, Run, benchmark, cli, open_run, topics, zoo
    from checkray.jobs.config import load_config


def __getattr__(name: str) -> Any:
    if name in API:
        from checkray.jobs import api

        return getattr(api, name)
    if name == "load_config":
        from checkray.jobs.config import load_config

        return load_config
    raise AttributeError(f"module 'checkray' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(__all__)
