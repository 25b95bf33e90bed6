"""Li et al.'s result tables from a benchmark's results on MFT suites: Table 7 (accuracy
per model on the documents vs on the MFTs, per split) and Table 8 (accuracy per MFT topic).

A cell is the accuracy pooled over versions, with the std of the per-version accuracies
after it when there are several versions: ``74.8% (±8.4)``; "—" where a model has no case.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.benchmark.registry import ModelSpec

MISSING = "—"
TABLE7_SUITES = {
    "Train MFT (Original)": "mft-train-original",
    "Train MFT (Extended)": "mft-train-extended",
    "Test MFT (Original)": "mft-test-original",
    "Test MFT (Extended)": "mft-test-extended",
}


def accuracy_by_version(results: pa.Table, group: Sequence[str]) -> pd.DataFrame:
    """Accuracy per ``group`` pooled over versions, and its mean ± std across versions."""
    df = results.select(["model", "suite", "topic", "version", "pass"]).to_pandas()
    df = df[df["pass"].notna()]
    df["pass"] = df["pass"].astype(float)
    pooled = df.groupby(list(group))["pass"].agg(accuracy="mean", n="size")
    per_version = df.groupby([*group, "version"])["pass"].mean().groupby(list(group)).agg(["mean", "std", "count"])
    out = pooled.join(per_version.rename(columns={"mean": "version_mean", "std": "version_std", "count": "versions"}))
    return out.reset_index()


def accuracy_cell(row: pd.Series | None) -> str:
    """``74.8% (±8.4)``: pooled accuracy, ± the std over versions when there are several."""
    if row is None:
        return MISSING
    text = f"{100 * row['accuracy']:.1f}%"
    if row["versions"] > 1 and not np.isnan(row["version_std"]):
        text += f" (±{100 * row['version_std']:.1f})"
    return text


def _percent(value: object) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else MISSING


def mft_table7(results: pa.Table, specs: Sequence[ModelSpec]) -> list[dict]:
    """Li et al., Table 7. Rows: models. Columns: Train (the model's training accuracy),
    Train MFT (Original/Extended), Test (its held-out accuracy), Test MFT (...)."""
    acc = accuracy_by_version(results, ["model", "suite"]).set_index(["model", "suite"])

    def cell(model: str, suite: str) -> str:
        return accuracy_cell(acc.loc[(model, suite)] if (model, suite) in acc.index else None)

    return [
        {
            "model": spec.name,
            "Train": _percent(spec.meta.get("train_accuracy")),
            "Train MFT (Original)": cell(spec.name, TABLE7_SUITES["Train MFT (Original)"]),
            "Train MFT (Extended)": cell(spec.name, TABLE7_SUITES["Train MFT (Extended)"]),
            "Test": _percent(spec.accuracy),
            "Test MFT (Original)": cell(spec.name, TABLE7_SUITES["Test MFT (Original)"]),
            "Test MFT (Extended)": cell(spec.name, TABLE7_SUITES["Test MFT (Extended)"]),
        }
        for spec in specs
    ]


def mft_table8(results: pa.Table) -> list[dict]:
    """Li et al., Table 8. Rows: models. Columns: MFT topics (original cases of both splits)."""
    original = results.filter(pc.match_substring(results.column("suite"), "-original"))
    if original.num_rows == 0:
        return []
    rows: dict[str, dict] = {}
    for _, r in accuracy_by_version(original, ["model", "topic"]).iterrows():
        rows.setdefault(r["model"], {"model": r["model"]})[r["topic"]] = accuracy_cell(r)
    return list(rows.values())


def rows_table(rows: Sequence[dict]) -> pa.Table:
    """A table's rows as an Arrow table (a stage output): the columns in the order they
    first appear across all rows (Table 8's topics differ by model), strings throughout."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return pa.table({c: pa.array([row.get(c) for row in rows], pa.string()) for c in columns})
