"""Held-out accuracy of a zoo's transformer models under each encoder runtime.

The zoo (``checkray zoo``, or a ``checkray demo`` run's ``zoo/``) records each model's
accuracy on its held-out split, computed with the runtime it was built with. This loads
the same trained models again under PyTorch, ONNX fp32 and ONNX int8 (``--runtimes``),
predicts the same held-out sentences with each, and prints the accuracy per model and
runtime and how many predictions differ from PyTorch's: what choosing ``onnx-int8`` costs
a model whose weights were trained in fp32. Only the models that run a transformer
(families ``hf`` and ``st_head``) are read; the others do not depend on the runtime.

    .venv/bin/python bench/encoder_accuracy.py --zoo DIR/zoo [--runtimes torch,onnx,onnx-int8] [--limit N]

``--limit N`` reads the first N held-out sentences instead of all of them. The verdict
line is the worst ratio of a runtime's accuracy to the first runtime's over the models
(met when no model loses more than 1 % of its accuracy).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import report, setup_env  # noqa: E402

ENCODER_FAMILIES = ("hf", "st_head")


def held_out(zoo: Path, limit: int | None) -> tuple[list[str], list[str]]:
    import pyarrow.parquet as pq

    table = pq.read_table(zoo / "stages" / "split" / "data.parquet").to_pylist()
    rows = [r for r in table if r["held_out"]][:limit]
    return [r["text"] for r in rows], [r["label"] for r in rows]


def predictions(runtime: str, specs, texts: list[str]) -> dict[str, tuple[np.ndarray, list[str], float]]:
    """Per model: (predicted label index per text, its labels, seconds) under ``runtime``."""
    from checkray.actors.models import load_model
    from checkray.engine.inference import set_encoder

    set_encoder(runtime)
    out = {}
    for spec in specs:
        model = load_model(spec)
        start = time.perf_counter()
        probs = np.asarray(model.predict_proba(texts, None))
        out[spec.name] = (probs.argmax(1), list(model.labels), time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", required=True, help="a zoo directory (its zoo.yaml and stages/split)")
    parser.add_argument("--runtimes", default="torch,onnx,onnx-int8")
    parser.add_argument("--limit", type=int, default=None, help="read the first N held-out sentences")
    args = parser.parse_args()
    setup_env()
    from checkray.engine.benchmark.registry import read_registry

    zoo = Path(args.zoo)
    specs = [s for s in read_registry(zoo / "zoo.yaml") if s.family in ENCODER_FAMILIES]
    if not specs:
        raise SystemExit(f"{zoo}/zoo.yaml: no model of the families {', '.join(ENCODER_FAMILIES)}")
    texts, gold = held_out(zoo, args.limit)
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    results = {runtime: predictions(runtime, specs, texts) for runtime in runtimes}
    base = runtimes[0]
    lines = [("held-out", f"{len(texts):,} sentences of {zoo}, load {os.getloadavg()[0]:.2f}")]
    worst = 1.0
    summary: dict[str, dict] = {}
    for spec in specs:
        for runtime in runtimes:
            index, labels, seconds = results[runtime][spec.name]
            predicted = [labels[i] for i in index]
            accuracy = float(np.mean([p == g for p, g in zip(predicted, gold)]))
            differ = int((index != results[base][spec.name][0]).sum())
            lines.append(
                (
                    f"{spec.name} {runtime}",
                    f"accuracy {accuracy:.4f}; {differ} of {len(texts)} predictions differ from {base}; {seconds:.1f} s",
                )
            )
            summary.setdefault(spec.name, {})[runtime] = {"accuracy": accuracy, "differ": differ, "seconds": seconds}
        first = summary[spec.name][base]["accuracy"]
        worst = min(worst, *(summary[spec.name][r]["accuracy"] / first for r in runtimes))
    goal = f"every model's accuracy under each runtime >= 0.99 x under {base}"
    report("encoder accuracy", lines, worst, goal, worst >= 0.99, summary)


if __name__ == "__main__":
    main()
