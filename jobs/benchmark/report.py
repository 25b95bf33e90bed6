"""Report sections of the benchmark, built from the small tables only (summary, examples,
models), so a 36-model x 150k-case run renders without loading its results:

the model x capability heatmap first (failure rate coloured, the count and the 95 %
Wilson interval on hover, rows by overall failure rate, columns hardest first, each cell
linking to that model's failing examples), its drill-down to tests; the leaderboard;
CheckList's summary (one row per test that exists: type, capability, test cases, every
model's failure rate side by side); failing examples per model and capability; models
that failed and suites they could not answer. Other jobs (demo, mft, s2lct) add these
sections to their own reports.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.benchmark.summary import model_leaderboard, per_test_table
from checkray.engine.report import SEQUENTIAL, Section, figure_html, table_html
from checkray.engine.suite_validity import wilson

EXAMPLES_PER_CELL = 5  # failing examples shown per model and capability
MAX_TEXT_CELLS = 900  # above this many cells a heatmap shows colours only (hover has the numbers)


def example_anchor(model_index: int, capability_index: int | None = None) -> str:
    """The id of a model's (and capability's) failing examples; indexes, never names, so
    the anchor is plain ASCII whatever the model or capability is called."""
    return f"ex-{model_index}" if capability_index is None else f"ex-{model_index}-{capability_index}"


def capability_ids(summary: pa.Table, examples: pa.Table | None) -> dict[str, int]:
    """A number per capability (of the summary and the examples), for the anchors."""
    names = {c or "" for c in summary.column("capability").to_pylist()}
    if examples is not None:
        names |= {c or "" for c in examples.column("capability").to_pylist()}
    return {c: j for j, c in enumerate(sorted(names))}


def _pooled(summary: pa.Table, keys: list[str], n: str, k: str) -> pd.DataFrame:
    df = summary.select(["model", *keys, n, k]).to_pandas()
    for key in keys:
        df[key] = df[key].astype(object).where(df[key].notna(), "")
    return df.groupby(["model", *keys], sort=False).agg(n=(n, "sum"), k=(k, "sum")).reset_index()


def _hardest_first(cells: pd.DataFrame, column: str) -> list:
    """Columns by their failure rate over every model (hardest first), then by name."""
    tot = cells.groupby(column, sort=False).agg(n=("n", "sum"), k=("k", "sum"))
    tot = tot[tot["n"] > 0]
    rate = tot["k"] / tot["n"]
    return sorted(rate.index, key=lambda c: (-rate[c], str(c)))


def _cell_text(k: int, n: int, what: str) -> tuple[float, str, str]:
    if not n:
        return np.nan, "", f"nothing evaluated ({what})"
    low, high = wilson(int(k), int(n))
    rate = k / n
    return (
        rate,
        f"{rate:.0%}",
        f"failure rate {rate:.1%} [{low:.1%}, {high:.1%}] (95 % Wilson)<br>{int(k)} of {int(n)} {what} failed",
    )


def heatmap_figure(
    cells: pd.DataFrame,
    rows: list[str],
    columns: list,
    labels: list[str],
    what: str,
    title: str,
    links: list[list[str | None]] | None = None,
):
    """Models (rows) x ``columns`` coloured by failure rate; ``cells`` holds model, the
    column key, n and k (failed)."""
    import plotly.graph_objects as go

    key = cells.columns[1]
    index = {(r["model"], r[key]): (r["n"], r["k"]) for r in cells.to_dict("records")}
    z, text, hover = [], [], []
    for m in rows:
        zr, tr, hr = [], [], []
        for c, label in zip(columns, labels, strict=True):
            n, k = index.get((m, c), (0, 0))
            rate, short, long = _cell_text(k, n, what)
            zr.append(rate)
            tr.append(short)
            hr.append(f"model {m}<br>{label}<br>{long}")
        z.append(zr)
        text.append(tr)
        hover.append(hr)
    if links is not None:
        hover = [
            [h + ("<br><i>click: failing examples</i>" if links[i][j] else "") for j, h in enumerate(row)]
            for i, row in enumerate(hover)
        ]
    show_text = len(rows) * len(columns) <= MAX_TEXT_CELLS
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=labels,
            y=rows,
            text=text if show_text else None,
            texttemplate="%{text}" if show_text else None,
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
            colorscale=SEQUENTIAL,
            zmin=0,
            zmax=1,
            xgap=1,
            ygap=1,
            colorbar={"title": {"text": "failure rate"}, "tickformat": ".0%"},
        )
    )
    fig.update_layout(
        title={"text": title},
        yaxis={"autorange": "reversed", "automargin": True},
        xaxis={"automargin": True, "tickangle": -30 if len(columns) > 6 else 0},
        height=max(320, 34 * len(rows) + 220),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="#ffffff",
    )
    return fig


def heatmap_sections(summary: pa.Table, order: list[str], examples: pa.Table | None = None) -> list[Section]:
    """The model x capability heatmap (cells link to failing examples) and its drill-down
    to tests; nothing when no model evaluated anything."""
    caps = _pooled(summary, ["capability"], "n", "failures")
    columns = _hardest_first(caps, "capability")
    rows = [m for m in order if m in set(caps.loc[caps["n"] > 0, "model"])]
    if not rows or not columns:
        return []
    cap_index = capability_ids(summary, examples)
    has_examples = set()
    if examples is not None and examples.num_rows:
        for r in examples.select(["model", "capability"]).to_pylist():
            has_examples.add((r["model"], r["capability"] or ""))
    model_index = {m: i for i, m in enumerate(order)}
    links = [
        ["#" + example_anchor(model_index[m], cap_index[c]) if (m, c) in has_examples else None for c in columns]
        for m in rows
    ]
    fig = heatmap_figure(
        caps,
        rows,
        columns,
        [str(c) for c in columns],
        "cases",
        "Failure rate by model and capability",
        links,
    )
    sections = [
        Section(
            "Failure rate by model and capability",
            [figure_html(fig, links=[links], name="failure-rate-by-capability")],
            "Share of failed cases per model and capability, pooled over suites and tests; hover a cell for the "
            "count and its 95 % Wilson interval, click it for that model's failing examples. Models from best to "
            "worst (leaderboard order), capabilities from hardest to easiest.",
        )
    ]
    tests = _pooled(summary, ["suite", "capability", "topic", "test_type"], "testcases", "testcase_failures")
    tests["test"] = list(zip(tests["suite"], tests["capability"], tests["topic"], tests["test_type"], strict=True))
    tests = tests[["model", "test", "n", "k"]]
    by_test = _hardest_first(tests, "test")
    cap_rank = {c: j for j, c in enumerate(columns)}
    by_test.sort(key=lambda t: cap_rank.get(t[1], len(cap_rank)))  # stable: hardest first within a capability
    if by_test and len(by_test) > len(columns):
        suites = {t[0] for t in by_test}
        labels = [
            " · ".join(x for x in ((t[0] if len(suites) > 1 else ""), str(t[1]), str(t[2]), t[3]) if x) for t in by_test
        ]
        test_links = [
            [
                "#" + example_anchor(model_index[m], cap_index[t[1]])
                if (m, t[1]) in has_examples and t[1] in cap_index
                else None
                for t in by_test
            ]
            for m in rows
        ]
        fig = heatmap_figure(tests, rows, by_test, labels, "test cases", "Failure rate by model and test", test_links)
        fig.update_layout(height=max(360, 34 * len(rows) + 320))
        sections.append(
            Section(
                "Failure rate by model and test",
                [figure_html(fig, links=[test_links], name="failure-rate-by-test")],
                "The drill-down: one column per CheckList test (suite · capability · test · type), grouped by "
                "capability in the order above; the share of failed test cases, as in CheckList's summary.",
            )
        )
    return sections


def _percent(value) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{100 * value:.1f}%"


def checklist_section(summary: pa.Table, order: list[str]) -> Section:
    """CheckList's summary table, models side by side (test-case failure rates): one row
    per test that exists (a test no model evaluated is left out)."""
    table = per_test_table(summary, order)
    models = [m for m in order if m in table.columns]
    rows = []
    for r in table.to_dict("records"):
        rates = {m: _percent(r.get(m)) for m in models}
        cases = r["testcases"]
        if (cases is None or np.isnan(cases) or not cases) and not any(rates.values()):
            continue  # a (suite, capability, test) combination that does not exist
        row = {
            "capability": r["capability"],
            "test": r["topic"],
            "type": r["test_type"],
            "suite": r["suite"],
            "test cases": "" if cases is None or np.isnan(cases) else int(cases),
        }
        row.update(rates)
        rows.append(row)
    return Section(
        "Failure rate per test (CheckList summary)",
        [table_html(rows, max_rows=500)],
        f"{len(rows)} tests, one row each, as CheckList's summary shows it: the share of failed test cases (an MFT "
        "example, or an INV/DIR original with its perturbations: it fails when any perturbation "
        "fails), one column per model, in leaderboard order.",
    )


def examples_section(examples: pa.Table, order: list[str], summary: pa.Table | None = None) -> Section:
    """A few failing cases per model and capability, each block with an anchor the
    heatmap's cells link to."""
    cap_index = capability_ids(summary if summary is not None else examples, examples)
    caps = sorted(cap_index)
    by_cell: dict[tuple[str, str], list[dict]] = {}
    for r in examples.to_pylist():
        by_cell.setdefault((r["model"], r["capability"] or ""), []).append(r)
    blocks = []
    columns = ["topic", "test_type", "suite", "text", "original", "expected", "predicted", "probabilities"]
    models = [m for m in order if any(k[0] == m for k in by_cell)]
    models += sorted({k[0] for k in by_cell} - set(models))
    index = {m: i for i, m in enumerate(order)}
    for m in models:
        i = index.get(m, len(order) + models.index(m))
        parts = [f'<h3 id="{example_anchor(i)}">{html.escape(str(m))}</h3>']
        for c in caps:
            shown = sorted(by_cell.get((m, c), []), key=lambda r: (r.get("topic") or "", r.get("suite") or ""))
            if not shown:
                continue
            more = f" ({EXAMPLES_PER_CELL} of {len(shown)} shown)" if len(shown) > EXAMPLES_PER_CELL else ""
            parts.append(
                f'<h4 id="{example_anchor(i, cap_index[c])}">{html.escape(str(m))} · {html.escape(str(c))}{more}</h4>'
            )
            parts.append(table_html(shown[:EXAMPLES_PER_CELL], columns))
        blocks.append("".join(parts))
    return Section(
        "Example failures",
        blocks or ["<p><em>(no failing example)</em></p>"],
        "A few failing cases per model and capability (the heatmap's cells link here); 'original' is the text "
        "an INV/DIR case was compared with.",
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
    sections = heatmap_sections(summary, order, examples)
    sections += [
        Section(
            "Benchmark leaderboard",
            [table_html(board.to_pylist())],
            f"{len(order)} models × {n_suites} suites, ranked by overall failure rate (failed cases / "
            "evaluated cases, all suites pooled); testcase_failure_rate counts CheckList test cases. "
            "Accuracy is the held-out accuracy recorded for the model.",
        ),
        checklist_section(summary, order),
    ]
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
    sections.append(examples_section(examples, order, summary))
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
