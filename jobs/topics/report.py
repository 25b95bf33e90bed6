"""Report sections of the topics job: the 2-D map (by topic, by label), the cluster table."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from checkray.engine.report import Section, figure_html, table_html
from checkray.engine.topics.config import TopicsConfig
from checkray.jobs.config import CheckrayConfig


def _map_figure(frame, colours: list[str], title: str):
    """The 2-D map, coloured by each of ``colours`` in turn: one SVG figure whose buttons
    show one colouring at a time (a hidden trace is not drawn, so the page draws one map;
    WebGL would cost a context per map, seconds where the GPU is emulated)."""
    import plotly.express as px
    import plotly.graph_objects as go

    fig, shown = go.Figure(), []
    for colour in colours:
        part = px.scatter(
            frame, x="x", y="y", color=colour, hover_data={"text": True, "x": False, "y": False}, render_mode="svg"
        )
        for trace in part.data:
            trace.update(marker={"size": 4, "opacity": 0.6}, visible=not shown, legendgroup=colour)
            fig.add_trace(trace)
        shown.append(len(part.data))
    buttons = []
    for i, colour in enumerate(colours):
        visible = [j == i for j, n in enumerate(shown) for _ in range(n)]
        buttons.append({"label": f"by {colour}", "method": "update", "args": [{"visible": visible}]})
    fig.update_layout(
        title=title,
        height=520,
        legend={"itemsizing": "constant"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        updatemenus=[{"type": "buttons", "direction": "right", "x": 1, "y": 1.08, "buttons": buttons}]
        if len(colours) > 1
        else [],
    )
    return fig


def topics_sections(
    corpus: pa.Table, assignments: pa.Table, clusters: pa.Table, reps: pa.Table, cfg: CheckrayConfig
) -> list[Section]:
    names = dict(zip(clusters.column("cluster").to_pylist(), clusters.column("topic").to_pylist()))
    frame = {
        "x": assignments.column("x").to_numpy(),
        "y": assignments.column("y").to_numpy(),
        "topic": [names[c] for c in assignments.column("cluster").to_pylist()],
        "label": ["(no label)" if v is None else str(v) for v in corpus.column("label").to_pylist()],
        "text": [t[:120] for t in corpus.column("text").to_pylist()],
    }
    n = len(frame["x"])
    topics = cfg.section(TopicsConfig)
    keep = np.sort(np.random.default_rng(cfg.seed).choice(n, size=min(n, topics.map_points), replace=False))
    frame = {
        k: np.asarray(v, dtype=object if k in ("topic", "label", "text") else None)[keep] for k, v in frame.items()
    }
    import pandas as pd

    df = pd.DataFrame(frame)
    blocks = []
    if len(df):
        colours = ["topic"] + (["label"] if corpus.column("label").null_count < corpus.num_rows else [])
        title = f"2-D map by {' and by '.join(colours)} ({len(df)} of {n} documents)"
        blocks.append(figure_html(_map_figure(df, colours, title), name="topic-map"))
    examples = {}
    for r in reps.to_pylist():
        examples.setdefault(r["cluster"], []).append(f"[{r['label']}] {r['text'][:160]}")
    rows = [
        {
            "topic": c["topic"],
            "size": c["size"],
            "majority label": c["majority_label"],
            "majority share": c["majority_share"],
            "keywords": c["keywords"][:8],
            "example documents": " | ".join(examples.get(c["cluster"], [])[:3]),
        }
        for c in clusters.to_pylist()
    ]
    blocks.append(table_html(rows))
    blocks.append(
        "<h3>Representative documents</h3>"
        + table_html(reps.to_pylist(), ["topic", "rank", "label", "relevance", "text"], max_rows=500)
    )
    summary = (
        f"{n} documents embedded with {topics.embedder.model}, reduced by UMAP to "
        f"{topics.reducer.n_components}-D, {clusters.num_rows} k-means clusters named by c-TF-IDF; "
        f"{reps.num_rows} representatives by MMR (diversity {topics.representatives.diversity}"
        f"{', stratified by label' if topics.representatives.stratify else ''})."
    )
    return [Section("Topics", blocks, summary)]
