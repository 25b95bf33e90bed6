"""What the content cache holds (``cache_info``) and bounding it (``prune``): the work of
``checkray cache info|prune`` (``jobs/cache.py``). Layout and keys: ``engine/cache.py``.

``prune`` deletes debris (temporary files of crashed writers), shards unused for longer
than an age, then the least recently used shards until the cache fits a size (a hit
touches its shard on local disks; on object stores, where nothing can be touched, the
oldest written go first), and merges spaces made of many small shards. It is safe while
runs use the cache: a reader that loses a shard recomputes its rows, and a merge writes
the merged shard (renamed into place whole) before it deletes what it merged.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from checkray.engine.cache import (
    COMPACT_AT,
    DEBRIS_AGE_S,
    KINDS,
    SPACE_FILE,
    CacheSpace,
    ContentCache,
    ShardInfo,
    _digest_numpy,
    _matrix,
    _meta_of,
)


@dataclass
class PruneReport:
    deleted: int = 0
    freed: int = 0
    merged: int = 0  # shards merged into larger ones
    debris: int = 0  # temporary files of crashed writers, unreadable shards
    kept: int = 0
    kept_bytes: int = 0


def describe(cache: ContentCache, kind: str, space: str) -> dict[str, Any]:
    """The identity a space was written for (its ``space.json``), or {}."""
    try:
        with cache.fs.open_input_stream(cache.path(kind, space, SPACE_FILE)) as src:
            return json.loads(src.read()).get("identity", {})
    except (OSError, ValueError):
        return {}


def summarize_identity(identity: Mapping[str, Any]) -> str:
    """A short readable name for an identity (``{'builtin': 'minilm', ...} normalize=True``)."""
    inner = identity.get("predictor", identity)
    model = inner.get("model", inner.get("path", ""))
    if isinstance(model, Mapping):
        model = model.get("path") or model.get("callable") or model.get("builtin") or model.get("hub") or model
    extras = [
        f"{k}={v}"
        for k, v in sorted(inner.items())
        if k not in ("model", "path", "libraries") and not isinstance(v, (dict, list)) and v is not None
    ]
    return " ".join([str(model), *extras])[:120]


def cache_info(cache: ContentCache) -> list[dict[str, Any]]:
    """One row per space: kind, model, shards, rows, bytes, last used (epoch seconds)."""
    spaces: dict[tuple[str, str], list[ShardInfo]] = {}
    for shard in cache.shards():
        spaces.setdefault((shard.kind, shard.space), []).append(shard)
    rows = []
    for (kind, space), shards in sorted(spaces.items()):
        count = 0
        for shard in shards:
            try:
                count += pq.read_metadata(shard.path, filesystem=cache.fs).num_rows
            except (pa.ArrowException, OSError):
                pass
        rows.append(
            {
                "kind": kind,
                "space": space,
                "model": summarize_identity(describe(cache, kind, space)),
                "shards": len(shards),
                "rows": count,
                "bytes": sum(s.size for s in shards),
                "last_used": max(s.mtime for s in shards),
            }
        )
    return rows


def prune(
    cache: ContentCache,
    max_bytes: int | None = None,
    max_age_s: float | None = None,
    compact: bool = True,
    now: float | None = None,
) -> PruneReport:
    """Bound the cache (see the module docstring)."""
    now = time.time() if now is None else now
    report = PruneReport()
    report.debris += _delete_debris(cache, now)
    shards = []
    for shard in cache.shards():
        if max_age_s is not None and now - shard.mtime > max_age_s:
            _delete(cache, shard, report)
        else:
            shards.append(shard)
    if compact:
        shards = _compact(cache, shards, report)
    shards.sort(key=lambda s: s.mtime)  # least recently used first
    total = sum(s.size for s in shards)
    while max_bytes is not None and shards and total > max_bytes:
        shard = shards.pop(0)
        _delete(cache, shard, report)
        total -= shard.size
    report.kept, report.kept_bytes = len(shards), total
    return report


def _delete(cache: ContentCache, shard: ShardInfo, report: PruneReport) -> None:
    try:
        cache.fs.delete_file(shard.path)
    except FileNotFoundError:
        return
    report.deleted += 1
    report.freed += shard.size


def _delete_debris(cache: ContentCache, now: float) -> int:
    count = 0
    for kind in KINDS:
        try:
            infos = cache.fs.get_file_info(pafs.FileSelector(cache.path(kind), allow_not_found=True, recursive=True))
        except OSError:
            continue
        for info in infos:
            if info.type != pafs.FileType.File or ".tmp-" not in info.base_name:
                continue
            if now - (info.mtime.timestamp() if info.mtime else 0.0) > DEBRIS_AGE_S:
                try:
                    cache.fs.delete_file(info.path)
                    count += 1
                except OSError:
                    pass
    return count


def _compact(cache: ContentCache, shards: list[ShardInfo], report: PruneReport) -> list[ShardInfo]:
    """Merge each space of ``COMPACT_AT`` shards or more into as few shards as it needs."""
    by_space: dict[tuple[str, str], list[ShardInfo]] = {}
    for shard in shards:
        by_space.setdefault((shard.kind, shard.space), []).append(shard)
    kept = []
    for (kind, space), members in by_space.items():
        if len(members) < COMPACT_AT:
            kept.extend(members)
            continue
        tables, first, used = [], None, []
        for shard in members:
            try:
                table = pq.read_table(shard.path, filesystem=cache.fs)
            except (pa.ArrowException, OSError):
                cache.discard(shard.path, "unreadable while merging")
                report.debris += 1
                continue
            meta = _meta_of(table.schema) or {}
            key = (meta.get("format"), meta.get("width"), json.dumps(meta.get("meta"), sort_keys=True))
            first = first or (key, meta)
            if key != first[0]:
                kept.append(shard)  # disagrees with the space: left to the size bound
                continue
            tables.append(table.replace_schema_metadata(None))
            used.append(shard)
        if len(used) < 2:
            kept.extend(used)
            continue
        meta = first[1]
        merged = pa.concat_tables(tables)
        target = CacheSpace(cache, kind, meta.get("identity") or {}, key=space)
        values = _matrix(merged.column("value"), meta["width"])
        written = target.put(_digest_numpy(merged.column("digest")), values, meta.get("meta"))
        if not written:
            kept.extend(used)
            continue
        for shard in used:
            _delete(cache, shard, report)
        report.deleted -= len(used)  # merged, not lost
        report.freed -= sum(s.size for s in used)
        report.merged += len(used)
        newest = max(s.mtime for s in used)
        for path in written:
            info = cache.fs.get_file_info(path)
            kept.append(ShardInfo(kind, space, path, int(info.size or 0), newest))
            if cache.local:
                os.utime(path, (newest, newest))  # the merged shard keeps its last use
    return kept
