"""Command-line options several jobs share, declared once (typer ``Annotated`` aliases),
and the config overrides they map to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from checkray.engine.labels import parse_label_map

TextColumn = Annotated[Optional[str], typer.Option("--text-column", help="Corpus column holding the text.")]
LabelColumn = Annotated[Optional[str], typer.Option("--label-column", help="Corpus column holding the label.")]
Labels = Annotated[
    Optional[str],
    typer.Option(
        "--labels",
        help="Name the corpus's labels: 0=negative,1=positive (corpus.labels); every job then sees the names.",
    ),
]
RunOut = Annotated[Optional[str], typer.Option("--out", "-o", help="Run directory (local path or s3://...).")]
AsGenerated = Annotated[
    Optional[bool],
    typer.Option(
        "--as-generated",
        help="Read each suite as its generator wrote it, not the reviewed version `checkray review apply` wrote.",
    ),
]
ConfigFile = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="YAML config (configs/demo.yaml has every section).")
]


def corpus_overrides(
    path: str | None, text_column: str | None, label_column: str | None, labels: str | None = None
) -> dict[str, Any]:
    """The ``corpus:`` section's flags as ``load_config`` overrides (None: keep the file's).
    ``labels`` is the ``--labels`` string, parsed here so a typo is a one-line error."""
    return {
        "corpus.path": path,
        "corpus.text_column": text_column,
        "corpus.label_column": label_column,
        "corpus.labels": parse_label_map(labels),
    }
