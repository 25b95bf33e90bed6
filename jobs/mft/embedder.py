"""The mft job's sentence embedder: near-duplicate detection and the MFT-topic clustering."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def open_embedder(model: str) -> Callable[[list[str]], np.ndarray]:
    """Normalized sentence embeddings in this process (MFT suites are small: no actor pool)."""
    from checkray.actors.embedder import load_sentence_transformer

    st = load_sentence_transformer(model)

    def embed(texts: list[str]) -> np.ndarray:
        return st.encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    return embed
