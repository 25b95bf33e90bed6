"""COSTELLO's tables, over the published Arrow tables: the paper's Tables 1, 2 and 3
(``costello_table1`` triples per CR, ``costello_table2`` effectiveness per distance and
threshold, ``costello_table3`` the repair's fixing rates) and the report's other tables
(violations and precision per model, rates per suite, classifier accuracies, thresholds,
example and largest violations). Rows are plain dicts, ready for ``table_html``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.costello.metrics import fixing_rate, precision
from checkray.engine.costello.triples import CAPABILITIES, counts_per_cr

# The paper's Table 1 (triples generated from SST and MRPC), for comparison.
PAPER_TABLE1 = {"CR1": 1417, "CR2": 681, "CR3": 588, "CR4": 408}


def costello_table1(wide: pa.Table) -> list[dict]:
    """COSTELLO's Table 1: triples per CR for every suite in the run, next to the paper's counts."""
    suites = list(dict.fromkeys(wide.column("suite").to_pylist()))
    per = {s: counts_per_cr(wide.filter(pc.equal(wide["suite"], s))) for s in suites}
    rows = []
    for cr in list(CAPABILITIES) + ["SUM"]:
        rec: dict = {"CR": cr}
        for s in suites:
            rec[s] = sum(per[s].values()) if cr == "SUM" else per[s][cr]
        rec["paper"] = sum(PAPER_TABLE1.values()) if cr == "SUM" else PAPER_TABLE1[cr]
        rows.append(rec)
    return rows


def _model_precision(m) -> tuple[int, float | None, float | None]:
    """(violations, P_A, P_B) of one model's rows; triples without ground truth (CR4) left out."""
    v = m["verdict"].to_numpy(bool)
    known = np.array([g is not None and g == g for g in m["gt_a"].to_numpy(dtype=object)])
    if not known.any():
        return int(v.sum()), None, None
    pa_ = precision(v[known], m["gt_a"].to_numpy(dtype=object)[known].astype(bool))
    pb_ = precision(v[known], m["gt_b"].to_numpy(dtype=object)[known].astype(bool))
    return int(v.sum()), pa_, pb_


def costello_table2(rows: Sequence[dict], capabilities: Sequence[str]) -> list[dict]:
    """COSTELLO's Table 2 layout from violation rows (model, capability, distance,
    threshold, verdict, gt_a, gt_b): per distance x threshold and CR, N_M (models with a
    violation), N_V (violations per model, mean), P_A / P_B (%, mean over models with
    violations), and the same precision over all CRs."""
    import pandas as pd

    df = pd.DataFrame(rows)
    out = []
    for (dist, thr), block in df.groupby(["distance", "threshold"], sort=False):
        rec: dict = {"distance": dist, "threshold": thr}
        for cr in list(capabilities) + ["ALL"]:
            sub = block if cr == "ALL" else block[block["capability"] == cr]
            per_model = [_model_precision(m) for _, m in sub.groupby("model")]
            pas = [p for _, p, _ in per_model if p is not None]
            pbs = [p for _, _, p in per_model if p is not None]
            if cr != "ALL":
                rec[f"{cr} N_M"] = sum(1 for n, _, _ in per_model if n)
                rec[f"{cr} N_V"] = float(np.mean([n for n, _, _ in per_model])) if per_model else 0.0
            rec[f"{cr} P_A%"] = round(100 * float(np.mean(pas)), 2) if pas else None
            rec[f"{cr} P_B%"] = round(100 * float(np.mean(pbs)), 2) if pbs else None
        out.append(rec)
    return out


def violation_counts(
    violations: pa.Table, distance: str, threshold: str, capabilities: Sequence[str] = CAPABILITIES
) -> dict[str, dict[str, int]]:
    """Per CR (and ALL) under one verdict: triples, violations, GT_A-buggy and GT_B-buggy triples."""
    rows = [r for r in violations.to_pylist() if r["distance"] == distance and r["threshold"] == threshold]
    out = {}
    for cr in list(capabilities) + ["ALL"]:
        sub = [r for r in rows if cr == "ALL" or r["capability"] == cr]
        out[cr] = {
            "triples": len(sub),
            "violations": sum(bool(r["verdict"]) for r in sub),
            "gt_a": sum(bool(r["gt_a"]) for r in sub),
            "gt_b": sum(bool(r["gt_b"]) for r in sub),
        }
    return out


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def costello_table3(
    before: dict[str, dict[str, int]],
    after: dict[str, dict[str, int]],
    acc_before: float | None,
    acc_after: float | None,
) -> list[dict]:
    """COSTELLO's Table 3 layout (the repair): fixing rate (%) of N_V, GT_A and GT_B per CR
    from ``violation_counts`` before and after, with the counts, and the change of the
    downstream classifiers' mean held-out accuracy (percentage points)."""
    rows = []
    for metric, key in (("N_V", "violations"), ("GT_A", "gt_a"), ("GT_B", "gt_b")):
        rec: dict = {"metric": metric}
        for cr in list(CAPABILITIES) + ["ALL"]:
            rate = fixing_rate(before[cr][key], after[cr][key])
            rec[cr] = None if rate is None else round(100 * rate, 2)
            rec[f"{cr} before→after"] = f"{before[cr][key]}→{after[cr][key]}"
        rows.append(rec)
    change = None if acc_after is None or acc_before is None else round(100 * (acc_after - acc_before), 2)
    rows.append(
        {
            "metric": "downstream accuracy",
            "ALL": change,
            "ALL before→after": f"{_rounded(acc_before, 4)}→{_rounded(acc_after, 4)}",
        }
    )
    return rows


def mean_accuracy(classifiers: pa.Table, model: str | None = None) -> float | None:
    """Mean held-out accuracy of the classifiers (of ``model`` when given); None: none."""
    if model is not None:
        classifiers = classifiers.filter(pc.equal(classifiers["model"], model))
    acc = classifiers.column("accuracy").to_pylist()
    return float(np.mean(acc)) if acc else None


def violations_per_model(violations: pa.Table, classifiers: pa.Table, distance: str, threshold: str) -> list[dict]:
    """Under one verdict, per model: theta, violations per CR and in all, P_A / P_B (%) and
    the classifiers' mean accuracy."""
    df = violations.to_pandas()
    df = df[(df["distance"] == distance) & (df["threshold"] == threshold)]
    acc = classifiers.to_pandas().groupby("model")["accuracy"].mean().to_dict() if classifiers.num_rows else {}
    rows = []
    for model, m in df.groupby("model", sort=False):
        rec = {"model": model, "theta": float(m["theta"].iloc[0]), "triples": len(m)}
        for cr in CAPABILITIES:
            rec[f"{cr} N_V"] = int(m.loc[m["capability"] == cr, "verdict"].sum())
        v = m["verdict"].to_numpy(bool)
        known = m["gt_a"].notna().to_numpy()
        pa_ = precision(v[known], m["gt_a"][known].astype(bool).to_numpy())
        pb_ = precision(v[known], m["gt_b"][known].astype(bool).to_numpy())
        rec.update(
            {
                "N_V": int(v.sum()),
                "P_A%": None if pa_ is None else round(100 * pa_, 1),
                "P_B%": None if pb_ is None else round(100 * pb_, 1),
                "classifier acc": None if model not in acc else round(acc[model], 3),
            }
        )
        rows.append(rec)
    return rows


def violation_rates_per_suite(
    violations: pa.Table, distance: str, thresholds: tuple[str, ...] = ("zero", "mu-2sigma")
) -> list[dict]:
    """Violation rate (%) per model, suite and CR: the generated suite next to given ones."""
    df = violations.to_pandas()
    df = df[df["distance"] == distance]
    rows = []
    for (model, suite), block in df.groupby(["model", "suite"], sort=False):
        for thr in thresholds:
            sub = block[block["threshold"] == thr]
            rec = {"model": model, "suite": suite, "threshold": thr}
            for cr in CAPABILITIES:
                c = sub[sub["capability"] == cr]
                rec[cr] = None if c.empty else f"{100 * c['verdict'].mean():.1f} % of {len(c)}"
            rec["ALL"] = f"{100 * sub['verdict'].mean():.1f} % of {len(sub)}"
            rows.append(rec)
    return rows


def classifier_summary(classifiers: pa.Table) -> list[dict]:
    """Each model's downstream classifiers: held-out accuracy of each, mean and range."""
    df = classifiers.to_pandas()
    rows = []
    for model, m in df.groupby("model", sort=False):
        accs = m.sort_values("classifier")["accuracy"].tolist()
        rows.append(
            {
                "model": model,
                "classifiers": len(accs),
                "mean": round(float(sum(accs) / len(accs)), 4),
                "min": round(min(accs), 4),
                "max": round(max(accs), 4),
                "above 0.85": sum(a > 0.85 for a in accs),
                "each": " ".join(f"{a:.3f}" for a in accs),
            }
        )
    return rows


def threshold_table(thresholds: pa.Table) -> list[dict]:
    """One row per model x distance: dictionary size, NN mean and std, and each threshold."""
    thr = thresholds.to_pandas()
    if not len(thr):
        return []
    pivot = thr.pivot_table(
        index=["model", "distance", "words", "nn_mean", "nn_std"], columns="threshold", values="theta", sort=False
    ).reset_index()
    return pivot.to_dict("records")


def example_triples(wide: pa.Table, per_cr: int = 2) -> list[dict]:
    """The first ``per_cr`` triples of each CR."""
    rows, seen = [], {}
    for r in wide.to_pylist():
        if seen.get(r["capability"], 0) < per_cr:
            seen[r["capability"]] = seen.get(r["capability"], 0) + 1
            rows.append(
                {
                    "CR": r["capability"],
                    "seed": r["seed"],
                    "positive (closer)": r["positive"],
                    "negative (farther)": r["negative"],
                }
            )
    return rows


def largest_violations(wide: pa.Table, violations: pa.Table, distance: str, threshold: str, n: int = 10) -> list[dict]:
    """The ``n`` violations with the largest margin d(s,s+) - d(s,s-) under one verdict, with their texts."""
    df = violations.to_pandas()
    df = df[(df["distance"] == distance) & (df["threshold"] == threshold) & df["verdict"]]
    if not len(df):
        return []
    df = df.assign(margin=df["d_pos"] - df["d_neg"]).sort_values("margin", ascending=False).head(n)
    texts = {r["triple"]: r for r in wide.to_pylist()}
    return [
        {
            "model": r.model,
            "CR": r.capability,
            "margin": float(r.margin),
            "seed": texts[r.triple]["seed"],
            "positive": texts[r.triple]["positive"],
            "negative": texts[r.triple]["negative"],
            "GT_A": r.gt_a,
            "GT_B": r.gt_b,
        }
        for r in df.itertuples()
    ]
