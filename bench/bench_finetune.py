"""The zoo's fine-tune on CPU: random batches vs batches grouped by token length.

Both arms fine-tune MiniLM exactly as the demo's zoo does (``actors/zoo/trainers.fine_tune``:
1,200 training sentences, one epoch, max length 64, batch 32, seed 0, every core) on the
same seeded sample of the bundled Rotten Tomatoes sentences; they differ only in
``finetune.group_by_length``:

* ``random``: a permutation split into batches (the baseline; each batch pads to its
  longest text);
* ``grouped``: the same permutation sorted by length within runs of 50 batches, the
  batches shuffled (``engine/training.epoch_batches``, the default).

Arms run alternately ``--repeat`` times; the best training time of each is kept (the model
load is not timed). Printed per arm: training seconds, token positions computed (pads
included), the last tenth's mean loss and the held-out accuracy on 1,706 other sentences
(PyTorch fp32 forward), and this machine's float32 matmul rate beside them, since a
shared VM's speed drifts between runs.

    .venv/bin/python bench/bench_finetune.py [--n 1200] [--repeat 2] [--quick]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RT_SIZE, add_repeat, base_parser, report, resolve_n, setup_env  # noqa: E402

HELD_OUT = 1_706
LABELS = ["negative", "positive"]


def split(n: int) -> tuple[list[str], list[str], list[str], list[str]]:
    """``n`` training sentences and ``HELD_OUT`` others (seeded, disjoint)."""
    import numpy as np

    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus

    corpus = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))
    texts, labels = corpus.column("text").to_pylist(), corpus.column("label").to_pylist()
    order = np.random.default_rng(0).permutation(len(texts))
    train, test = order[:n], order[-HELD_OUT:]
    return [texts[i] for i in train], [labels[i] for i in train], [texts[i] for i in test], [labels[i] for i in test]


def held_out_accuracy(model, tokenizer, texts: list[str], gold: list[str]) -> float:
    import numpy as np
    import torch

    predicted = []
    with torch.no_grad():
        for lo in range(0, len(texts), 128):
            enc = tokenizer(texts[lo : lo + 128], truncation=True, max_length=64, padding=True, return_tensors="pt")
            predicted += model(**enc).logits.argmax(-1).tolist()
    return float(np.mean([LABELS[p] == g for p, g in zip(predicted, gold)]))


def arm(grouped: bool, data, epochs: float):
    """One fine-tune; (training seconds, details)."""
    from checkray.actors.embedder import resolve_model
    from checkray.actors.zoo.trainers import fine_tune
    from checkray.engine.training import FineTuneConfig

    train_texts, train_gold, test_texts, test_gold = data
    cfg = FineTuneConfig(train_size=None, epochs=epochs, max_length=64, batch_size=32, group_by_length=grouped)
    model, tokenizer, details = fine_tune(
        resolve_model("builtin:minilm"), train_texts, train_gold, LABELS, cfg, seed=0, threads=os.cpu_count()
    )
    details["accuracy"] = held_out_accuracy(model, tokenizer, test_texts, test_gold)
    return details["train_seconds"], details


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], 1_200, 96)
    add_repeat(parser)
    args = parser.parse_args()
    setup_env()
    from bench_encoders import matmul_gflops

    n = resolve_n(args)
    if n + HELD_OUT > RT_SIZE:
        raise SystemExit(f"--n {n}: at most {RT_SIZE - HELD_OUT} training sentences")
    repeat = args.repeat or (1 if args.quick else 2)
    data = split(n)
    runs = {"random": [], "grouped": []}
    details, rates = {}, []
    for _ in range(repeat):
        for name in runs:
            rates.append(matmul_gflops(1.0))
            seconds, details[name] = arm(name == "grouped", data, 1.0)
            runs[name].append(seconds)
    best = {name: min(times) for name, times in runs.items()}
    lines = [
        (
            "machine",
            f"{os.cpu_count()} cores, float32 matmul {min(rates):,.1f}-{max(rates):,.1f} GFLOP/s over the runs",
        ),
        ("load", f"{os.getloadavg()[0]:.2f} at the end"),
    ]
    for name in runs:
        d = details[name]
        lines.append(
            (
                name,
                f"train {best[name]:.1f} s (runs {', '.join(f'{t:.1f}' for t in runs[name])}), "
                f"{d['padded_tokens']:,} token positions, loss {d['loss_last']:.4f}, "
                f"held-out accuracy {d['accuracy']:.4f}",
            )
        )
    ratio = best["random"] / best["grouped"]
    report(
        "bench_finetune",
        lines,
        ratio,
        "> 1.0 (grouped faster than random)",
        ratio > 1.0,
        extra={"n": n, "runs": runs, "details": details, "gflops": rates},
    )


if __name__ == "__main__":
    main()
