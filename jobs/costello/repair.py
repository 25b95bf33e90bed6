"""``checkray repair``: close COSTELLO's test -> repair -> retest loop for one model.

    checkray repair --violations DIR --model NAME --out DIR2

reads what a ``costello`` run published (listed in ``DIR/manifest.json``: the triples,
violations, embedders, classifier training sentences, threshold dictionaries and
classifier accuracies; never its private stage checkpoints), fine-tunes embedder NAME on its
violated triples with benign triples as anchors (``actors/costello/repair.py``), saves the
repaired model to ``DIR2/model`` (a sentence-transformers directory), re-runs the same
tests on it (same triples, dictionary and classifier training sentences; thresholds and
classifiers recomputed for the repaired model) and writes ``DIR2/violations.parquet``,
``DIR2/fixing.parquet`` (Table 3: fixing rate of violations, GT_A and GT_B per CR;
downstream accuracy before and after), ``DIR2/history.parquet`` and ``DIR2/report.html``.

This module imports nothing of ``jobs/costello/job.py`` (the job imports it, to chain a
repair after a costello run in the demo).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import typer

from checkray.actors.costello.repair import RepairSettings
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, open_cache
from checkray.engine.costello.metrics import fixing_rate
from checkray.engine.costello.triples import CAPABILITIES, triple_table
from checkray.engine.errors import InputError
from checkray.engine.report import Section, table_html
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner, path_digest, reference_digest
from checkray.jobs.base import Job, published_path, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.costello.config import CostelloConfig, RepairConfig

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


def most_violated(src: RunDir, rc: RepairConfig) -> str:
    """The sentence-transformers embedder with the most violations under the repair's
    verdict (the demo's ``repair.model: most-violated``)."""
    meta, cc = source_config(src, rc)
    trainable = {e["name"] for e in meta["embedders"] if e["kind"] == "sentence-transformers"}
    v = read_published(src, "violations.parquet")
    v = v.filter(pc.and_(pc.equal(v["distance"], cc.distance), pc.equal(v["threshold"], cc.threshold)))
    suite = rc.suite or cc.suite
    if suite in set(v["suite"].to_pylist()):
        v = v.filter(pc.equal(v["suite"], suite))
    counts = Counter(m for m, bad in zip(v["model"].to_pylist(), v["verdict"].to_pylist()) if bad and m in trainable)
    if not trainable:
        raise InputError("repair: no sentence-transformers embedder to repair")
    return counts.most_common(1)[0][0] if counts else sorted(trainable)[0]


def split_triples(wide: pa.Table, violations: pa.Table, distance: str, threshold: str):
    """(violated, benign) single-sentence triples under the default verdict."""
    v = violations.filter(
        pc.and_(pc.equal(violations["distance"], distance), pc.equal(violations["threshold"], threshold))
    )
    bad = {t for t, verdict in zip(v["triple"].to_pylist(), v["verdict"].to_pylist()) if verdict}
    violated, benign = [], []
    for r in wide.to_pylist():
        if r["seed_pair"] is not None:
            continue  # pair triples (CR4) are scored, not trained on
        (violated if r["triple"] in bad else benign).append((r["seed"], r["positive"], r["negative"]))
    return violated, benign


def counts(violations: pa.Table, distance: str, threshold: str) -> dict[str, dict[str, int]]:
    from checkray.jobs.costello.validate import violation_counts

    return violation_counts(violations, distance, threshold, CAPABILITIES)


def table3(before: dict, after: dict, acc_before: float | None, acc_after: float | None) -> list[dict]:
    rows = []
    for metric, key in (("N_V", "violations"), ("GT_A", "gt_a"), ("GT_B", "gt_b")):
        rec = {"metric": metric}
        for cr in list(CAPABILITIES) + ["ALL"]:
            rate = fixing_rate(before[cr][key], after[cr][key])
            rec[cr] = None if rate is None else round(100 * rate, 2)
            rec[f"{cr} before→after"] = f"{before[cr][key]}→{after[cr][key]}"
        rows.append(rec)
    rows.append(
        {
            "metric": "downstream accuracy",
            "ALL": None if acc_after is None or acc_before is None else round(100 * (acc_after - acc_before), 2),
            "ALL before→after": f"{acc_before if acc_before is None else round(acc_before, 4)}→"
            f"{acc_after if acc_after is None else round(acc_after, 4)}",
        }
    )
    return rows


def mean_accuracy(classifiers: pa.Table, model: str) -> float | None:
    acc = [a for m, a in zip(classifiers["model"].to_pylist(), classifiers["accuracy"].to_pylist()) if m == model]
    return float(np.mean(acc)) if acc else None


class RepairJob(Job[RepairConfig]):
    """train (fine-tune in a Ray actor) -> retest (embed + score like costello's validate).
    Inputs: ``violations_dir``, a finished costello run, and ``model``, one of its embedders."""

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
        meta, self.cc = source_config(self.src, self.conf)
        specs = {e["name"]: e for e in meta["embedders"]}
        if self.model not in specs:
            raise InputError(
                f"repair: model '{self.model}' was not tested in {self.src.uri} (have: {', '.join(specs)})"
            )
        self.spec = specs[self.model]
        if self.spec["kind"] != "sentence-transformers":
            raise InputError(
                f"repair: model '{self.model}' is a {self.spec['kind']} embedder; "
                "only sentence-transformers models can be fine-tuned"
            )
        wide = triple_table(read_published(self.src, "triples.parquet"))
        suites = list(dict.fromkeys(wide.column("suite").to_pylist()))
        # The suite repaired and re-tested: the run's generated suite (the paper repairs on
        # its own test results), or the first given one when the run generated none.
        self.suite = self.conf.suite or (self.cc.suite if self.cc.suite in suites else suites[0])
        if self.suite not in suites:
            raise InputError(f"repair: suite '{self.suite}' is not in {self.src.uri} (have: {', '.join(suites)})")
        self.wide = wide.filter(pc.equal(wide["suite"], self.suite))
        violations = read_published(self.src, "violations.parquet")
        self.before = violations.filter(
            pc.and_(pc.equal(violations["model"], self.model), pc.equal(violations["suite"], self.suite))
        )
        self.violated, self.benign = split_triples(self.wide, self.before, self.cc.distance, self.cc.threshold)
        if not self.violated:
            raise InputError(
                f"repair: model '{self.model}' has no violation under {self.cc.distance}/{self.cc.threshold} to repair"
            )
        # The re-test scores with the costello run's seed (same classifier splits).
        self.source_seed = meta["config"].get("seed", 0) if self.cc.seed is None else self.cc.seed
        self.settings = RepairSettings.model_validate(
            self.conf.model_dump(exclude={"model", "backend", "distance", "threshold", "suite"})
        )

    def stages(self):
        rc, cc, model = self.conf, self.cc, self.model
        fp: list[Any] = [
            rc,
            cc,
            model,
            reference_digest(self.spec),  # the model repaired, by content
            # the source run by the content of what it published, not by its path
            [path_digest(f"{self.src.uri.rstrip('/')}/{name}") for name in SOURCE_FILES],
            self.suite,
            self.source_seed,
            len(self.violated),
            len(self.benign),
        ]

        def train(ctx: StageContext):
            from checkray.actors.costello.repair import repair_in_actor

            if "://" in ctx.run.uri:
                raise InputError(f"{ctx.run.uri}: repair saves a model directory and needs a local --out")
            result = repair_in_actor(
                self.spec,
                self.violated,
                self.benign,
                self.settings,
                ctx.run.path("model"),
                rc.backend,
                timeout_s=self.cfg.runtime.task_timeout_s,
                old_embeddings=self.cached_anchors(),
            )
            hist = pa.Table.from_pylist(
                [
                    {
                        **h,
                        "loss_before": result["loss_before"],
                        "loss_after": result["loss_after"],
                        "seconds": result["seconds"],
                        "device": result["device"],
                    }
                    for h in result["history"]
                ]
            )
            return {"history": hist}

        def retest(ctx: StageContext):
            from checkray.actors.costello.embedders import EmbedderSpec, embed_all
            from checkray.jobs.costello.validate import model_nn, score_model, texts_to_embed

            train_t = read_published(self.src, "train.parquet")
            words = read_published(self.src, "dictionaries.parquet")
            dictionary = words.filter(pc.equal(words["model"], model)).select(["word"])
            texts = texts_to_embed(self.wide, train_t, dictionary)
            repaired = EmbedderSpec(
                name=f"{model}-repaired",
                model=ctx.run.path("model"),
                pooling="model",
                max_length=self.spec["max_length"],
                encode_batch_size=self.spec["encode_batch_size"],
            )
            vectors = embed_all(texts, [repaired], cc.backend, cc.batch_size)[repaired.name]
            lookup = dict(zip(texts, vectors))
            nn = model_nn(lookup, dictionary.column("word").to_pylist(), cc.backend)
            viol, _, accs = score_model(model, lookup, self.wide, train_t, nn, cc, self.source_seed)
            return {"violations": viol, "classifiers": pa.table({"accuracy": pa.array(accs, pa.float64())})}

        yield Stage("train", train, config=fp, version="1")
        yield Stage("retest", retest, inputs=("train",), config=fp, version="1")

    def cached_anchors(self) -> dict[str, np.ndarray]:
        """The original model's embeddings of the benign texts that the content cache holds
        (the costello run embedded every triple text through it): the repair actor encodes
        only the others. The repaired model's own embeddings (retest) are not cached: that
        model exists only in this run (a new directory, new files each time it is trained),
        so no other run could ever read them back."""
        from checkray.actors.costello.embedders import EmbedderSpec, contrast_identity
        from checkray.actors.embed_cache import lookup_embeddings

        cache_cfg = self.cfg.section(CacheConfig)
        cache = open_cache(cache_cfg) if cache_cfg.embeddings else None
        texts = list(dict.fromkeys(t for triple in self.benign for t in triple))
        if cache is None or not texts:
            return {}
        found = lookup_embeddings(cache, contrast_identity(EmbedderSpec.model_validate(self.spec)), texts)
        return dict(zip((t for t, h in zip(texts, found.hit) if h), found.values)) if found.values is not None else {}

    def publish(self, runner: StageRunner) -> list[Section]:
        run, cc, s = runner.run, self.cc, self.settings
        after_v = runner.output("retest", "violations")
        history = runner.output("train", "history")
        acc_b = mean_accuracy(read_published(self.src, "classifiers.parquet"), self.model)
        acc_a_col = runner.output("retest", "classifiers").column("accuracy").to_pylist()
        acc_a = float(np.mean(acc_a_col)) if acc_a_col else None
        rows = table3(
            counts(self.before, cc.distance, cc.threshold), counts(after_v, cc.distance, cc.threshold), acc_b, acc_a
        )
        run.write_table("violations.parquet", after_v)
        run.write_table("history.parquet", history)
        run.write_table(
            "fixing.parquet",
            pa.Table.from_pylist([{k: (None if v is None else str(v)) for k, v in r.items()} for r in rows]),
        )
        h = history.to_pylist()
        summary = (
            f"{self.model}: {len(self.violated)} violated and {len(self.benign)} benign triples of suite "
            f"{self.suite}; {s.epochs} "
            f"epochs of SGD (lr {s.learning_rate}, alpha {s.alpha}); triplet loss on the violated triples "
            f"probed {h[0]['loss_before']:.4f} -> {h[0]['loss_after']:.4f}; model saved to {run.path('model')}."
        )
        return [
            Section(
                f"COSTELLO repair: fixing rate (Table 3 layout), {cc.distance} / {cc.threshold}",
                [table_html(rows), table_html(h)],
                summary,
            )
        ]

    def subtitle(self) -> str:
        return self.src.uri


def run_repair(cfg: CheckrayConfig, violations_dir: str, model: str, out: str) -> tuple[RunDir, list[Section]]:
    if "://" in out:  # refused before anything is read, claimed or started
        raise InputError(
            f"{out}: repair saves the fine-tuned model from a Ray actor; use a local or shared-filesystem --out"
        )
    result = run_job(RepairJob(cfg, violations_dir=violations_dir, model=model), out)
    return result.run, result.sections


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
    run, sections = run_repair(cfg, violations, model, out)
    typer.echo(f"repair: {sections[0].summary} -> {run.path('fixing.parquet')}, violations.parquet, report.html")
