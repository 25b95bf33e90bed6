"""The ``consistency`` stage of the s2lct job: a sample of the suite (every capability,
half seeds, half expansions of them) whose labels an offline judge checks (the paper's
RQ1, which people did). The sampling, the judge's choice and the verdicts are in
``engine/s2lct/consistency.py``; this module loads the judge, runs it through the
predictions cache and writes DIR/consistency.parquet (see docs/s2lct.md). A zero-shot LLM
judge is asked with the neutral label added to its labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from checkray.engine.benchmark.families import has_trait
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, ContentCache, open_cache
from checkray.engine.s2lct.config import S2lctConfig
from checkray.engine.s2lct.consistency import (
    case_rows,
    choose_judge,
    consistency_row,
    judge_reading,
    sample_cases,
    summarize,
    verdicts,
)
from checkray.engine.s2lct.spec import CapabilitySpec
from checkray.engine.stages import Stage, StageContext
from checkray.jobs.s2lct.stages import model_digests


def judge_reader(spec: ModelSpec, neutral_label: str, cache: ContentCache | None = None):
    """texts -> readings ({label, neutral, p_positive}) of the judge model, and the
    ``CachedPredictor`` behind it: through the predictions cache, the judge runs (and is
    loaded) only for texts no run had it read; ``flush()`` stores what it read."""
    from checkray.actors.benchmark.cached import CachedPredictor
    from checkray.actors.models import load_model

    if has_trait(spec, "zero_shot") and neutral_label not in spec.labels:
        spec = spec.model_copy(update={"labels": [*spec.labels, neutral_label]})
    predictor = CachedPredictor(spec, lambda: load_model(spec), cache)
    may_abstain = has_trait(spec, "zero_shot")  # an LLM that names no label gives the uniform row

    def read(texts: list[str]) -> list[dict]:
        probs = predictor(texts)
        labels = list(predictor.labels or [])
        return [judge_reading(row, labels, neutral_label, may_abstain=may_abstain) for row in probs]

    return read, predictor


def consistency_stage(
    s: S2lctConfig,
    specs: Sequence[CapabilitySpec],
    models: Sequence[ModelSpec],
    seed: int,
    cache_cfg: CacheConfig | None = None,
) -> Stage:
    c = s.consistency

    def run(ctx: StageContext) -> dict[str, pa.Table]:
        search = ctx.input("parse", "search", columns=["id", "text"])
        rows = case_rows(ctx.input("seeds"), ctx.input("suite"), search, specs)
        sampled = sample_cases(rows, c.per_capability, seed)
        part_texts = list(dict.fromkeys(p["text"] for r in sampled for p in r["parts"]))
        judge = choose_judge(models, c.judge, part_texts, c.max_overlap)
        # The content cache (any run, any --out): the judge reads only texts it never read.
        cache = open_cache(cache_cfg) if cache_cfg is None or cache_cfg.predictions else None
        read, predictor = judge_reader(judge.spec, s.neutral_label, cache)
        checked = verdicts(sampled, read, neutral_label=s.neutral_label)
        predictor.flush()
        return {
            "data": pa.Table.from_pylist([consistency_row(r, judge.spec.name) for r in checked]),
            "summary": pa.Table.from_pylist(summarize(checked)),
            "info": pa.table(
                {
                    "judge": [judge.spec.name],
                    "overlap": pa.array([judge.overlap], pa.float64()),
                    "notes": [list(judge.notes)],
                }
            ),
        }

    return Stage(
        "consistency",
        run,
        inputs=("seeds", "suite", "parse"),
        config=[c, s.neutral_label, seed, [sp.model_dump(mode="json") for sp in models], list(specs)],
        external=model_digests(s.models, models),
    )
