"""Label maps: raw label values (``0``, ``1``) to label names (``negative``, ``positive``).

One syntax everywhere: ``--labels 0=negative,1=positive`` on every command that reads a
corpus (``corpus.labels`` in the config file) and on ``checkray import checklist``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from numbers import Integral, Real
from typing import Any

from checkray.engine.errors import InputError

EXAMPLE = "--labels 0=negative,1=positive"


def label_key(raw: Any) -> str:
    """The map key of a raw label: strings as they are, integers (and integral floats) by
    their digits (``1``, ``1.0`` and ``"1"`` are all ``"1"``). Booleans are not labels."""
    if isinstance(raw, str):
        return raw.strip()
    if isinstance(raw, bool) or not isinstance(raw, Real):
        raise ValueError(f"label key {raw!r} is neither a string nor a number")
    if isinstance(raw, Integral):
        return str(int(raw))
    if float(raw).is_integer():
        return str(int(raw))
    return str(raw)


def parse_label_map(spec: str | None, flag: str = "--labels") -> dict[str, str] | None:
    """``"0=negative,1=positive"`` -> ``{"0": "negative", "1": "positive"}``; None or blank: None.
    A part that is not KEY=NAME, or a key given twice, is a one-line ``InputError``."""
    if spec is None or not spec.strip():
        return None
    names: dict[str, str] = {}
    for part in spec.split(","):
        key, eq, name = part.partition("=")
        key, name = key.strip(), name.strip()
        if not eq or not key or not name:
            raise InputError(f"{flag}: '{part.strip()}' is not KEY=NAME (e.g. {EXAMPLE})")
        if key in names:
            raise InputError(f"{flag}: label '{key}' is given twice")
        names[key] = name
    return names


def label_map(value: Any, where: str = "corpus.labels") -> dict[str, str] | None:
    """A label map from config: a mapping (YAML ``{0: negative, 1: positive}``, integer keys
    allowed) or a ``--labels`` string. Raises ``ValueError`` (pydantic reports it)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_label_map(value, where)
        except InputError as exc:
            raise ValueError(str(exc)) from None
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping like {{0: negative, 1: positive}}, got {type(value).__name__}")
    out: dict[str, str] = {}
    for raw, name in value.items():
        key = label_key(raw)
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"label {key!r} must map to a non-empty name, got {name!r}")
        if not key:
            raise ValueError("an empty label key")
        if key in out:
            raise ValueError(f"label '{key}' is given twice")
        out[key] = name.strip()
    return out or None


def format_label_map(names: Mapping[str, str]) -> str:
    """``{"0": "negative"}`` -> ``0=negative``: the ``--labels`` value that gives this map."""
    return ",".join(f"{k}={v}" for k, v in names.items())


def suggest_flag(have: Mapping[str, str] | None, unknown: Iterable[str]) -> str:
    """The ``--labels`` a user could pass: the map they have plus ``KEY=...`` for each unknown."""
    parts = dict(have or {})
    parts.update({k: "..." for k in unknown})
    return f"--labels {format_label_map(parts)}"
