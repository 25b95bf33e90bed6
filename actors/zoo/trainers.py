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
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as pads

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.stages import RunDir
from checkray.engine.training import FineTuneConfig, ZooConfig, ZooModel, accuracy, make_head, make_text_pipeline
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
):
    """Fine-tune a transformer encoder with a fresh classification head.

    Plain PyTorch loop (AdamW, linear warm-up/decay) over ``texts`` for ``cfg.epochs``;
    returns (model, tokenizer, details) with the model in eval mode. ``on_step(done, total)``
    is called after every optimizer step (a fine-tune on CPU runs for minutes: progress);
    ``on_epoch(epoch, model)`` after every whole epoch (1, 2, ...), the model in eval mode
    for the call (snapshots; ``bench/validity_snapshots.py``).
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
    n = len(texts)
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = max(1, int(round(cfg.epochs * steps_per_epoch)))
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = [
        {
            "params": [p for k, p in model.named_parameters() if not k.endswith(no_decay)],
            "weight_decay": cfg.weight_decay,
        },
        {"params": [p for k, p in model.named_parameters() if k.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total), total)
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    model.train()
    start = time.perf_counter()
    step = 0
    while step < total:
        for batch in np.array_split(rng.permutation(n), steps_per_epoch):
            if step >= total:
                break
            enc = tokenizer(
                [texts[i] for i in batch], truncation=True, max_length=cfg.max_length, padding=True, return_tensors="pt"
            ).to(device)
            loss = model(**enc, labels=target[batch].to(device)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(float(loss.detach()))
            step += 1
            if on_step is not None:
                on_step(step, total)
        else:  # a whole epoch (not cut short by ``total``)
            if on_epoch is not None:
                model.eval()
                on_epoch(step // steps_per_epoch, model)
                model.train()
    model.eval()
    tail = max(1, len(losses) // 10)
    details = {
        "steps": step,
        "train_sentences": n,
        "device": device,
        "loss_first": round(float(np.mean(losses[:tail])), 4),
        "loss_last": round(float(np.mean(losses[-tail:])), 4),
        "train_seconds": round(time.perf_counter() - start, 1),
    }
    return model, tokenizer, details


def build_zoo_model(
    run_uri: str, model: ZooModel, zoo: ZooConfig, labels: list[str], embed_stage: str | None, threads: int = 1
) -> dict[str, Any]:
    """Fit, save and evaluate one model; returns its registry entry (path relative to the run)."""
    from checkray.actors.models import load_model
    from checkray.actors.models.hf_model import HFSequenceClassifier
    from checkray.actors.models.sklearn_models import EncoderHeadModel, SklearnTextModel

    start = time.perf_counter()
    run = RunDir(run_uri)
    texts, gold, held = _read_split(run)
    seed = zoo.seed if model.seed is None else model.seed
    train_texts, train_gold = list(texts[~held]), list(gold[~held])
    test_texts, test_gold = list(texts[held]), list(gold[held])
    rel = model_dir(model.name)
    meta: dict[str, Any] = {
        "kind": model.kind,
        "seed": seed,
        "n_train": len(train_texts),
        "n_held_out": len(test_texts),
    }
    options: dict[str, Any] = {}

    if model.kind == "tfidf":
        family, path = "sklearn", f"{rel}/model.joblib"
        pipeline = make_text_pipeline(model.head, model.params, zoo.tfidf, seed, threads)
        pipeline.fit(train_texts, train_gold)
        _dump_joblib(run, path, pipeline)
        spec = ModelSpec(name=model.name, family=family, path=path, labels=labels)
        probs = SklearnTextModel(spec, pipeline).predict_proba(test_texts)
        meta.update(
            head=model.head,
            params=model.params,
            tfidf=zoo.tfidf.model_dump(),
            vocabulary=len(pipeline.named_steps["tfidf"].vocabulary_),
        )
    elif model.kind == "embedding":
        family, path = "st_head", f"{rel}/head.joblib"
        X = read_embeddings(run, embed_stage)
        head = make_head(model.head, model.params, seed, threads).fit(X[~held], train_gold)
        _dump_joblib(run, path, head)
        options = {"encoder": model.encoder, "normalize": True}
        spec = ModelSpec(name=model.name, family=family, path=path, labels=labels, options=options)
        # Same head and label mapping as the adapter, on the embeddings already computed.
        probs = EncoderHeadModel(spec, head, encoder=None).predict_embeddings(X[held])
        meta.update(head=model.head, params=model.params, encoder=model.encoder, dim=int(X.shape[1]))
    elif model.kind == "finetune":
        from checkray.actors.embedder import resolve_model

        family, path = "hf", f"{rel}/model"
        cfg = model.finetune
        rng = np.random.default_rng(seed)
        take = np.arange(len(train_texts))
        if cfg.train_size and cfg.train_size < len(take):
            take = np.sort(rng.choice(take, size=cfg.train_size, replace=False))
        hf_model, tokenizer, details = fine_tune(
            resolve_model(model.encoder),
            [train_texts[i] for i in take],
            [train_gold[i] for i in take],
            labels,
            cfg,
            seed,
            threads,
        )
        with tempfile.TemporaryDirectory(prefix="zoo-ft-") as tmp:
            hf_model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            _upload_dir(run, Path(tmp), path)
        options = {"max_length": cfg.max_length}
        spec = ModelSpec(name=model.name, family=family, path=path, labels=labels, options=options)
        probs = HFSequenceClassifier(spec, hf_model, tokenizer).predict_proba(test_texts)
        meta.update(encoder=model.encoder, finetune=cfg.model_dump(), **details)
    else:  # lexicon models and the zero-shot LLM: nothing to fit
        family, path = model.kind, None
        spec = ModelSpec(name=model.name, family=family, labels=labels)
        if model.eval_sample and model.eval_sample < len(test_texts):
            keep = np.sort(np.random.default_rng(seed).choice(len(test_texts), size=model.eval_sample, replace=False))
            test_texts, test_gold = [test_texts[i] for i in keep], [test_gold[i] for i in keep]
            meta["n_held_out"] = len(test_texts)
        probs = load_model(spec).predict_proba(test_texts)

    meta["build_seconds"] = round(time.perf_counter() - start, 1)
    return {
        "name": model.name,
        "family": family,
        "path": path,
        "labels": labels,
        "options": options,
        "accuracy": round(accuracy(probs, labels, test_gold), 4),
        "max_cases": model.max_cases,
        "meta": meta,
    }
