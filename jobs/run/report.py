"""The first section of a ``checkray run`` report: per model under test, where it fails
(capability x method, with a failing example), how sure the figures are (Wilson
intervals, the merged suite's people-checked validity where there is one) and how it
compares with the best baseline (McNemar's exact test on the cases both were judged on).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pyarrow as pa

from checkray.engine.compare.stats import mcnemar_exact
from checkray.engine.report import Section, table_html
from checkray.engine.suite_validity import wilson

MIN_CELL = 5  # a capability x method cell with fewer judged cases is not ranked


def judged_frame(results: pa.Table, suite: pa.Table) -> pd.DataFrame:
    """One row per model x judged case: model, case_id, method, capability, text, pass."""
    frame = results.select(["model", "case_id", "capability", "text", "pass"]).to_pandas()
    methods = suite.select(["case_id", "method"]).to_pandas()
    frame = frame.merge(methods, on="case_id", how="left")
    return frame[frame["pass"].notna()].astype({"pass": bool})


def _rate(passed: pd.Series) -> str:
    lo, hi = wilson(int(passed.sum()), len(passed))
    return f"{passed.mean():.1%} [{lo:.1%}, {hi:.1%}]"


def weakest_cells(frame: pd.DataFrame, model: str, top: int = 3) -> list[dict]:
    """The ``top`` capability x method cells of ``model`` with the lowest pass rate."""
    mine = frame[frame["model"] == model]
    rows = []
    for (capability, method), cell in mine.groupby(["capability", "method"]):
        if len(cell) < MIN_CELL:
            continue
        failing = cell[~cell["pass"]]
        rows.append(
            {
                "capability": capability,
                "method": method,
                "cases": len(cell),
                "pass rate [95% CI]": _rate(cell["pass"]),
                "example failure": failing["text"].iloc[0] if len(failing) else "",
                "_rate": cell["pass"].mean(),
            }
        )
    rows.sort(key=lambda r: (r["_rate"], -r["cases"]))
    return [{k: v for k, v in r.items() if k != "_rate"} for r in rows[:top]]


def versus_baseline(frame: pd.DataFrame, model: str, baselines: Sequence[str]) -> dict:
    """The best baseline (highest pass rate) and McNemar's exact p on the shared cases."""
    rates = {b: frame.loc[frame["model"] == b, "pass"].mean() for b in baselines}
    rates = {b: r for b, r in rates.items() if pd.notna(r)}
    if not rates:
        return {"best baseline": "-", "baseline pass rate": "-", "paired p (McNemar)": "-"}
    best = max(rates, key=lambda b: rates[b])
    a = frame[frame["model"] == model].set_index("case_id")["pass"]
    b = frame[frame["model"] == best].set_index("case_id")["pass"]
    shared = a.index.intersection(b.index)
    a, b = a[shared], b[shared]
    only_model, only_baseline = int((a & ~b).sum()), int((~a & b).sum())
    return {
        "best baseline": best,
        "baseline pass rate": f"{rates[best]:.1%}",
        "paired p (McNemar)": f"{mcnemar_exact(only_model, only_baseline):.3g} ({only_model} vs {only_baseline} discordant)",
    }


def model_verdicts(
    results: pa.Table, suite: pa.Table, models: Sequence[str], baselines: Sequence[str], validity: str | None
) -> list[Section]:
    """The report's opening: one table of models, then each model's weakest cells."""
    frame = judged_frame(results, suite)
    overview, sections = [], []
    for model in models:
        mine = frame[frame["model"] == model]
        row = {
            "model": model,
            "judged cases": len(mine),
            "pass rate [95% CI]": _rate(mine["pass"]) if len(mine) else "-",
        }
        overview.append({**row, **versus_baseline(frame, model, baselines)})
        cells = weakest_cells(frame, model)
        if cells:
            sections.append(
                Section(f"Where {model} fails", [table_html(cells)], f"lowest pass rates, ≥{MIN_CELL} cases")
            )
    note = "Pass rates over every judged case of the merged suite; brackets: Wilson 95% intervals."
    if validity:
        note += f" Suite validity (people's verdicts): {validity}."
    return [Section("Models under test", [table_html(overview)], note), *sections]
