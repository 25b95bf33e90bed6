"""What the mft job runs on: the configured LLM (an actor pool) and a sentence embedder."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from jobs.config import CheckrayConfig
from engine.llm import Generation, GenerationParams


def open_embedder(model: str) -> Callable[[list[str]], np.ndarray]:
    """Normalized sentence embeddings in this process (MFT suites are small)."""
    from actors.embedder import load_sentence_transformer

    st = load_sentence_transformer(model)

    def embed(texts: list[str]) -> np.ndarray:
        return st.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)

    return embed


class GeneratorChat:
    """``chat(messages_list, params)`` over a started generator actor pool."""

    def __init__(self, generator):
        self.generator = generator
        self.name = generator.name

    def __call__(self, messages_list: Sequence, params: GenerationParams) -> list[Generation]:
        return self.generator.chat(messages_list, params)

    def close(self) -> None:
        self.generator.close()


def open_chat(cfg: CheckrayConfig) -> GeneratorChat:
    """Start the ``llm:`` backend as Ray actors (vLLM on GPU clusters, else local/http)."""
    from actors.llm.actor import start_generator
    from engine.runtime import init_ray

    init_ray(cfg.runtime)
    return GeneratorChat(start_generator(cfg.section("llm")))
