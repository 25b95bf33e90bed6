"""Command-line options several jobs share, declared once (typer ``Annotated`` aliases),
and the config overrides they map to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

TextColumn = Annotated[Optional[str], typer.Option("--text-column", help="Corpus column holding the text.")]
LabelColumn = Annotated[Optional[str], typer.Option("--label-column", help="Corpus column holding the label.")]
RunOut = Annotated[Optional[str], typer.Option("--out", "-o", help="Run directory (local path or s3://...).")]
ConfigFile = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="YAML config (configs/demo.yaml has every section).")
]


def corpus_overrides(path: str | None, text_column: str | None, label_column: str | None) -> dict[str, Any]:
    """The ``corpus:`` section's flags as ``load_config`` overrides (None: keep the file's)."""
    return {"corpus.path": path, "corpus.text_column": text_column, "corpus.label_column": label_column}
