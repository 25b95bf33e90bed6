"""The ``testaug`` job (Yang et al., 2022): LLM-generated capability tests, a validity
filter, template expansion, and the paper's diversity and bug-finding metrics.

    checkray testaug --spec FILE --out DIR [--validity CLF_DIR] [--annotations FILE] [--models M]
        -> DIR/suite.parquet   <suite>-gpt (valid generated cases) + <suite>-expansion (§4.3)
           DIR/baseline.parquet  the template-only (CheckList) suite of the same spec
           DIR/annotate.jsonl    each description's first sample, for people to annotate
           DIR/report.html       Tables 3/4/5 shapes, validity decisions, failure rates
           DIR/manifest.json     what the run published (``jobs/base.py``)

Stages (checkpointed under DIR/stages/): generate (LLM) -> parse -> validity (two-phase
rule, §4.2) -> topup (more rounds for descriptions short of ``testaug.min_kept``) ->
expand (spaCy) -> suites (what is published) -> diversity; with models: patch (Table 3),
then benchmark (a benchmark run under DIR/benchmark/). Descriptions, seeds and prompts:
``engine/testaug/prompt.py``; the method's rules and tables: ``engine/testaug/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Optional

import typer

from checkray.actors.llm.chat import chat_key, chat_name, chat_session
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.labels import parse_label_map, suggest_flag
from checkray.engine.llm import LLMConfig
from checkray.engine.report import Section as ReportSection
from checkray.engine.stages import StageRunner
from checkray.engine.templates.expand import read_spec
from checkray.engine.testaug.config import TestAugConfig
from checkray.engine.testaug.prompt import Description, describe_templates
from checkray.jobs.base import Job, JobResult, QualityTable, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.testaug.generation import generation_stage, parse_stage
from checkray.jobs.testaug.judging import validity_stage
from checkray.jobs.testaug.report import testaug_sections
from checkray.jobs.testaug.stages import benchmark_stage, diversity_stage, expand_stage, patch_stage, suites_stage
from checkray.jobs.testaug.topup import topup_stage
from checkray.jobs.zoo.resolve import select_models

SUITE_FILE, BASELINE_FILE, ANNOTATE_FILE = "suite.parquet", "baseline.parquet", "annotate.jsonl"
DECISIONS_FILE = "validity_decisions.parquet"  # the validity filter's decision per description
REJECTED_FILE = "rejected.parquet"  # every candidate a check or the validity filter rejected, with its reason


def spec_labels(t: TestAugConfig, names: dict[str, str] | None) -> TestAugConfig:
    """``t`` with the label map its spec is read with: ``testaug.label_map`` when set, else
    the corpus label map (``--labels 0=negative,1=neutral,2=positive``, corpus.labels)."""
    if t.label_map is None and names:
        return t.model_copy(update={"label_map": dict(names)})
    return t


_UNMAPPED = re.compile(r"^(?P<where>.*): label (?P<label>-?\d+) is not in the label map ")


def read_spec_labels(t: TestAugConfig) -> list:
    """The spec's templates; an integer label the map does not cover is a one-line error
    showing the ``--labels`` to pass. Without a map the templates' defaults apply (single
    texts 0 negative, 1 positive, 2 neutral; pairs 0 not_duplicate, 1 duplicate): numeric
    labels then get a warning, since dumps differ (TestAug's sentiment file: 1 is neutral)."""
    try:
        templates = read_spec(t.spec, t.label_map)
    except InputError as exc:
        m = _UNMAPPED.match(str(exc))
        if m is None:
            raise
        have = t.label_map or {}
        raise InputError(
            f"{m['where']}: label {m['label']} is not in the label map"
            f"{' (have ' + ', '.join(have) + ')' if have else ''}; pass "
            f"{suggest_flag(have, [m['label']])} (corpus.labels) or set testaug.label_map"
        ) from None
    if t.label_map is None:
        try:
            read_spec(t.spec, {})  # an empty map: the first integer label fails
        except InputError as exc:
            if _UNMAPPED.match(str(exc)):
                console.print(
                    f"[yellow]warning:[/] {t.spec}: the labels are numbers, read with the default map "
                    "(single texts 0=negative,1=positive,2=neutral; pairs 0=not_duplicate,1=duplicate); "
                    "name them with --labels if the spec means otherwise (TestAug's sentiment dump: "
                    "--labels 0=negative,1=neutral,2=positive)",
                    highlight=False,
                )
    return templates


def load_descriptions(t: TestAugConfig, seed: int) -> list[Description]:
    if not t.spec:
        raise InputError("no spec: pass --spec FILE or set testaug.spec in the config")
    descs = describe_templates(read_spec_labels(t), t.seeds_per_template, seed)
    if t.descriptions:
        wanted = set(t.descriptions)
        descs = [d for d in descs if wanted & {d.key, d.capability, d.description}]
        if not descs:
            raise InputError(f"testaug.descriptions {sorted(wanted)} match no description of {t.spec}")
    return descs[: t.max_descriptions] if t.max_descriptions else descs


class TestAugJob(Job[TestAugConfig]):
    """generate (LLM) -> parse -> validity (LLM labeler) -> topup -> expand -> diversity [-> patch];
    publishes the suite, the template-only baseline and the annotation sheet, and with
    models their failure rates (a benchmark run under DIR/benchmark)."""

    name, title, section = "testaug", "checkray · TestAug", TestAugConfig
    suite_file = SUITE_FILE
    published = (SUITE_FILE, BASELINE_FILE, ANNOTATE_FILE, DECISIONS_FILE, REJECTED_FILE)
    quality = (
        QualityTable(REJECTED_FILE, "TestAug: candidates rejected, with the check and its reason"),
        QualityTable(
            DECISIONS_FILE,
            "TestAug validity filter (§4.2) per description",
            ("key", "generated", "annotated_by", "valid_share", "threshold", "filter", "kept", "dropped"),
        ),
    )
    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, cfg: CheckrayConfig, models: Sequence[ModelSpec] | None = None, chat=None):
        super().__init__(cfg, models)
        self.chat = chat  # None: the llm: backend

    @cached_property
    def tconf(self) -> TestAugConfig:
        """The section with the spec's label map (``testaug.label_map``, else corpus.labels)."""
        return spec_labels(self.conf, self.cfg.corpus.labels)

    @cached_property
    def descs(self) -> list[Description]:
        """The spec's descriptions, with their seed cases."""
        return load_descriptions(self.tconf, self.seed)

    def check(self) -> None:
        _ = self.descs  # read the spec now: a missing or bad one fails before Ray starts

    def subtitle(self) -> str:
        return f"spec {self.conf.spec}"

    @cached_property
    def specs(self) -> list[ModelSpec] | None:
        return select_models(self.models, self.conf.models)

    @property
    def generator(self) -> str:
        return chat_name(self.chat, self.cfg.section(LLMConfig))

    def stages(self):
        t, llm = self.tconf, self.cfg.section(LLMConfig)
        chat_id = chat_key(self.chat, llm)
        with chat_session(self.chat, llm) as chat:  # the LLM actors end with the validity filter
            yield generation_stage(t, llm, self.descs, chat, self.seed, chat_id)
            yield parse_stage(t, self.descs)
            yield validity_stage(t, llm, self.descs, chat, chat_id)
            yield topup_stage(t, llm, self.descs, chat, self.seed, chat_id)
        yield expand_stage(t, self.descs, self.seed)
        yield suites_stage(t, self.descs, self.generator, self.seed)
        yield diversity_stage(t, self.descs)
        if self.specs and t.patch.enabled:
            yield patch_stage(self.cfg, self.specs)
        if self.specs:
            yield benchmark_stage(self.cfg, self.specs)

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        run = runner.run
        run.write_table(SUITE_FILE, runner.output("suites", "suite"))
        run.write_table(BASELINE_FILE, runner.output("suites", "baseline"))
        run.write_table(DECISIONS_FILE, runner.output("validity", "decisions"))
        run.write_table(REJECTED_FILE, runner.output("suites", "rejected"))
        sheet = runner.output("suites", "annotation_sheet").to_pylist()
        run.write_text(ANNOTATE_FILE, "".join(json.dumps(r) + "\n" for r in sheet))
        return testaug_sections(runner, self.conf, self.descs, self.specs, self.generator)


def run_testaug(
    cfg: CheckrayConfig,
    out: str | None,
    specs: Sequence[ModelSpec] | None = None,
    chat=None,
) -> JobResult:
    """Run the job; ``specs`` (else ``testaug.models``) get failure rates and Table 3;
    ``chat`` defaults to the configured LLM actor pool."""
    return run_job(TestAugJob(cfg, specs, chat=chat), out)


def testaug_command(
    spec: Optional[str] = typer.Option(None, "--spec", "-s", help="Capability spec (template JSONL/YAML)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Run directory."),
    validity: Optional[str] = typer.Option(None, "--validity", help="Validity classifier directory."),
    annotations: Optional[str] = typer.Option(
        None, "--annotations", help="People's validity annotations (JSONL, CSV, TSV or Parquet)."
    ),
    models: Optional[str] = typer.Option(None, "--models", help="Model registry or zoo recipe to test."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Generator backend: auto, local, http, vllm."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config (testaug: and llm: sections)."),
    labels: Optional[str] = typer.Option(
        None,
        "--labels",
        help="Name the spec's integer labels: 0=negative,1=neutral,2=positive (corpus.labels; testaug.label_map wins).",
    ),
):
    """Generate capability tests with an LLM (TestAug): filter, expand, measure diversity and bugs found."""
    cfg = load_config(
        config,
        {
            "testaug.spec": spec,
            "testaug.validity": validity,
            "testaug.annotations": annotations,
            "testaug.models": models,
            "llm.backend": backend,
            "corpus.labels": parse_label_map(labels),
            "out": out,
        },
    )
    result = run_testaug(cfg, cfg.out)
    suite = result.table(SUITE_FILE, columns=["suite"]).column("suite").to_pylist()
    counts = ", ".join(f"{s} {suite.count(s)}" for s in sorted(set(suite)))
    console.print(f"testaug: {len(suite)} cases ({counts or 'none'})")
    typer.echo(f"wrote {result.path(SUITE_FILE)} and report.html")
