"""The comparison table of two models on paired cases (pure: pandas in, Arrow out).

One row per group at four levels: ``overall``; ``test_type`` (MFT/INV/DIR); ``capability``
(pooled over suites and tests); ``test`` (suite × capability × test name × type, a
CheckList test). Each row: paired cases ``n``, both pass rates, the difference
(candidate − baseline), the flips (``pass_to_fail``: the baseline passed and the candidate
fails; ``fail_to_pass``: the reverse), McNemar's exact p-value on the flips and its Holm
adjustment within the level, and a seeded paired-bootstrap interval of the difference
(``checkray.engine.compare.stats``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from checkray.engine.compare.pairing import KEYS
from checkray.engine.compare.stats import group_seed, holm, mcnemar_exact, paired_bootstrap

LEVELS = ("overall", "test_type", "capability", "test")
LEVEL_KEYS = {"overall": [], "test_type": ["test_type"], "capability": ["capability"], "test": KEYS}

COMPARE_SCHEMA = pa.schema(
    [
        pa.field("level", pa.string()),
        pa.field("suite", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("test_type", pa.string()),
        pa.field("n", pa.int64()),  # cases judged for both models
        pa.field("baseline_pass_rate", pa.float64()),
        pa.field("candidate_pass_rate", pa.float64()),
        pa.field("diff", pa.float64()),  # candidate - baseline
        pa.field("pass_to_fail", pa.int64()),  # b: regressions
        pa.field("fail_to_pass", pa.int64()),  # c: fixes
        pa.field("both_pass", pa.int64()),
        pa.field("both_fail", pa.int64()),
        pa.field("p_value", pa.float64()),  # McNemar exact, two-sided
        pa.field("p_holm", pa.float64()),  # Holm-adjusted within the level
        pa.field("ci_low", pa.float64()),  # paired bootstrap interval of diff
        pa.field("ci_high", pa.float64()),
    ]
)

FLIPS_SCHEMA = pa.schema(
    [
        pa.field("direction", pa.string()),  # pass->fail | fail->pass
        pa.field("suite", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("test_type", pa.string()),
        pa.field("case_id", pa.string()),
        pa.field("text", pa.string()),
        pa.field("expected", pa.string()),
        pa.field("baseline_predicted", pa.string()),
        pa.field("candidate_predicted", pa.string()),
    ]
)


def group_row(cell: pd.DataFrame, level: str, key: dict, samples: int, level_ci: float, seed: int) -> dict[str, object]:
    """One comparison row from the paired cases of one group."""
    base = cell["base_pass"].to_numpy(dtype=bool)
    cand = cell["cand_pass"].to_numpy(dtype=bool)
    b = int(np.sum(base & ~cand))
    c = int(np.sum(~base & cand))
    n = len(cell)
    clusters = (cell["suite"].astype(str) + "\x1f" + cell["testcase"].astype(str)).to_numpy()
    name = level + "\x1f" + "\x1f".join(f"{k}={key.get(k)}" for k in KEYS)
    low, high = paired_bootstrap(base, cand, clusters, samples, level_ci, group_seed(seed, name))
    base_rate = float(base.mean()) if n else float("nan")
    cand_rate = float(cand.mean()) if n else float("nan")
    return {
        "level": level,
        **{k: key.get(k) for k in KEYS},
        "n": n,
        "baseline_pass_rate": base_rate,
        "candidate_pass_rate": cand_rate,
        "diff": cand_rate - base_rate,
        "pass_to_fail": b,
        "fail_to_pass": c,
        "both_pass": int(np.sum(base & cand)),
        "both_fail": int(np.sum(~base & ~cand)),
        "p_value": mcnemar_exact(b, c),
        "p_holm": float("nan"),
        "ci_low": low,
        "ci_high": high,
    }


def compare_paired(paired: pd.DataFrame, samples: int = 1000, level_ci: float = 0.95, seed: int = 0) -> pa.Table:
    """The comparison table (``COMPARE_SCHEMA``) at every level."""
    rows: list[dict] = []
    for level in LEVELS:
        keys = LEVEL_KEYS[level]
        start = len(rows)
        if not keys:
            rows.append(group_row(paired, level, {}, samples, level_ci, seed))
        else:
            frame = paired.copy()
            for k in keys:
                frame[k] = frame[k].astype(object).where(frame[k].notna(), "\x00")
            for values, cell in frame.groupby(keys, sort=True):
                values = values if isinstance(values, tuple) else (values,)
                key = {k: (None if v == "\x00" else v) for k, v in zip(keys, values)}
                rows.append(group_row(cell, level, key, samples, level_ci, seed))
        adjusted = holm([r["p_value"] for r in rows[start:]])
        for r, p in zip(rows[start:], adjusted):
            r["p_holm"] = p
    return pa.Table.from_pylist(rows, schema=COMPARE_SCHEMA)


def flips(paired: pd.DataFrame) -> pa.Table:
    """Every case whose verdict changed, regressions first."""
    changed = paired[paired["base_pass"] != paired["cand_pass"]]
    direction = np.where(changed["base_pass"], "pass->fail", "fail->pass")
    out = pd.DataFrame(
        {
            "direction": direction,
            **{k: changed[k] for k in KEYS},
            "case_id": changed["case_id"],
            "text": changed["text"],
            "expected": changed["expected"],
            "baseline_predicted": changed["base_pred"],
            "candidate_predicted": changed["cand_pred"],
        }
    )
    out = out.sort_values(["direction", "capability", "suite", "case_id"], ascending=[False, True, True, True])
    out = out.astype(object).where(out.notna(), None)
    return pa.Table.from_pandas(out, schema=FLIPS_SCHEMA, preserve_index=False)
