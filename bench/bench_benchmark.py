"""Benchmark engine vs a sequential per-model loop, for cheap and heavy models, and at scale.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_benchmark.py [--scenario all|cheap|heavy|scale|small|custom] [--quick]

Scenarios (``all`` runs the first three in one process, one Ray session):
* cheap: 12 scikit-learn text models (+ VADER) x 10,000 cases, engine vs the loop;
* heavy: 12 classifier heads on MiniLM embeddings x 10,000 cases, engine vs the loop;
* scale: 36 models (24 text models, 12 heads) x a CheckList-format suite of 166,010
  cases (``bench/checklist_suite.py``, imported with ``checkray import checklist``), and
  with ``--released FILE`` also x CheckList's released sentiment suite (178,578 cases):
  wall time, throughput (model x cases / s) and peak memory of the whole process tree,
  each arm from an empty content cache;
* small: 12 MiniLM heads and the packaged VADER x 300 cases, the size of the suites a
  ``checkray demo`` benchmarks: the engine predicting in its own process (the default
  under ``benchmark.in_process_below``) vs the same engine with host processes, each from
  an empty content cache, and the sequential loop;
* custom: ``--models N --heads H`` as before;
* ``--quick``: 4 text models x 1,000 cases, engine vs the loop (proves the script works).

Baseline (as CheckList/MTEB run suites): in one process, one model after another, load
it, predict every suite's cases in batches of 32, evaluate. Engine: ``run_benchmark``
(cheap models sharing about one host per CPU, heavy ones a host each, batches of 256,
inputs shared by suites scored once, MiniLM heads reading embeddings computed once).
Both are timed in the same run from the same Ray-ready process; Ray start-up is reported
separately. An ablation runs the engine with a host per model, batch 32, no
de-duplication and no shared encoder.

Models (``bench/bench_models.py``): scikit-learn text pipelines + VADER (family
"callable", ``bench_models:model_<name>``) and classifier heads on MiniLM embeddings
(family "st_head", as the zoo builds them), trained on the bundled Rotten Tomatoes
sentences and cached in runs/bench_models/.
Cases: a 4,000-case MFT suite, a 3,000-case INV typo suite and a 3,000-case DIR suite;
the INV/DIR suites contain their 1,500 original sentences each, which the MFT suite
also tests (as suites built from one corpus do): 7,000 distinct texts in 10,000 cases.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def build_suites(n_cases: int):
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus
    from checkray.engine.schema import make_cases

    corpus = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))
    texts, labels = corpus.column("text").to_pylist(), corpus.column("label").to_pylist()
    n_mft, n_pair = int(n_cases * 0.4), int(n_cases * 0.15)
    rng = np.random.default_rng(1)

    def typo(text: str) -> str:
        i = int(rng.integers(0, max(len(text) - 1, 1)))
        return text[:i] + text[i + 1 : i + 2] + text[i] + text[i + 2 :] if len(text) > 2 else text + "."

    def mft(i, suite, version):
        return {
            "case_id": f"{suite}-o{i}",
            "suite": suite,
            "method": "corpus",
            "capability": "Vocabulary",
            "text": texts[i],
            "expected_label": labels[i],
            "meta": {"version": version},
        }

    mft_suite = [mft(i, "sentiment_mft", f"v{i % 2}") for i in range(n_mft)]
    inv, dirs = [], []
    for k in range(n_pair):
        i = k
        inv += [
            mft(i, "typos_inv", "v0") | {"capability": "Robustness"},
            {
                "case_id": f"typos_inv-p{i}",
                "suite": "typos_inv",
                "method": "typo",
                "capability": "Robustness",
                "text": typo(texts[i]),
                "test_type": "INV",
                "perturbs": f"typos_inv-o{i}",
                "relation": "same",
            },
        ]
        j = n_pair + k
        phrase, relation = (" Really great.", "up") if labels[j] == "positive" else (" Truly awful.", "up")
        dirs += [
            mft(j, "intensity_dir", "v0") | {"capability": "Intensifiers"},
            {
                "case_id": f"intensity_dir-p{j}",
                "suite": "intensity_dir",
                "method": "append",
                "capability": "Intensifiers",
                "text": texts[j] + phrase,
                "test_type": "DIR",
                "perturbs": f"intensity_dir-o{j}",
                "relation": relation,
                "expected_label": labels[j],
            },
        ]
    return [make_cases(mft_suite), make_cases(inv), make_cases(dirs)]


def sequential(parts, specs, batch_size: int = 32):
    """The usual loop: one model after another, each suite in batches of 32, in-process."""
    from checkray.actors.models import load_model
    from checkray.engine.benchmark.expectations import evaluate_cases
    from checkray.jobs.benchmark.job import BenchmarkConfig

    settings = BenchmarkConfig().settings()
    per_model, passed = {}, {}
    for spec in specs:
        start = time.perf_counter()
        model = load_model(spec)
        outcome = []
        for part in parts:
            texts = part.column("text").to_pylist()
            probs = np.concatenate(
                [model.predict_proba(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
            )
            outcome += evaluate_cases(part, probs, model.labels, settings).passed.tolist()
        per_model[spec.name] = time.perf_counter() - start
        passed[spec.name] = outcome
    return per_model, passed


def engine(parts, specs, **bench_options):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from checkray.engine.cache import CacheConfig
    from checkray.jobs.benchmark.job import BenchmarkConfig, run_benchmark
    from checkray.jobs.config import CheckrayConfig

    # Every engine arm starts from an empty content cache of its own: an arm served from
    # the predictions the one before it stored would time the cache, not the engine.
    with tempfile.TemporaryDirectory(prefix="bench-") as out, tempfile.TemporaryDirectory(prefix="bench-cold-") as cold:
        cfg = CheckrayConfig().with_section(BenchmarkConfig(**bench_options)).with_section(CacheConfig(dir=cold))
        results, _ = run_benchmark(parts, specs, cfg, out)
        models = pq.read_table(f"{out}/stages/predict/models.parquet").to_pylist()
    passed = {}
    for spec in specs:
        rows = results.filter(pc.equal(results.column("model"), spec.name))
        passed[spec.name] = rows.column("pass").to_pylist()
    return {m["model"]: m for m in models}, passed


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


class PeakRSS:
    """Peak resident memory of this process and all its descendants (Ray's workers and
    raylet included), sampled every 0.5 s in a thread."""

    def __init__(self):
        import threading

        import psutil

        self.peak, self._stop = 0, threading.Event()
        me = psutil.Process()

        def sample():
            while not self._stop.wait(0.5):
                total = 0
                for proc in [me, *me.children(recursive=True)]:
                    try:
                        total += proc.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)

        self._thread = threading.Thread(target=sample, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def compare(label: str, specs, parts, repeat: int, options: dict, ablation: bool) -> float:
    """Engine vs the sequential loop on the same cases; prints a table; returns the speed-up."""
    n_cases = sum(p.num_rows for p in parts)
    n_unique = len({t for p in parts for t in p.column("text").to_pylist()})
    print(f"\n== {label}: {len(specs)} models x {n_cases} cases in {len(parts)} suites, {n_unique} distinct texts")
    best = {"sequential": float("inf"), "engine": float("inf"), "ablation": float("inf")}
    for round_ in range(repeat):
        seq_total, (seq_times, seq_passed) = timed(sequential, parts, specs)
        eng_total, (eng_models, eng_passed) = timed(engine, parts, specs, **options)
        abl_total = float("nan")
        if ablation:
            abl_total, _ = timed(
                engine,
                parts,
                specs,
                batch_size=32,
                dedup_texts=False,
                share_encoders=False,
                models_per_host=1,
                **options,
            )
        print(
            f"round {round_ + 1}: sequential {seq_total:.1f}s · engine {eng_total:.1f}s "
            f"({seq_total / eng_total:.2f}x) · engine with a host per model, batch 32, no dedup, no shared "
            f"encoder {abl_total:.1f}s ({seq_total / abl_total:.2f}x)"
        )
        if seq_total < best["sequential"]:
            best_seq_times = seq_times
        best["sequential"] = min(best["sequential"], seq_total)
        if eng_total < best["engine"]:
            best_models = eng_models
        best["engine"] = min(best["engine"], eng_total)
        best["ablation"] = min(best["ablation"], abl_total)
    same = all(seq_passed[s.name] == eng_passed[s.name] for s in specs if eng_models[s.name]["error"] is None)
    print(f"{'model':<16} {'sequential':>11} {'host':>5} {'ready':>7} {'predicting':>11} {'accuracy':>9}")
    print(f"{'':<16} {'cases/s':>11} {'size':>5} {'s':>7} {'s':>11}")
    for s in specs:
        m = best_models[s.name]
        print(
            f"{s.name:<16} {n_cases / best_seq_times[s.name]:>11.0f} {m['host_size'] or 0:>5} "
            f"{m['ready_seconds'] or 0:>7.2f} {m['predict_seconds'] or 0:>11.2f} "
            f"{s.accuracy if s.accuracy is not None else float('nan'):>9.3f}"
            + (f"  FAILED {m['error']}" if m["error"] else "")
        )
    total = len(specs) * n_cases
    speedup = best["sequential"] / best["engine"]
    print(
        f"{label}: sequential (batch 32, one model at a time): {best['sequential']:.1f}s ({total / best['sequential']:.0f} model-cases/s)"
    )
    print(
        f"{label}: engine (shared hosts, batch 256, dedup, shared encoder): {best['engine']:.1f}s ({total / best['engine']:.0f} model-cases/s)"
    )
    if ablation:
        print(
            f"{label}: engine, host per model, batch 32, no dedup, no shared encoder: {best['ablation']:.1f}s ({best['sequential'] / best['ablation']:.2f}x)"
        )
    print(f"{label}: speed-up engine vs sequential: {speedup:.2f}x (goal >= 1.3x) · identical pass/fail: {same}")
    return speedup


def small(heads, parts) -> float:
    """Small work, in the driver vs in host processes: returns hosts' time / in-process time."""
    from checkray.engine.benchmark.registry import ModelSpec

    specs = [*heads, ModelSpec(name="vader_builtin", family="vader")]
    n_cases = sum(p.num_rows for p in parts)
    print(
        f"\n== small: {len(specs)} models x {n_cases} cases in {len(parts)} suites ({len(specs) * n_cases} model-cases)"
    )
    local_s, (_, local_passed) = timed(engine, parts, specs)
    hosts_s, (host_models, host_passed) = timed(engine, parts, specs, in_process_below=0)
    seq_s, _ = timed(sequential, parts, specs)
    same = local_passed == host_passed
    ready = max(m["ready_seconds"] or 0 for m in host_models.values())
    print(f"small: in this process (benchmark.in_process_below): {local_s:.1f}s")
    print(f"small: host processes (in_process_below: 0): {hosts_s:.1f}s (slowest host ready after {ready:.1f}s)")
    print(f"small: sequential loop: {seq_s:.1f}s")
    print(f"small: speed-up in-process vs hosts: {hosts_s / local_s:.2f}x · identical pass/fail: {same}")
    return hosts_s / local_s


def import_suite(archive: Path, mapping: Path, out: Path):
    """``checkray import checklist`` as a user runs it; the imported table."""
    import pyarrow.parquet as pq

    from checkray.jobs.cli import main as cli

    t = time.perf_counter()
    try:
        cli(
            [
                "import",
                "checklist",
                str(archive),
                "--labels",
                "0=negative,1=neutral,2=positive",
                "--mapping",
                str(mapping),
                "--out",
                str(out),
            ]
        )
    except SystemExit as exc:
        if exc.code:
            raise
    imported = pq.read_table(out / "suite.parquet")
    counts = __import__("collections").Counter(imported.column("test_type").to_pylist())
    print(
        f"\n== scale: {archive.name}: imported {imported.num_rows} cases in {time.perf_counter() - t:.1f}s; by type "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    return imported


def scale(specs, workdir: Path, released: Path | None = None) -> None:
    """36 models x the CheckList-format stand-in (and, given ``released``, CheckList's
    released sentiment suite): import, benchmark, wall time, throughput, memory. Each arm
    starts with an empty content cache of its own (cold: every embedding and prediction
    computed), so neither serves the other."""
    import subprocess
    import tempfile

    suite_dir = workdir / "checklist"
    if not (suite_dir / "sentiment_suite.pkl").exists():
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "checklist_suite.py"), "--out", str(suite_dir)], check=True
        )
    arms = [("stand-in", suite_dir / "sentiment_suite.pkl", suite_dir / "mapping.yaml")]
    if released is not None:
        arms.append(("released", released, ROOT / "configs" / "checklist" / "sentiment.yaml"))
    for name, archive, mapping in arms:
        imported = import_suite(archive, mapping, workdir / f"imported-{name}")
        with tempfile.TemporaryDirectory(prefix="checkray-scale-cache-") as cold:
            scale_run(specs, imported, workdir / f"scale_run-{name}", name, cold)


def scale_run(specs, imported, out: Path, name: str, cache_dir: str) -> None:
    """One timed benchmark of ``specs`` on ``imported`` with the content cache in ``cache_dir``."""
    import shutil

    import pyarrow.parquet as pq

    from checkray.engine.cache import CacheConfig
    from checkray.jobs.base import run_job
    from checkray.jobs.benchmark.config import BenchmarkConfig
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.config import CheckrayConfig

    shutil.rmtree(out, ignore_errors=True)
    cfg = CheckrayConfig().with_section(BenchmarkConfig()).with_section(CacheConfig(dir=cache_dir))
    print(f"scale[{name}]: content cache cold (empty {cache_dir}); load average {os.getloadavg()[0]:.1f}")
    with PeakRSS() as memory:
        t = time.perf_counter()
        run_job(BenchmarkJob(cfg, specs, [imported]), str(out))
        wall = time.perf_counter() - t
    models = pq.read_table(out / "models.parquet").to_pylist()
    failed = [m["model"] for m in models if m["error"]]
    rows = pq.ParquetFile(out / "results.parquet").metadata.num_rows
    print(
        f"scale[{name}]: {len(specs)} models x {imported.num_rows} cases = {rows} results rows in {wall:.1f}s "
        f"({len(specs) * imported.num_rows / wall:.0f} model-cases/s); peak RSS of the process tree "
        f"{memory.peak / 2**30:.2f} GiB; failed models: {failed or 'none'}"
    )
    predict = max((m["ready_seconds"] or 0) + (m["predict_seconds"] or 0) for m in models)
    print(
        f"scale[{name}]: slowest model busy {predict:.1f}s; "
        f"results.parquet {os.path.getsize(out / 'results.parquet') / 2**20:.0f} MiB"
    )


def main() -> None:
    # The bench scores models it trained itself (callable VADER, its own joblib pipelines):
    # code it wrote, so it trusts it as `checkray --trust-code` would (SECURITY.md).
    os.environ.setdefault("CHECKRAY_TRUST_CODE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["all", "cheap", "heavy", "scale", "small", "custom"], default="all")
    parser.add_argument(
        "--quick", action="store_true", help="proves the script works: 4 text models x 1,000 cases, engine vs loop"
    )
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=12, help="custom scenario: number of models")
    parser.add_argument("--heads", type=int, default=4, help="custom scenario: how many are MiniLM heads (st_head)")
    parser.add_argument("--repeat", type=int, default=1, help="Interleaved rounds; the best time of each is kept.")
    parser.add_argument("--max-concurrent", type=int, default=None, help="benchmark.max_concurrent_models")
    parser.add_argument("--no-ablation", action="store_true", help="Skip the host-per-model, batch-32, no-dedup run.")
    parser.add_argument(
        "--released",
        type=Path,
        default=None,
        help="scale: also run CheckList's released sentiment_suite.tar.gz (e.g. ../shared/data/checklist/)",
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts workers at nice 15; the baseline loop runs at nice 0. On a shared machine that
    # alone starves the actors, so both sides get the same priority (0) unless told otherwise.
    os.environ.setdefault("RAY_worker_niceness", "0")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # actors import bench_models:model_XX
    sys.path.insert(0, str(ROOT))

    from bench_models import build_models

    from checkray.engine.runtime import cluster_resources, init_ray

    if args.quick:
        args.scenario, args.models, args.heads, args.cases = "custom", 4, 0, min(args.cases, 1_000)
    t = time.perf_counter()
    # 24 text models, then 12 heads; trained once, cached (a custom run builds only its own)
    n_models, n_heads = {"custom": (args.models, args.heads), "small": (12, 12)}.get(args.scenario, (36, 12))
    all_specs = build_models(n_models, n_heads)
    text_models, heads = all_specs[: n_models - n_heads], all_specs[n_models - n_heads :]
    print(f"models: {len(all_specs)} built or loaded in {time.perf_counter() - t:.1f}s")
    parts = build_suites(args.cases)
    t = time.perf_counter()
    init_ray()
    print(f"ray start: {time.perf_counter() - t:.1f}s (not counted) · resources {cluster_resources()}")
    print(f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    options = {"max_concurrent_models": args.max_concurrent}
    ablation = not args.no_ablation
    results = {}
    if args.scenario in ("all", "cheap"):
        results["cheap"] = compare("cheap", text_models[:12], parts, args.repeat, options, ablation)
    if args.scenario in ("all", "heavy"):
        results["heavy"] = compare("heavy", heads, parts, args.repeat, options, ablation)
    if args.scenario == "small":
        results["small (vs hosts)"] = small(heads, build_suites(300))
    if args.scenario == "custom":
        results["custom"] = compare("custom", text_models + heads, parts, args.repeat, options, ablation)
    if args.scenario in ("all", "scale"):
        if args.released is not None and not args.released.is_file():
            parser.error(f"--released {args.released}: file not found")
        scale(all_specs, ROOT / "runs" / "bench_scale", args.released)
    if results:
        print(
            "\nspeed-ups vs the sequential loop (small: vs host processes): "
            + ", ".join(f"{k} {v:.2f}x" for k, v in results.items())
        )


if __name__ == "__main__":
    main()
