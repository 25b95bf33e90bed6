"""The ``mft`` job (Li et al.): topics-job output -> labeled, de-duplicated, paraphrased
Minimum Functionality Tests in the common schema, second-level MFT topics, evaluation.

    checkray mft --topics DIR --out DIR2   ->  DIR2/suite.parquet, report.html, manifest.json

Per split (train/test of the topics corpus, the zoo's split) and per version (seed):
representatives (MMR, stratified) -> one few-shot example per label -> ~4 MFTs per
representative -> exact + near de-duplication -> paraphrases ("Extended") -> LLM label
gate. Then all kept cases are clustered again (embed, UMAP, k-means, c-TF-IDF) into MFT
topics. Suites: ``mft-<split>-original`` and ``mft-<split>-extended`` (original cases
plus their paraphrases), ``meta.version`` = the version number.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import typer

from checkray.actors.llm.chat import chat_key, chat_name, chat_session
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.config import RepresentationConfig, RepresentativesConfig
from checkray.engine.corpus import apply_label_map
from checkray.engine.errors import InputError
from checkray.engine.labels import parse_label_map
from checkray.engine.llm import LLMConfig
from checkray.engine.mft.suite import check_label_words, named_label_words
from checkray.engine.report import Section
from checkray.engine.schema import case_id, make_cases
from checkray.engine.splits import split_ids
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner
from checkray.engine.topics.describe import describe_clusters
from checkray.jobs.base import Job, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.mft.config import MFTConfig
from checkray.jobs.mft.embedder import open_embedder
from checkray.jobs.mft.generate import (
    collect_stage,
    generation_stage,
)
from checkray.jobs.mft.report import mft_sections
from checkray.jobs.options import Labels
from checkray.jobs.zoo.resolve import select_models

SUITE_FILE = "suite.parquet"
TOPICS_FILES = ("stages/corpus/data.parquet", "assignments.parquet", "clusters.parquet")


def check_topics_run(topics_dir: str) -> None:
    """A one-line error unless ``topics_dir`` is a finished topics run."""
    run = RunDir(topics_dir)
    for rel in TOPICS_FILES:
        if not run.exists(rel):
            raise InputError(f"{topics_dir}: not a finished topics run (missing {rel}); run `checkray topics` first")


def load_topics_run(topics_dir: str) -> tuple[pa.Table, pa.Table]:
    """(corpus, assignments) of a finished topics run."""
    check_topics_run(topics_dir)
    run = RunDir(topics_dir)
    corpus = run.read_table("stages/corpus/data.parquet")
    assignments = run.read_table("assignments.parquet", columns=["id", "cluster"])
    return corpus, assignments


def representatives_stage(m: MFTConfig, topics_dir: str, seed: int, names: dict[str, str] | None = None) -> Stage:
    m = m.view("test_fraction", "split_seed", "splits", "representatives_per_cluster", "diversity", "label_words")

    def run(ctx: StageContext):
        corpus, assignments = load_topics_run(topics_dir)
        if names:  # corpus.labels / --labels: name a topics run's raw labels
            idx = corpus.column_names.index("label")
            corpus = corpus.set_column(idx, "label", apply_label_map(corpus.column("label"), names, topics_dir))
        split = split_ids(corpus, m.test_fraction, m.split_seed)
        cluster_of = dict(zip(assignments.column("id").to_pylist(), assignments.column("cluster").to_pylist()))
        parts = []
        for name in m.splits:
            mask = pa.array([split[i] == name for i in corpus.column("id").to_pylist()])
            sub = corpus.filter(mask)
            clusters = np.array([cluster_of[i] for i in sub.column("id").to_pylist()])
            _, reps = describe_clusters(
                sub,
                clusters,
                RepresentationConfig(),
                RepresentativesConfig(top_k=m.representatives_per_cluster, diversity=m.diversity),
                seed=seed,
            )
            parts.append(reps.append_column("split", pa.array([name] * reps.num_rows)))
        reps = pa.concat_tables(parts)
        labels = set(reps.column("label").to_pylist()) - {None}
        if not labels:
            raise InputError(f"{topics_dir}: the topics run has no labeled representatives; the mft job needs labels")
        check_label_words(labels, m.label_words, names)
        docs = corpus.append_column("split", pa.array([split[i] for i in corpus.column("id").to_pylist()]))
        return {"data": reps, "corpus": docs.select(["id", "text", "label", "split"])}

    return Stage("representatives", run, config=[m, seed, names], external=(topics_fingerprint(topics_dir),))


def topics_fingerprint(topics_dir: str) -> str:
    """What identifies a topics run's content: its committed stage fingerprints."""
    run = RunDir(topics_dir)
    parts = []
    for stage in ("corpus", "layout"):
        rel = f"stages/{stage}/_SUCCESS.json"
        parts.append(json.loads(run.read_text(rel))["fingerprint"] if run.exists(rel) else "missing")
    return ":".join(parts)


def mft_topics_stage(m: MFTConfig, embed, seed: int) -> Stage:
    """Second-level clustering of the kept MFT texts (§2.4.3)."""

    def run(ctx: StageContext):
        from checkray.engine.topics.ctfidf import fit_class_tfidf, topic_name
        from checkray.jobs.mft.topics import mft_topic_clusters

        cases = ctx.input("generate")
        texts = cases.column("text").to_pylist()
        clusters = mft_topic_clusters(embed(texts), m.mft_topics, seed)
        model = fit_class_tfidf(texts, clusters, min_df=1)
        names = {int(c): topic_name(int(c), [w for w, _ in kw], 4) for c, kw in zip(model.classes, model.keywords(4))}
        return {"data": cases.append_column("mft_topic", pa.array([names[int(c)] for c in clusters]))}

    return Stage("mft_topics", run, inputs=("generate",), config=[m, seed])


def to_suite(cases: pa.Table, generator: str) -> pa.Table:
    """Common-schema suite: original cases in ``-original`` and (again) in ``-extended``
    with their paraphrases, so each suite is self-contained for the benchmark."""
    rows = []
    for r in cases.to_pylist():
        suites = [f"mft-{r['split']}-extended"] + ([] if r["paraphrase_of"] else [f"mft-{r['split']}-original"])
        for suite in suites:
            rows.append(
                {
                    "suite": suite,
                    "method": "mft",
                    "capability": r["source_topic"],
                    "topic": r["mft_topic"],
                    "text": r["text"],
                    "expected_label": r["label"],
                    "test_type": "MFT",
                    "case_id": None,
                    "provenance": {
                        "source_id": r["source_id"],
                        "template_id": "mft_paraphrase" if r["paraphrase_of"] else "mft_generate",
                        "generator": generator,
                        "seed": r["seed"],
                    },
                    "meta": {
                        "version": r["version"],
                        "split": r["split"],
                        "summary": r["summary"],
                        "paraphrase_of": r["paraphrase_of"],
                        "llm_reason": r["llm_reason"],
                    },
                }
            )
    # the same text may be generated in two versions: ids include the version
    for row in rows:
        row["case_id"] = case_id(row["suite"], row["meta"]["version"], row["text"])
    unique = {row["case_id"]: row for row in rows}
    return make_cases(unique.values())


class MFTJob(Job[MFTConfig]):
    """representatives -> generate (one stage per split x version, the LLM) -> collect ->
    MFT topics; publishes suite.parquet and, with models, evaluates them on it."""

    name, title, section = "mft", "checkray · MFTs (Li et al.)", MFTConfig
    published = (SUITE_FILE,)

    def __init__(
        self, cfg: CheckrayConfig, models: Sequence[ModelSpec] | None = None, *, topics_dir: str, chat=None, embed=None
    ):
        super().__init__(cfg, models)
        self.topics_dir = topics_dir
        self.chat, self.embed = chat, embed  # None: the llm: backend, the mft.embedder model

    def check(self) -> None:
        check_topics_run(self.topics_dir)

    def subtitle(self) -> str:
        return f"topics run {self.topics_dir}"

    @cached_property
    def specs(self) -> list[ModelSpec] | None:
        return select_models(self.models, self.conf.models)

    def stages(self):
        m, llm, names = self.conf, self.cfg.section(LLMConfig), self.cfg.corpus.labels
        # label_words may be keyed by raw labels (0: negative) or names: one lookup by name
        m = m.model_copy(update={"label_words": named_label_words(m.label_words, names)})
        embed = self.embed or open_embedder(m.embedder)
        yield representatives_stage(m, self.topics_dir, self.seed, names)
        with chat_session(self.chat, llm) as chat:  # the LLM actors end with the generation
            parts = [
                generation_stage(m, llm, self.seed, chat, embed, split, version, chat_key(self.chat, llm))
                for split in m.splits
                for version in range(1, m.versions + 1)
            ]
            yield from parts
        yield collect_stage([p.name for p in parts])
        yield mft_topics_stage(m, embed, self.seed)

    def publish(self, runner: StageRunner) -> list[Section]:
        suite = to_suite(runner.output("mft_topics"), generator=chat_name(self.chat, self.cfg.section(LLMConfig)))
        runner.run.write_table(SUITE_FILE, suite)
        evaluation = None
        if self.specs:
            from checkray.jobs.mft.evaluate import evaluate_mft

            evaluation = evaluate_mft(self.cfg, suite, self.specs, runner.run)
        return mft_sections(runner, suite, evaluation)


def run_mft(cfg: CheckrayConfig, topics_dir: str, out: str, chat=None, embed=None) -> tuple[RunDir, list[Section]]:
    """Run the job; ``chat``/``embed`` default to the configured LLM actor pool and embedder.
    Returns the run directory and the report sections."""
    result = run_job(MFTJob(cfg, topics_dir=topics_dir, chat=chat, embed=embed), out)
    return result.run, result.sections


def mft_command(
    topics: str = typer.Option(..., "--topics", help="Output directory of `checkray topics`."),
    out: str = typer.Option(..., "--out", "-o", help="Run directory for the suite and report."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config (mft: and llm: sections)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Generator backend: auto, local, http, vllm."),
    models: Optional[str] = typer.Option(None, "--models", help="Registry or zoo recipe to evaluate on the suite."),
    versions: Optional[int] = typer.Option(None, "--versions", help="Versions (seeds) per split."),
    labels: Labels = None,
):
    """Generate Minimum Functionality Tests from a topics run with an LLM (Li et al.)."""
    cfg = load_config(
        config,
        {
            "llm.backend": backend,
            "mft.models": models,
            "mft.versions": versions,
            "corpus.labels": parse_label_map(labels),
        },
    )
    run, _ = run_mft(cfg, topics, out)
    suite = pq.read_table(run.path("suite.parquet"), filesystem=run.fs)
    counts = json.dumps(
        {s: suite.column("suite").to_pylist().count(s) for s in sorted(set(suite.column("suite").to_pylist()))}
    )
    console.print(f"wrote {run.path('suite.parquet')} ({suite.num_rows} cases: {counts}) and report.html")
