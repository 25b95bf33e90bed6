"""Every bench's quick mode, run as a user runs it: the command its README row gives, from
the repository root, with the project's Python, and without ``--trust-code`` in the
environment (a bench that scores code it wrote trusts it itself, and says so).

A bench that only this machine's test suite could run (trust left on by the tests, a
package the lock lacks, a flag the README forgot) fails here, not in a user's hands.
``make test-bench`` runs it (``-m bench``); ``make test`` leaves it out to keep CI within its
45 minutes. The timed figures are not checked: the benches run side by side here, four at a time
(each mostly waits on process and actor start-up), so their ratios mean nothing; speed
is read from a bench run alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
README = BENCH / "README.md"
SHARED_DATA = ROOT.parent / "shared" / "data"
AT_ONCE = 4

# bench script -> (data outside the repository it reads or None, lines its output must hold)
QUICK = {
    "bench_embedding.py": (None, ["engine, warm cache"]),
    "bench_memory.py": (None, ["documents 1x / 10x"]),
    "bench_clustering.py": (None, ["cluster agreement (ARI)"]),
    "bench_encoders.py": (None, ["physical floor", "onnx-int8"]),
    "bench_finetune.py": (None, ["grouped", "held-out accuracy"]),
    "bench_parsing.py": (None, []),
    "bench_costello.py": (None, ["costello_scoring", "costello_fanout", "costello_shared_pass", "costello_nn"]),
    "bench_llm_backends.py": (None, ["llamacpp decode", "transformers decode"]),
    "bench_benchmark.py": (None, ["speed-up engine vs sequential", "identical pass/fail: True"]),
    "bench_validity.py": (SHARED_DATA / "testaug", []),
}


def scripts_with_quick_mode() -> set[str]:
    """Bench scripts whose command line has ``--quick`` (their own or bench/common.py's)."""
    found = set()
    for path in BENCH.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        if '"--quick"' in text or "base_parser(" in text:
            found.add(path.name)
    return found - {"common.py", "run_all.py"}


def test_every_quick_mode_is_run_here_and_documented():
    """A new bench with --quick joins QUICK, `make bench`'s list and the README."""
    assert scripts_with_quick_mode() == set(QUICK)
    readme = README.read_text(encoding="utf-8")
    run_all = (BENCH / "run_all.py").read_text(encoding="utf-8")
    for script in QUICK:
        assert re.search(rf"[`/]{re.escape(script)}[^\n]*--quick", readme), f"{script}: no --quick in bench/README.md"
        assert f'"{script}"' in run_all, f"{script}: not in bench/run_all.py (make bench)"


def run_quick(script: str, results: Path) -> str | None:
    """Run ``bench/<script> --quick``; None when it ran and printed what it should, else why not."""
    needs, expected = QUICK[script]
    env = {k: v for k, v in os.environ.items() if k != "CHECKRAY_TRUST_CODE"}
    env["CHECKRAY_BENCH_RESULTS"] = str(results)  # not the user's bench/results/
    try:
        proc = subprocess.run(
            [sys.executable, f"bench/{script}", "--quick"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        return f"{script} --quick: still running after 900 s"
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return f"{script} --quick exited {proc.returncode}:\n{output[-3000:]}"
    # each bench prints its engine and baseline side by side as a ratio (0.98x, 1.30x)
    missing = [line for line in expected if line not in output]
    if not re.search(r"\d\.\d+x", output) or missing:
        return f"{script} --quick printed no ratio or lacks {missing}:\n{output[-2000:]}"
    return None


@pytest.mark.bench  # about 6 minutes: `make test-bench`, not `make test`
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_quick_modes_run_as_documented(tmp_path):
    runnable = [s for s, (needs, _) in sorted(QUICK.items()) if needs is None or needs.exists()]
    with ThreadPoolExecutor(AT_ONCE) as pool:
        problems = list(pool.map(lambda s: run_quick(s, tmp_path / s), runnable))
    assert [p for p in problems if p] == []
    encoders = json.loads((tmp_path / "bench_encoders.py" / "encoders.json").read_text())
    assert encoders["onnx"]["cos_min"] > 0.9999  # fp32 ONNX gives PyTorch's vectors
