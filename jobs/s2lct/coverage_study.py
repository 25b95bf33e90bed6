"""Why neuron coverage comes out the way it does: S²LCT vs CheckList suites of the same size
under several bound sizes and both neuron readings, for one torch model of a registry.

    python -m checkray.jobs.s2lct.coverage_study --run DIR --models zoo.yaml [--model minilm_ft]
        [--templates FILE ...] [--cases 500] [--train 500,1000,3000,all]

``DIR`` is a finished s2lct run (its suite.parquet). Prints one table row per (bound
size, reading, suite); docs/s2lct.md quotes it. One forward pass over the model's whole
training split and over each suite; bounds from subsets of the training activations.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pyarrow.parquet as pq

from checkray.actors.models import load_model
from checkray.engine.benchmark.registry import read_registry
from checkray.engine.s2lct.consistency import normalize
from checkray.engine.s2lct.coverage import (
    NEURONS,
    corner_coverage,
    layer_summaries,
    neuron_bounds,
    neuron_values,
    template_texts,
    training_texts,
)
from checkray.jobs.config import load_config

DEFAULT_TEMPLATES = ["configs/suites/sentiment_templates.jsonl"]


def _take(summary: dict, idx: np.ndarray) -> dict:
    return {k: v[idx] for k, v in summary.items()}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--model", default="minilm_ft")
    ap.add_argument("--templates", nargs="*", default=DEFAULT_TEMPLATES)
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--train", default="500,1000,3000,all")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def compared_suites(texts: list[str], args: argparse.Namespace, rng: np.random.Generator) -> dict[str, list[str]]:
    """``--cases`` random cases of the S²LCT suite and of each CheckList template suite."""
    suites = {"S2LCT": [texts[i] for i in rng.permutation(len(texts))[: args.cases]]}
    for path in args.templates:
        theirs = template_texts(path, args.cases, args.seed)
        suites[f"CheckList ({path.rsplit('/', 1)[-1]})"] = [
            theirs[i] for i in rng.permutation(len(theirs))[: args.cases]
        ]
    return suites


def suite_groups(texts: list[str], meta: list[dict], cases: int, rng: np.random.Generator) -> dict[str, list[str]]:
    """Parts of the S²LCT suite (seeds, expansions, plain sentences, templates), sampled to one size."""
    groups = {
        "S2LCT seeds": [t for t, m in zip(texts, meta) if m["kind"] == "seed"],
        "S2LCT expansions": [t for t, m in zip(texts, meta) if m["kind"] == "expansion"],
        "S2LCT LC1+LC2 (no template)": [t for t, m in zip(texts, meta) if m["capability_id"] in ("LC1", "LC2")],
        "S2LCT LC3-LC11 (templates)": [t for t, m in zip(texts, meta) if m["capability_id"] not in ("LC1", "LC2")],
    }
    n = min([cases] + [len(v) for v in groups.values() if v])
    return {k: [v[i] for i in rng.permutation(len(v))[:n]] for k, v in groups.items() if v}


def print_sizes(
    name: str, train: list[str], texts: list[str], meta: list[dict], compared: dict[str, list[str]]
) -> None:
    seen = {normalize(t) for t in train}
    plain = [t for t, m in zip(texts, meta) if m["kind"] == "seed" and m["capability_id"] in ("LC1", "LC2")]
    print(
        f"model {name}; training split {len(train)} sentences, mean {np.mean([len(t.split()) for t in train]):.1f} words"
    )
    for suite, xs in compared.items():
        print(f"  {suite}: {len(xs)} cases, mean {np.mean([len(t.split()) for t in xs]):.1f} words")
    print(f"  LC1/LC2 seeds that are training sentences: {sum(normalize(t) in seen for t in plain)} of {len(plain)}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    spec = next(s for s in read_registry(args.models) if s.name == args.model)
    clf = load_model(spec)
    model, tok, max_len = clf.model, clf.tokenizer, getattr(clf, "max_length", 64)
    rng = np.random.default_rng(args.seed)
    train = training_texts(spec, load_config(None).corpus.path, None, args.seed)
    rows = pq.read_table(f"{args.run}/suite.parquet").select(["text", "meta"]).to_pylist()
    meta = [json.loads(r["meta"]) for r in rows]
    texts = [r["text"] for r in rows]
    suites = compared_suites(texts, args, rng)
    groups = suite_groups(texts, meta, args.cases, rng)
    print_sizes(spec.name, train, texts, meta, {**suites, **groups})

    sizes = [len(train) if size == "all" else min(int(size), len(train)) for size in args.train.split(",")]
    order = rng.permutation(len(train))[: max(sizes)]  # one pass over the largest subset; smaller ones nest in it
    train_act = layer_summaries(model, tok, [train[i] for i in order], max_len)
    acts = {name: layer_summaries(model, tok, xs, max_len) for name, xs in {**suites, **groups}.items()}
    print("\n| bounds from | neurons | suite | cases | BoundCov | SActCov |\n| --- | --- | --- | ---: | ---: | ---: |")
    for k in sizes:
        sub = _take(train_act, np.arange(k))
        for neurons in NEURONS:
            low, high = neuron_bounds(*neuron_values(sub, neurons))
            names = list(suites) + (list(groups) if k == max(sizes) else [])
            for name in names:
                upper, lower = neuron_values(acts[name], neurons)
                c = corner_coverage(upper, low, high, lower)
                print(f"| {k} | {neurons} | {name} | {c.cases} | {c.bound_cov:.3f} | {c.sact_cov:.3f} |")


if __name__ == "__main__":
    main()
