"""Actors for fault tests: the real embedding actor, telling the test where it runs."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from checkray.actors.embedder import EmbeddingActor


class ReportingEmbeddingActor(EmbeddingActor):
    """``EmbeddingActor`` that writes its pid to ``report_dir`` when it starts and counts
    the batches it finished, so a test can SIGKILL it from outside mid-stage."""

    def __init__(self, report_dir: str, **kwargs):
        super().__init__(**kwargs)
        self.report = Path(report_dir)
        (self.report / f"actor-{os.getpid()}.pid").write_text(str(os.getpid()))

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = super().__call__(batch)
        with open(self.report / "batches", "a") as f:
            f.write(f"{os.getpid()}\n")
        return out
