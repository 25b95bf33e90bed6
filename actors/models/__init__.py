"""Adapters for models under test. Importing this package registers every family."""

from actors.models import callable_model  # noqa: F401
