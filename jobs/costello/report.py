"""Report sections of the ``costello`` job: triple counts per CR, thresholds, Table 2's
layout, violations and precision per model, example violations."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from checkray.engine.costello.metrics import precision, table2
from checkray.engine.costello.triples import CAPABILITIES, counts_per_cr
from checkray.engine.report import Section, table_html


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


# The paper's Table 1 (triples generated from SST and MRPC), for comparison.
PAPER_TABLE1 = {"CR1": 1417, "CR2": 681, "CR3": 588, "CR4": 408}


def count_rows(wide: pa.Table) -> list[dict]:
    """Table 1: triples per CR for every suite in the run, next to the paper's counts."""
    suites = list(dict.fromkeys(wide.column("suite").to_pylist()))
    per = {s: counts_per_cr(wide.filter(pa.compute.equal(wide["suite"], s))) for s in suites}
    rows = []
    for cr in list(CAPABILITIES) + ["SUM"]:
        rec: dict = {"CR": cr}
        for s in suites:
            rec[s] = sum(per[s].values()) if cr == "SUM" else per[s][cr]
        rec["paper"] = sum(PAPER_TABLE1.values()) if cr == "SUM" else PAPER_TABLE1[cr]
        rows.append(rec)
    return rows


def suite_rates(violations: pa.Table, distance: str, thresholds: tuple[str, ...] = ("zero", "mu-2sigma")) -> list[dict]:
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


def classifier_rows(classifiers: pa.Table) -> list[dict]:
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


def costello_sections(
    wide: pa.Table, violations: pa.Table, thresholds: pa.Table, classifiers: pa.Table, cc
) -> list[Section]:
    sections = [
        Section(
            "COSTELLO: contrast triples per CR (Table 1)",
            [table_html(count_rows(wide)), table_html(_examples(wide))],
            "CR1 synonym vs antonym of the same word; CR2 gender swap vs synonym; CR3 synonym vs "
            "semantic inversion; CR4 shared-word synonym vs antonym in a matching pair. 'paper': the "
            "paper's Table 1 (SST + MRPC).",
        )
    ]
    if classifiers.num_rows:
        sections.append(
            Section(
                "COSTELLO: downstream classifiers (ground truth)",
                [table_html(classifier_rows(classifiers))],
                "Held-out accuracy of each model's MLPs (the paper's 14 architectures; the paper reports a "
                "mean above 0.85).",
            )
        )
    thr = thresholds.to_pandas()
    if len(thr):
        pivot = thr.pivot_table(
            index=["model", "distance", "words", "nn_mean", "nn_std"], columns="threshold", values="theta", sort=False
        ).reset_index()
        sections.append(
            Section(
                "COSTELLO: adaptive thresholds (Algorithm 2)",
                [table_html(pivot.to_dict("records"))],
                "Nearest-neighbour distances within each model's dictionary ('words' entries: its whole "
                "vocabulary unless costello.dictionary_size samples it); mu-2sigma and mu-sigma with sigma the "
                "standard deviation; negatives clamped to 0.",
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
    cols = ["model", "suite", "capability", "distance", "threshold", "verdict", "gt_a", "gt_b"]
    rows = violations.select(cols).to_pylist()
    for suite in dict.fromkeys(r["suite"] for r in rows):
        sections.append(
            Section(
                f"COSTELLO: effectiveness per distance and threshold (Table 2 layout), suite {suite}",
                [table_html(table2([r for r in rows if r["suite"] == suite], CAPABILITIES))],
                "N_M models with a violation, N_V violations per model (mean), P_A/P_B precision (%) "
                "averaged over models; CR4 has no classifier ground truth.",
            )
        )
    if len({r["suite"] for r in rows}) > 1:
        sections.append(
            Section(
                f"COSTELLO: violation rates per suite ({cc.distance})",
                [table_html(suite_rates(violations, cc.distance))],
                "The generated suite next to the given ones (e.g. the paper's released triples), same "
                "models, thresholds and classifiers.",
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
