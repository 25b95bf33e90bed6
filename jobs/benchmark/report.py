"""Report sections of the benchmark: leaderboard, model x capability heatmap, per-suite
failure rates (with version spread), example failures, and models that failed.

Other jobs (demo, mft, s2lct) add these sections to their own reports.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.benchmark.summary import capability_matrix, model_leaderboard
from engine.report import Section, figure_html, table_html


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


def example_failures(results: pa.Table, per_cell: int) -> list[dict]:
    """Up to ``per_cell`` failing cases per model x capability, with the perturbed text."""
    if per_cell <= 0:
        return []
    failing = results.filter(pc.equal(results.column("pass"), False))
    text_of = dict(zip(results.column("case_id").to_pylist(), results.column("text").to_pylist()))
    rows, taken = [], {}
    for r in failing.to_pylist():
        cell = (r["model"], r["capability"])
        if taken.get(cell, 0) >= per_cell:
            continue
        taken[cell] = taken.get(cell, 0) + 1
        probs = dict(zip(r["labels"] or [], r["probabilities"] or []))
        rows.append(
            {
                "model": r["model"],
                "capability": r["capability"],
                "suite": r["suite"],
                "type": r["test_type"],
                "text": r["text"],
                "perturbs": text_of.get(r["perturbs"]) if r["perturbs"] else None,
                "expected": r["expected_label"],
                "predicted": r["predicted"],
                "probabilities": ", ".join(f"{k}={v:.2f}" for k, v in probs.items()),
            }
        )
    return sorted(rows, key=lambda row: (row["model"], row["capability"]))


def leaderboard_sections(
    results: pa.Table, summary: pa.Table, accuracy: Mapping[str, float | None] | None = None, examples: int = 3
) -> list[Section]:
    board = model_leaderboard(results, accuracy)
    order = board.column("model").to_pylist()
    n_suites = len(pc.unique(results.column("suite")))
    n_cases = results.num_rows // max(len(order), 1)
    sections = [
        Section(
            "Benchmark leaderboard",
            [table_html(board.to_pylist())],
            f"{len(order)} models × {n_suites} suites ({n_cases} cases each), ranked by overall failure rate "
            "(failed cases / evaluated cases, all suites pooled). Accuracy is the held-out accuracy recorded "
            "for the model; a low failure rate with a high accuracy is what a good model shows.",
        )
    ]
    matrix = capability_matrix(results)
    if matrix.size and not np.isnan(matrix.to_numpy(dtype=float)).all():
        sections.append(
            Section(
                "Failure rate by capability",
                [figure_html(_heatmap(matrix, order))],
                "Share of failed test cases per model and capability, pooled over suites and topics.",
            )
        )
    evaluated = summary.filter(pc.greater(summary.column("n"), 0))
    columns = ["model", "suite", "capability", "topic", "n", "failures", "failure_rate"]
    note = ""
    if (pc.max(summary.column("n_versions")).as_py() or 0) >= 2:
        columns += ["n_versions", "failure_rate_mean", "failure_rate_std"]
        note = " Suites with several versions show the mean and standard deviation of the per-version failure rate."
    sections.append(
        Section(
            "Failure rates by suite, capability and topic",
            [table_html(evaluated.select(columns).to_pylist(), max_rows=300)],
            "One row per model × suite × capability × topic." + note,
        )
    )
    failures = example_failures(results, examples)
    sections.append(
        Section(
            "Example failures",
            [table_html(failures, max_rows=300)],
            f"Up to {examples} failing cases per model × capability; 'perturbs' is the text of "
            "the case an INV/DIR case was compared with.",
        )
    )
    problems = summary.filter(pc.invert(pc.is_null(summary.column("error"))))
    if problems.num_rows:
        rows = {}
        for r in problems.to_pylist():
            rows.setdefault(
                (r["model"], r["suite"], r["error"]), {"model": r["model"], "suite": r["suite"], "error": r["error"]}
            )
        sections.append(
            Section(
                "Models and suites that could not be evaluated",
                [table_html(list(rows.values()))],
                "A model that failed to load or predict, a label-map mismatch, or cases whose "
                "expectation could not be checked; the other models were still benchmarked.",
            )
        )
    return sections
