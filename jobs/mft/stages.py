"""The mft job's stages around generation (``jobs/mft/generate.py``): representatives of
the topics run per split, MFT topics of the kept cases, the suite, and the evaluation of
models on it (Tables 7 and 8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.provenance import model_identity
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.config import RepresentationConfig, RepresentativesConfig
from checkray.engine.corpus import apply_label_map
from checkray.engine.errors import InputError
from checkray.engine.mft.config import MFTConfig
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


def mft_topics_stage(m: MFTConfig, embed: Callable[[list[str]], np.ndarray], seed: int) -> Stage:
    """Second-level clustering of the kept MFT texts into MFT topics (§2.4.3)."""

    def run(ctx: StageContext):
        cases = ctx.input("generate")
        texts = cases.column("text").to_pylist()
        topics = mft_topic_names(texts, embed(texts), m.mft_topics, seed)
        return {"data": cases.append_column("mft_topic", pa.array(topics, pa.string()))}

    return Stage("mft_topics", run, inputs=("generate",), config=[m, seed])


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
