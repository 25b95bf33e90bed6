"""checkray's engine: pure stages over Arrow tables, and the shared core every job uses."""

from importlib.metadata import PackageNotFoundError, version

# One name per module: from the repository root this folder would also import as `engine`,
# a second copy of every module (two classes, two registries); see checkray/__init__.py.
if __name__ != "checkray.engine":
    raise ImportError(f"import checkray.engine, not {__name__}: checkray's layers import only under checkray")

try:
    __version__ = version("checkray")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
