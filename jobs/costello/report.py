"""Report sections of the ``costello`` job: triple counts per CR, thresholds, Table 2's
layout, violations and precision per model, example violations."""

from __future__ import annotations

import pyarrow as pa

from engine.costello.metrics import precision, table2
from engine.costello.triples import CAPABILITIES, counts_per_cr
from engine.report import Section, table_html


def _examples(wide: pa.Table, per_cr: int = 2) -> list[dict]:
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


def model_rows(violations: pa.Table, classifiers: pa.Table, distance: str, threshold: str) -> list[dict]:
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


def costello_sections(
    wide: pa.Table, violations: pa.Table, thresholds: pa.Table, classifiers: pa.Table, cc
) -> list[Section]:
    counts = counts_per_cr(wide)
    count_rows = [{"CR": cr, "triples": n} for cr, n in counts.items()] + [
        {"CR": "SUM", "triples": sum(counts.values())}
    ]
    sections = [
        Section(
            "COSTELLO: contrast triples per CR (Table 1)",
            [table_html(count_rows), table_html(_examples(wide))],
            "CR1 synonym vs antonym of the same word; CR2 gender swap vs synonym; CR3 synonym vs "
            "semantic inversion; CR4 shared-word synonym vs antonym in a matching pair.",
        )
    ]
    thr = thresholds.to_pandas()
    if len(thr):
        pivot = thr.pivot_table(
            index=["model", "distance"], columns="threshold", values="theta", sort=False
        ).reset_index()
        sections.append(
            Section(
                "COSTELLO: adaptive thresholds (Algorithm 2)",
                [table_html(pivot.to_dict("records"))],
                "Nearest-neighbour distances between corpus-dictionary words; mu-2sigma and mu-sigma "
                "with sigma the standard deviation; negatives clamped to 0.",
            )
        )
    per_model = model_rows(violations, classifiers, cc.distance, cc.threshold)
    sections.append(
        Section(
            f"COSTELLO: violations per model ({cc.distance}, {cc.threshold})",
            [table_html(per_model)],
            "N_V violations (d(s,s+) - d(s,s-) > theta); P_A / P_B: share of violations that the "
            f"{cc.classifiers} downstream MLPs confirm under GT_A / GT_B (Wilcoxon, alpha {cc.alpha}).",
        )
    )
    rows = violations.select(["model", "capability", "distance", "threshold", "verdict", "gt_a", "gt_b"]).to_pylist()
    sections.append(
        Section(
            "COSTELLO: effectiveness per distance and threshold (Table 2 layout)",
            [table_html(table2(rows, CAPABILITIES))],
            "N_M models with a violation, N_V violations per model (mean), P_A/P_B precision (%) "
            "averaged over models; CR4 has no classifier ground truth.",
        )
    )
    df = violations.to_pandas()
    df = df[(df["distance"] == cc.distance) & (df["threshold"] == cc.threshold) & df["verdict"]]
    if len(df):
        df = df.assign(margin=df["d_pos"] - df["d_neg"]).sort_values("margin", ascending=False).head(10)
        texts = {r["triple"]: r for r in wide.to_pylist()}
        ex = [
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
        sections.append(Section("COSTELLO: largest violations", [table_html(ex)]))
    return sections
