"""HTML reports: one self-contained page per job (jinja2 + plotly), viewable offline.

Jobs build a list of ``Section``s; the demo concatenates the sections of every job into
one report. plotly.js is inlined once per page so the report needs no network.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jinja2

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("engine", "html"),
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


def figure_html(fig) -> str:
    """A plotly figure as a div; plotly.js itself is inlined once by ``render``."""
    return fig.to_html(full_html=False, include_plotlyjs=False)


def render(title: str, sections: Sequence[Section], subtitle: str = "") -> str:
    from plotly.offline import get_plotlyjs

    return _ENV.get_template("report.html.j2").render(
        title=title,
        subtitle=subtitle,
        sections=sections,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        plotlyjs=get_plotlyjs(),
    )
