"""Do the encoder runtimes give the same benchmark verdicts? PyTorch vs ONNX fp32 vs int8.

Runs ``checkray --encoder E benchmark`` once per runtime on the same registry and suites,
each from an EMPTY content cache of its own (so every model computes every prediction
with that runtime), and compares, for the models that run a transformer (families
``hf`` and ``st_head``), each row's pass/fail with PyTorch's, and each model's failure
rate. Also prints each run's wall time (the cheap models' time included).

    .venv/bin/python bench/encoder_verdicts.py --models DIR/zoo/zoo.yaml \\
        --suites DIR/templates/suite.parquet [--max-cases-per-model N] [--runtimes torch,onnx,onnx-int8] [--trust-code]

``DIR`` is a ``checkray demo`` run (its zoo and template suite). For CheckList's released
sentiment suite, import it first (``checkray import checklist ...``, docs/checklist.md)
and pass its ``suite.parquet``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OFFLINE_ENV  # noqa: E402

ENCODER_FAMILIES = ("hf", "st_head")
KEYS = ["model", "suite", "case_id", "text"]


def run(runtime: str, args: argparse.Namespace, work: Path) -> tuple[float, Path]:
    out = work / runtime
    env = dict(os.environ, **OFFLINE_ENV, CHECKRAY_CACHE_URI=str(work / f"cache-{runtime}"))
    env.pop("CHECKRAY_ENCODER", None)
    command = [sys.executable, "-m", "checkray.jobs.cli", "--encoder", runtime]
    command += ["--trust-code"] if args.trust_code else []
    command += ["benchmark"]
    command += ["--models", args.models, "--suites", *args.suites, "--out", str(out)]
    if args.max_cases_per_model:
        command += ["--max-cases-per-model", str(args.max_cases_per_model)]
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True)
    return time.perf_counter() - start, out / "results.parquet"


def encoder_rows(path: Path, models: set[str]):
    import pandas as pd

    table = pd.read_parquet(path, columns=[*KEYS, "pass"])
    table = table[table["model"].isin(models)]
    return table.drop_duplicates(KEYS).set_index(KEYS)["pass"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--suites", nargs="+", required=True)
    parser.add_argument("--max-cases-per-model", type=int, default=None)
    parser.add_argument("--runtimes", default="torch,onnx,onnx-int8")
    parser.add_argument("--trust-code", action="store_true", help="pass --trust-code (pickled heads of another user)")
    args = parser.parse_args()
    from checkray.engine.benchmark.families import has_trait
    from checkray.engine.benchmark.registry import read_registry

    models = {s.name for s in read_registry(args.models) if has_trait(s, "encoder")}
    runtimes = args.runtimes.split(",")
    work = Path(tempfile.mkdtemp(prefix="encoder-verdicts-"))
    timed = {r: run(r, args, work) for r in runtimes}
    verdicts = {r: encoder_rows(path, models) for r, (_, path) in timed.items()}
    reference = verdicts[runtimes[0]]
    print(
        f"\n== verdicts of {len(models)} encoder models ({', '.join(sorted(models))}), load {os.getloadavg()[0]:.2f} =="
    )
    for runtime in runtimes:
        got = verdicts[runtime].reindex(reference.index)
        known = got.notna() & reference.notna()
        same = (got[known].astype(bool) == reference[known].astype(bool)).mean() if known.any() else float("nan")
        rates = (1 - got.groupby(level="model").mean()).round(4).to_dict()
        print(
            f"  {runtime:<10} {timed[runtime][0]:7.1f} s  rows {int(known.sum()):,}  "
            f"same verdict as {runtimes[0]}: {same:.2%}  failure rates {rates}"
        )


if __name__ == "__main__":
    main()
