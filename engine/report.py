"""HTML reports: one page per job (jinja2 + plotly), viewable offline.

Jobs build a list of ``Section``s; the demo concatenates the sections of every job into
one report. plotly.js is never fetched from a network: a page written into a run
(``write_page``) loads the one shared copy of the site,
``_checkray/plotly-cartesian-<version>.min.js``, found in the run or in a run above it (a
demo writes it once at its top, so its pages share one copy); a page rendered to a string
alone (``render`` without ``assets``) inlines it. A page without figures loads no plotly.

The bundle is plotly.js's cartesian partial bundle (npm ``plotly.js-cartesian-dist-min``,
MIT, shipped in ``engine/html/assets/``), of the plotly.js version the installed plotly
package writes figures for: 1.5 MB against the full bundle's 4.8 MB, which the browser
parsed on every page load (``bench/bench_report_pages.py``). It draws the trace types in
``PLOTLY_TRACES``; ``figure_html`` refuses any other, so no page needs the full bundle.

Tables list only what exists: ``table_html`` drops every all-empty row and column (a
cell is empty when it is None, NaN or blank) and makes the table sortable by a click on
its header; colours are a colour-blind-safe sequential palette (``SEQUENTIAL``) and every
coloured cell also shows its number.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("checkray.engine", "html"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
)


@dataclass
class Section:
    title: str
    blocks: list[str] = field(default_factory=list)  # trusted HTML fragments
    summary: str = ""  # plain text, escaped


ASSET_DIR = "_checkray"  # the site's shared scripts, at the top of a run (or of a demo)
ASSET_DEPTH = 3  # how far up write_page looks for a run that already holds them
PLOTLY_BUNDLE = Path(__file__).parent / "html" / "assets" / "plotly-cartesian.min.js"
PLOTLY_JS_VERSION = "4.1.1"  # the bundle's; tests check it is the plotly package's plotly.js
PLOTLY_TRACES = frozenset(  # the trace modules of the cartesian bundle (its README)
    {
        "bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour",
        "image", "pie", "scatter", "scatterternary", "violin",
    }
)  # fmt: skip

# Failure rate 0 -> 1: light yellow to dark blue (cividis, reversed), readable with every
# common colour-vision deficiency and in greyscale; the number is printed in each cell too.
SEQUENTIAL = "cividis_r"


def _empty(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float):
        return v != v
    if isinstance(v, str):
        return not v.strip() or v.strip() in ("-", "–")
    if isinstance(v, (list, tuple)):
        return not v
    return False


def real_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """``rows`` and ``columns`` without an all-empty row or column."""
    kept = [r for r in rows if not all(_empty(r.get(c)) for c in columns)]
    return kept, [c for c in columns if not all(_empty(r.get(c)) for r in kept)]


def table_html(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str] | None = None,
    max_rows: int = 200,
    ids: Sequence[str | None] | None = None,
) -> str:
    """An escaped, sortable HTML table of dict rows (floats shown with 3 decimals), without
    all-empty rows or columns. ``ids``: an element id per row (plain ASCII, for links)."""
    if not rows:
        return "<p><em>(no rows)</em></p>"
    columns = list(columns or rows[0].keys())
    if ids is not None:
        keep = [i for i, r in enumerate(rows) if not all(_empty(r.get(c)) for c in columns)]
        rows, ids = [rows[i] for i in keep], [ids[i] for i in keep]
    rows, columns = real_rows(rows, columns)
    if not rows:
        return "<p><em>(no rows)</em></p>"

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        if isinstance(v, (list, tuple)):
            return html.escape(", ".join(map(str, v)))
        return html.escape("" if v is None else str(v))

    def tr(i: int, r: dict[str, Any]) -> str:
        rid = ids[i] if ids is not None else None
        attr = f' id="{html.escape(rid)}"' if rid else ""
        return f"<tr{attr}>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>"

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(tr(i, r) for i, r in enumerate(rows[:max_rows]))
    more = f"<p><em>{len(rows) - max_rows} more rows not shown</em></p>" if len(rows) > max_rows else ""
    return f'<table class="data sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}'


# Tags plotly.js renders in text and that code writes in hover templates (no attributes).
_PLOT_TAGS = ("br", "b", "i", "em", "sup", "sub", "extra")
_RESTORE = [(f"&lt;{t}&gt;", f"<{t}>") for t in _PLOT_TAGS] + [(f"&lt;/{t}&gt;", f"</{t}>") for t in _PLOT_TAGS]


def plot_text(value: str) -> str:
    """Text for a plotly figure (hover text, labels, names, tick labels): plotly.js reads it
    as HTML-like markup, so ``<``, ``>`` and ``&`` are escaped (plotly shows the entities as
    the characters); only the attribute-less formatting tags above stay markup."""
    out = html.escape(value, quote=False)
    if "&lt;" in out:
        for escaped, tag in _RESTORE:
            out = out.replace(escaped, tag)
    return out


def _escape_plot(obj: Any) -> Any:
    if isinstance(obj, str):
        return plot_text(obj)
    if isinstance(obj, dict):
        return {k: _escape_plot(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_escape_plot(v) for v in obj]
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "OUS":
        return np.vectorize(_escape_plot, otypes=[object])(obj) if obj.size else obj
    return obj


def script_json(value: Any) -> str:
    """JSON for inside a ``<script>``: ``<``, ``>``, ``&`` and the JS line separators escaped
    (``\\u003c`` ...), so no text in it can close the script or open a tag."""
    out = json.dumps(value, ensure_ascii=False, default=str)
    for ch in ("<", ">", "&", "\u2028", "\u2029"):
        out = out.replace(ch, f"\\u{ord(ch):04x}")
    return out


def figure_html(fig, links: Any = None, name: str = "") -> str:
    """A plotly figure as a div and its JSON; the page draws every figure once plotly.js
    is loaded (``render``). Every string in the figure (data and layout) goes through
    ``plot_text`` first: hover texts, legend names and category labels come from corpora,
    models and LLMs; the JSON has ``<``, ``>`` and ``&`` escaped (``script_json``).

    ``links``: per trace, per point (a list, or a list of rows for a heatmap) an in-page
    anchor (``#id``, ASCII letters, digits, ``-`` and ``_``) the point opens when clicked;
    the page ignores any other value.
    ``name``: the file name a PNG/SVG download of the figure gets."""
    import uuid

    from plotly.utils import PlotlyJSONEncoder

    spec = _escape_plot(fig.to_plotly_json())
    spec = json.loads(json.dumps(spec, cls=PlotlyJSONEncoder))
    foreign = sorted({t.get("type", "scatter") for t in spec.get("data", [])} - PLOTLY_TRACES)
    if foreign:  # a programming error: the page could not draw it (e.g. scattergl needs WebGL modules)
        raise ValueError(f"trace type(s) {', '.join(foreign)} are not in the shipped plotly.js bundle")
    payload = {"data": spec.get("data", []), "layout": spec.get("layout", {})}
    if links is not None:
        payload["links"] = links
    payload["name"] = re.sub(r"[^A-Za-z0-9_-]+", "-", name)[:60] or "figure"
    div = f"fig-{uuid.uuid4().hex[:12]}"
    height = int((payload["layout"] or {}).get("height") or 450)
    return (
        f'<div id="{div}" class="plotly-graph-div" style="height:{height}px;width:100%"></div>'
        f'<script type="application/json" class="figure-spec" data-for="{div}">{script_json(payload)}</script>'
    )


@functools.cache
def plotly_js() -> str:
    """The shipped plotly.js bundle's source (see the module docstring)."""
    return PLOTLY_BUNDLE.read_text(encoding="utf-8")


def plotly_asset() -> str:
    """The shared plotly bundle's path in a site (versioned, so versions never mix)."""
    return f"{ASSET_DIR}/plotly-cartesian-{PLOTLY_JS_VERSION}.min.js"


def _has_figures(sections: Sequence[Section]) -> bool:
    return any('class="figure-spec"' in b for s in sections for b in s.blocks)


def render(title: str, sections: Sequence[Section], subtitle: str = "", assets: str | None = None) -> str:
    """The page. ``assets``: the relative URL of the folder holding ``_checkray/`` (``""``,
    ``"../"`` ...) to load the shared plotly bundle from; None inlines it (a page alone)."""
    figures = _has_figures(sections)
    return _ENV.get_template("report.html.j2").render(
        title=title,
        subtitle=subtitle,
        sections=sections,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        plotlyjs=plotly_js() if figures and assets is None else "",
        plotly_src=assets + plotly_asset() if figures and assets is not None else "",
        figures=figures,
    )


def site_assets(run) -> str:
    """The relative URL prefix of the run that holds this site's shared plotly bundle:
    ``run`` itself or a run up to ``ASSET_DEPTH`` levels above it (a demo's top); when
    none has it, it is written into ``run`` (recorded as the run's own file)."""
    import posixpath

    import pyarrow.fs as pafs

    asset = plotly_asset()
    here = run.root.rstrip("/")
    for up in range(ASSET_DEPTH + 1):
        if run.fs.get_file_info(f"{here}/{asset}").type == pafs.FileType.File:
            return "../" * up
        parent = posixpath.dirname(here)
        if not parent or parent == here:
            break
        here = parent
    write_assets(run)
    return ""


def write_assets(run) -> str:
    """Write the shared plotly bundle into ``run`` (once per version)."""
    if run.exists(plotly_asset()):
        return run.path(plotly_asset())
    return run.write_text(plotly_asset(), plotly_js())


def write_page(run, name: str, title: str, sections: Sequence[Section], subtitle: str = "") -> str:
    """Render and write a report page into ``run``, loading the site's shared plotly."""
    assets = site_assets(run) if _has_figures(sections) else ""
    return run.write_text(name, render(title, sections, subtitle=subtitle, assets=assets))


def inline_assets(page: str) -> str:
    """A page written by ``write_page`` made self-contained (the shared plotly bundle
    inlined), for copies that leave the site: an experiment tracker's artifact."""
    tag = re.search(r'<script defer src="(?:\.\./)*' + re.escape(plotly_asset()) + r'"></script>', page)
    if tag is None:
        return page
    return page[: tag.start()] + "<script>" + plotly_js() + "</script>" + page[tag.end() :]


_SPEC = re.compile(r'<script type="application/json" class="figure-spec" data-for="[^"]+">(.*?)</script>', re.S)


def page_figures(page: str) -> list[dict[str, Any]]:
    """The figures of a page ``render`` wrote: each one's data, layout, links and name."""
    return [json.loads(m.group(1)) for m in _SPEC.finditer(page)]


def export_figures(page: str, out_dir: str, formats: Sequence[str] = ("svg", "png")) -> list[str]:
    """Write every figure of ``page`` as SVG/PNG files into ``out_dir`` (for papers and
    slides), named as the page's download buttons name them. Needs plotly's static export,
    kaleido (not a dependency of checkray: ``pip install kaleido``), which drives a local
    Chrome or Chromium (``BROWSER_PATH``), offline. The pages themselves need neither:
    their SVG/PNG buttons draw the file in the browser."""
    import os

    import plotly.graph_objects as go

    os.makedirs(out_dir, exist_ok=True)
    written, seen = [], {}
    for spec in page_figures(page):
        name = spec.get("name") or "figure"
        seen[name] = seen.get(name, 0) + 1
        stem = name if seen[name] == 1 else f"{name}-{seen[name]}"
        fig = go.Figure({"data": spec["data"], "layout": spec["layout"]})
        for fmt in formats:
            path = os.path.join(out_dir, f"{stem}.{fmt}")
            fig.write_image(path, format=fmt, width=1100, height=int(spec["layout"].get("height") or 500))
            written.append(path)
    return written


def render_template(name: str, **context: Any) -> str:
    """Render another page of ``engine/html`` (autoescaped), e.g. a run directory's index."""
    return _ENV.get_template(name).render(**context)
