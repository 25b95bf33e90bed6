"""What the ``costello`` job reads: the embedder list, seeds (corpus sentences, inversion-
table sentences, matching pairs), the classifiers' training sentences and each model's
threshold dictionary (its whole vocabulary by default, as its embedder kind reads it)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from checkray.actors.costello.embedders import vocabulary
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.config import CorpusConfig, read_yaml, repo_path, validate_section
from checkray.engine.corpus import read_corpus
from checkray.engine.costello.config import CostelloConfig, EmbedderSpec, PairsConfig
from checkray.engine.costello.mutations import normalize
from checkray.engine.errors import ConfigError, InputError


def read_embedders(path: str, zoo: Sequence[ModelSpec] = ()) -> list[EmbedderSpec]:
    """The embedder list (``{embedders: [...]}``); ``zoo:<name>`` models resolve to the
    zoo registry's model directory."""
    p = Path(repo_path(path))
    if not p.is_file():
        raise InputError(f"{path}: embedders file not found")
    data = read_yaml(p)
    items = data.get("embedders") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{p}: expected a non-empty 'embedders' list")
    by_name = {s.name: s for s in zoo}
    specs = []
    for i, item in enumerate(items):
        spec = validate_section(EmbedderSpec, item, prefix=f"embedders[{i}]", source=str(p))
        if spec.model.startswith("zoo:"):
            ref = spec.model.split(":", 1)[1]
            if ref not in by_name or not by_name[ref].path:
                raise InputError(f"{p}: embedder '{spec.name}' names {spec.model} but no such zoo model was given")
            spec = spec.model_copy(update={"model": by_name[ref].path})
        specs.append(spec)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"{p}: embedder names must be unique ({', '.join(names)})")
    return specs


def _model_key(model: str) -> str:
    path = Path(repo_path(model)).expanduser()
    return str(path.resolve()) if path.exists() else model


def encoders_of_models(models: Sequence[ModelSpec], listed: Sequence[EmbedderSpec]) -> list[EmbedderSpec]:
    """The encoders inside models under test, as embedders COSTELLO can test: a Hugging
    Face classifier's transformer (mean pooling over its hidden states) and a
    sentence-transformer head's encoder (its own pooling). An encoder already ``listed``
    (any pooling) or met twice is left out: one model, tested once."""
    taken = {_model_key(s.model) for s in listed}
    names = {s.name for s in listed}
    found = []
    for spec in models:
        if spec.family == "hf" and spec.path:
            model, pooling = spec.path, "mean"
        elif spec.family == "st_head":
            model, pooling = str(spec.options.get("encoder", "builtin:minilm")), "model"
        else:
            continue
        if _model_key(model) in taken:
            continue
        taken.add(_model_key(model))
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", spec.name)
        name = name if name not in names else f"{name}_encoder"
        names.add(name)
        found.append(EmbedderSpec(name=name, model=model, pooling=pooling))
    return found


def pick_seeds(corpus: pa.Table, n: int, inversions: dict[str, str] | None, seed: int) -> np.ndarray:
    """Row indices: sentences of the inversion table found in the corpus first (CR3 needs
    them), then a seeded random sample."""
    texts = corpus.column("text").to_pylist()
    hits = [i for i, t in enumerate(texts) if inversions and normalize(t) in inversions][:n]
    rest = np.setdiff1d(np.arange(len(texts)), hits)
    rng = np.random.default_rng(seed)
    extra = rng.choice(rest, size=min(len(rest), n - len(hits)), replace=False) if n > len(hits) else []
    return np.sort(np.concatenate([np.asarray(hits, dtype=np.int64), np.asarray(extra, dtype=np.int64)]))


def classifier_rows(corpus: pa.Table, seeds: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Labeled rows for the downstream classifiers: non-seed rows first (seeded sample),
    topped up with seed rows when the seeds cover most of the corpus (the paper trains its
    classifiers on the same SST it draws seeds from)."""
    labeled = np.flatnonzero(np.asarray(corpus.column("label").is_valid()))
    if len(labeled) == 0:
        return np.array([], dtype=np.int64)
    rng = np.random.default_rng(seed + 1)
    rest = np.setdiff1d(labeled, seeds)
    first = rng.choice(rest, size=min(len(rest), n), replace=False) if len(rest) else np.array([], np.int64)
    more = np.setdiff1d(labeled, first)
    top = rng.choice(more, size=min(len(more), n - len(first)), replace=False) if n > len(first) else []
    return np.sort(np.concatenate([first, np.asarray(top, dtype=np.int64)]).astype(np.int64))


def dictionary_words(texts: Sequence[str], size: int | None, seed: int) -> list[str]:
    """A user dictionary from the corpus (the paper's 'SST dictionary'): alphabetic words
    seen at least twice; a seeded sample of ``size`` when one is given."""
    counts = Counter(w for t in texts for w in re.findall(r"[a-z]+", t.lower()) if len(w) > 1)
    return _sample(sorted(w for w, c in counts.items() if c >= 2), size, seed)


def _sample(words: list[str], size: int | None, seed: int) -> list[str]:
    if size is not None and len(words) > size:
        return sorted(np.random.default_rng(seed).choice(words, size=size, replace=False).tolist())
    return words


def model_dictionaries(
    specs: Sequence[EmbedderSpec], corpus_words: pa.Table, cc: CostelloConfig, seed: int
) -> pa.Table:
    """Each model's threshold dictionary (model, word): its own vocabulary (every entry, or
    a seeded sample of ``dictionary_size``), or the corpus words (``dictionary: corpus``)."""
    parts = []
    for spec in specs:
        if cc.dictionary == "corpus":
            words = corpus_words.column("word").to_pylist()
        else:
            words = _sample(vocabulary(spec, cc.dictionary_tokens), cc.dictionary_size, seed)
        parts.append(
            pa.table({"model": pa.array([spec.name] * len(words), pa.string()), "word": pa.array(words, pa.string())})
        )
    return pa.concat_tables(parts)


def read_corpora(corpus: CorpusConfig, more: Sequence[str]) -> pa.Table:
    """``corpus.path`` plus ``more`` files read the same way; ids prefixed by each file's
    stem when there are several (SST's train and test ids both start at 0)."""
    if not more:
        return read_corpus(corpus)
    tables = []
    for path in [corpus.path, *more]:
        table = read_corpus(corpus.model_copy(update={"path": repo_path(path)}))
        stem = Path(path).stem
        ids = pa.array([f"{stem}-{i}" for i in table.column("id").to_pylist()], pa.string())
        tables.append(table.set_column(table.schema.get_field_index("id"), "id", ids))
    return pa.concat_tables(tables)


def read_pairs(corpus: CorpusConfig, pairs: PairsConfig) -> pa.Table:
    """Matching pairs as seeds (id, text, label, text_pair): the pair column, or one text
    split at ``separator``; only ``keep_label`` rows (raw labels: the corpus label map is
    not applied) when it is set. Several files are read in order."""
    parts = []
    for path in pairs.paths():
        table = read_corpus(
            corpus.model_copy(
                update=dict(
                    path=repo_path(path),
                    text_column=pairs.text_column,
                    label_column=pairs.label_column,
                    id_column=None,
                    labels=None,
                    limit=None,
                    sample=None,
                )
            )
        )
        ids = pa.array([f"{Path(path).stem}-{i}" for i in table.column("id").to_pylist()], pa.string())
        parts.append(table.set_column(table.schema.get_field_index("id"), "id", ids))
    table = pa.concat_tables(parts)
    texts = table.column("text").to_pylist()
    metas = [json.loads(m or "{}") for m in table.column("meta").to_pylist()]
    second = [m.get(pairs.pair_column) for m in metas]
    if all(p is None for p in second):
        if not pairs.separator:
            raise InputError(f"{pairs.path}: missing pair column '{pairs.pair_column}' (or set pairs.separator)")
        split = [t.split(pairs.separator, 1) for t in texts]
        if any(len(s) != 2 for s in split):
            raise InputError(f"{pairs.path}: a text without the separator {pairs.separator!r}")
        texts, second = [s[0].strip() for s in split], [s[1].strip() for s in split]
    labels = table.column("label").to_pylist()
    keep = [
        i
        for i in range(table.num_rows)
        if second[i] and (pairs.keep_label is None or str(labels[i]) == str(pairs.keep_label))
    ]
    if pairs.keep_label is not None and not keep:
        raise InputError(f"{pairs.path}: no pair has label {pairs.keep_label!r}")
    if pairs.limit:
        keep = keep[: pairs.limit]
    ids = table.column("id").to_pylist()
    return pa.table(
        {
            "id": pa.array([f"pair-{ids[i]}" for i in keep], pa.string()),
            "text": pa.array([texts[i] for i in keep], pa.string()),
            "label": pa.nulls(len(keep), pa.string()),
            "text_pair": pa.array([second[i] for i in keep], pa.string()),
        }
    )
