"""Failures become training data, measured on cases the retraining never saw.

    .venv/bin/python bench/retrain_on_failures.py --zoo runs/zoo --suite runs/templates/suite.parquet \\
        --spec configs/suites/sentiment_templates.jsonl --model tfidf_lr --out runs/retrain [--split template]

The whole loop with checkray's own commands, on one trainable zoo model (family sklearn):

1. split the template suite in two: ``--split case`` puts half of every template's cases
   (by a seeded hash of the case id) in a training part and half in a held-out part;
   ``--split template`` holds out whole templates (one per capability that has two or more),
   so the held-out sentences are not even built from the same template;
2. ``checkray benchmark`` the model on the training part;
3. ``checkray export-failures`` that run (with ``--neighbours``), minus any row whose text
   is a held-out case (counted);
4. refit a clone of the model on the zoo's training split plus the exported rows that have
   a label the model can produce, and save it next to the original (signed pickle);
5. ``checkray compare`` original vs retrained on the HELD-OUT part (flips, McNemar), and
   measure both models' accuracy on the zoo's held-out corpus split (did general
   accuracy pay for it?).

It prints one line per figure and writes them to ``OUT/retrain.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, setup_env

setup_env()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def checkray(*args: str) -> subprocess.CompletedProcess:
    cmd = [str(ROOT / ".venv" / "bin" / "checkray"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc


def split_suite(suite: pa.Table, how: str, seed: int) -> tuple[pa.Table, pa.Table]:
    templates = pc.struct_field(suite.column("provenance"), "template_id").to_pylist()
    if how == "case":
        held = [
            int(hashlib.sha256(f"{seed}:{cid}".encode()).hexdigest()[:8], 16) % 2 == 1
            for cid in suite.column("case_id").to_pylist()
        ]
    else:
        by_cap: dict[str, list[str]] = {}
        for cap, tid in zip(suite.column("capability").to_pylist(), templates):
            if tid not in by_cap.setdefault(cap, []):
                by_cap[cap].append(tid)
        out = set()
        for tids in by_cap.values():
            if len(tids) >= 2:
                out.add(sorted(tids, key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())[0])
        held = [t in out for t in templates]
    mask = pa.array(held)
    return suite.filter(pc.invert(mask)), suite.filter(mask)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", required=True, help="A zoo run directory (its zoo.yaml and training split).")
    ap.add_argument("--suite", required=True, help="A template suite (checkray templates).")
    ap.add_argument("--spec", default=None, help="The suite's template spec (neighbours from its pools).")
    ap.add_argument("--model", default="tfidf_lr")
    ap.add_argument("--out", required=True)
    ap.add_argument("--split", choices=["case", "template"], default="case")
    ap.add_argument("--neighbours", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from sklearn.base import clone

    from checkray.actors.models.sklearn_models import SklearnTextModel, load_estimator
    from checkray.engine.benchmark.registry import read_registry, write_registry
    from checkray.engine.trust import SIGNATURE_SUFFIX, pickle_bytes

    start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = next(s for s in read_registry(Path(args.zoo) / "zoo.yaml") if s.name == args.model)
    if spec.family != "sklearn":
        sys.exit(f"{args.model}: family {spec.family}; this script refits sklearn pipelines")
    train, held = split_suite(pq.read_table(args.suite), args.split, args.seed)
    pq.write_table(train, out / "train.parquet")
    pq.write_table(held, out / "heldout.parquet")
    write_registry(out / "original.yaml", [spec])

    # 2. benchmark on the training part, 3. export its failures
    checkray(
        "benchmark",
        "--models",
        str(out / "original.yaml"),
        "--suites",
        str(out / "train.parquet"),
        "--out",
        str(out / "bench_train"),
    )
    export = [
        "export-failures",
        str(out / "bench_train"),
        "--out",
        str(out / "failures.jsonl"),
        "--neighbours",
        str(args.neighbours),
        "--seed",
        str(args.seed),
    ]
    if args.spec:
        export += ["--spec", args.spec]
    exported = checkray(*export).stdout.strip()
    rows = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    held_texts = set(held.column("text").to_pylist())
    leaked = sum(r["text"] in held_texts for r in rows)
    usable = [r for r in rows if r["text"] not in held_texts and r["label"] in spec.labels]

    # 4. refit on the zoo's training split plus the failures
    split = pq.read_table(Path(args.zoo) / "stages" / "split" / "data.parquet")
    held_out = split.column("held_out").to_numpy(zero_copy_only=False)
    texts = np.asarray(split.column("text").to_pylist(), dtype=object)
    gold = np.asarray(split.column("label").to_pylist(), dtype=object)
    estimator = load_estimator(spec)
    patched = clone(estimator).fit(
        list(texts[~held_out]) + [r["text"] for r in usable], list(gold[~held_out]) + [r["label"] for r in usable]
    )
    data, signature = pickle_bytes(patched)
    (out / "patched").mkdir(exist_ok=True)
    (out / "patched" / "model.joblib").write_bytes(data)
    (out / "patched" / ("model.joblib" + SIGNATURE_SUFFIX)).write_text(signature)

    def accuracy(est, s) -> float:
        probs = SklearnTextModel(s, est).predict_proba(list(texts[held_out]))
        return float(np.mean(np.asarray(s.labels)[probs.argmax(axis=1)] == gold[held_out]))

    new = spec.model_copy(update={"name": f"{spec.name}_retrained", "path": str(out / "patched" / "model.joblib")})
    acc_before, acc_after = accuracy(estimator, spec), accuracy(patched, new)
    new = new.model_copy(update={"accuracy": round(acc_after, 4)})
    write_registry(out / "models.yaml", [spec, new])

    # 5. compare on the held-out part (and on the training part, for contrast)
    figures = {
        "split": args.split,
        "train_cases": train.num_rows,
        "heldout_cases": held.num_rows,
        "exported": exported,
        "rows_exported": len(rows),
        "rows_dropped_as_heldout_text": leaked,
        "rows_trained_on": len(usable),
        "zoo_heldout_accuracy_before": round(acc_before, 4),
        "zoo_heldout_accuracy_after": round(acc_after, 4),
    }
    for part in ("heldout", "train"):
        res = checkray(
            "compare",
            "--models",
            str(out / "models.yaml"),
            "--suites",
            str(out / f"{part}.parquet"),
            "--baseline",
            spec.name,
            "--candidate",
            new.name,
            "--out",
            str(out / f"compare_{part}"),
        )
        figures[f"compare_{part}"] = [
            line for line in res.stdout.splitlines() if " · overall" in line or " · capability" in line
        ]
        table = pq.read_table(out / f"compare_{part}" / "compare.parquet").to_pylist()
        overall = next(r for r in table if r["level"] == "overall")
        figures[f"{part}_pass_rate_before"] = round(overall["baseline_pass_rate"], 4)
        figures[f"{part}_pass_rate_after"] = round(overall["candidate_pass_rate"], 4)
        figures[f"{part}_mcnemar_p"] = overall["p_value"]
    figures["seconds"] = round(time.perf_counter() - start, 1)
    (out / "retrain.json").write_text(json.dumps(figures, indent=1))
    for key, value in figures.items():
        if isinstance(value, list):
            print(f"{key}:")
            for line in value:
                print(f"  {line}")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
