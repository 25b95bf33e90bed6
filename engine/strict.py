"""What YAML and pydantic let through and a config must not: duplicate keys, booleans
where numbers are expected (``n_clusters: yes`` is 1 to pydantic). ``engine/config.py``
applies both to every config section; infinities and NaN are refused there too
(``allow_inf_nan=False`` on ``Section``)."""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from yaml.constructor import ConstructorError

MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (PyYAML keeps the
    last value silently). Keys brought in by a merge (``<<: *defaults``) may be overridden."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # an unhashable key: the base class reports it
                    continue
                if first != key_node.start_mark.line + 1:
                    raise ConstructorError(
                        None, None, f"duplicate key '{key}' (first at line {first})", key_node.start_mark
                    )
        return super().construct_mapping(node, deep)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with duplicate keys refused (``StrictLoader``)."""
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass


def _flat(annotation: Any) -> list[Any]:
    """The alternatives of an annotation: ``int | None`` -> [int, NoneType]."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _flat(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [t for arg in get_args(annotation) for t in _flat(arg)]
    return [annotation]


def _takes_bool(options: list[Any]) -> bool:
    for t in options:
        if t is bool or t is Any or t is object:
            return True
        if get_origin(t) is Literal and any(isinstance(v, bool) for v in get_args(t)):
            return True
    return False


def bool_for_number(value: Any, annotation: Any) -> str | None:
    """Why ``value`` must be refused for ``annotation`` (a boolean where only numbers are
    expected, also inside lists and dicts), or None. Pydantic would read ``True`` as 1."""
    options = _flat(annotation)
    if isinstance(value, bool):
        numeric = any(t in (int, float) for t in options)
        if numeric and not _takes_bool(options):
            kind = "an integer" if int in options else "a number"
            return f"expected {kind}, got the boolean {str(value).lower()} (YAML reads yes/no/on/off as booleans)"
        return None
    for t in options:
        origin, args = get_origin(t), get_args(t)
        if origin in (list, tuple, set, frozenset, Sequence) and isinstance(value, list | tuple | set):
            elems = [args[0]] * len(value) if len(args) == 1 or (len(args) == 2 and args[1] is Ellipsis) else args
            for i, (v, a) in enumerate(zip(value, elems)):
                why = bool_for_number(v, a)
                if why:
                    return f"item {i}: {why}"
        if origin in (dict, Mapping) and isinstance(value, dict) and len(args) == 2:
            for k, v in value.items():
                why = bool_for_number(v, args[1])
                if why:
                    return f"'{k}': {why}"
    return None


class StrictInput(BaseModel):
    """Base of every model read from a user's file (config sections, model registries,
    template specs, CheckList mappings): infinities and NaN are refused for float fields,
    and a boolean where a number is expected is an error (pydantic reads ``yes`` as 1)."""

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        why = bool_for_number(value, field.annotation) if field is not None else None
        if why:
            raise ValueError(why)
        return value
