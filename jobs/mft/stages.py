"""The mft job's stages around generation (``jobs/mft/generate.py``): representatives of
the topics run per split, MFT topics of the kept cases, the suite, and the evaluation of
models on it (Tables 7 and 8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.benchmark.provenance import model_identity
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, open_cache
from checkray.engine.case_checks import apply_checks, rejected_table
from checkray.engine.config import RepresentationConfig, RepresentativesConfig
from checkray.engine.corpus import apply_label_map, sample_rows
from checkray.engine.errors import EmptySuiteError, InputError
from checkray.engine.label_classifier import fitted_confidence
from checkray.engine.mft.checks import classifier_checks
from checkray.engine.mft.config import ClassifierCheckConfig, MFTConfig
from checkray.engine.mft.generation import CASE_ROW_SCHEMA, GATE_SCHEMA, rejected_case
from checkray.engine.mft.suite import check_label_words, to_suite
from checkray.engine.mft.tables import mft_table7, mft_table8, rows_table
from checkray.engine.splits import split_ids
from checkray.engine.stages import RunDir, Stage, StageContext
from checkray.engine.topics.describe import describe_clusters
from checkray.jobs.config import CheckrayConfig
from checkray.jobs.mft.topics import mft_topic_names
from checkray.jobs.mft.topics_run import load_topics_run, topics_fingerprint

BENCHMARK_DIR = "benchmark"  # the evaluation's benchmark run, inside the mft run


def representatives_stage(m: MFTConfig, topics_dir: str, seed: int, names: dict[str, str] | None = None) -> Stage:
    """Representative documents (MMR, stratified by label) of every topic of the topics
    run, per split (the zoo's train/held-out split), and every document with its split."""
    m = m.view("test_fraction", "split_seed", "splits", "representatives_per_cluster", "diversity", "label_words")

    def run(ctx: StageContext):
        corpus, assignments = load_topics_run(topics_dir)
        if names:  # corpus.labels / --labels: name a topics run's raw labels
            idx = corpus.column_names.index("label")
            corpus = corpus.set_column(idx, "label", apply_label_map(corpus.column("label"), names, topics_dir))
        split = split_ids(corpus, m.test_fraction, m.split_seed)
        cluster_of = dict(zip(assignments.column("id").to_pylist(), assignments.column("cluster").to_pylist()))
        reps = pa.concat_tables([split_representatives(corpus, split, cluster_of, name, m, seed) for name in m.splits])
        labels = set(reps.column("label").to_pylist()) - {None}
        if not labels:
            raise InputError(f"{topics_dir}: the topics run has no labeled representatives; the mft job needs labels")
        check_label_words(labels, m.label_words, names)
        docs = corpus.append_column("split", pa.array([split[i] for i in corpus.column("id").to_pylist()]))
        return {"data": reps, "corpus": docs.select(["id", "text", "label", "split"])}

    return Stage("representatives", run, config=[m, seed, names], external=(topics_fingerprint(topics_dir),))


def split_representatives(
    corpus: pa.Table, split: dict[str, str], cluster_of: dict[str, int], name: str, m, seed: int
) -> pa.Table:
    """The representatives of each topic among the documents of split ``name``."""
    sub = corpus.filter(pa.array([split[i] == name for i in corpus.column("id").to_pylist()]))
    clusters = np.array([cluster_of[i] for i in sub.column("id").to_pylist()])
    _, reps = describe_clusters(
        sub,
        clusters,
        RepresentationConfig(),
        RepresentativesConfig(top_k=m.representatives_per_cluster, diversity=m.diversity),
        seed=seed,
    )
    return reps.append_column("split", pa.array([name] * reps.num_rows))


def classifier_check_stage(check: ClassifierCheckConfig, seed: int, cache_cfg: CacheConfig | None = None) -> Stage:
    """The kept cases through the classifier's label check (``engine/mft/checks.py``): a
    logistic regression on ``check.encoder`` embeddings of a seeded sample of the labeled
    corpus (the ``corpus.sample`` rule, so S²LCT's searched sample with the same seed hits
    the same cached embeddings) scores each distinct text's expected label."""

    def run(ctx: StageContext):
        from checkray.actors.embed_cache import cluster_plan, embed_texts, sentence_model
        from checkray.actors.embedder import resolve_model

        resolve_model(check.encoder)  # a missing model path fails here, not inside an actor
        corpus = ctx.input("representatives", "corpus").filter(pc.is_valid(pc.field("label")))
        train = sample_rows(corpus, check.train_size or corpus.num_rows, seed)
        cases = ctx.input("generate").to_pylist()
        texts = sorted({r["text"] for r in cases})
        cache = open_cache(cache_cfg) if cache_cfg is None or cache_cfg.embeddings else None
        model = sentence_model(check.encoder, normalize=True)
        inputs = train.column("text").to_pylist() + texts
        vectors = embed_texts(inputs, model, cache=cache, plan=cluster_plan(texts=len(inputs)))
        labels = {r["text"]: r["label"] for r in cases}  # a text keeps one label across versions
        p = fitted_confidence(
            vectors[: train.num_rows],
            train.column("label").to_pylist(),
            vectors[train.num_rows :],
            [labels[t] for t in texts],
        )
        outcome = apply_checks(
            cases, classifier_checks(dict(zip(texts, p.tolist())), check.min_confidence, check.lexicon_agrees)
        )
        if not outcome.kept:
            raise EmptySuiteError(
                f"the mft job kept no test case: the classifier check rejected all {len(cases)} (classifier "
                f"p < {check.min_confidence:g} or VADER against the label); lower mft.classifier_check."
                "min_confidence, or set mft.classifier_check.encoder to null to turn the check off"
            )
        return {
            "data": pa.Table.from_pylist(
                [{k: r.get(k) for k in CASE_ROW_SCHEMA.names} for r in outcome.kept], CASE_ROW_SCHEMA
            ),
            "rejected": pa.concat_tables(
                [ctx.input("generate", "rejected"), rejected_table([rejected_case(r) for r in outcome.rejected])]
            ),
            "gates": pa.concat_tables([ctx.input("generate", "gates"), classifier_gates(cases, outcome)]),
        }

    return Stage("classifier_check", run, inputs=("representatives", "generate"), config=[check, seed])


def classifier_gates(cases: list[dict], outcome) -> pa.Table:
    """One gate row per split x version: the cases the classifier check kept and dropped."""
    keys = sorted({(r["split"], r["version"]) for r in cases})
    rows = []
    for split, version in keys:
        kept = sum(1 for r in outcome.kept if (r["split"], r["version"]) == (split, version))
        dropped = [r for r in outcome.rejected if (r["split"], r["version"]) == (split, version)]
        why = {name: sum(1 for r in dropped if r["check"] == name) for name in ("classifier label", "lexicon agrees")}
        note = ", ".join(f"{name} {n}" for name, n in why.items() if n)
        rows.append(
            dict(
                gate="classifier check",
                split=split,
                version=version,
                kept=kept,
                dropped=len(dropped),
                note=note,
                seconds=None,
            )
        )
    return pa.Table.from_pylist(rows, schema=GATE_SCHEMA)


def mft_topics_stage(
    m: MFTConfig, embed: Callable[[list[str]], np.ndarray], seed: int, source: str = "generate"
) -> Stage:
    """Second-level clustering of the kept MFT texts (``source``: the stage that kept them)
    into MFT topics (§2.4.3)."""

    def run(ctx: StageContext):
        cases = ctx.input(source)
        texts = cases.column("text").to_pylist()
        topics = mft_topic_names(texts, embed(texts), m.mft_topics, seed)
        return {"data": cases.append_column("mft_topic", pa.array(topics, pa.string()))}

    return Stage("mft_topics", run, inputs=(source,), config=[m, seed])


def suite_stage(generator: str) -> Stage:
    """The kept cases as suites in the common schema (``mft-<split>-original|extended``);
    ``generator`` (the LLM's name) goes into every case's provenance."""

    def run(ctx: StageContext):
        return {"data": to_suite(ctx.input("mft_topics"), generator=generator)}

    return Stage("suite", run, inputs=("mft_topics",), config=[generator])


def evaluate_stage(cfg: CheckrayConfig, specs: Sequence[ModelSpec]) -> Stage:
    """The models benchmarked on the suite (a benchmark run in ``<run>/benchmark``, whose
    own checkpoints make a rerun cheap), in the layouts of Li et al.'s Tables 7 and 8.
    Table 7 shows each model's registry accuracies, so the whole entries are fingerprinted."""
    specs = list(specs)

    def run(ctx: StageContext):
        from checkray.jobs.benchmark.job import run_benchmark

        out = RunDir(ctx.run.path(BENCHMARK_DIR))
        results, _ = run_benchmark(ctx.input("suite"), specs, cfg, out=out)
        return {"table7": rows_table(mft_table7(results, specs)), "table8": rows_table(mft_table8(results))}

    identities = [model_identity(s.model_dump(mode="json")) for s in specs]
    return Stage("evaluate", run, inputs=("suite",), config=[cfg.section("benchmark"), identities])
