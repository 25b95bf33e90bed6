"""The ``mft`` job (Li et al.): topics-job output -> labeled, de-duplicated, paraphrased
Minimum Functionality Tests in the common schema, second-level MFT topics, evaluation.

    checkray mft --topics DIR --out DIR2   ->  DIR2/suite.parquet, report.html, manifest.json

Per split (train/test of the topics corpus, the zoo's split) and per version (seed):
representatives (MMR, stratified) -> one few-shot example per label -> ~4 MFTs per
representative -> exact + near de-duplication -> paraphrases ("Extended") -> LLM label
gate. Then the label check by a classifier of the corpus (``mft.classifier_check``), and
all kept cases are clustered again (embed, UMAP, k-means, c-TF-IDF) into MFT topics. Suites: ``mft-<split>-original`` and ``mft-<split>-extended`` (original cases
plus their paraphrases), ``meta.version`` = the version number. With models, the evaluate
stage benchmarks them on the suite (``DIR2/benchmark``) in the layouts of Tables 7 and 8.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Optional

import typer

from checkray.actors.llm.chat import chat_key, chat_name, chat_session
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig
from checkray.engine.labels import parse_label_map
from checkray.engine.llm import LLMConfig
from checkray.engine.mft.config import MFTConfig
from checkray.engine.mft.suite import named_label_words
from checkray.engine.report import Section
from checkray.engine.stages import StageRunner
from checkray.jobs.base import Job, JobResult, QualityTable, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.mft.embedder import open_embedder
from checkray.jobs.mft.generate import collect_stage, generation_stage
from checkray.jobs.mft.report import mft_sections
from checkray.jobs.mft.stages import (
    classifier_check_stage,
    evaluate_stage,
    mft_topics_stage,
    representatives_stage,
    suite_stage,
)
from checkray.jobs.mft.topics_run import check_topics_run
from checkray.jobs.options import Labels
from checkray.jobs.zoo.resolve import select_models

SUITE_FILE = "suite.parquet"
GATES_FILE = "gates.parquet"  # cases kept and dropped at each gate, per split and version
REJECTED_FILE = "rejected.parquet"  # every candidate a check rejected, with the check and its reason


class MFTJob(Job[MFTConfig]):
    """representatives -> generate (one stage per split x version, the LLM) -> collect ->
    classifier check -> MFT topics -> suite -> (with models) evaluate; publishes suite.parquet and gates.parquet."""

    name, title, section = "mft", "checkray · MFTs (Li et al.)", MFTConfig
    suite_file = SUITE_FILE
    published = (SUITE_FILE, GATES_FILE, REJECTED_FILE)
    quality = (
        QualityTable(REJECTED_FILE, "MFT: candidates rejected, with the check and its reason"),
        QualityTable(
            GATES_FILE,
            "MFT gates (Li et al.): cases kept and dropped at each gate",
            ("split", "version", "gate", "kept", "dropped", "note"),
        ),
    )

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
        kept = "generate"
        if m.classifier_check.encoder:
            yield classifier_check_stage(m.classifier_check, self.seed, self.cfg.section(CacheConfig))
            kept = "classifier_check"
        yield mft_topics_stage(m, embed, self.seed, source=kept)
        yield suite_stage(generator=chat_name(self.chat, llm))
        if self.specs:
            yield evaluate_stage(self.cfg, self.specs)

    def publish(self, runner: StageRunner) -> list[Section]:
        suite = runner.output("suite")
        runner.run.write_table(SUITE_FILE, suite)
        checked = "classifier_check" if "classifier_check" in runner.done else "generate"
        runner.run.write_table(GATES_FILE, runner.output(checked, "gates"))
        runner.run.write_table(REJECTED_FILE, runner.output(checked, "rejected"))
        evaluated = "evaluate" in runner.done
        return mft_sections(
            runner,
            suite,
            table7=runner.output("evaluate", "table7").to_pylist() if evaluated else None,
            table8=runner.output("evaluate", "table8").to_pylist() if evaluated else None,
        )


def run_mft(cfg: CheckrayConfig, topics_dir: str, out: str | None = None, *, chat=None, embed=None) -> JobResult:
    """Run the job into ``out`` (default: the config's); ``chat``/``embed`` default to the
    configured LLM actor pool and embedder."""
    return run_job(MFTJob(cfg, topics_dir=topics_dir, chat=chat, embed=embed), out)


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
    result = run_mft(cfg, topics, out)
    suites = result.table(SUITE_FILE, columns=["suite"]).column("suite").to_pylist()
    counts = json.dumps({s: suites.count(s) for s in sorted(set(suites))})
    console.print(f"wrote {result.path(SUITE_FILE)} ({len(suites)} cases: {counts}) and report.html")
