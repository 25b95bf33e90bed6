"""Report sections of ``checkray compare``: first the flips per capability (pass→fail and
fail→pass, significant capabilities marked, each bar linking to its flipped cases), then
what was compared, the overall and per-capability results with McNemar's p and the
bootstrap interval, a forest plot of the differences, every test, the flipped cases and
the gate. Every text goes through
``checkray.engine.report.table_html`` / ``figure_html`` (escaped)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.report import Section, figure_html, table_html
from checkray.jobs.compare.config import CompareConfig

_COLUMNS = [
    "n",
    "baseline_pass_rate",
    "candidate_pass_rate",
    "diff",
    "ci_low",
    "ci_high",
    "pass_to_fail",
    "fail_to_pass",
    "p_value",
    "p_holm",
]


def _rows(table: pa.Table, level: str, keys: Sequence[str], alpha: float) -> list[dict]:
    rows = []
    for r in table.filter(pc.equal(table.column("level"), level)).to_pylist():
        row = {k: r[k] for k in keys}
        row.update({k: r[k] for k in _COLUMNS})
        row["p_value"] = f"{r['p_value']:.4g}"
        row["p_holm"] = f"{r['p_holm']:.4g}"
        row["significant"] = "yes" if r["p_value"] < alpha else ""
        rows.append(row)
    return rows


def _forest(table: pa.Table):
    import plotly.graph_objects as go

    caps = table.filter(pc.equal(table.column("level"), "capability")).to_pylist()
    caps.sort(key=lambda r: r["diff"])
    diff = [r["diff"] for r in caps]
    low = [r["diff"] - r["ci_low"] if r["ci_low"] == r["ci_low"] else 0 for r in caps]
    high = [r["ci_high"] - r["diff"] if r["ci_high"] == r["ci_high"] else 0 for r in caps]
    names = [str(r["capability"]) for r in caps]
    hover = [
        f"{r['capability']}<br>{r['baseline_pass_rate']:.3f} → {r['candidate_pass_rate']:.3f}"
        f"<br>{r['pass_to_fail']} pass→fail, {r['fail_to_pass']} fail→pass<br>McNemar p={r['p_value']:.3g}"
        for r in caps
    ]
    fig = go.Figure(
        go.Scatter(
            x=diff,
            y=names,
            mode="markers",
            error_x={"type": "data", "array": high, "arrayminus": low, "symmetric": False},
            hovertext=hover,
            hoverinfo="text",
            marker={"size": 9, "color": ["#c0392b" if d < 0 else "#2e86c1" for d in diff]},
        )
    )
    fig.add_vline(x=0, line_dash="dot")
    fig.update_layout(
        title="Pass-rate difference (candidate − baseline) per capability, paired bootstrap interval",
        xaxis={"title": "difference in pass rate", "tickformat": "+.0%"},
        height=max(260, 32 * len(caps) + 140),
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
    )
    return fig


# Okabe-Ito: told apart by every common colour-vision deficiency (and by the side of the axis).
REGRESSION, FIX = "#D55E00", "#0072B2"


def flip_anchor(capability_index: int) -> str:
    return f"flips-{capability_index}"


def _capability_ids(table: pa.Table, flips: pa.Table) -> dict[str, int]:
    caps = table.filter(pc.equal(table.column("level"), "capability")).column("capability").to_pylist()
    names = {str(c) for c in caps} | {str(c) for c in flips.column("capability").to_pylist()}
    return {c: j for j, c in enumerate(sorted(names))}


def _flips_figure(table: pa.Table, alpha: float, ids: dict[str, int], linked: set[str]):
    """Pass→fail (left) and fail→pass (right) per capability, most regressions on top; a
    capability whose McNemar p < alpha is marked ★ and drawn solid."""
    import plotly.graph_objects as go

    caps = table.filter(pc.equal(table.column("level"), "capability")).to_pylist()
    caps = [r for r in caps if r["pass_to_fail"] or r["fail_to_pass"]]  # a capability with no flip has no bar
    caps.sort(key=lambda r: (-(r["pass_to_fail"] - r["fail_to_pass"]), -r["pass_to_fail"], str(r["capability"])))
    significant = [r["p_value"] == r["p_value"] and r["p_value"] < alpha for r in caps]
    names = [("★ " if sig else "") + str(r["capability"]) for r, sig in zip(caps, significant, strict=True)]
    hover = [
        f"{r['capability']}<br>{r['pass_to_fail']} pass→fail, {r['fail_to_pass']} fail→pass of {r['n']} paired cases"
        f"<br>pass rate {r['baseline_pass_rate']:.1%} → {r['candidate_pass_rate']:.1%}"
        f"<br>McNemar p={r['p_value']:.3g} (Holm {r['p_holm']:.3g})" + ("<br><b>significant</b>" if sig else "")
        for r, sig in zip(caps, significant, strict=True)
    ]
    links = ["#" + flip_anchor(ids[str(r["capability"])]) if str(r["capability"]) in linked else None for r in caps]
    opacity = [1.0 if sig else 0.55 for sig in significant]
    fig = go.Figure(
        [
            go.Bar(
                y=names,
                x=[-r["pass_to_fail"] for r in caps],
                orientation="h",
                name="pass→fail (regressions)",
                marker={"color": REGRESSION, "opacity": opacity},
                text=[str(r["pass_to_fail"]) for r in caps],
                textposition="auto",
                hovertext=hover,
                hovertemplate="%{hovertext}<extra></extra>",
            ),
            go.Bar(
                y=names,
                x=[r["fail_to_pass"] for r in caps],
                orientation="h",
                name="fail→pass (fixes)",
                marker={"color": FIX, "opacity": opacity},
                text=[str(r["fail_to_pass"]) for r in caps],
                textposition="auto",
                hovertext=hover,
                hovertemplate="%{hovertext}<extra></extra>",
            ),
        ]
    )
    fig.add_vline(x=0, line_color="#444")
    fig.update_layout(
        title={"text": f"Flipped cases per capability (★ McNemar p < {alpha:g})"},
        barmode="relative",
        xaxis={"title": {"text": "← pass→fail    cases    fail→pass →"}},
        yaxis={"autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "y": -0.2},
        height=max(280, 30 * len(caps) + 200),
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
    )
    return fig, [links, links]


def compare_sections(
    table: pa.Table, flips: pa.Table, info: dict, conf: CompareConfig, checks: Sequence | None = None
) -> list[Section]:
    ids = _capability_ids(table, flips)
    sections = []
    caps = table.filter(pc.equal(table.column("level"), "capability"))
    if caps.num_rows and pc.sum(pc.add(caps.column("pass_to_fail"), caps.column("fail_to_pass"))).as_py():
        fig, links = _flips_figure(table, conf.alpha, ids, {str(c) for c in flips.column("capability").to_pylist()})
        sections.append(
            Section(
                "Flips per capability",
                [figure_html(fig, links=links, name="flips-per-capability")],
                _headline(table, conf) + " Click a bar for its flipped cases.",
            )
        )
    sections += [
        _compared_section(info),
        _overall_section(table, conf),
        _capability_section(table, conf.alpha),
    ]
    if _has_capability_differences(table):
        sections.append(Section("Differences per capability", [figure_html(_forest(table))]))
    sections.append(
        Section(
            "Per test",
            [table_html(_rows(table, "test", ["suite", "capability", "topic", "test_type"], conf.alpha), max_rows=500)],
            "One row per CheckList test (suite, capability, test name, type).",
        )
    )
    sections.append(_flips_section(flips, conf.examples, ids))
    if checks is not None:
        sections.append(_gate_section(checks))
    return sections


def _side_row(role: str, side: dict) -> dict:
    """One side's model, run, identity and key package versions."""
    ident = side.get("identity") or {}
    packages = (side.get("environment") or {}).get("packages") or {}
    return {
        "role": role,
        "model": side["model"],
        "run": side["run"],
        "family": ident.get("family"),
        "path": ident.get("path"),
        "content digest": ident.get("digest"),
        "revision": ident.get("revision"),
        "checkray": side.get("checkray"),
        "torch": packages.get("torch"),
        "scikit-learn": packages.get("scikit-learn"),
        "run now": "yes" if side.get("ran_now") else "",
    }


def _compared_section(info: dict) -> Section:
    """Both sides, the suites, and what differs between the runs (packages, settings)."""
    sides = [_side_row(role, info[role]) for role in ("baseline", "candidate")]
    suites = [{"suite": k, "cases": v.get("cases"), "digest": v.get("digest")} for k, v in info["suites"].items()]
    diffs = [
        {"package or setting": k, "baseline": a, "candidate": b}
        for k, (a, b) in [*info["package_differences"].items(), *info["settings_differences"].items()]
    ]
    what = [table_html(sides), table_html(suites)]
    if diffs:
        what.append(table_html(diffs))
    return Section(
        "What was compared",
        what,
        f"Both runs tested the same suites (case ids and content digests match). {info['paired']} cases were "
        f"judged for both models; {info['unpaired_baseline']} only for the baseline, "
        f"{info['unpaired_candidate']} only for the candidate (not paired). Package or setting differences "
        "between the runs are listed when there are any.",
    )


def _headline(table: pa.Table, conf: CompareConfig) -> str:
    overall = table.filter(pc.equal(table.column("level"), "overall")).to_pylist()[0]
    return (
        f"Pass rate {overall['baseline_pass_rate']:.3f} → {overall['candidate_pass_rate']:.3f} "
        f"({overall['diff']:+.3f}, {conf.confidence:.0%} paired-bootstrap interval "
        f"[{overall['ci_low']:+.3f}, {overall['ci_high']:+.3f}]) on {overall['n']} paired cases: "
        f"{overall['pass_to_fail']} flipped pass→fail, {overall['fail_to_pass']} fail→pass; McNemar's exact "
        f"p = {overall['p_value']:.4g}."
    )


def _overall_section(table: pa.Table, conf: CompareConfig) -> Section:
    headline = _headline(table, conf)
    rows = _rows(table, "overall", [], conf.alpha) + _rows(table, "test_type", ["test_type"], conf.alpha)
    return Section(
        "Overall and per test type",
        [table_html(rows)],
        headline + " McNemar's exact test uses only the flipped cases (a paired test); the interval "
        f"resamples whole CheckList test cases ({conf.bootstrap} resamples, seed {conf.seed}).",
    )


def _capability_section(table: pa.Table, alpha: float) -> Section:
    return Section(
        "Per capability",
        [table_html(_rows(table, "capability", ["capability"], alpha), max_rows=500)],
        f"Pooled over suites and tests. 'significant': McNemar p < {alpha:g}; p_holm adjusts for testing every "
        "capability at once (Holm).",
    )


def _has_capability_differences(table: pa.Table) -> bool:
    """A capability row with a difference to plot (not all NaN)."""
    caps = table.filter(pc.equal(table.column("level"), "capability"))
    diffs = caps.column("diff").to_numpy(zero_copy_only=False) if caps.num_rows else np.array([])
    return bool(caps.num_rows) and not np.isnan(diffs.astype(float)).all()


def _flips_section(flips: pa.Table, per_group: int, ids: dict[str, int] | None = None) -> Section:
    """Up to ``per_group`` flipped cases per capability and direction; the first row of a
    capability carries the anchor the flips figure links to."""
    shown, seen, anchors, first = [], {}, [], set()
    for r in flips.to_pylist():
        key = (r["capability"], r["direction"])
        if seen.get(key, 0) < per_group:
            seen[key] = seen.get(key, 0) + 1
            shown.append(r)
            cap = str(r["capability"])
            anchors.append(flip_anchor(ids[cap]) if ids and cap in ids and cap not in first else None)
            first.add(cap)
    columns = ["direction", "capability", "topic", "test_type", "text", "expected"]
    columns += ["baseline_predicted", "candidate_predicted"]
    return Section(
        "Flipped cases",
        [table_html(shown, columns, max_rows=1000, ids=anchors)],
        f"Up to {per_group} per capability and direction ({flips.num_rows} flips in all, every one in "
        "flips.parquet); regressions (pass→fail) first.",
    )


def _gate_section(checks: Sequence) -> Section:
    rows = [
        {
            "status": "ok" if c.passed else "FAIL",
            "model": c.model,
            "rule": c.name,
            "measured": c.measured(),
            "why": "; ".join(c.reasons),
        }
        for c in checks
    ]
    failed = sum(not c.passed for c in checks)
    return Section(
        "Gate",
        [table_html(rows)],
        f"{failed} of {len(checks)} checks failed (junit.xml, summary.md)." if failed else "Every check passed.",
    )
