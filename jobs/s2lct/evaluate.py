"""S²LCT evaluation: the benchmark on the suite, Table 3 per model, neuron coverage
(Eq. 3–4) against a CheckList template suite of the same size, and minimal-token
explanations (Eq. 5) of a few failures.

Coverage needs a model's neurons, so it runs on the zoo's torch classifiers (family
``hf``, e.g. the fine-tuned MiniLM ``minilm_ft``); explanations only need predictions
and run on any model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from checkray.actors.models import load_model
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, ContentCache, open_cache
from checkray.engine.config import CorpusConfig
from checkray.engine.corpus import read_corpus
from checkray.engine.s2lct.coverage import coverage_curve, layer_summaries, minimal_tokens, neuron_bounds, neuron_values
from checkray.engine.splits import split_ids
from checkray.engine.stages import RunDir
from checkray.jobs.config import CheckrayConfig


@dataclass
class Evaluation:
    results: pa.Table
    summary: pa.Table
    table3: list[dict]
    coverage: list[dict] = field(default_factory=list)
    explanations: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    consistency: pa.Table | None = None  # the consistency stage's verdicts (DIR/consistency.parquet)
    consistency_summary: list[dict] = field(default_factory=list)
    consistency_info: dict = field(default_factory=dict)


def case_meta(suite: pa.Table) -> dict[str, dict]:
    return {
        cid: json.loads(m or "{}")
        for cid, m in zip(suite.column("case_id").to_pylist(), suite.column("meta").to_pylist())
    }


def _rate(fails: int, n: int) -> float | None:
    return round(100.0 * fails / n, 2) if n else None


def table3(results: pa.Table, suite: pa.Table) -> list[dict]:
    """Per model and capability: #seeds, seed fail %, #expansions, expansion fail %,
    pass-to-fail (expansions that fail while their seed passes)."""
    meta = case_meta(suite)
    outcome: dict[tuple[str, str], bool | None] = {}
    for model, cid, passed in zip(*(results.column(c).to_pylist() for c in ("model", "case_id", "pass"))):
        outcome[(model, cid)] = passed
    models = list(dict.fromkeys(results.column("model").to_pylist()))
    capabilities = list(dict.fromkeys(suite.column("capability").to_pylist()))
    cap_of = dict(zip(suite.column("case_id").to_pylist(), suite.column("capability").to_pylist()))
    rows = []
    for model in models:
        for cap in capabilities:
            seeds = [c for c, m in meta.items() if cap_of[c] == cap and m.get("kind") == "seed"]
            exps = [c for c, m in meta.items() if cap_of[c] == cap and m.get("kind") == "expansion"]
            seed_eval = [outcome.get((model, c)) for c in seeds]
            exp_eval = [outcome.get((model, c)) for c in exps]
            seed_n = sum(v is not None for v in seed_eval)
            exp_n = sum(v is not None for v in exp_eval)
            p2f = sum(
                1
                for c, v in zip(exps, exp_eval)
                if v is False and outcome.get((model, meta[c]["seed_case_id"])) is True
            )
            rows.append(
                {
                    "model": model,
                    "capability": cap,
                    "seeds": len(seeds),
                    "seed_fail_pct": _rate(sum(v is False for v in seed_eval), seed_n),
                    "expansions": len(exps),
                    "exp_fail_pct": _rate(sum(v is False for v in exp_eval), exp_n),
                    "pass_to_fail": p2f if exp_n else None,
                }
            )
    return rows


def training_texts(spec: ModelSpec, cfg: CheckrayConfig, n: int | None, seed: int) -> list[str]:
    """A sample of ``n`` sentences (None: all) of the zoo's train split the model learned from."""
    corpus = read_corpus(CorpusConfig(path=spec.meta.get("corpus", cfg.corpus.path)))
    split = split_ids(corpus, float(spec.meta.get("held_out", 0.2)), int(spec.meta.get("split_seed", 0)))
    train = [
        t for i, t in zip(corpus.column("id").to_pylist(), corpus.column("text").to_pylist()) if split[i] == "train"
    ]
    rng = np.random.default_rng(seed)
    return [train[i] for i in rng.choice(len(train), size=min(n or len(train), len(train)), replace=False)]


def template_texts(path: str, n: int, seed: int) -> list[str]:
    from checkray.engine.templates.expand import expand, read_spec

    templates = read_spec(path)
    per = math.ceil(n / max(1, len(templates))) + 1
    return expand(templates, suite="checklist", nsamples=per, seed=seed).cases.column("text").to_pylist()


def coverage_rows(
    cfg: CheckrayConfig, s, suite: pa.Table, targets: Sequence[tuple[ModelSpec, Any]], seed: int
) -> list[dict]:
    c = s.coverage
    rng = np.random.default_rng(seed)
    ours = suite.column("text").to_pylist()
    theirs = template_texts(c.templates, min(c.max_cases, len(ours)), seed)
    m = min(c.max_cases, len(ours), len(theirs))
    ours = [ours[i] for i in rng.permutation(len(ours))[:m]]
    theirs = [theirs[i] for i in rng.permutation(len(theirs))[:m]]
    sizes = sorted({max(1, round(m * (i + 1) / c.points)) for i in range(c.points)})
    rows = []
    for spec, clf in targets:
        model, tok, max_len = clf.model, clf.tokenizer, getattr(clf, "max_length", 64)
        train = layer_summaries(model, tok, training_texts(spec, cfg, c.train_sample, seed), max_len)
        suites = {
            name: layer_summaries(model, tok, texts, max_len)
            for name, texts in (("S2LCT", ours), ("CheckList", theirs))
        }
        for neurons in c.neurons:
            low, high = neuron_bounds(*neuron_values(train, neurons))
            for name, summary in suites.items():
                upper, lower = neuron_values(summary, neurons)
                for cov in coverage_curve(upper, low, high, sizes, lower):
                    rows.append(
                        {
                            "model": spec.name,
                            "neurons": neurons,
                            "suite": name,
                            "cases": cov.cases,
                            "neurons_total": cov.neurons,
                            "BoundCov": round(cov.bound_cov, 4),
                            "SActCov": round(cov.sact_cov, 4),
                        }
                    )
    return rows


def explanation_rows(
    results: pa.Table,
    suite: pa.Table,
    targets: Sequence[tuple[ModelSpec, Any]],
    s,
    cache: ContentCache | None = None,
) -> list[dict]:
    """Eq. 5 on up to ``explain.failures`` failures per model: pass-to-fail expansions
    first, one per capability before a second one of any. The masked variants' predictions
    go through the predictions cache (``cache``): a rerun scores none of them again."""
    from checkray.actors.benchmark.cached import CachedPredictor

    meta = case_meta(suite)
    rows = []
    for spec, clf in targets:
        predictor = CachedPredictor(spec, lambda clf=clf: clf, cache, labels=clf.labels)
        rows += _explain(results, meta, spec, clf, predictor, s)
        predictor.flush()
    return rows


def _explain(results, meta, spec: ModelSpec, clf, predictor, s) -> list[dict]:
    """One model's explanation rows; ``predictor``: the model through the cache."""
    rows = []
    sub = results.filter(pa.compute.equal(results.column("model"), spec.name)).to_pylist()
    outcome = {r["case_id"]: r["pass"] for r in sub}
    fails = [r for r in sub if r["pass"] is False and r["predicted"] in clf.labels]
    fails.sort(key=lambda r: 0 if outcome.get(meta[r["case_id"]].get("seed_case_id")) is True else 1)
    picked, seen = [], set()
    for r in fails:  # one per capability first, then the rest
        if r["capability"] not in seen and len(picked) < s.explain.failures:
            picked.append(r)
            seen.add(r["capability"])
    picked += [r for r in fails if r not in picked][: s.explain.failures - len(picked)]
    for r in picked:
        tokens = r["text"].split()
        label = clf.labels.index(r["predicted"])
        expl = minimal_tokens(
            tokens,
            lambda texts: np.asarray(predictor(texts), dtype=float),
            label,
            s.explain.p_thresh,
            s.explain.mask_token,
        )
        rows.append(
            {
                "model": spec.name,
                "capability": r["capability"],
                "kind": meta[r["case_id"]].get("kind"),
                "text": r["text"],
                "expected": r["expected_label"],
                "predicted": r["predicted"],
                "minimal tokens": " ".join(tokens[i] for i in expl.kept),
                "kept": f"{len(expl.kept)}/{len(tokens)}",
                "P(predicted)": round(expl.probability, 3),
                "reached": expl.reached,
            }
        )
    return rows


def evaluate_suite(
    cfg: CheckrayConfig, s, suite: pa.Table, specs: list[ModelSpec], run: RunDir, seed: int
) -> Evaluation:
    from checkray.jobs.benchmark.job import run_benchmark

    results, summary = run_benchmark(suite, specs, cfg, RunDir(f"{run.uri.rstrip('/')}/benchmark"))
    ev = Evaluation(results, summary, table3(results, suite))
    torch_specs = [
        sp for sp in specs if sp.family == "hf" and (s.coverage.models is None or sp.name in s.coverage.models)
    ]
    explain_names = (
        s.explain.models if s.explain.models is not None else [sp.name for sp in torch_specs] or [specs[0].name]
    )
    loaded: dict[str, Any] = {}

    def model(spec: ModelSpec):
        if spec.name not in loaded:
            loaded[spec.name] = load_model(spec)
        return loaded[spec.name]

    if s.coverage.enabled and torch_specs:
        ev.coverage = coverage_rows(cfg, s, suite, [(sp, model(sp)) for sp in torch_specs], seed)
    elif s.coverage.enabled:
        ev.notes.append("neuron coverage: no torch (family hf) model among the models under test")
    explain_specs = [sp for sp in specs if sp.name in explain_names]
    if s.explain.failures and explain_specs:
        cache_cfg = cfg.section(CacheConfig)
        cache = open_cache(cache_cfg) if cache_cfg.predictions else None
        ev.explanations = explanation_rows(results, suite, [(sp, model(sp)) for sp in explain_specs], s, cache)
    run.write_table("table3.parquet", pa.Table.from_pylist(ev.table3))
    if ev.coverage:
        run.write_table("coverage.parquet", pa.Table.from_pylist(ev.coverage))
    return ev
