"""The S²LCT paper's tables, computed from a suite and its benchmark results (pure).

``s2lct_table3``: Table 3 of the paper (failure rates of seeds and expansions per model
and capability), written as DIR/table3.parquet and shown in the report.
"""

from __future__ import annotations

import json

import pyarrow as pa

TABLE3_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("seeds", pa.int64()),
        pa.field("seed_fail_pct", pa.float64()),
        pa.field("expansions", pa.int64()),
        pa.field("exp_fail_pct", pa.float64()),
        pa.field("pass_to_fail", pa.int64()),
    ]
)


def case_meta(suite: pa.Table) -> dict[str, dict]:
    """case id -> the case's ``meta`` (kind, seed_case_id ...)."""
    return {
        cid: json.loads(m or "{}")
        for cid, m in zip(suite.column("case_id").to_pylist(), suite.column("meta").to_pylist())
    }


def _rate(fails: int, n: int) -> float | None:
    return round(100.0 * fails / n, 2) if n else None


def s2lct_table3(results: pa.Table, suite: pa.Table) -> pa.Table:
    """S²LCT Table 3, per model and capability: #seeds, seed fail %, #expansions, expansion
    fail %, pass-to-fail (expansions that fail while their seed passes). ``results``: the
    benchmark's ``model``, ``case_id`` and ``pass`` columns (None: not evaluated)."""
    meta = case_meta(suite)
    outcome: dict[tuple[str, str], bool | None] = {
        (model, cid): passed
        for model, cid, passed in zip(*(results.column(c).to_pylist() for c in ("model", "case_id", "pass")))
    }
    cap_of = dict(zip(suite.column("case_id").to_pylist(), suite.column("capability").to_pylist()))
    rows = []
    for model in dict.fromkeys(results.column("model").to_pylist()):
        for cap in dict.fromkeys(suite.column("capability").to_pylist()):
            seeds = [c for c, m in meta.items() if cap_of[c] == cap and m.get("kind") == "seed"]
            exps = [c for c, m in meta.items() if cap_of[c] == cap and m.get("kind") == "expansion"]
            seed_eval = [outcome.get((model, c)) for c in seeds]
            exp_eval = [outcome.get((model, c)) for c in exps]
            seed_n = sum(v is not None for v in seed_eval)
            exp_n = sum(v is not None for v in exp_eval)
            pass_to_fail = sum(
                1
                for c, v in zip(exps, exp_eval)
                if v is False and outcome.get((model, meta[c]["seed_case_id"])) is True
            )
            rows.append(
                {
                    "model": model,
                    "capability": cap,
                    "seeds": len(seeds),
                    "seed_fail_pct": _rate(sum(v is False for v in seed_eval), seed_n),
                    "expansions": len(exps),
                    "exp_fail_pct": _rate(sum(v is False for v in exp_eval), exp_n),
                    "pass_to_fail": pass_to_fail if exp_n else None,
                }
            )
    return pa.Table.from_pylist(rows, schema=TABLE3_SCHEMA)
