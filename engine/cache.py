"""A content-keyed cache of embeddings and predictions, shared by every job and run.

A stage checkpoint is reused only inside its run directory, and only whole. This cache
holds the per-text results that are expensive to compute, keyed by content, so a new run
(another ``--out``, another job) computes only what no run computed before:

* **embeddings**: a model identity (its files by content, a ``builtin:`` asset by its
  pinned package, the normalisation, the pooling ...) and the text's digest;
* **predictions**: a model under test's identity (its spec with every file it names
  digested, as the benchmark fingerprints it) and the digest of (text, text pair).

Both are (rows, width) float32 matrices: an embedding, or the probabilities in the
model's label order. Layout under the cache root (a local path or any pyarrow filesystem
URI, ``s3://bucket/checkray``, so the drivers of a cluster can share one)::

    <root>/embeddings/<space>/space.json           the identity of the space (for `cache info`)
    <root>/embeddings/<space>/<time>-<uuid>.parquet  a shard: digest (binary16), value (float32[width])
    <root>/predictions/<space>/...

A *space* is one identity (``space_key``). Shards are immutable and uniquely named, each
written under a temporary name and renamed (one PUT on object stores), so concurrent
runs never corrupt the cache: the directory listing is the index, and a writer only ever
adds a complete file to it. A shard that cannot be read (truncated) is skipped, deleted,
and its rows recomputed by the caller; a file checkray did not name is skipped, never
deleted. ``engine/cache_admin.py`` lists the cache and bounds it (size, age, merging).
Nothing here changes what a stage computes: a cached value is the value the same model
computed for the same text (up to float32 rounding of the batch it was computed in), and
stage fingerprints never include the cache's settings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pydantic import Field

from checkray.engine.config import NOT_FINGERPRINTED, JobSection, cache_root
from checkray.engine.errors import InputError
from checkray.engine.rundir import open_filesystem
from checkray.engine.stages import fingerprint

log = logging.getLogger(__name__)

FORMAT = "1"  # bump when the shard layout changes: old spaces are then never read
KINDS = ("embeddings", "predictions")
DIGEST_BYTES = 16
SHARD_ROWS = 16_384  # rows per shard written by one put (callers put chunk by chunk)
ROW_GROUP_ROWS = 2_048  # a lookup reads only the row groups that hold its hits
COMPACT_AT = 8  # prune merges a space of this many shards or more
DEBRIS_AGE_S = 3600.0  # a temporary file this old belongs to a crashed writer
ENV_URI = "CHECKRAY_CACHE_URI"  # where results are cached; "off" disables the cache
META_KEY = b"checkray.cache"
SPACE_FILE = "space.json"


class CacheConfig(JobSection):
    """``cache:``: where embeddings and predictions are cached. Not part of any stage
    fingerprint: the cache only avoids recomputation."""

    key: ClassVar[str] = "cache"

    enabled: bool = Field(default=True, json_schema_extra=NOT_FINGERPRINTED)
    # A local path or any pyarrow URI (s3://bucket/checkray). None: $CHECKRAY_CACHE_URI,
    # else $CHECKRAY_CACHE, else ~/.cache/checkray.
    dir: str | None = Field(default=None, json_schema_extra=NOT_FINGERPRINTED)
    embeddings: bool = Field(default=True, json_schema_extra=NOT_FINGERPRINTED)
    predictions: bool = Field(default=True, json_schema_extra=NOT_FINGERPRINTED)


def cache_uri(cfg: CacheConfig | None = None) -> str | None:
    """The cache root for ``cfg`` (see ``CacheConfig.dir``), or None when it is off."""
    cfg = cfg or CacheConfig()
    if not cfg.enabled:
        return None
    uri = cfg.dir or os.environ.get(ENV_URI) or str(cache_root())
    return None if uri.strip().lower() in ("off", "none", "0", "false") else uri


def open_cache(cfg: CacheConfig | None = None) -> ContentCache | None:
    """The cache ``cfg`` names, or None when it is off."""
    uri = cache_uri(cfg)
    return ContentCache(uri) if uri else None


# ---------------------------------------------------------------------------- keys
def text_digests(texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
    """(n, 16) uint8: the BLAKE2b digest of each text, or of each (text, pair); a text
    alone and a text with an empty pair differ."""
    out = np.empty((len(texts), DIGEST_BYTES), dtype=np.uint8)
    view = memoryview(out).cast("B")
    blake = hashlib.blake2b
    for i, text in enumerate(texts):
        pair = None if pairs is None else pairs[i]
        data = text.encode("utf-8") if pair is None else b"\x01" + text.encode("utf-8") + b"\x00" + pair.encode("utf-8")
        view[i * DIGEST_BYTES : (i + 1) * DIGEST_BYTES] = blake(data, digest_size=DIGEST_BYTES).digest()
    return out


def space_key(kind: str, identity: Mapping[str, Any]) -> str:
    """The directory name of an identity's space (its fingerprint, with the format)."""
    if kind not in KINDS:
        raise ValueError(f"cache kind must be one of {KINDS}, got {kind!r}")
    return fingerprint("checkray-cache", FORMAT, kind, identity)


def digest_array(digests: np.ndarray) -> pa.FixedSizeBinaryArray:
    digests = np.ascontiguousarray(digests, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(DIGEST_BYTES), len(digests), [None, pa.py_buffer(digests.tobytes())]
    )


def _digest_numpy(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    buf = col.buffers()[1]
    start = col.offset * DIGEST_BYTES
    return np.frombuffer(buf, dtype=np.uint8)[start : start + len(col) * DIGEST_BYTES].reshape(-1, DIGEST_BYTES)


# ---------------------------------------------------------------------------- files
def _atomic_write(fs: pafs.FileSystem, final: str, write: Callable[[Any], None]) -> None:
    """Write under a temporary name, then rename (``RunDir._atomic``'s pattern): readers
    list only ``*.parquet``/``space.json``, so they never see a half-written file."""
    fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
    tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with fs.open_output_stream(tmp) as sink:
            write(sink)
        fs.move(tmp, final)
    except BaseException:
        try:
            fs.delete_file(tmp)
        except OSError:
            pass
        raise


_SHARD_NAME = re.compile(r"^\d{8}T\d{6}-[0-9a-f]{12}\.parquet$")


def _shard_name() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}.parquet"


def _meta_of(schema: pa.Schema) -> dict[str, Any] | None:
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return meta if isinstance(meta, dict) else None


def _matrix(col: pa.ChunkedArray | pa.Array, width: int) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col.flatten().to_numpy(zero_copy_only=False).reshape(-1, width).astype(np.float32, copy=False)


# ---------------------------------------------------------------------------- lookups
@dataclass
class Found:
    """Which of a lookup's digests the cache holds, and where; ``read`` fetches values."""

    space: CacheSpace
    mask: np.ndarray  # (n,) bool: the cache holds digest i
    shard: np.ndarray  # (n,) int: index into ``paths`` (-1: not held)
    row: np.ndarray  # (n,) int: row inside that shard
    paths: list[str] = field(default_factory=list)
    width: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # the values' meta (labels of a model)

    @property
    def hits(self) -> int:
        return int(self.mask.sum())

    def read(self, which: np.ndarray | Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Values of the lookup's digests ``which`` (default: every hit): returns ``(ok,
        values)``, ``values[k]`` for ``which[k]`` where ``ok[k]``. A shard that turns out
        unreadable (or was pruned meanwhile) leaves its rows not ok: recompute them."""
        which = np.flatnonzero(self.mask) if which is None else np.asarray(which, dtype=np.int64)
        ok = np.zeros(len(which), dtype=bool)
        values = np.zeros((len(which), self.width or 0), dtype=np.float32)
        held = self.mask[which] if len(which) else np.zeros(0, bool)
        for s in np.unique(self.shard[which[held]]) if held.any() else []:
            sel = np.flatnonzero(held & (self.shard[which] == s))
            rows = self.row[which[sel]]
            got = self.space._read_rows(self.paths[s], rows, self.width)
            if got is not None:
                values[sel] = got
                ok[sel] = True
        return ok, values


class CacheSpace:
    """The cached values of one identity (one model, one normalisation ...)."""

    def __init__(self, cache: ContentCache, kind: str, identity: Mapping[str, Any], key: str | None = None):
        self.cache, self.kind, self.identity = cache, kind, dict(identity)
        self.key = key or space_key(kind, identity)  # key: an existing space, as listed (prune)
        self.path = cache.path(kind, self.key)

    def _shards(self) -> list[pafs.FileInfo]:
        try:
            infos = self.cache.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        except OSError as exc:
            log.warning("cache %s: cannot list %s: %s", self.cache.uri, self.path, exc)
            return []
        shards = [i for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")]
        return sorted(shards, key=lambda i: i.base_name)

    def has_shards(self) -> bool:
        return bool(self._shards())

    def find(self, digests: np.ndarray) -> Found:
        """Look up (n, 16) digests. Reads only each shard's digest column; a shard that
        cannot be read is skipped (and deleted: shards are renamed into place complete,
        so an unreadable one is corrupt, never in progress)."""
        n = len(digests)
        if n == 0:
            return Found(self, np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, np.int64))
        # Each distinct digest once (index_in matches the first of equal values only).
        digests = np.ascontiguousarray(digests, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        _, first, inverse = np.unique(digests.view(f"V{DIGEST_BYTES}").ravel(), return_index=True, return_inverse=True)
        m = len(first)
        found = Found(self, np.zeros(m, bool), np.full(m, -1, np.int64), np.zeros(m, np.int64))
        query = digest_array(digests[first])
        for info in self._shards():
            try:
                table = pq.read_table(info.path, columns=["digest"], filesystem=self.cache.fs)
            except FileNotFoundError:
                continue  # pruned meanwhile
            except (pa.ArrowException, OSError) as exc:
                self.cache.discard(info.path, exc)
                continue
            meta = _meta_of(table.schema)
            if meta is None or meta.get("format") != FORMAT or not isinstance(meta.get("width"), int):
                self.cache.discard(info.path, "no checkray cache metadata")
                continue
            values_meta = meta.get("meta") or {}
            if found.width is None:
                found.width, found.meta = meta["width"], values_meta
            elif meta["width"] != found.width or values_meta != found.meta:
                log.warning("cache %s: shard %s disagrees with its space; ignored", self.cache.uri, info.path)
                continue
            if table.num_rows == 0:
                continue
            where = pc.index_in(table.column("digest"), value_set=query).fill_null(-1)
            where = where.to_numpy(zero_copy_only=False)
            rows = np.flatnonzero(where >= 0)
            targets = where[rows]
            new = ~found.mask[targets]
            if not new.any():
                continue
            rows, targets = rows[new], targets[new]
            found.mask[targets] = True
            found.shard[targets] = len(found.paths)
            found.row[targets] = rows
            found.paths.append(info.path)
            self.cache.touch(info)
            if found.mask.all():
                break
        inverse = inverse.ravel()
        found.mask, found.shard, found.row = found.mask[inverse], found.shard[inverse], found.row[inverse]
        return found

    def _read_rows(self, path: str, rows: np.ndarray, width: int | None) -> np.ndarray | None:
        """Values at ``rows`` of one shard, reading only the row groups that hold them."""
        try:
            with self.cache.fs.open_input_file(path) as src:
                pf = pq.ParquetFile(src)
                starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
                groups = np.unique(np.searchsorted(starts, rows, side="right") - 1)
                table = pf.read_row_groups([int(g) for g in groups], columns=["value"])
            if width is None or table.schema.field("value").type.list_size != width:
                raise pa.ArrowInvalid(f"value width is not {width}")
            local = np.concatenate([np.arange(starts[g], starts[g + 1]) for g in groups])
            position = np.searchsorted(local, rows)
            return _matrix(table.column("value"), width)[position]
        except FileNotFoundError:
            return None
        except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
            self.cache.discard(path, exc)
            return None

    def get(self, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """``(ok, values, meta)`` for every digest (values of rows not ok are zeros)."""
        found = self.find(digests)
        ok, values = found.read(np.arange(len(digests)))
        return ok, values, found.meta

    def put(self, digests: np.ndarray, values: np.ndarray, meta: Mapping[str, Any] | None = None) -> list[str]:
        """Add values (one shard per ``SHARD_ROWS`` rows, each renamed into place whole);
        duplicate digests are stored once. Returns the shard paths written."""
        values = np.ascontiguousarray(values, dtype=np.float32)
        digests = np.ascontiguousarray(digests, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        if len(digests) != len(values):
            raise ValueError(f"{len(digests)} digests for {len(values)} values")
        if len(values) == 0:
            return []
        if values.ndim != 2 or not np.isfinite(values).all():
            raise ValueError("cache values must be a finite (rows, width) matrix")
        _, first = np.unique(digests.view(f"V{DIGEST_BYTES}").ravel(), return_index=True)
        first.sort()
        digests, values = digests[first], values[first]
        self._write_space_file()
        header = {
            "format": FORMAT,
            "kind": self.kind,
            "space": self.key,
            "width": int(values.shape[1]),
            "meta": dict(meta or {}),
            "identity": self.identity,
        }
        schema = pa.schema(
            [pa.field("digest", pa.binary(DIGEST_BYTES)), pa.field("value", pa.list_(pa.float32(), values.shape[1]))],
            metadata={META_KEY: json.dumps(header, sort_keys=True, default=str).encode()},
        )
        paths = []
        for lo in range(0, len(values), SHARD_ROWS):
            chunk = values[lo : lo + SHARD_ROWS]
            value_col = pa.FixedSizeListArray.from_arrays(pa.array(chunk.reshape(-1)), chunk.shape[1])
            table = pa.Table.from_arrays([digest_array(digests[lo : lo + SHARD_ROWS]), value_col], schema=schema)
            final = f"{self.path}/{_shard_name()}"
            try:
                _atomic_write(
                    self.cache.fs, final, lambda sink, t=table: pq.write_table(t, sink, row_group_size=ROW_GROUP_ROWS)
                )
            except OSError as exc:  # a full or read-only cache must not fail the run
                log.warning("cache %s: cannot write %s: %s", self.cache.uri, final, exc)
                break
            paths.append(final)
        return paths

    def _write_space_file(self) -> None:
        final = f"{self.path}/{SPACE_FILE}"
        try:
            if self.cache.fs.get_file_info(final).type == pafs.FileType.File:
                return
            blob = json.dumps({"kind": self.kind, "identity": self.identity}, indent=1, default=str).encode()
            _atomic_write(self.cache.fs, final, lambda sink: sink.write(blob))
        except OSError as exc:
            log.warning("cache %s: cannot write %s: %s", self.cache.uri, final, exc)


# ---------------------------------------------------------------------------- the cache
@dataclass
class ShardInfo:
    kind: str
    space: str
    path: str
    size: int
    mtime: float


class ContentCache:
    """The cache root; ``space(kind, identity)`` gives one identity's values."""

    def __init__(self, uri: str):
        self.uri = uri
        self.fs, self.root = open_filesystem(uri)
        self.local = isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def space(self, kind: str, identity: Mapping[str, Any]) -> CacheSpace:
        return CacheSpace(self, kind, identity)

    def touch(self, info: pafs.FileInfo) -> None:
        """Mark a shard used (local disks: its mtime), so ``prune`` evicts it last."""
        if not self.local:
            return
        try:
            if info.mtime is None or time.time() - info.mtime.timestamp() > 60:
                os.utime(info.path)
        except OSError:
            pass

    def discard(self, path: str, why: object) -> None:
        """An unreadable shard is skipped; deleted when its name says checkray wrote it
        (renamed into place whole, so it is corrupt, not in progress), else left alone."""
        log.warning("cache %s: ignoring unreadable shard %s (%s); its rows are recomputed", self.uri, path, why)
        if not _SHARD_NAME.match(path.rsplit("/", 1)[-1]):
            return
        try:
            self.fs.delete_file(path)
        except OSError:
            pass

    # -------------------------------------------------------------- inspection
    def shards(self) -> list[ShardInfo]:
        out = []
        for kind in KINDS:
            try:
                infos = self.fs.get_file_info(pafs.FileSelector(self.path(kind), allow_not_found=True, recursive=True))
            except OSError as exc:
                raise InputError(f"{self.uri}: cannot list the cache: {exc}") from None
            for info in infos:
                if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
                    continue
                space = info.path[len(self.path(kind)) + 1 :].split("/", 1)[0]
                mtime = info.mtime.timestamp() if info.mtime else 0.0
                out.append(ShardInfo(kind, space, info.path, int(info.size or 0), mtime))
        return out
