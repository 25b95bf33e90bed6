"""The stages that evaluate an S²LCT suite on models (with ``--models``):

benchmark  the benchmark job on the suite, run into DIR/benchmark (its own checkpoints,
           leaderboard and published files)
table3     S²LCT Table 3 per model (engine/s2lct/tables.py) -> DIR/table3.parquet
coverage   neuron coverage (Eq. 3–4) of the models exposing neurons against a CheckList
           template suite of the same size -> DIR/coverage.parquet
explain    minimal-token explanations (Eq. 5) of a few failures per model

The maths is in ``engine/s2lct/`` (tables, coverage, explain); here the models are loaded
(``actors/models``) and run through the predictions cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, ContentCache, open_cache
from checkray.engine.s2lct.config import CoverageConfig, ExplainConfig
from checkray.engine.s2lct.coverage import COVERAGE_SCHEMA, coverage_sample, model_coverage_rows, training_texts
from checkray.engine.s2lct.explain import EXPLANATION_SCHEMA, explanation_rows
from checkray.engine.s2lct.tables import s2lct_table3
from checkray.engine.stages import Stage, StageContext
from checkray.jobs.base import run_job
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.config import CheckrayConfig
from checkray.jobs.s2lct.stages import file_digests, model_digests

BENCHMARK_DIR = "benchmark"  # the benchmark run's directory inside the s2lct run
# What Table 3 and the explanations read of the benchmark's results.
RESULT_COLUMNS = ["model", "case_id", "capability", "text", "expected_label", "predicted", "pass"]


def benchmark_stage(cfg: CheckrayConfig, models: Sequence[ModelSpec], registry: str | None) -> Stage:
    """The benchmark job on the suite, into DIR/benchmark; keeps the result columns the
    later stages read (from the benchmark's published results.parquet)."""
    models = list(models)

    def run(ctx: StageContext):
        from checkray.jobs.benchmark.job import BenchmarkJob

        out = f"{ctx.run.uri.rstrip('/')}/{BENCHMARK_DIR}"
        result = run_job(BenchmarkJob(cfg, models, [ctx.input("suite")]), out)
        return {"data": result.table("results.parquet", columns=RESULT_COLUMNS)}

    return Stage(
        "benchmark",
        run,
        inputs=("suite",),
        config=[cfg.section(BenchmarkConfig), [sp.model_dump(mode="json") for sp in models]],
        external=model_digests(registry, models),
    )


def table3_stage() -> Stage:
    """S²LCT Table 3 from the suite and the benchmark's verdicts."""

    def run(ctx: StageContext):
        return {
            "data": s2lct_table3(ctx.input("benchmark"), ctx.input("suite", columns=["case_id", "capability", "meta"]))
        }

    return Stage("table3", run, inputs=("suite", "benchmark"))


def coverage_stage(
    c: CoverageConfig, models: Sequence[ModelSpec], seed: int, default_corpus: str, registry: str | None
) -> Stage:
    """Neuron coverage of ``models`` (torch classifiers); bounds from the split each
    trained on (its ``meta.corpus``, else ``default_corpus``: the run's corpus)."""
    models = list(models)
    corpora = [sp.meta.get("corpus", default_corpus) for sp in models]

    def run(ctx: StageContext):
        from checkray.actors.models import load_model

        sample = coverage_sample(ctx.input("suite", columns=["text"]).column("text").to_pylist(), c, seed)
        rows = []
        for spec in models:
            clf = load_model(spec)
            train = training_texts(spec, default_corpus, c.train_sample, seed)
            max_length = getattr(clf, "max_length", 64)
            rows += model_coverage_rows(spec.name, clf.model, clf.tokenizer, train, sample, c.neurons, max_length)
        return {"data": pa.Table.from_pylist(rows, schema=COVERAGE_SCHEMA)}

    return Stage(
        "coverage",
        run,
        inputs=("suite",),
        config=[c, seed, default_corpus, [sp.model_dump(mode="json") for sp in models]],
        external=(*model_digests(registry, models), *file_digests([c.templates, *corpora])),
    )


def explain_stage(e: ExplainConfig, models: Sequence[ModelSpec], cache_cfg: CacheConfig, registry: str | None) -> Stage:
    """Minimal-token explanations of up to ``e.failures`` failures per model."""
    models = list(models)

    def run(ctx: StageContext):
        from checkray.actors.models import load_model

        cache = open_cache(cache_cfg) if cache_cfg.predictions else None
        targets = [(spec, load_model(spec)) for spec in models]
        suite = ctx.input("suite", columns=["case_id", "meta"])
        rows = explain_failures(ctx.input("benchmark"), suite, targets, e, cache)
        return {"data": pa.Table.from_pylist(rows, schema=EXPLANATION_SCHEMA)}

    return Stage(
        "explain",
        run,
        inputs=("suite", "benchmark"),
        config=[e, [sp.model_dump(mode="json") for sp in models]],
        external=model_digests(registry, models),
    )


def explain_failures(
    results: pa.Table,
    suite: pa.Table,
    targets: Sequence[tuple[ModelSpec, Any]],
    e: ExplainConfig,
    cache: ContentCache | None = None,
) -> list[dict]:
    """Eq. 5 on the failures of each loaded model of ``targets``. The masked variants'
    predictions go through the predictions cache (``cache``): a rerun scores none of them again."""
    from checkray.actors.benchmark.cached import CachedPredictor

    rows = []
    for spec, clf in targets:
        predictor = CachedPredictor(spec, lambda clf=clf: clf, cache, labels=clf.labels)
        rows += explanation_rows(spec.name, results, suite, clf.labels, _probabilities(predictor), e)
        predictor.flush()
    return rows


def _probabilities(predictor):
    return lambda texts: np.asarray(predictor(texts), dtype=float)
