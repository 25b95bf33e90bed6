"""Evaluation of models on MFT suites in Li et al.'s layouts (Tables 7 and 8)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.stages import RunDir
from checkray.jobs.config import CheckrayConfig


def _accuracy_by_version(results: pa.Table, group: Sequence[str]) -> pd.DataFrame:
    """Accuracy per ``group`` pooled over versions, and its mean ± std across versions."""
    df = results.select(["model", "suite", "topic", "version", "pass"]).to_pandas()
    df = df[df["pass"].notna()]
    df["pass"] = df["pass"].astype(float)
    pooled = df.groupby(list(group))["pass"].agg(accuracy="mean", n="size")
    per_version = df.groupby([*group, "version"])["pass"].mean().groupby(list(group)).agg(["mean", "std", "count"])
    out = pooled.join(per_version.rename(columns={"mean": "version_mean", "std": "version_std", "count": "versions"}))
    return out.reset_index()


def _cell(row: pd.Series | None) -> str:
    if row is None:
        return "—"
    text = f"{100 * row['accuracy']:.1f}%"
    if row["versions"] > 1 and not np.isnan(row["version_std"]):
        text += f" (±{100 * row['version_std']:.1f})"
    return text


def table7(results: pa.Table, specs: Sequence[ModelSpec]) -> list[dict]:
    """Rows: models. Columns: Train, Train MFT (Original/Extended), Test, Test MFT (...)."""
    acc = _accuracy_by_version(results, ["model", "suite"]).set_index(["model", "suite"])
    rows = []
    for spec in specs:

        def get(suite: str, name: str = spec.name):
            return acc.loc[(name, suite)] if (name, suite) in acc.index else None

        train = spec.meta.get("train_accuracy")
        rows.append(
            {
                "model": spec.name,
                "Train": f"{100 * train:.1f}%" if isinstance(train, (int, float)) else "—",
                "Train MFT (Original)": _cell(get("mft-train-original")),
                "Train MFT (Extended)": _cell(get("mft-train-extended")),
                "Test": f"{100 * spec.accuracy:.1f}%" if spec.accuracy is not None else "—",
                "Test MFT (Original)": _cell(get("mft-test-original")),
                "Test MFT (Extended)": _cell(get("mft-test-extended")),
            }
        )
    return rows


def table8(results: pa.Table) -> list[dict]:
    """Rows: models. Columns: MFT topics (original cases of both splits)."""
    original = results.filter(pa.compute.match_substring(results.column("suite"), "-original"))
    if original.num_rows == 0:
        return []
    acc = _accuracy_by_version(original, ["model", "topic"])
    rows = {}
    for _, r in acc.iterrows():
        rows.setdefault(r["model"], {"model": r["model"]})[r["topic"]] = _cell(r)
    return list(rows.values())


def evaluate_mft(cfg: CheckrayConfig, suite: pa.Table, specs: Sequence[ModelSpec], run: RunDir) -> dict:
    """Benchmark ``specs`` on the MFT suite (a benchmark run under ``run/benchmark``)."""
    from checkray.jobs.benchmark.job import run_benchmark

    results, summary = run_benchmark(suite, specs, cfg, out=RunDir(run.path("benchmark")))
    return {
        "results": results,
        "summary": summary,
        "table7": table7(results, specs),
        "table8": table8(results),
        "specs": specs,
    }
