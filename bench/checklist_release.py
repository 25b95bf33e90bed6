"""CheckList's released sentiment suite, the real file: import, run, and check the verdicts.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/checklist_release.py [--suite PATH] [--models verify|zoo] [--verify N]

1. Imports ``sentiment_suite.tar.gz`` (default ``../shared/data/checklist/``) with
   ``checkray import checklist --labels 0=negative,1=neutral,2=positive --mapping
   configs/checklist/sentiment.yaml`` and prints tests, test cases and rows by type and
   how each expectation was decided.
2. Runs the benchmark on it: ``verify`` = three models (a 3-class stand-in model, VADER,
   a scikit-learn model); ``zoo`` = the 36 models of ``bench_benchmark.py`` (24 text models,
   12 MiniLM heads): wall time, model x cases / s, peak RSS of the process tree.
3. For the first N models, recomputes every test's failure rate from ``results.parquet``
   with CheckList 2020's ``Expect`` semantics (``tests/fakes/checklist_release.py``: result
   > 0 passes, None is not counted, ``all_except_first``, ``get_stats``), the expectations
   built here from what ``pickletools`` shows of each test's pickled code, not from the
   importer's output, and compares them with checkray's ``testcase_failure_rate``.

Predictions CheckList sees: ``pred`` = the model's predicted label (for a binary model the
neutral band), ``conf`` = its probabilities over (negative, neutral, positive); for a binary
model (P(neg), 1 - 2|P(pos) - 1/2|, P(pos)), checkray's scores for those labels.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LABELS = ["negative", "neutral", "positive"]


def model_random3(texts, pairs=None):
    """A deterministic 3-class stand-in model: text-seeded Dirichlet probabilities."""
    out = np.empty((len(texts), 3))
    for i, t in enumerate(texts):
        seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).dirichlet(np.ones(3) * 0.7)
    return out


def reference_expectations(E):
    """Each released test's expectation as its pickled code computes it (read with
    pickletools; docs/checklist.md), built with the stand-in Expect. Tests not named: MFT
    ``Expect.eq()``, INV ``Expect.inv(0.1)``."""

    def positive_change(orig_conf, conf):
        return orig_conf[0] - conf[0] + conf[2] - orig_conf[2]

    def diff_up(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
        change = positive_change(orig_conf, conf)
        return True if change + 0.1 >= 0 else change + 0.1

    def diff_down(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
        change = positive_change(orig_conf, conf)
        return True if change - 0.1 <= 0 else -(change - 0.1)

    def not_neutral(pred, *args, **kwargs):
        return pred != 1

    def not_negative(x, pred, *args):
        return pred != 0

    up = E.slice_pairwise(E.monotonic(increasing=True, tolerance=0.1), not_neutral)
    down = E.slice_pairwise(E.monotonic(increasing=False, tolerance=0.1), not_neutral)
    return {
        "intensifiers": up,
        "reducers": down,
        '"used to" should reduce': down,
        "add positive phrases": E.pairwise(diff_up),
        "add negative phrases": E.pairwise(diff_down),
        "simple negations: not negative": E.single(not_negative),
        "simple negations: I thought x was negative, but it was not (should be neutral or positive)": E.single(
            not_negative
        ),
        "Hard: Negation of negative with neutral stuff in the middle (should be positive or neutral)": E.single(
            not_negative
        ),
        "Q & A: no": E.single(lambda x, pred, _, label, _2: pred != 0 if label == 1 else pred == label),
    }


class _Test:
    def __init__(self, record, expect):
        self.data, self.labels, self.meta = record.data, record.labels, record.meta
        self.agg_fn = "all" if record.kind == "MFT" else "all_except_first"
        self.expect, self.run_idxs = expect, None


def _conf_reader(probs: list, labels: list[str]):
    """conf(k): the (negative, neutral, positive) vector CheckList sees for row k."""
    where = {label: i for i, label in enumerate(labels)}

    def conf(k: int) -> np.ndarray:
        p = probs[k]
        if len(labels) == 3:
            return np.array([p[where[x]] for x in LABELS], dtype=float)
        pos = p[where["positive"]]
        return np.array([p[where["negative"]], 1 - 2 * abs(pos - 0.5), pos], dtype=float)

    return conf


def verify(suite_records, results, models: list[str]) -> int:
    """CheckList's fail rate per test vs checkray's testcase_failure_rate; returns mismatches."""
    import pyarrow.compute as pc

    from checkray.engine.benchmark.summary import summarize
    from checkray.engine.schema import case_id
    from tests.fakes.checklist_release import checklist_passed, checklist_stats, release_checklist

    summary = summarize(results).to_pylist()
    mismatches = 0
    with release_checklist() as cl:
        named = reference_expectations(cl.Expect)
        for model in models:
            rows = results.filter(pc.equal(results.column("model"), model))
            row_of = {cid: k for k, cid in enumerate(rows.column("case_id").to_pylist())}
            predicted = rows.column("predicted").to_pylist()
            probs = rows.column("probabilities").to_pylist()
            labels = rows.column("labels")[0].as_py()

            conf = _conf_reader(probs, labels)

            ours = {s["topic"]: s for s in summary if s["model"] == model}
            print(f"\n{model}: test, CheckList fail rate (fails / judged), checkray testcase_failure_rate")
            for suite in suite_records:
                for record in suite.tests:
                    if record.kind == "MFT":
                        default = cl.Expect.eq()
                    else:
                        default = cl.Expect.inv(0.1)
                    test = _Test(record, named.get(record.name, default))
                    preds, confs = [], []
                    for i, case in enumerate(record.data):
                        examples = case if isinstance(case, list) else [case]
                        ks = [row_of[case_id(suite.name, record.name, i, j)] for j in range(len(examples))]
                        p = [LABELS.index(predicted[k]) for k in ks]
                        c = [conf(k) for k in ks]
                        preds.append(np.array(p) if isinstance(case, list) else p[0])
                        confs.append(np.array(c) if isinstance(case, list) else c[0])
                    stats = checklist_stats(checklist_passed(test, preds, confs))
                    mine = ours.get(record.name, {})
                    theirs = stats["fail_rate"]
                    judged = stats["testcases"] - stats["filtered"]
                    same = (mine.get("testcases"), mine.get("testcase_failures")) == (judged, stats["fails"])
                    mismatches += not same
                    rate = "-" if theirs is None else f"{100 * theirs:.1f}%"
                    ck = mine.get("testcase_failure_rate")
                    ck = "-" if ck is None or ck != ck else f"{100 * ck:.1f}%"
                    print(
                        f"  {'ok ' if same else 'DIFF'} {record.kind} {record.name[:70]:70s} "
                        f"{rate:>6s} ({stats['fails']}/{judged})  checkray {ck:>6s} "
                        f"({mine.get('testcase_failures')}/{mine.get('testcases')})"
                    )
    return mismatches


def in_process(specs, imported, run: Path) -> list[str]:
    """results.parquet without Ray: each model scores the distinct inputs, then the same
    ``model_results`` the benchmark writes. Returns the models that failed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from checkray.actors.models import load_model
    from checkray.engine.benchmark.inputs import prepare_cases
    from checkray.engine.benchmark.results import model_results
    from checkray.jobs.benchmark.job import BenchmarkConfig

    settings = BenchmarkConfig().settings()
    cases, inputs = prepare_cases([imported])
    texts, pairs = inputs.column("text").to_pylist(), inputs.column("text_pair").to_pylist()
    if all(p is None for p in pairs):
        pairs = None
    tables, failed = [], []
    for spec in specs:
        start = time.perf_counter()
        try:
            model = load_model(spec)
            batches = [
                model.predict_proba(texts[i : i + 512], None if pairs is None else pairs[i : i + 512])
                for i in range(0, len(texts), 512)
            ]
            probs = np.concatenate(batches).astype(float)
            error = None
        except Exception as exc:  # noqa: BLE001 - one failing model is reported, not fatal
            probs, error = None, f"{type(exc).__name__}: {exc}"
            failed.append(spec.name)
            print(f"   {spec.name} failed: {error}")
        tables.append(model_results(cases, spec.name, list(spec.labels), error, probs, settings))
        print(f"   {spec.name}: {time.perf_counter() - start:.1f}s")
    run.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.concat_tables(tables), run / "results.parquet")
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--suite", default=str(ROOT.parent / "shared" / "data" / "checklist" / "sentiment_suite.tar.gz")
    )
    parser.add_argument("--models", choices=["verify", "zoo", "none"], default="verify")
    parser.add_argument("--verify", type=int, default=3, help="Recompute CheckList's verdicts for the first N models.")
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench_checklist_release"))
    parser.add_argument(
        "--no-ray", action="store_true", help="Score in this process (one model after another) when Ray cannot start."
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_worker_niceness", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(ROOT))

    import pyarrow.parquet as pq

    from checkray.engine.benchmark.checklist.reader import read_checklist
    from checkray.engine.trust import allow_code
    from checkray.jobs.cli import main as cli

    allow_code()  # the models are this bench's own callables (bench_models, model_random3)

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    t = time.perf_counter()
    try:
        cli(
            [
                "import",
                "checklist",
                args.suite,
                "--labels",
                "0=negative,1=neutral,2=positive",
                "--mapping",
                str(ROOT / "configs" / "checklist" / "sentiment.yaml"),
                "--out",
                str(out / "imported"),
            ]
        )
    except SystemExit as exc:
        if exc.code:
            raise
    imported = pq.read_table(out / "imported" / "suite.parquet")
    report = json.loads((out / "imported" / "import.json").read_text())
    texts = imported.column("text").to_pylist()
    print(
        f"== import: {imported.num_rows} rows ({len(set(texts))} distinct texts) in "
        f"{time.perf_counter() - t:.1f}s; tests {Counter(x['type'] for x in report['tests'])}; "
        f"test cases {sum(x['testcases'] for x in report['tests'])}"
    )
    how = Counter(x["expectation"].split(":")[0].split(" '")[0] for x in report["tests"])
    print(f"   expectations: {dict(how)}; statuses {dict(Counter(x['status'] for x in report['tests']))}")
    if args.models == "none":
        return

    from bench_benchmark import PeakRSS

    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.jobs.base import run_job
    from checkray.jobs.benchmark.config import BenchmarkConfig
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.config import CheckrayConfig

    if args.models == "zoo":
        from bench_models import build_models

        specs = build_models(36, 12)
    else:
        from bench_models import build_models

        zoo = build_models(4, 0)  # tfidf_lr and VADER (binary positive/negative)
        specs = [ModelSpec(name="random3", family="callable", path="checklist_release:model_random3", labels=LABELS)]
        specs += [zoo[0], zoo[3]]
    cfg = CheckrayConfig().with_section(BenchmarkConfig())
    run = out / "run"
    with PeakRSS() as memory:
        t = time.perf_counter()
        if args.no_ray:
            failed = in_process(specs, imported, run)
        else:
            run_job(BenchmarkJob(cfg, specs, [imported]), str(run))
            failed = [m["model"] for m in pq.read_table(run / "models.parquet").to_pylist() if m["error"]]
        wall = time.perf_counter() - t
    print(
        f"== run: {len(specs)} models x {imported.num_rows} cases in {wall:.1f}s "
        f"({len(specs) * imported.num_rows / wall:.0f} model-cases/s); peak RSS of the process tree "
        f"{memory.peak / 2**30:.2f} GiB; failed models: {failed or 'none'}; load average now "
        f"{os.getloadavg()[0]:.1f}"
    )
    results = pq.read_table(run / "results.parquet")
    suites = read_checklist(args.suite)
    mismatches = verify(suites, results, [s.name for s in specs[: args.verify]])
    print(f"\n== verdicts: {mismatches} test(s) differ from CheckList's over {min(args.verify, len(specs))} model(s)")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
