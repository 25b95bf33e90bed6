"""The JSON shapes a corpus file may have (``engine/corpus.py`` reads the other formats).

A ``.json`` file is one of:

- JSON Lines: one object per line (as ``.jsonl``/``.ndjson``);
- an array of objects: ``[{"text": ..., "label": ...}, ...]``;
- an object keyed by id whose values are ``[text, label]`` or ``[text]`` lists:
  ``{"0": ["a fine film", 1], ...}`` (the shape of the SST-2 and MRPC files of the
  COSTELLO release), read as columns ``id``, ``text`` and ``label``.

Anything else is a one-line ``InputError``.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson

from checkray.engine.errors import InputError

SHAPES = "JSON Lines, an array of objects, or an object of [text, label] lists keyed by id"


def read_json_corpus(data: bytes, uri: str, lines_only: bool = False) -> pa.Table:
    """``data`` (UTF-8 checked) as a table; ``lines_only``: JSON Lines (``.jsonl``)."""
    if not lines_only:
        try:
            doc = json.loads(data)
        except json.JSONDecodeError:
            doc = None  # several values (JSON Lines) or broken: pyarrow's reader says which
        except RecursionError:
            raise InputError(f"{uri}: JSON nested too deeply") from None
        if isinstance(doc, list):
            return _records(doc, uri)
        if isinstance(doc, dict) and doc and all(isinstance(v, list) for v in doc.values()):
            return _keyed(doc, uri)
        if isinstance(doc, dict) and any(isinstance(v, list | dict) for v in doc.values()):
            raise InputError(f"{uri}: a JSON corpus must be {SHAPES}; this object mixes lists and other values")
        if doc is not None and not isinstance(doc, dict):
            raise InputError(f"{uri}: a JSON corpus must be {SHAPES}, not a {type(doc).__name__}")
    return pajson.read_json(pa.BufferReader(data))


def _records(rows: list[Any], uri: str) -> pa.Table:
    if not rows:
        raise InputError(f"{uri}: corpus has no rows")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"{uri}: item {i} of the JSON array is a {type(row).__name__}, not an object")
    try:
        return pa.Table.from_struct_array(pa.array(rows))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(f"{uri}: unreadable corpus file: {str(exc).splitlines()[0]}") from None


def _keyed(doc: dict[str, list], uri: str) -> pa.Table:
    ids, texts, labels = [], [], []
    with_label = False
    for key, value in doc.items():
        if not 1 <= len(value) <= 2 or not (value[0] is None or isinstance(value[0], str)):
            raise InputError(f"{uri}: entry '{key}' is not [text, label] or [text] ({SHAPES} expected)")
        label = value[1] if len(value) == 2 else None
        if isinstance(label, list | dict):
            raise InputError(f"{uri}: entry '{key}' has a {type(label).__name__} as its label")
        with_label = with_label or len(value) == 2
        ids.append(key)
        texts.append(value[0])
        labels.append(label)
    columns = {"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())}
    if with_label:
        kinds = {type(v) for v in labels if v is not None}
        if len(kinds) > 1:  # 1 and "1" mixed: compare them as text
            labels = [None if v is None else str(v) for v in labels]
        columns["label"] = pa.array(labels)
    return pa.table(columns)
