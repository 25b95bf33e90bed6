"""Snapshots of one validity fine-tune: held-out accuracy after each epoch, and of weight
and probability averages of the last epochs (stochastic weight averaging), for the price of
one fine-tune.

The validity classifier's default is one mpnet fine-tune (4 epochs, lr 3e-5, balanced by
oversampling; ``bench_validity.py --variants finetune:mpnet``). Its labels are noisy (TestAug's
file annotates 11 of its 14 repeated texts both ways), and a model that memorises noise late
in training may generalise better from an average of its late weights. This runs that
fine-tune once on the bench's split (``--split-seed``, the same stratified 70/30 split and
seed 42 as ``bench_validity.py``, so epoch 4 is its ``finetune:mpnet`` exactly), and saves
every variant's held-out P(valid) for ``combine_validity.py``:

    OMP_NUM_THREADS=1 .venv/bin/python bench/validity_snapshots.py --split-seed 42 --save-probs DIR

Variants: ``epochN`` (the weights after epoch N of the 4-epoch schedule), ``swa:A-B`` (the
mean of the weights after epochs A..B), ``snap:A-B`` (the mean of their P(valid)).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_validity import DATA, held_out_split, save_probs  # noqa: E402
from common import setup_env  # noqa: E402

AVERAGED = ((2, 4), (3, 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--split-seed", type=int, default=42)
    parser.add_argument("--encoder", default="builtin:mpnet")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--save-probs", type=Path, default=None, help="directory for combine_validity.py")
    args = parser.parse_args()
    setup_env()
    import numpy as np
    from transformers import AutoTokenizer

    from checkray.actors.embedder import resolve_model
    from checkray.actors.testaug.validity import LABELS, FineTunedEncoder, ValidityClassifier, oversample
    from checkray.actors.zoo.trainers import fine_tune
    from checkray.engine.testaug.validity import read_annotations
    from checkray.engine.training import FineTuneConfig

    rows = read_annotations(args.data)
    train, test = held_out_split(rows, 0.3, args.split_seed)
    held_gold = np.array([r["validity"] for r in test])
    order = oversample([r["validity"] for r in train], 42)  # as the classifier's first member
    cfg = FineTuneConfig(train_size=None, epochs=args.epochs, max_length=64, batch_size=16, learning_rate=args.lr)
    probs: dict[str, np.ndarray] = {}
    weights: dict[int, dict] = {}
    base = resolve_model(args.encoder)
    tokenizer = AutoTokenizer.from_pretrained(base)  # fine_tune returns its own only at the end
    held_inputs = [r["text"] for r in test]

    def p_valid(model) -> np.ndarray:  # the classifier's own prediction, on these weights
        weights = FineTunedEncoder(args.encoder, cfg, members=[(model, tokenizer)])
        return ValidityClassifier("finetune", args.encoder, finetune=cfg, model=weights).predict_proba(held_inputs)

    def on_epoch(epoch: int, model) -> None:
        probs[f"epoch{epoch}"] = p_valid(model)
        weights[epoch] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        accuracy = ((probs[f"epoch{epoch}"] >= 0.5) == held_gold).mean()
        print(f"epoch {epoch}: held-out accuracy {accuracy:.3f}", flush=True)

    start = time.perf_counter()
    model, _, _ = fine_tune(
        base,
        [train[i]["text"] for i in order],
        [LABELS[train[i]["validity"]] for i in order],
        LABELS,
        cfg,
        42,
        on_epoch=on_epoch,
    )
    for first, last in AVERAGED:
        span = range(first, last + 1)
        mean = {k: sum(weights[e][k].float() for e in span) / len(span) for k in weights[last]}
        model.load_state_dict({k: v.to(weights[last][k].dtype) for k, v in mean.items()})
        probs[f"swa:{first}-{last}"] = p_valid(model)
        probs[f"snap:{first}-{last}"] = np.mean([probs[f"epoch{e}"] for e in span], axis=0)
    results = {name: round(float(((p >= 0.5) == held_gold).mean()), 4) for name, p in probs.items()}
    print(
        json.dumps(
            {
                "split_seed": args.split_seed,
                "seconds": round(time.perf_counter() - start, 1),
                "held_out": len(test),
                "accuracy": results,
            }
        ),
        flush=True,
    )
    if args.save_probs:
        for name, p in probs.items():
            save_probs(args.save_probs, f"snapshots-{name}", args.split_seed, p, test)


if __name__ == "__main__":
    main()
