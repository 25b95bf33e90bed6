"""Minimal-token explanations of a model's failures on an S²LCT suite (Eq. 5), as rows (pure).

Which failures: up to ``explain.failures`` per model, pass-to-fail expansions (failing
while their seed passes) first, one per capability before a second one of any. The
model is passed in as ``predict`` (texts -> probabilities in ``labels`` order): the job
runs it through the predictions cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.s2lct.config import ExplainConfig
from checkray.engine.s2lct.coverage import minimal_tokens
from checkray.engine.s2lct.tables import case_meta

EXPLANATION_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("text", pa.string()),
        pa.field("expected", pa.string()),
        pa.field("predicted", pa.string()),
        pa.field("minimal tokens", pa.string()),
        pa.field("kept", pa.string()),
        pa.field("P(predicted)", pa.float64()),
        pa.field("reached", pa.bool_()),
    ]
)


def pick_failures(rows: Sequence[dict], meta: dict[str, dict], labels: Sequence[str], n: int) -> list[dict]:
    """Up to ``n`` of one model's failed ``rows`` (benchmark results) whose prediction is
    one of its ``labels``: pass-to-fail expansions first, one per capability first."""
    outcome = {r["case_id"]: r["pass"] for r in rows}
    fails = [r for r in rows if r["pass"] is False and r["predicted"] in labels]
    fails.sort(key=lambda r: 0 if outcome.get(meta[r["case_id"]].get("seed_case_id")) is True else 1)
    picked, seen = [], set()
    for r in fails:
        if r["capability"] not in seen and len(picked) < n:
            picked.append(r)
            seen.add(r["capability"])
    picked += [r for r in fails if r not in picked][: n - len(picked)]
    return picked


def explanation_rows(
    model: str,
    results: pa.Table,
    suite: pa.Table,
    labels: Sequence[str],
    predict: Callable[[list[str]], np.ndarray],
    e: ExplainConfig,
) -> list[dict]:
    """One row per explained failure of ``model``: its minimal tokens (Eq. 5) and the
    probability they keep for the wrong label."""
    meta = case_meta(suite)
    rows = results.filter(pc.equal(results.column("model"), model)).to_pylist()
    out = []
    for r in pick_failures(rows, meta, labels, e.failures):
        tokens = r["text"].split()
        expl = minimal_tokens(tokens, predict, list(labels).index(r["predicted"]), e.p_thresh, e.mask_token)
        out.append(
            {
                "model": model,
                "capability": r["capability"],
                "kind": meta[r["case_id"]].get("kind"),
                "text": r["text"],
                "expected": r["expected_label"],
                "predicted": r["predicted"],
                "minimal tokens": " ".join(tokens[i] for i in expl.kept),
                "kept": f"{len(expl.kept)}/{len(tokens)}",
                "P(predicted)": round(expl.probability, 3),
                "reached": expl.reached,
            }
        )
    return out
