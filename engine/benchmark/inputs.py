"""Benchmark inputs (pure): reading suite files, case versions, de-duplicated model inputs.

Every model sees each distinct (text, text_pair) once: INV/DIR cases share texts with
the cases they perturb, versions of a suite share their seeds' sentences, and several
suites are often built from the same corpus, so predictions are made on the unique
inputs and mapped back to the cases.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from checkray.engine.benchmark.provenance import case_digests
from checkray.engine.errors import InputError
from checkray.engine.schema import validate_cases
from checkray.engine.stages import open_filesystem

PREPARED_EXTRA = [
    pa.field("part", pa.int32()),  # which input table (suite file) the case came from
    pa.field("version", pa.string()),  # suite version (meta "version", else provenance.seed)
    pa.field("input_key", pa.int64()),  # row of the unique-inputs table
    pa.field("case_digest", pa.string()),  # content digest (engine.benchmark.provenance.case_digests)
]


@dataclass(frozen=True)
class SuiteFile:
    """Which file a named suite is read from. ``checkray review apply`` writes
    ``reviewed_<suite>.parquet`` beside a job's suite and records in the run's manifest the
    SHA-256 of the suite it reviewed; the reviewed file stands in for the named one while
    that digest still matches (a rerun of the job since the review makes it stale)."""

    named: str  # the file the user named
    read: str  # the file read: ``named`` or its reviewed version
    note: str | None = None  # one line for the console when a reviewed suite exists

    @property
    def reviewed(self) -> bool:
        return self.read != self.named


def suite_file(uri: str, use_reviewed: bool = True) -> SuiteFile:
    """The file to read for the suite ``uri`` (see ``SuiteFile``); reads only the run's
    manifest and, when it names a reviewed version of this file, the file's bytes."""
    from checkray.engine.review import MANIFEST

    folder, name = posixpath.split(uri)
    fs, manifest_path = open_filesystem(posixpath.join(folder, MANIFEST) if folder else MANIFEST)
    try:
        with fs.open_input_stream(manifest_path) as stream:
            record = json.loads(stream.read()).get("reviewed") or {}
    except (OSError, ValueError, AttributeError):  # no manifest (a plain file), or not a run's
        return SuiteFile(uri, uri)
    if record.get("of") != name or not record.get("file"):
        return SuiteFile(uri, uri)
    reviewed = posixpath.join(folder, record["file"]) if folder else record["file"]
    counts = ", ".join(f"{record[k]} {k}" for k in ("reject", "relabel", "edit") if record.get(k))
    if _sha256(uri) != record.get("of_sha256"):
        note = f"{uri}: {record['file']} was reviewed on an earlier version of this suite; read as generated"
        return SuiteFile(uri, uri, note + " (run `checkray review apply` again)")
    if not use_reviewed:
        return SuiteFile(uri, uri, f"{uri}: read as generated, not its reviewed {record['file']} (--as-generated)")
    return SuiteFile(
        uri, reviewed, f"{uri}: reading its reviewed version {record['file']} ({counts or 'all accepted'})"
    )


def _sha256(uri: str) -> str | None:
    fs, path = open_filesystem(uri)
    h = hashlib.sha256()
    try:
        with fs.open_input_stream(path) as stream:
            while chunk := stream.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None  # a missing suite: read_suite says so in one line
    return h.hexdigest()


def read_suite(uri: str) -> pa.Table:
    """One suite file as a validated test-case table; one-line errors naming the file."""
    fs, path = open_filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{uri}: suite file not found")
    try:
        table = pq.read_table(path, filesystem=fs)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{uri}: not a readable Parquet suite: {exc}") from None
    return check_suite(table, uri)


def check_suite(table: pa.Table, name: str) -> pa.Table:
    """Validate a suite table: schema, non-empty, every ``perturbs`` id present."""
    try:
        table = validate_cases(table)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None
    if table.num_rows == 0:
        raise InputError(f"{name}: suite has no test cases")
    ids = set(table.column("case_id").to_pylist())
    dangling = {p for p in table.column("perturbs").to_pylist() if p is not None} - ids
    if dangling:
        example = sorted(dangling)[0]
        raise InputError(f"{name}: {len(dangling)} perturbs id(s) name no case in the file (e.g. '{example}')")
    return table


def case_versions(table: pa.Table) -> pa.Array:
    """Version of each case: ``version`` in its meta JSON, else its provenance seed, else null."""
    seeds = pc.struct_field(table.column("provenance"), "seed").to_pylist() if table.num_rows else []
    versions = []
    for meta, seed in zip(table.column("meta").to_pylist(), seeds):
        version = None
        if meta:
            try:
                parsed = json.loads(meta)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict) and parsed.get("version") is not None:
                version = str(parsed["version"])
        if version is None and seed is not None:
            version = str(seed)
        versions.append(version)
    return pa.array(versions, pa.string())


def prepare_cases(parts: Sequence[pa.Table], *, dedup: bool = True) -> tuple[pa.Table, pa.Table]:
    """(cases, inputs): all suites' cases with part/version/input_key/case_digest columns, and the
    inputs models must score (``input_key``, ``text``, ``text_pair``)."""
    if not parts:
        raise InputError("no suites given")
    tables, keys = [], {}
    texts: list[str] = []
    pairs: list[str | None] = []
    for index, part in enumerate(parts):
        part = check_suite(part, f"suite #{index + 1}")
        part_keys = []
        for text, pair in zip(part.column("text").to_pylist(), part.column("text_pair").to_pylist()):
            key = keys.get((text, pair)) if dedup else None
            if key is None:
                key = len(texts)
                texts.append(text)
                pairs.append(pair)
                if dedup:
                    keys[(text, pair)] = key
            part_keys.append(key)
        tables.append(
            part.append_column(PREPARED_EXTRA[0], pa.array([index] * part.num_rows, pa.int32()))
            .append_column(PREPARED_EXTRA[1], case_versions(part))
            .append_column(PREPARED_EXTRA[2], pa.array(part_keys, pa.int64()))
            .append_column(PREPARED_EXTRA[3], case_digests(part))
        )
    inputs = pa.table(
        {
            "input_key": pa.array(range(len(texts)), pa.int64()),
            "text": pa.array(texts, pa.string()),
            "text_pair": pa.array(pairs, pa.string()),
        }
    )
    return pa.concat_tables(tables), inputs
