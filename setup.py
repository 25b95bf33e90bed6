"""The package list of checkray's distribution; everything else is in pyproject.toml.

``engine/``, ``actors/`` and ``jobs/`` stay at the top of the repository and ship as
``checkray.engine``, ``checkray.actors`` and ``checkray.jobs`` (pyproject.toml's
``[tool.setuptools.package-dir]``). setuptools' ``packages.find`` cannot rename what it
finds, so the list is computed here from the folders: a new subpackage ships without an
edit anywhere. Folders without ``__init__.py`` (``engine/html``, ``jobs/prompts``) are
listed too, as the packages their data files belong to.
"""

from setuptools import find_namespace_packages, setup

LAYERS = ("engine", "actors", "jobs")

layer_packages = find_namespace_packages(include=[pattern for layer in LAYERS for pattern in (layer, f"{layer}.*")])
setup(packages=["checkray", *(f"checkray.{name}" for name in sorted(layer_packages))])
