"""HTML reports: one self-contained page per job (jinja2 + plotly), viewable offline.

Jobs build a list of ``Section``s; the demo concatenates the sections of every job into
one report. plotly.js is inlined once per page so the report needs no network.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
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


def table_html(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, max_rows: int = 200) -> str:
    """An escaped HTML table of dict rows (floats shown with 3 decimals)."""
    if not rows:
        return "<p><em>(no rows)</em></p>"
    columns = list(columns or rows[0].keys())

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        if isinstance(v, (list, tuple)):
            return html.escape(", ".join(map(str, v)))
        return html.escape("" if v is None else str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows[:max_rows])
    more = f"<p><em>{len(rows) - max_rows} more rows not shown</em></p>" if len(rows) > max_rows else ""
    return f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}'


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


def figure_html(fig) -> str:
    """A plotly figure as a div; plotly.js itself is inlined once by ``render``. Every
    string in the figure (data and layout) goes through ``plot_text`` first: hover texts,
    legend names and category labels come from corpora, models and LLMs. plotly writes the
    figure's JSON with ``<``, ``>`` and ``/`` escaped."""
    import plotly.io as pio

    spec = _escape_plot(fig.to_plotly_json())
    return pio.to_html(spec, full_html=False, include_plotlyjs=False, validate=False)


def render(title: str, sections: Sequence[Section], subtitle: str = "") -> str:
    from plotly.offline import get_plotlyjs

    return _ENV.get_template("report.html.j2").render(
        title=title,
        subtitle=subtitle,
        sections=sections,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        plotlyjs=get_plotlyjs(),
    )


def render_template(name: str, **context: Any) -> str:
    """Render another page of ``engine/html`` (autoescaped), e.g. a run directory's index."""
    return _ENV.get_template(name).render(**context)
