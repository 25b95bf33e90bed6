"""The ``topics:`` config section: embedder, reducer, clusterer, c-TF-IDF and MMR settings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from checkray.engine.config import (
    ClustererConfig,
    EmbedderConfig,
    JobSection,
    ReducerConfig,
    RepresentationConfig,
    RepresentativesConfig,
)


class TopicsConfig(JobSection):
    key: ClassVar[str] = "topics"

    embedder: EmbedderConfig = EmbedderConfig()
    reducer: ReducerConfig = ReducerConfig()
    clusterer: ClustererConfig = ClustererConfig()
    representation: RepresentationConfig = RepresentationConfig()
    representatives: RepresentativesConfig = RepresentativesConfig()
    # points drawn in the report's 2-D map: an SVG map of 2,000 draws in well under a second
    map_points: int = Field(default=2_000, ge=0)
