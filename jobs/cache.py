"""``checkray cache info|prune``: what the content cache of embeddings and predictions
holds (``engine/cache.py``), and bounding its size.

    checkray cache info  [--dir URI] [--config FILE]
    checkray cache prune [--max-size 5GB] [--max-age 30d] [--no-compact] [--dir URI] [--config FILE]
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Optional

import typer

from checkray.engine.cache import CacheConfig, ContentCache, cache_uri
from checkray.engine.cache_admin import cache_info, prune
from checkray.engine.errors import ConfigError, InputError
from checkray.jobs.config import load_config

app = typer.Typer(help="Show or bound the cache of embeddings and predictions (info, prune).", no_args_is_help=True)

CacheDir = typer.Option(
    None, "--dir", help="Cache location (path or s3://...); default: cache.dir, $CHECKRAY_CACHE_URI, ~/.cache/checkray."
)
CacheConfigFile = typer.Option(None, "--config", "-c", help="YAML config whose cache: section names the cache.")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``500MB``, ``2G``, ``1.5GiB``, ``1024`` (bytes) -> bytes (1 KB = 1024 bytes)."""
    m = _SIZE.match(text or "")
    if not m:
        raise ConfigError(f"--max-size {text!r}: not a size (e.g. 500MB, 2GB)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``2w``, ``90`` (seconds) -> seconds."""
    m = _AGE.match(text or "")
    if not m:
        raise ConfigError(f"--max-age {text!r}: not an age (e.g. 30d, 12h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2).lower()]


def human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"


def open_named(directory: str | None, config: Path | None) -> ContentCache:
    cfg = load_config(config).section(CacheConfig) if config else CacheConfig()
    uri = directory or cache_uri(cfg)
    if not uri:
        raise InputError("the cache is off (cache.enabled: false or CHECKRAY_CACHE_URI=off); pass --dir")
    return ContentCache(uri)


@app.command("info")
def info_command(directory: Optional[str] = CacheDir, config: Optional[Path] = CacheConfigFile):
    """What the cache holds: one line per model (space), its shards, rows, size, last use."""
    cache = open_named(directory, config)
    rows = cache_info(cache)
    typer.echo(f"cache {cache.uri}")
    if not rows:
        typer.echo("  empty")
        return
    now = time.time()
    for r in rows:
        age = (now - r["last_used"]) / 86400
        typer.echo(
            f"  {r['kind']:<11} {r['space']}  {r['rows']:>9,} rows  {r['shards']:>4} shard(s)  "
            f"{human(r['bytes']):>10}  used {age:5.1f} d ago  {r['model']}"
        )
    total = sum(r["bytes"] for r in rows)
    typer.echo(
        f"  total: {len(rows)} space(s), {sum(r['rows'] for r in rows):,} rows, "
        f"{sum(r['shards'] for r in rows)} shard(s), {human(total)}"
    )


@app.command("prune")
def prune_command(
    max_size: Optional[str] = typer.Option(
        None, "--max-size", help="Keep at most this much (e.g. 5GB): least recently used shards go first."
    ),
    max_age: Optional[str] = typer.Option(None, "--max-age", help="Delete shards unused for longer (e.g. 30d)."),
    compact: bool = typer.Option(True, "--compact/--no-compact", help="Merge models' many small shards into one."),
    directory: Optional[str] = CacheDir,
    config: Optional[Path] = CacheConfigFile,
):
    """Bound the cache: by size (least recently used first), by age; merge small shards.
    Safe while runs use the cache (a run that loses a shard recomputes its rows)."""
    cache = open_named(directory, config)
    report = prune(
        cache,
        max_bytes=parse_size(max_size) if max_size else None,
        max_age_s=parse_age(max_age) if max_age else None,
        compact=compact,
    )
    typer.echo(
        f"cache {cache.uri}: deleted {report.deleted} shard(s) ({human(report.freed)}), merged {report.merged}, "
        f"removed {report.debris} debris file(s); kept {report.kept} shard(s), {human(report.kept_bytes)}"
    )
