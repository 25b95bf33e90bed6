"""``checkray repair``: close COSTELLO's test -> repair -> retest loop for one model.

    checkray repair --violations DIR --model NAME --out DIR2

reads what a ``costello`` run published (listed in ``DIR/manifest.json``: the triples,
violations, embedders, classifier training sentences, threshold dictionaries and
classifier accuracies; never its private stage checkpoints), fine-tunes embedder NAME on its
violated triples with benign triples as anchors (``actors/costello/repair.py``), saves the
repaired model to ``DIR2/model`` (a sentence-transformers directory), re-runs the same
tests on it (same triples, dictionary and classifier training sentences; thresholds and
classifiers recomputed for the repaired model) and writes ``DIR2/violations.parquet``,
``DIR2/fixing.parquet`` (COSTELLO's Table 3: fixing rate of violations, GT_A and GT_B per
CR; downstream accuracy before and after), ``DIR2/history.parquet`` and ``DIR2/report.html``.

Stages: ``train`` (fine-tune in a Ray actor), ``retest`` (embed + score like costello's
validate), ``fixing`` (Table 3 from the violations before and after).

This module imports nothing of ``jobs/costello/job.py`` (the job imports it, to chain a
repair after a costello run in the demo).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import typer

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, open_cache
from checkray.engine.costello.config import CostelloConfig, EmbedderSpec, RepairConfig
from checkray.engine.costello.embedder_kinds import EMBEDDER_KINDS, embedder_kind
from checkray.engine.costello.repair import (
    RepairInputs,
    Triple,
    most_violated_model,
    repair_suite,
    split_triples,
)
from checkray.engine.costello.tables import costello_table3, mean_accuracy, violation_counts
from checkray.engine.costello.triples import triple_table
from checkray.engine.errors import InputError
from checkray.engine.report import Section
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner, path_digest, reference_digest
from checkray.jobs.base import Job, JobResult, published_path, run_job
from checkray.jobs.config import CheckrayConfig, load_config

SOURCE = "costello"  # the job whose published files a repair reads


# What repair reads of the COSTELLO run it repairs from (its fingerprint digests them).
SOURCE_FILES = (
    "triples.parquet",
    "violations.parquet",
    "train.parquet",
    "dictionaries.parquet",
    "classifiers.parquet",
    "costello.json",
)


def read_published(src: RunDir, name: str) -> pa.Table:
    """A table the costello run published (one-line error when it did not)."""
    return pq.read_table(published_path(src, SOURCE, name), filesystem=src.fs)


def source_config(src: RunDir, rc: RepairConfig) -> tuple[dict, CostelloConfig]:
    """The costello run's ``costello.json`` and its section, with the repair's verdict
    (distance, threshold) where the repair sets one."""
    with src.fs.open_input_stream(published_path(src, SOURCE, "costello.json")) as fh:
        meta = json.loads(fh.read().decode("utf-8"))
    cc = CostelloConfig.model_validate(meta["config"].get("costello") or {})
    return meta, cc.model_copy(
        update={"distance": rc.distance or cc.distance, "threshold": rc.threshold or cc.threshold}
    )


def tested_embedders(meta: dict) -> dict[str, EmbedderSpec]:
    """The embedders the costello run tested (its ``costello.json``), by name."""
    return {e["name"]: EmbedderSpec.model_validate(e) for e in meta["embedders"]}


def most_violated(src: RunDir, rc: RepairConfig) -> str:
    """The trainable embedder with the most violations under the repair's verdict (the
    demo's ``repair.model: most-violated``)."""
    meta, cc = source_config(src, rc)
    trainable = {name for name, spec in tested_embedders(meta).items() if embedder_kind(spec.kind).trainable}
    violations = read_published(src, "violations.parquet")
    return most_violated_model(violations, trainable, cc.distance, cc.threshold, rc.suite or cc.suite)


def read_repair_inputs(src: RunDir, rc: RepairConfig, model: str) -> RepairInputs:
    """Everything read from the costello run; a model it did not test, one that cannot be
    fine-tuned, a suite it lacks and nothing to repair are one-line errors."""
    meta, cc = source_config(src, rc)
    specs = tested_embedders(meta)
    if model not in specs:
        raise InputError(f"repair: model '{model}' was not tested in {src.uri} (have: {', '.join(specs)})")
    spec = specs[model]
    if not embedder_kind(spec.kind).trainable:
        trainable = ", ".join(r.name for r in EMBEDDER_KINDS.records() if r.trainable)
        raise InputError(
            f"repair: model '{model}' is a {spec.kind} embedder; only {trainable} models can be fine-tuned"
        )
    wide = triple_table(read_published(src, "triples.parquet"))
    suite = repair_suite(list(dict.fromkeys(wide.column("suite").to_pylist())), rc.suite, cc.suite, src.uri)
    wide = wide.filter(pc.equal(wide["suite"], suite))
    violations = read_published(src, "violations.parquet")
    before = violations.filter(pc.and_(pc.equal(violations["model"], model), pc.equal(violations["suite"], suite)))
    violated, benign = split_triples(wide, before, cc.distance, cc.threshold)
    if not violated:
        raise InputError(f"repair: model '{model}' has no violation under {cc.distance}/{cc.threshold} to repair")
    source_seed = meta["config"].get("seed", 0) if cc.seed is None else cc.seed
    return RepairInputs(cc, spec, suite, wide, before, violated, benign, source_seed, rc.settings())


def cached_anchors(cache_cfg: CacheConfig, spec: EmbedderSpec, benign: Sequence[Triple]) -> dict[str, np.ndarray]:
    """The original model's embeddings of the benign texts that the content cache holds
    (the costello run embedded every triple text through it): the repair actor encodes
    only the others. The repaired model's own embeddings (retest) are not cached: that
    model exists only in this run (a new directory, new files each time it is trained),
    so no other run could ever read them back."""
    from checkray.actors.costello.embedders import contrast_identity
    from checkray.actors.embed_cache import lookup_embeddings

    cache = open_cache(cache_cfg) if cache_cfg.embeddings else None
    texts = list(dict.fromkeys(t for triple in benign for t in triple))
    if cache is None or not texts:
        return {}
    found = lookup_embeddings(cache, contrast_identity(spec), texts)
    return dict(zip((t for t, h in zip(texts, found.hit) if h), found.values)) if found.values is not None else {}


def train_stage(inputs: RepairInputs, rc: RepairConfig, cfg: CheckrayConfig, fp: list[Any]) -> Stage:
    """Fine-tune the model in a Ray actor; saves it to ``<run>/model``; the loss per epoch."""

    def run(ctx: StageContext):
        from checkray.actors.costello.repair import repair_in_actor

        if "://" in ctx.run.uri:
            raise InputError(f"{ctx.run.uri}: repair saves a model directory and needs a local --out")
        result = repair_in_actor(
            inputs.spec,
            inputs.violated,
            inputs.benign,
            inputs.settings,
            ctx.run.path("model"),
            rc.backend,
            timeout_s=cfg.runtime.task_timeout_s,
            old_embeddings=cached_anchors(cfg.section(CacheConfig), inputs.spec, inputs.benign),
        )
        whole_run = {
            "loss_before": result.loss_before,
            "loss_after": result.loss_after,
            "seconds": result.seconds,
            "device": result.device,
        }
        return {"history": pa.Table.from_pylist([{**h, **whole_run} for h in result.history])}

    return Stage("train", run, config=fp, version="1")


def retest_stage(src: RunDir, inputs: RepairInputs, fp: list[Any]) -> Stage:
    """The repaired model scored like costello's validate: same triples, dictionary and
    classifier sentences; its own thresholds and classifiers."""

    def run(ctx: StageContext):
        from checkray.actors.costello.embedders import embed_all
        from checkray.actors.costello.neighbours import dictionary_nn
        from checkray.engine.costello.distances import DISTANCES
        from checkray.engine.costello.scoring import score_model, texts_to_embed

        model, cc = inputs.spec.name, inputs.cc
        train = read_published(src, "train.parquet")
        words = read_published(src, "dictionaries.parquet")
        dictionary = words.filter(pc.equal(words["model"], model)).select(["word"])
        texts = texts_to_embed(inputs.wide, train, dictionary)
        # The saved model keeps the pooling it was trained with: its own ("model").
        repaired = EmbedderSpec(
            name=f"{model}-repaired",
            kind=inputs.spec.kind,
            model=ctx.run.path("model"),
            pooling="model",
            max_length=inputs.spec.max_length,
            encode_batch_size=inputs.spec.encode_batch_size,
        )
        lookup = dict(zip(texts, embed_all(texts, [repaired], cc.backend, cc.batch_size)[repaired.name]))
        matrix = np.stack([lookup[w] for w in dictionary.column("word").to_pylist()])
        nn = dictionary_nn({model: matrix}, DISTANCES, cc.backend)[model]
        score = score_model(model, lookup, inputs.wide, train, nn, cc, inputs.source_seed)
        accuracies = pa.table({"accuracy": pa.array(score.accuracies, pa.float64())})
        return {"violations": score.violations, "classifiers": accuracies}

    return Stage("retest", run, inputs=("train",), config=fp, version="1")


def fixing_stage(src: RunDir, inputs: RepairInputs, fp: list[Any]) -> Stage:
    """COSTELLO's Table 3 from the violations before and after: ``table3`` as the report
    shows it, ``fixing`` as published (every value a string)."""

    def run(ctx: StageContext):
        cc, model = inputs.cc, inputs.spec.name
        rows = costello_table3(
            violation_counts(inputs.before, cc.distance, cc.threshold),
            violation_counts(ctx.input("retest", "violations"), cc.distance, cc.threshold),
            mean_accuracy(read_published(src, "classifiers.parquet"), model),
            mean_accuracy(ctx.input("retest", "classifiers")),
        )
        published = [{k: (None if v is None else str(v)) for k, v in r.items()} for r in rows]
        return {"table3": pa.Table.from_pylist(rows), "fixing": pa.Table.from_pylist(published)}

    return Stage("fixing", run, inputs=("retest",), config=fp, version="1")


class RepairJob(Job[RepairConfig]):
    """train (fine-tune in a Ray actor) -> retest (embed + score like costello's validate)
    -> fixing (Table 3). Inputs: ``violations_dir``, a finished costello run, and
    ``model``, one of its embedders."""

    name, title, section = "repair", "checkray · costello repair", RepairConfig
    published = ("model", "violations.parquet", "fixing.parquet", "history.parquet")

    def __init__(
        self, cfg: CheckrayConfig, models: Sequence[ModelSpec] | None = None, *, violations_dir: str, model: str
    ):
        super().__init__(cfg, models)
        self.src = RunDir(violations_dir)
        self.model = model

    def check(self) -> None:
        """Everything read from the costello run, and nothing to repair, fails here."""
        self.inputs = read_repair_inputs(self.src, self.conf, self.model)

    def stages(self):
        inputs = self.inputs
        fp: list[Any] = [
            self.conf,
            inputs.cc,
            self.model,
            reference_digest(inputs.spec.model_dump()),  # the model repaired, by content
            # the source run by the content of what it published, not by its path
            [path_digest(f"{self.src.uri.rstrip('/')}/{name}") for name in SOURCE_FILES],
            inputs.suite,
            inputs.source_seed,
            len(inputs.violated),
            len(inputs.benign),
        ]
        yield train_stage(inputs, self.conf, self.cfg, fp)
        yield retest_stage(self.src, inputs, fp)
        yield fixing_stage(self.src, inputs, fp)

    def publish(self, runner: StageRunner) -> list[Section]:
        from checkray.jobs.costello.report import repair_sections

        run = runner.run
        history = runner.output("train", "history")
        run.write_table("violations.parquet", runner.output("retest", "violations"))
        run.write_table("history.parquet", history)
        run.write_table("fixing.parquet", runner.output("fixing", "fixing"))
        return repair_sections(self.inputs, runner.output("fixing", "table3"), history, run.path("model"))

    def subtitle(self) -> str:
        return self.src.uri


def run_repair(cfg: CheckrayConfig, violations_dir: str, model: str, out: str) -> JobResult:
    if "://" in out:  # refused before anything is read, claimed or started
        raise InputError(
            f"{out}: repair saves the fine-tuned model from a Ray actor; use a local or shared-filesystem --out"
        )
    return run_job(RepairJob(cfg, violations_dir=violations_dir, model=model), out)


def repair_after(cfg: CheckrayConfig, costello_run: RunDir) -> list[Section]:
    """The repair that follows a costello run when ``repair.model`` is set (the demo), into
    ``<run>/repair``: its report sections, or one line saying why it could not run."""
    rc = cfg.section(RepairConfig)
    if not rc.model:
        return []
    try:
        model = rc.model if rc.model != "most-violated" else most_violated(costello_run, rc)
        return run_repair(cfg, costello_run.uri, model, costello_run.path("repair")).sections
    except InputError as exc:  # e.g. nothing violated: the demo reports it and goes on
        return [Section("COSTELLO repair", [], f"repair skipped: {exc}")]


def repair_command(
    violations: str = typer.Option(..., "--violations", help="A costello run directory."),
    model: str = typer.Option(
        ...,
        "--model",
        help="Embedder name to repair (as in the embedders file), or most-violated (the trainable "
        "embedder with the most violations under the repair's verdict).",
    ),
    out: str = typer.Option(..., "--out", "-o", help="Output directory for the repaired model and its re-test."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config with a 'repair' section."),
    epochs: Optional[int] = typer.Option(None, "--epochs"),
    learning_rate: Optional[float] = typer.Option(None, "--lr"),
    alpha: Optional[float] = typer.Option(None, "--alpha"),
    threshold: Optional[str] = typer.Option(
        None, "--threshold", help="zero|min|mu-2sigma|mu-sigma (default: the run's)."
    ),
):
    """Fine-tune an embedding model on its COSTELLO violations, then re-test it."""
    cfg = load_config(
        config,
        {
            "repair.epochs": epochs,
            "repair.learning_rate": learning_rate,
            "repair.alpha": alpha,
            "repair.threshold": threshold,
        },
    )
    if model == "most-violated":
        model = most_violated(RunDir(violations), cfg.section(RepairConfig))
    result = run_repair(cfg, violations, model, out)
    typer.echo(
        f"repair: {result.sections[0].summary} -> {result.path('fixing.parquet')}, violations.parquet, report.html"
    )
