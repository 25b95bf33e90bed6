"""What the mft job runs on: the configured LLM (an actor pool) and a sentence embedder."""

from __future__ import annotations

from typing import Callable

import numpy as np

from engine.config import CheckrayConfig


def open_embedder(model: str) -> Callable[[list[str]], np.ndarray]:
    """Normalized sentence embeddings in this process (MFT suites are small)."""
    from actors.embedder import load_sentence_transformer

    st = load_sentence_transformer(model)

    def embed(texts: list[str]) -> np.ndarray:
        return st.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)

    return embed


def open_chat(cfg: CheckrayConfig):
    raise NotImplementedError("wired to actors/llm once the generator actor lands")
