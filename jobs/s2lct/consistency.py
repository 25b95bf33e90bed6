"""The ``consistency`` stage of the s2lct job: a sample of the suite (every capability,
half seeds, half expansions of them) whose labels an offline judge checks (the paper's
RQ1, which people did). The maths is in ``engine/s2lct/consistency.py``; this module picks
the judge, runs it and writes DIR/consistency.parquet (see docs/s2lct.md).

The judge is a model of the registry: ``s2lct.consistency.judge``, or by default the one
with the best held-out accuracy among those that did not train on the sentences the
seeds come from (measured: the share of those sentences found in the model's training
split, at most ``max_overlap``). Lexicon models are not candidates: VADER is the second
judge anyway. A zero-shot LLM judge is asked with the neutral label added to its labels.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, ContentCache, open_cache
from checkray.engine.config import CorpusConfig
from checkray.engine.errors import InputError
from checkray.engine.s2lct.consistency import NO_ANSWER, normalize, sample_cases, summarize, verdicts
from checkray.engine.s2lct.spec import CapabilitySpec
from checkray.engine.s2lct.suite import suite_table
from checkray.engine.stages import Stage, StageContext, path_digest
from checkray.jobs.s2lct.config import S2lctConfig, filler_name

LEXICON_FAMILIES = frozenset({"vader", "textblob"})
TRAINED_FAMILIES = frozenset({"sklearn", "st_head", "hf"})  # trained on spec.meta["corpus"] by the zoo
ZERO_SHOT_FAMILIES = frozenset({"llm_zero_shot"})
BAND = (1 / 3, 2 / 3)  # CheckList's neutral band on P(positive) for a binary judge


def training_sentences(spec: ModelSpec) -> set[str] | None:
    """Normalized texts of the zoo split a model trained on; None when unknown."""
    from checkray.engine.corpus import read_corpus
    from checkray.engine.splits import split_ids

    if spec.family not in TRAINED_FAMILIES or not spec.meta.get("corpus"):
        return None
    corpus = read_corpus(CorpusConfig(path=spec.meta["corpus"]))
    split = split_ids(corpus, float(spec.meta.get("held_out", 0.2)), int(spec.meta.get("split_seed", 0)))
    ids, texts = corpus.column("id").to_pylist(), corpus.column("text").to_pylist()
    return {normalize(t) for i, t in zip(ids, texts) if split[i] == "train"}


def overlap(spec: ModelSpec, texts: Sequence[str]) -> float | None:
    """Share of ``texts`` in the model's training split: 0 for models that do not train
    (lexicons, zero-shot LLMs), None when unknown (no corpus recorded)."""
    if spec.family in LEXICON_FAMILIES | ZERO_SHOT_FAMILIES:
        return 0.0
    seen = training_sentences(spec)
    if seen is None or not texts:
        return None
    return round(sum(normalize(t) in seen for t in texts) / len(texts), 3)


def choose_judge(
    specs: Sequence[ModelSpec], name: str | None, texts: Sequence[str], max_overlap: float
) -> tuple[ModelSpec, float | None, list[str]]:
    """The judge, the share of ``texts`` it trained on, and notes for the report."""
    if name:
        spec = next((sp for sp in specs if sp.name == name), None)
        if spec is None:
            raise InputError(f"s2lct.consistency.judge: no model named {name} among the models given")
        candidates = [spec]
    else:
        candidates = [sp for sp in specs if sp.family not in LEXICON_FAMILIES]
        if not candidates:
            raise InputError("s2lct consistency: no model to judge with (only lexicon models given)")
    measured = [(sp, overlap(sp, texts)) for sp in candidates]
    clean = [(sp, o) for sp, o in measured if o is None or o <= max_overlap]
    pool = clean or measured
    spec, share = max(pool, key=lambda so: so[0].accuracy if so[0].accuracy is not None else -1.0)
    notes = [
        f"judge: {spec.name} ({spec.family}, held-out accuracy {spec.accuracy}); trained on "
        + ("an unknown share" if share is None else f"{share:.0%}")
        + f" of the {len(texts)} corpus sentences the sampled seeds were built from"
    ]
    if share is not None and share > max_overlap:
        who = "the judge" if name else "every candidate judge"
        notes.append(
            f"WARNING: {who} trained on more than {max_overlap:.0%} of those sentences "
            f"({', '.join(f'{sp.name} {o:.0%}' for sp, o in measured if o is not None)}): its readings of the "
            "corpus parts repeat labels it was trained on, so agreement is inflated. Give a judge trained on other "
            "data (s2lct.consistency.judge), e.g. a zero-shot LLM."
        )
    return spec, share, notes


def judge_reader(spec: ModelSpec, neutral_label: str, cache: ContentCache | None = None):
    """texts -> readings ({label, neutral, p_positive}) of the judge model, and the
    ``CachedPredictor`` behind it: through the predictions cache, the judge runs (and is
    loaded) only for texts no run had it read; ``flush()`` stores what it read."""
    from checkray.actors.benchmark.cached import CachedPredictor
    from checkray.actors.models import load_model

    if spec.family in ZERO_SHOT_FAMILIES and neutral_label not in spec.labels:
        spec = spec.model_copy(update={"labels": [*spec.labels, neutral_label]})
    predictor = CachedPredictor(spec, lambda: load_model(spec), cache)
    answers = spec.family in ZERO_SHOT_FAMILIES  # an LLM that names no label gives the uniform row

    def read(texts: list[str]) -> list[dict]:
        probs = np.asarray(predictor(texts), dtype=float)
        labels = list(predictor.labels or [])
        out = []
        for row in probs:
            if answers and np.ptp(row) < 1e-9:
                out.append({"label": NO_ANSWER, "neutral": False, "p_positive": None})
                continue
            label = labels[int(np.argmax(row))]
            p_pos = float(row[labels.index("positive")]) if "positive" in labels else None
            binary = neutral_label not in labels and p_pos is not None and len(labels) == 2
            neutral = BAND[0] <= p_pos <= BAND[1] if binary else label == neutral_label
            out.append({"label": label, "neutral": bool(neutral), "p_positive": p_pos})
        return out

    return read, predictor


def case_rows(seeds: pa.Table, suite: pa.Table, search: pa.Table, specs: Sequence[CapabilitySpec]) -> list[dict]:
    """Every case with what the judge needs: its corpus parts (text, the label their rule
    required) and, for an expansion, its seed's text."""
    rule_label = {(sp.id, r.name): r.label for sp in specs for r in sp.search}
    text_of = dict(zip(search.column("id").to_pylist(), search.column("text").to_pylist()))
    parts = {}
    for sd in seeds.select(["case_id", "capability_id", "sources", "rules"]).to_pylist():
        pairs = zip(json.loads(sd["sources"]), json.loads(sd["rules"]))
        parts[sd["case_id"]] = [
            {"text": text_of[src], "needs": rule_label[(sd["capability_id"], rule)]} for src, rule in pairs
        ]
    rows = suite.select(["case_id", "capability", "text", "expected_label", "meta"]).to_pylist()
    text_by_id = {r["case_id"]: r["text"] for r in rows}
    out = []
    for r in rows:
        meta = json.loads(r["meta"])
        seed_id = meta.get("seed_case_id") or r["case_id"]
        out.append(
            {
                "case_id": r["case_id"],
                "capability_id": meta["capability_id"],
                "capability": r["capability"],
                "kind": meta["kind"],
                "seed_case_id": meta.get("seed_case_id"),
                "text": r["text"],
                "expected_label": r["expected_label"],
                "accepts": meta.get("accepts") or [],
                "label_source": meta.get("label_source"),
                "parts": parts[seed_id],
                "seed_text": text_by_id[seed_id] if meta["kind"] == "expansion" else None,
            }
        )
    return out


def registry_digests(s: S2lctConfig, models: Sequence[ModelSpec]) -> tuple[str, ...]:
    """Fingerprints of the model files a judge may come from: the registry file and
    every model path on disk."""
    files = [s.models] if s.models and os.path.exists(s.models) else []
    files += [sp.path for sp in models if sp.path and os.path.exists(sp.path)]
    return tuple(path_digest(f) for f in dict.fromkeys(files))


def consistency_stage(
    s: S2lctConfig,
    specs: Sequence[CapabilitySpec],
    models: Sequence[ModelSpec],
    seed: int,
    cache_cfg: CacheConfig | None = None,
) -> Stage:
    c = s.consistency

    def run(ctx: StageContext) -> dict[str, pa.Table]:
        seeds = ctx.input("seeds")
        suite = suite_table(seeds, ctx.input("expand"), filler_name(s.filler), seed)
        rows = case_rows(seeds, suite, ctx.input("parse", "search", columns=["id", "text"]), specs)
        sampled = sample_cases(rows, c.per_capability, seed)
        part_texts = list(dict.fromkeys(p["text"] for r in sampled for p in r["parts"]))
        judge, share, notes = choose_judge(models, c.judge, part_texts, c.max_overlap)
        # The content cache (any run, any --out): the judge reads only texts it never read.
        cache = open_cache(cache_cfg) if cache_cfg is None or cache_cfg.predictions else None
        read, predictor = judge_reader(judge, s.neutral_label, cache)
        checked = verdicts(sampled, read, neutral_label=s.neutral_label)
        predictor.flush()
        table = pa.Table.from_pylist([flat(r, judge.name) for r in checked])
        return {
            "data": table,
            "summary": pa.Table.from_pylist(summarize(checked)),
            "info": pa.table({"judge": [judge.name], "overlap": pa.array([share], pa.float64()), "notes": [notes]}),
        }

    return Stage(
        "consistency",
        run,
        inputs=("seeds", "expand", "parse"),
        config=[
            c,
            s.neutral_label,
            seed,
            [sp.model_dump(mode="json") for sp in models],
            list(specs),
            filler_name(s.filler),
        ],
        external=registry_digests(s, models),
    )


def flat(row: dict[str, Any], judge: str) -> dict[str, Any]:
    """A consistency.parquet row: parts and accepted labels as JSON."""
    keep = (
        "case_id capability_id capability kind seed_case_id text expected_label label_source judge_text judge_seed "
        "lexicon_text lexicon_seed agree_judge agree_lexicon agree_direct"
    ).split()
    out = {k: row.get(k) for k in keep}
    out.update(judge=judge, accepts=json.dumps(row["accepts"]), parts=json.dumps(row["parts"], ensure_ascii=False))
    return out
