"""Run every bench script in turn (``make bench``); each prints its own ratio line.

.venv/bin/python bench/run_all.py [--quick]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPTS = [
    "bench_embedding.py",
    "bench_encoders.py",
    "bench_finetune.py",
    "bench_clustering.py",
    "bench_memory.py",
    "bench_benchmark.py",
    "bench_llm_backends.py",
    "bench_parsing.py",
    "bench_costello.py",
    "bench_validity.py",
]


def main() -> int:
    here = Path(__file__).resolve().parent
    extra = sys.argv[1:]
    failed = []
    for script in SCRIPTS:
        if not (here / script).exists():
            continue
        print(f"== {script} {' '.join(extra)}", flush=True)
        if subprocess.run([sys.executable, str(here / script), *extra]).returncode != 0:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
