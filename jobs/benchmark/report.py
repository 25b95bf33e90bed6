"""Report sections of the benchmark, built from the small tables only (summary, examples,
models), so a 36-model x 150k-case run renders without loading its results:

leaderboard; CheckList's summary (per test: type, capability, test cases, every model's
failure rate side by side); a model x capability heatmap; failing examples per test;
models that failed and suites they could not answer. Other jobs (demo, mft, s2lct) add
these sections to their own reports.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.benchmark.summary import capability_matrix, model_leaderboard, per_test_table
from checkray.engine.report import Section, figure_html, table_html


def _heatmap(matrix, order: list[str]):
    import plotly.graph_objects as go

    matrix = matrix.reindex([m for m in order if m in matrix.index])
    values = matrix.to_numpy(dtype=float)
    text = [["" if np.isnan(v) else f"{v:.0%}" for v in row] for row in values]
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=list(matrix.columns),
            y=list(matrix.index),
            text=text,
            texttemplate="%{text}",
            colorscale="Reds",
            zmin=0,
            zmax=1,
            colorbar={"title": "failure rate"},
            hovertemplate="model %{y}<br>capability %{x}<br>failure rate %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Failure rate by model and capability",
        yaxis={"autorange": "reversed"},
        height=max(300, 40 * len(matrix.index) + 160),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


def _percent(value) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{100 * value:.1f}%"


def checklist_section(summary: pa.Table, order: list[str]) -> Section:
    """CheckList's summary table, models side by side (test-case failure rates)."""
    table = per_test_table(summary, order)
    rows = []
    for r in table.to_dict("records"):
        row = {
            "capability": r["capability"],
            "test": r["topic"],
            "type": r["test_type"],
            "suite": r["suite"],
            "test cases": "" if r["testcases"] is None or np.isnan(r["testcases"]) else int(r["testcases"]),
        }
        row.update({m: _percent(r.get(m)) for m in order if m in table.columns})
        rows.append(row)
    return Section(
        "Failure rate per test (CheckList summary)",
        [table_html(rows, max_rows=500)],
        "One row per test, as CheckList's summary shows it: the share of failed test cases (an MFT "
        "example, or an INV/DIR original with its perturbations: it fails when any perturbation "
        "fails), one column per model, in leaderboard order.",
    )


def leaderboard_sections(
    summary: pa.Table,
    examples: pa.Table,
    models: pa.Table | None = None,
    accuracy: Mapping[str, float | None] | None = None,
) -> list[Section]:
    board = model_leaderboard(summary, accuracy)
    order = board.column("model").to_pylist()
    n_suites = len(pc.unique(summary.column("suite")))
    sections = [
        Section(
            "Benchmark leaderboard",
            [table_html(board.to_pylist())],
            f"{len(order)} models × {n_suites} suites, ranked by overall failure rate (failed cases / "
            "evaluated cases, all suites pooled); testcase_failure_rate counts CheckList test cases. "
            "Accuracy is the held-out accuracy recorded for the model.",
        ),
        checklist_section(summary, order),
    ]
    matrix = capability_matrix(summary)
    if matrix.size and not np.isnan(matrix.to_numpy(dtype=float)).all():
        sections.append(
            Section(
                "Failure rate by capability",
                [figure_html(_heatmap(matrix, order))],
                "Share of failed test cases per model and capability, pooled over suites and topics.",
            )
        )
    if (pc.max(summary.column("n_versions")).as_py() or 0) >= 2:
        evaluated = summary.filter(pc.greater(summary.column("n"), 0))
        columns = ["model", "suite", "capability", "topic", "n", "failure_rate"]
        columns += ["n_versions", "failure_rate_mean", "failure_rate_std"]
        sections.append(
            Section(
                "Failure rates over suite versions",
                [table_html(evaluated.select(columns).to_pylist(), max_rows=300)],
                "Suites with several versions: mean and standard deviation of the per-version failure rate.",
            )
        )
    shown = examples.to_pylist()
    sections.append(
        Section(
            "Example failures",
            [table_html(sorted(shown, key=lambda r: (r["capability"], r["topic"] or "", r["model"])), max_rows=400)],
            "A few failing cases per model and test; 'original' is the text an INV/DIR case was compared with.",
        )
    )
    problems = []
    if models is not None:
        for r in models.to_pylist():
            if r["error"]:
                problems.append({"model": r["model"], "suite": "(all)", "error": r["error"]})
    failed_models = {p["model"] for p in problems}
    seen = set()
    for r in summary.filter(pc.invert(pc.is_null(summary.column("error")))).to_pylist():
        key = (r["model"], r["suite"], r["error"])
        if r["model"] not in failed_models and key not in seen:
            seen.add(key)
            problems.append({"model": r["model"], "suite": r["suite"], "error": r["error"]})
    if problems:
        sections.append(
            Section(
                "Models and suites that could not be evaluated",
                [table_html(problems, max_rows=300)],
                "A model that failed to load or predict, whose host died or timed out, a label-map "
                "mismatch, or cases whose expectation could not be checked; the other models were "
                "still benchmarked. A rerun into the same --out retries failed models only.",
            )
        )
    return sections
