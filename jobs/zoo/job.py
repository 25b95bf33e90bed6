"""The ``zoo`` job: build a cached set of sentiment models of different families from a
labeled corpus, and write the registry the benchmark reads (``DIR/zoo.yaml``).

Stages (under ``DIR/stages/``, each skipped on rerun when its config is unchanged):
``split`` (seeded stratified train/held-out split), ``embed-<encoder>`` (corpus embeddings,
once per encoder, shared by every head on it), ``model-<name>`` (one per model, built as a
Ray task; independent models run concurrently as far as the cluster's CPUs allow).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import typer

from checkray.actors.zoo.trainers import SPLIT_STAGE, build_zoo_model, model_stage_name
from checkray.engine.benchmark.registry import ModelSpec, read_registry, write_registry
from checkray.engine.cache import CacheConfig, open_cache
from checkray.engine.config import read_yaml
from checkray.engine.corpus import corpus_fingerprint, read_corpus
from checkray.engine.errors import CheckrayError, ConfigError, InputError
from checkray.engine.report import Section, table_html
from checkray.engine.runtime import cluster_resources, late_switches_env, plan_actor_pool, wait_for
from checkray.engine.stages import Stage, StageContext, StageRunner
from checkray.engine.training import ZooConfig, ZooModel, stratified_split
from checkray.jobs.base import Job, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.options import Labels, corpus_overrides

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "zoo.yaml"
REGISTRY = "zoo.yaml"
VERSION = "1"  # bump when a trainer changes what it builds


def split_stage(cfg: CheckrayConfig, zoo: ZooConfig) -> Stage:
    # Only what the split reads (Section.view): adding a model must not resplit.
    zoo = zoo.view("held_out", "seed", "tiny", "tiny_sample")

    def run(ctx: StageContext):
        from sklearn.model_selection import train_test_split

        table = read_corpus(cfg.corpus)
        labels = table.column("label").to_numpy(zero_copy_only=False)
        if table.column("label").null_count:
            raise InputError(
                f"{cfg.corpus.path}: the zoo trains classifiers and needs a label on every row "
                f"({table.column('label').null_count} missing)"
            )
        if zoo.tiny and zoo.tiny_sample < table.num_rows:
            keep, _ = train_test_split(
                np.arange(table.num_rows), train_size=zoo.tiny_sample, stratify=labels, random_state=zoo.seed
            )
            table = table.take(np.sort(keep))
            labels = table.column("label").to_numpy(zero_copy_only=False)
        try:
            held = stratified_split(labels, zoo.held_out, zoo.seed)
        except ConfigError as exc:
            raise InputError(f"{cfg.corpus.path}: {exc}") from None
        return {
            "data": table.select(["id", "text", "label"])
            .append_column("held_out", pa.array(held))
            .append_column("pos", pa.array(np.arange(table.num_rows), pa.int64()))
        }

    return Stage(
        SPLIT_STAGE, run, config=[cfg.corpus, zoo], external=(corpus_fingerprint(cfg.corpus),), version=VERSION
    )


def embed_stage_name(encoder: str) -> str:
    return "embed-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", encoder.removeprefix("builtin:")).strip("_")


def embed_stage(zoo: ZooConfig, encoder: str, cache_cfg: CacheConfig | None = None) -> Stage:
    def run(ctx: StageContext):
        from checkray.actors.embed_cache import cluster_plan, embed_texts, sentence_model
        from checkray.actors.embedder import resolve_model
        from checkray.engine.arrays import embeddings_column

        resolve_model(encoder)  # a missing model path fails here, not inside an actor
        split = ctx.input(SPLIT_STAGE, columns=["pos", "text"])
        model = sentence_model(encoder, normalize=True, encode_batch_size=zoo.embed_batch_size)
        cache = open_cache(cache_cfg) if cache_cfg is None or cache_cfg.embeddings else None
        # The corpus the topics job (or an earlier zoo) embedded with this encoder comes
        # from the cache: only sentences no run embedded are encoded.
        vectors = embed_texts(
            split.column("text").to_pylist(), model, cache=cache, plan=cluster_plan(zoo.backend, texts=split.num_rows)
        )
        table = pa.table({"pos": split.column("pos"), "embedding": embeddings_column(vectors)})
        ctx.run.write_table(f"stages/{ctx.stage.name}/embeddings/part-00000.parquet", table)
        return None

    return Stage(embed_stage_name(encoder), run, inputs=(SPLIT_STAGE,), config=[encoder, zoo.backend], version=VERSION)


def task_options(model: ZooModel, zoo: ZooConfig) -> tuple[dict, int]:
    """Ray resources and torch/LightGBM threads for one model's build task.

    A fine-tune takes a GPU when the cluster has one (planned, never assumed), else every
    CPU of one node; the other models are single-threaded and run side by side.
    """
    import ray

    if model.kind != "finetune":
        return {"num_cpus": 1}, 1
    plan = plan_actor_pool(cluster_resources(), zoo.backend, pool_size=1)
    if plan.device == "gpu":
        return plan.ray_options(), 1
    node_cpus = max((n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive")), default=1)
    threads = max(1, int(node_cpus))
    return {"num_cpus": threads, **late_switches_env()}, threads


def model_stage(zoo: ZooConfig, model: ZooModel, labels: list[str], timeout_s: float) -> Stage:
    embed = embed_stage_name(model.encoder) if model.kind == "embedding" else None

    def run(ctx: StageContext):
        import ray

        opts, threads = task_options(model, zoo)
        task = ray.remote(build_zoo_model).options(**opts, max_retries=0)
        try:
            ref = task.remote(ctx.run.uri, model, zoo, labels, embed, threads)
            entry = wait_for(ref, timeout_s, f"zoo model '{model.name}'")
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, CheckrayError):  # a user error inside the task stays one line
                raise type(exc.cause)(f"zoo model '{model.name}': {exc.cause}") from None
            raise
        return {"entry": pa.table({"spec": [ModelSpec.model_validate(entry).model_dump_json()]})}

    # What the model is built from; ``tiny`` only selects, and fine-tune settings matter only to fine-tunes.
    recipe = model.model_dump(exclude={"tiny"} if model.kind == "finetune" else {"tiny", "finetune"})
    config = [recipe, labels, zoo.seed] + ([zoo.tfidf] if model.kind == "tfidf" else [])
    return Stage(
        model_stage_name(model.name),
        run,
        inputs=(SPLIT_STAGE,) + ((embed,) if embed else ()),
        config=config,
        version=VERSION,
    )


def read_entry(runner: StageRunner, model: ZooModel) -> ModelSpec:
    table = runner.output(model_stage_name(model.name), "entry")
    return ModelSpec.model_validate_json(table.column("spec")[0].as_py())


class ZooJob(Job[ZooConfig]):
    """split -> one embedding stage per encoder -> one build stage per model -> zoo.yaml."""

    name, title, section = "zoo", "checkray · model zoo", ZooConfig
    published = (REGISTRY,)

    def __init__(self, cfg: CheckrayConfig, only: list[str] | None = None):
        super().__init__(cfg)
        zoo = self.conf
        self.selected = zoo.selected()
        self.specs: list[ModelSpec] = []  # the registry entries, once published
        if only:
            unknown = sorted(set(only) - {m.name for m in zoo.models})
            if unknown:
                raise InputError(
                    f"unknown zoo model(s): {', '.join(unknown)} (have: {', '.join(m.name for m in zoo.models)})"
                )
            self.selected = [m for m in self.selected if m.name in only]

    def check(self) -> None:
        if not self.selected:
            raise InputError("no zoo models selected (tiny mode builds only models marked 'tiny: true')")
        read_corpus(self.cfg.corpus)  # a bad corpus or label map fails before Ray starts

    def stages(self):
        zoo = self.conf
        yield split_stage(self.cfg, zoo)
        labels = sorted(set(self.runner.output(SPLIT_STAGE, columns=["label"]).column("label").to_pylist()))
        for encoder in dict.fromkeys(m.encoder for m in self.selected if m.kind == "embedding"):
            yield embed_stage(zoo, encoder, self.cfg.section(CacheConfig))
        # Independent builds, each a Ray task: run side by side as far as the CPUs allow.
        timeout = self.cfg.runtime.task_timeout_s
        yield [model_stage(zoo, m, labels, timeout) for m in sorted(self.selected, key=lambda m: m.kind != "finetune")]

    def publish(self, runner: StageRunner) -> list[Section]:
        zoo = self.conf
        split = {"corpus": self.cfg.corpus.path, "held_out": zoo.held_out, "split_seed": zoo.seed, "tiny": zoo.tiny}
        self.specs = [
            s.model_copy(update={"meta": {**s.meta, **split}}) for s in (read_entry(runner, m) for m in self.selected)
        ]
        write_registry(runner.run.path(REGISTRY), self.specs)  # paths stay relative to the zoo directory
        return [zoo_section(self.specs)]


def run_zoo(cfg: CheckrayConfig, out: str, only: list[str] | None = None) -> list[ModelSpec]:
    """Build (or reuse) every selected model; write ``out/zoo.yaml``; return its specs."""
    if "://" in out:  # its Ray tasks save model files, and the benchmark loads them as local files
        raise InputError(f"{out}: the zoo writes model files from its tasks; use a local or shared-filesystem --out")
    return run_job(ZooJob(cfg, only), out).job.specs


def zoo_section(specs: list[ModelSpec]) -> Section:
    rows = [
        {
            "model": s.name,
            "family": s.family,
            "held-out accuracy": s.accuracy,
            "train": s.meta.get("n_train"),
            "held out": s.meta.get("n_held_out"),
            "build s": s.meta.get("build_seconds"),
        }
        for s in specs
    ]
    best = max(specs, key=lambda s: s.accuracy or 0)
    return Section(
        "Model zoo", [table_html(rows)], summary=f"{len(specs)} models; best {best.name} ({best.accuracy:.3f})"
    )


def resolve_models(path: str | Path) -> list[ModelSpec]:
    """Model specs from a registry file (``models: [...]``) or from a zoo recipe config
    (``zoo: ...``), in which case the zoo is built, or reused, in ``zoo.cache_dir``."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: model registry or zoo recipe not found")
    raw = read_yaml(p)
    if isinstance(raw, dict) and "models" in raw and "zoo" not in raw:
        return read_registry(p)
    if not isinstance(raw, dict) or "zoo" not in raw:
        raise InputError(f"{p}: neither a model registry (models: [...]) nor a zoo recipe (zoo: ...)")
    cfg = load_config(p)
    cache = cfg.section("zoo").cache_dir
    run_zoo(cfg, cache)
    return read_registry(Path(cache) / REGISTRY)


def zoo_command(
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Zoo directory (default: zoo.cache_dir)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Zoo recipe (default: configs/zoo.yaml)."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Labeled corpus file or builtin:<name>."),
    labels: Labels = None,
    tiny: bool = typer.Option(False, "--tiny", help="Small sample, only models marked tiny, no fine-tuning."),
    only: Optional[str] = typer.Option(None, "--only", help="Comma-separated model names to build."),
):
    """Build and cache a zoo of sentiment models; write DIR/zoo.yaml for `checkray benchmark --models`."""
    import time

    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    cfg = load_config(
        path, {**corpus_overrides(corpus, None, None, labels), "zoo.tiny": True if tiny else None, "out": out}
    )
    target = cfg.out or cfg.section("zoo").cache_dir
    start = time.perf_counter()
    specs = run_zoo(cfg, target, [n.strip() for n in only.split(",") if n.strip()] if only else None)
    for s in specs:
        console.print(f"  {s.name:<14} {s.family:<9} held-out accuracy {s.accuracy:.3f}")
    console.print(f"zoo: {len(specs)} models in {time.perf_counter() - start:.1f}s")
    typer.echo(f"wrote {target.rstrip('/')}/{REGISTRY}, report.html")
