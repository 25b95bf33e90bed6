"""Building one zoo model: the body of a Ray task (``jobs/zoo/job.py`` schedules it).

A task reads the split corpus (and, for embedding heads, the embeddings computed once per
encoder) from the run directory, fits its model, writes the artifact under its stage
directory, and measures held-out accuracy through the same adapter class the benchmark
will load, so the recorded accuracy is the accuracy of what the registry points to.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as pads

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.inference import resolve_encoder
from checkray.engine.stages import RunDir
from checkray.engine.training import (
    FineTuneConfig,
    ZooConfig,
    ZooModel,
    accuracy,
    epoch_batches,
    make_head,
    make_text_pipeline,
    padded_tokens,
)
from checkray.engine.trust import SIGNATURE_SUFFIX, pickle_bytes

SPLIT_STAGE = "split"


def model_stage_name(name: str) -> str:
    return f"model-{name}"


def model_dir(name: str) -> str:
    """Stage directory of a model, relative to the run root."""
    return f"stages/{model_stage_name(name)}"


def _read_split(run: RunDir):
    table = run.read_table(f"stages/{SPLIT_STAGE}/data.parquet")
    held = table.column("held_out").to_numpy(zero_copy_only=False)
    texts = np.asarray(table.column("text").to_pylist(), dtype=object)
    gold = np.asarray(table.column("label").to_pylist(), dtype=object)
    return texts, gold, held


def read_embeddings(run: RunDir, stage: str) -> np.ndarray:
    """Embeddings of the split table's rows, in row order (shards arrive in any order)."""
    from checkray.engine.arrays import column_to_numpy

    data = pads.dataset(run.path("stages", stage, "embeddings"), filesystem=run.fs, format="parquet").to_table()
    data = data.take(pc.sort_indices(data, [("pos", "ascending")]))
    return column_to_numpy(data.column("embedding"))


def _dump_joblib(run: RunDir, rel: str, obj: Any) -> None:
    """The pickle and its signature (``checkray.engine.trust``): loading it later needs no --trust-code."""
    data, signature = pickle_bytes(obj)
    run.write_bytes(rel, data)
    run.write_text(rel + SIGNATURE_SUFFIX, signature)


def _upload_dir(run: RunDir, local: Path, rel: str) -> None:
    for f in sorted(local.rglob("*")):
        if f.is_file():
            run.write_bytes(f"{rel}/{f.relative_to(local).as_posix()}", f.read_bytes())


def fine_tune(
    base: str,
    texts: Sequence[str],
    labels: Sequence[str],
    label_names: list[str],
    cfg: FineTuneConfig,
    seed: int,
    threads: int | None = None,
    on_step: Callable[[int, int], None] | None = None,
    on_epoch: Callable[[int, Any], None] | None = None,
    precision: str = "fp32",
):
    """Fine-tune a transformer encoder with a fresh classification head.

    Plain PyTorch loop (AdamW, linear warm-up/decay) over ``texts`` for ``cfg.epochs``;
    returns (model, tokenizer, details) with the model in eval mode. ``on_step(done, total)``
    is called after every optimizer step (a fine-tune on CPU runs for minutes: progress);
    ``on_epoch(epoch, model)`` after every whole epoch (1, 2, ...), the model in eval mode
    for the call (snapshots; ``bench/validity_snapshots.py``). ``precision``: ``fp32``, or
    ``bf16-autocast`` (``training_precision``: the forward and backward matmuls under CPU
    bf16 autocast; weights, optimizer and loss stay fp32); on a GPU always fp32.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={n: i for i, n in enumerate(label_names)},
    ).to(device)
    target = torch.tensor([label_names.index(lab) for lab in labels], dtype=torch.long)
    steps_per_epoch = math.ceil(len(texts) / cfg.batch_size)
    total = max(1, int(round(cfg.epochs * steps_per_epoch)))
    optimizer = torch.optim.AdamW(_weight_decay_groups(model, cfg.weight_decay), lr=cfg.learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total), total)
    precision = precision if device == "cpu" else "fp32"
    trainer = _Trainer(
        model, tokenizer, texts, target, cfg.max_length, optimizer, schedule, device, precision, cfg.group_by_length
    )
    start = time.perf_counter()
    losses = trainer.train(np.random.default_rng(seed), steps_per_epoch, total, on_step, on_epoch)
    model.eval()
    tail = max(1, len(losses) // 10)
    details = {
        "steps": len(losses),
        "train_sentences": len(texts),
        "device": device,
        "precision": precision,
        "group_by_length": cfg.group_by_length,
        "padded_tokens": trainer.padded_tokens,
        "loss_first": round(float(np.mean(losses[:tail])), 4),
        "loss_last": round(float(np.mean(losses[-tail:])), 4),
        "train_seconds": round(time.perf_counter() - start, 1),
    }
    return model, tokenizer, details


def training_precision() -> str:
    """``bf16-autocast`` where the encoder setting resolves to ``torch-bf16`` (a CPU with
    native bf16, ``checkray.engine.inference``), else ``fp32``."""
    return "bf16-autocast" if resolve_encoder() == "torch-bf16" else "fp32"


def _weight_decay_groups(model: Any, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW parameter groups: no weight decay on biases and layer norms."""
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    return [
        {"params": [p for k, p in model.named_parameters() if not k.endswith(no_decay)], "weight_decay": weight_decay},
        {"params": [p for k, p in model.named_parameters() if k.endswith(no_decay)], "weight_decay": 0.0},
    ]


@dataclass
class _Trainer:
    """The pieces of one fine-tune's optimisation loop."""

    model: Any
    tokenizer: Any
    texts: Sequence[str]
    target: Any  # label index per text (a torch tensor)
    max_length: int
    optimizer: Any
    schedule: Any
    device: str
    precision: str = "fp32"  # or "bf16-autocast" (CPU)
    group_by_length: bool = True  # ``epoch_batches``
    padded_tokens: int = 0  # token positions computed so far, padding included

    def train(
        self,
        rng: np.random.Generator,
        steps_per_epoch: int,
        total: int,
        on_step: Callable[[int, int], None] | None,
        on_epoch: Callable[[int, Any], None] | None,
    ) -> list[float]:
        """``total`` steps over shuffled epochs; the loss of each step."""
        losses: list[float] = []
        lengths = self.token_lengths()
        self.model.train()
        while len(losses) < total:
            for batch in epoch_batches(lengths, steps_per_epoch, rng, self.group_by_length):
                if len(losses) >= total:
                    break
                losses.append(self.step(batch))
                self.padded_tokens += padded_tokens(lengths, [batch])
                if on_step is not None:
                    on_step(len(losses), total)
            else:  # a whole epoch (not cut short by ``total``)
                if on_epoch is not None:
                    self.model.eval()
                    on_epoch(len(losses) // steps_per_epoch, self.model)
                    self.model.train()
        return losses

    def token_lengths(self) -> np.ndarray:
        """Each text's token count as a step tokenizes it (truncated at ``max_length``)."""
        ids = self.tokenizer(list(self.texts), truncation=True, max_length=self.max_length)["input_ids"]
        return np.array([len(row) for row in ids])

    def step(self, batch: np.ndarray) -> float:
        """One optimizer step on the texts at ``batch``; its loss."""
        import torch

        enc = self.tokenizer(
            [self.texts[i] for i in batch],
            truncation=True,
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        ).to(self.device)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bf16-autocast"):
            loss = self.model(**enc, labels=self.target[batch].to(self.device)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad()
        return float(loss.detach())


@dataclass
class _Split:
    """The zoo's corpus split: training texts and gold labels, and the held-out ones."""

    held: np.ndarray  # held-out mask over the split table's rows
    train_texts: list[str]
    train_gold: list[str]
    test_texts: list[str]
    test_gold: list[str]

    @classmethod
    def read(cls, run: RunDir) -> _Split:
        texts, gold, held = _read_split(run)
        return cls(held, list(texts[~held]), list(gold[~held]), list(texts[held]), list(gold[held]))


@dataclass
class _Build:
    """What building one zoo model needs."""

    run: RunDir
    model: ZooModel
    zoo: ZooConfig
    labels: list[str]
    split: _Split
    seed: int
    threads: int
    embed_stage: str | None

    @property
    def folder(self) -> str:
        return model_dir(self.model.name)


@dataclass
class _Built:
    """A built model: its registry fields, its probabilities on the held-out texts it was
    evaluated on (``test_gold``), and details of its kind for ``meta``."""

    family: str
    path: str | None
    options: dict[str, Any]
    probs: np.ndarray
    test_gold: list[str]
    details: dict[str, Any]


def build_zoo_model(
    run_uri: str, model: ZooModel, zoo: ZooConfig, labels: list[str], embed_stage: str | None, threads: int = 1
) -> dict[str, Any]:
    """Fit, save and evaluate one model; returns its registry entry (path relative to the run)."""
    start = time.perf_counter()
    run = RunDir(run_uri)
    split = _Split.read(run)
    seed = zoo.seed if model.seed is None else model.seed
    builders = {"tfidf": _build_tfidf, "embedding": _build_embedding_head, "finetune": _build_finetuned}
    build = builders.get(model.kind, _build_untrained)  # lexicon models and the zero-shot LLM: nothing to fit
    built = build(_Build(run, model, zoo, labels, split, seed, threads, embed_stage))
    meta: dict[str, Any] = {
        "kind": model.kind,
        "seed": seed,
        "n_train": len(split.train_texts),
        "n_held_out": len(built.test_gold),
        **built.details,
        "build_seconds": round(time.perf_counter() - start, 1),
    }
    return {
        "name": model.name,
        "family": built.family,
        "path": built.path,
        "labels": labels,
        "options": built.options,
        "accuracy": round(accuracy(built.probs, labels, built.test_gold), 4),
        "max_cases": model.max_cases,
        "meta": meta,
    }


def _build_tfidf(b: _Build) -> _Built:
    from checkray.actors.models.sklearn_models import SklearnTextModel

    model, split = b.model, b.split
    path = f"{b.folder}/model.joblib"
    pipeline = make_text_pipeline(model.head, model.params, b.zoo.tfidf, b.seed, b.threads)
    pipeline.fit(split.train_texts, split.train_gold)
    _dump_joblib(b.run, path, pipeline)
    spec = ModelSpec(name=model.name, family="sklearn", path=path, labels=b.labels)
    probs = SklearnTextModel(spec, pipeline).predict_proba(split.test_texts)
    details = {
        "head": model.head,
        "params": model.params,
        "tfidf": b.zoo.tfidf.model_dump(),
        "vocabulary": len(pipeline.named_steps["tfidf"].vocabulary_),
    }
    return _Built("sklearn", path, {}, probs, split.test_gold, details)


def _build_embedding_head(b: _Build) -> _Built:
    from checkray.actors.models.sklearn_models import EncoderHeadModel

    model, held = b.model, b.split.held
    path = f"{b.folder}/head.joblib"
    X = read_embeddings(b.run, b.embed_stage)
    head = make_head(model.head, model.params, b.seed, b.threads).fit(X[~held], b.split.train_gold)
    _dump_joblib(b.run, path, head)
    options = {"encoder": model.encoder, "normalize": True}
    spec = ModelSpec(name=model.name, family="st_head", path=path, labels=b.labels, options=options)
    # Same head and label mapping as the adapter, on the embeddings already computed.
    probs = EncoderHeadModel(spec, head, encoder=None).predict_embeddings(X[held])
    details = {"head": model.head, "params": model.params, "encoder": model.encoder, "dim": int(X.shape[1])}
    return _Built("st_head", path, options, probs, b.split.test_gold, details)


def _build_finetuned(b: _Build) -> _Built:
    from checkray.actors.embedder import resolve_model
    from checkray.actors.models.hf_model import HFSequenceClassifier

    model, split, cfg = b.model, b.split, b.model.finetune
    path = f"{b.folder}/model"
    take = np.arange(len(split.train_texts))
    if cfg.train_size and cfg.train_size < len(take):
        take = np.sort(np.random.default_rng(b.seed).choice(take, size=cfg.train_size, replace=False))
    hf_model, tokenizer, details = fine_tune(
        resolve_model(model.encoder),
        [split.train_texts[i] for i in take],
        [split.train_gold[i] for i in take],
        b.labels,
        cfg,
        b.seed,
        b.threads,
        precision=training_precision(),  # the zoo's fine-tunes; the validity fine-tunes stay fp32
    )
    with tempfile.TemporaryDirectory(prefix="zoo-ft-") as tmp:
        hf_model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _upload_dir(b.run, Path(tmp), path)
    options = {"max_length": cfg.max_length}
    spec = ModelSpec(name=model.name, family="hf", path=path, labels=b.labels, options=options)
    probs = HFSequenceClassifier(spec, hf_model, tokenizer).predict_proba(split.test_texts)
    details = {"encoder": model.encoder, "finetune": cfg.model_dump(), **details}
    return _Built("hf", path, options, probs, split.test_gold, details)


def _build_untrained(b: _Build) -> _Built:
    """A model with nothing to fit, evaluated on ``eval_sample`` held-out texts when it sets one."""
    from checkray.actors.models import load_model

    model = b.model
    test_texts, test_gold = b.split.test_texts, b.split.test_gold
    if model.eval_sample and model.eval_sample < len(test_texts):
        keep = np.sort(np.random.default_rng(b.seed).choice(len(test_texts), size=model.eval_sample, replace=False))
        test_texts, test_gold = [test_texts[i] for i in keep], [test_gold[i] for i in keep]
    spec = ModelSpec(name=model.name, family=model.kind, labels=b.labels)
    probs = load_model(spec).predict_proba(test_texts)
    return _Built(model.kind, None, {}, probs, test_gold, {})
