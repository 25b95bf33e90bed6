"""What the mft job reads of a finished topics run: the files it published (its corpus,
cluster assignments and clusters, listed in its manifest) and the fingerprint that says
when that content changed."""

from __future__ import annotations

import pyarrow as pa

from checkray.engine.errors import InputError
from checkray.engine.stages import RunDir
from checkray.jobs.base import published_path, read_manifest

TOPICS_FILES = ("corpus.parquet", "assignments.parquet", "clusters.parquet")


def check_topics_run(topics_dir: str) -> None:
    """A one-line error unless ``topics_dir`` is a finished topics run that published what mft reads."""
    run = RunDir(topics_dir)
    try:
        for name in TOPICS_FILES:
            published_path(run, "topics", name)
    except InputError as exc:
        raise InputError(f"{exc}; run `checkray topics` first") from None


def load_topics_run(topics_dir: str) -> tuple[pa.Table, pa.Table]:
    """(corpus, assignments) of a finished topics run."""
    check_topics_run(topics_dir)
    run = RunDir(topics_dir)
    corpus = run.read_table("corpus.parquet")
    assignments = run.read_table("assignments.parquet", columns=["id", "cluster"])
    return corpus, assignments


def topics_fingerprint(topics_dir: str) -> str:
    """What identifies a topics run's content: the fingerprints its manifest records."""
    stages = read_manifest(RunDir(topics_dir), "topics").get("stages") or {}
    return ":".join(str(stages.get(stage, "missing")) for stage in ("corpus", "layout"))
