"""Validity classifiers combined after the fact, from ``bench_validity.py --save-probs DIR``.

Each file of DIR holds one variant's held-out P(valid) on one split. For every variant and
every average of two or three variants (members weighted equally, P(valid) >= 0.5), this
prints the held-out accuracy per split and its mean over the splits all members were run
on, and for single variants how many errors were confident (P(valid) above 0.9 or below
0.1): confident errors on a classifier that is otherwise accurate point at the annotations,
not at the classifier's uncertainty.

    .venv/bin/python bench/combine_validity.py --probs /tmp/probs [--max-members 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def load(directory: Path) -> dict[str, dict[int, dict]]:
    runs: dict[str, dict[int, dict]] = defaultdict(dict)
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text())
        runs[record["variant"]][int(record["split_seed"])] = record
    if not runs:
        raise SystemExit(f"error: {directory}: no saved probabilities (bench_validity.py --save-probs)")
    return runs


def averaged(runs: dict[str, dict[int, dict]], members: tuple[str, ...]) -> dict[int, float]:
    """Held-out accuracy per split of the members' mean P(valid), on the splits all have."""
    splits = set.intersection(*(set(runs[m]) for m in members))
    out = {}
    for split in sorted(splits):
        first = runs[members[0]][split]
        if any(runs[m][split]["text"] != first["text"] for m in members):
            raise SystemExit(f"error: split {split}: the variants were scored on different held-out cases")
        p = np.mean([runs[m][split]["p_valid"] for m in members], axis=0)
        out[split] = float(((p >= 0.5) == np.array(first["gold"])).mean())
    return out


def confident_errors(record: dict, margin: float = 0.1) -> tuple[int, int]:
    p, gold = np.array(record["p_valid"]), np.array(record["gold"])
    wrong = (p >= 0.5) != gold
    return int(wrong.sum()), int((wrong & ((p > 1 - margin) | (p < margin))).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probs", type=Path, required=True, help="the directory of --save-probs")
    parser.add_argument("--max-members", type=int, default=3)
    args = parser.parse_args()
    runs = load(args.probs)
    for k in range(1, args.max_members + 1):
        for members in itertools.combinations(sorted(runs), k):
            acc = averaged(runs, members)
            if not acc:
                continue
            cells = ", ".join(f"{s}: {a:.3f}" for s, a in acc.items())
            line = f"{' + '.join(members)}: mean {np.mean(list(acc.values())):.3f} over {len(acc)} splits ({cells})"
            if k == 1:
                errors = [confident_errors(runs[members[0]][s]) for s in acc]
                line += f"; errors {sum(e for e, _ in errors)}, confident {sum(c for _, c in errors)}"
            print(line)


if __name__ == "__main__":
    main()
