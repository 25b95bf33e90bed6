"""checkray's engine: pure stages over Arrow tables, and the shared core every job uses."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("checkray")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
