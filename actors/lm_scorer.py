"""Sentence log-probabilities under a packaged causal LM: how natural a sentence reads.

A word substitution that a reader finds odd ("the deal is expected to shut", "raw beef"
-> "rude beef") costs the sentence log-probability under a language model, even a small
one. ``CausalLMScorer`` holds the model (``builtin:<alias>`` or a local GGUF file or
model directory, loaded by ``local_transformers.load_causal_lm``: a GGUF is dequantized
once) and returns each sentence's summed token log-probability, the first token
conditioned on a line break so it is scored too. PyTorch on CUDA when torch sees one, else CPU; batches
are sorted by length so padding costs little, and padding never changes a score (the
attention mask hides it and each row is scored on its own positions).

``score_sentences`` maps distinct sentences through a Ray Data pool of these actors
(``map_with_actors``): one GPU per actor when Ray reports GPUs, else one CPU actor, or
this process for a few sentences on a one-node CPU Ray.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

SCORE_SCHEMA = pa.schema([("text", pa.string()), ("logprob", pa.float64())])
SCORE_BATCH = 16  # sentences per forward pass


class CausalLMScorer:
    """Summed log-probability of each sentence under a causal LM."""

    def __init__(self, model: str, threads: int | None = None):
        from checkray.actors.llm.local_transformers import load_causal_lm

        self.tokenizer, self.model, self.device = load_causal_lm(model, threads)
        # Context for the first token: a line break, so a sentence's opening word is scored
        # as a line's start (no BOS token in Qwen or SmolLM2 tokenizers).
        self.prefix = self.tokenizer("\n", add_special_tokens=False)["input_ids"]
        self.pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def logprobs(self, texts: Sequence[str], batch_size: int = SCORE_BATCH) -> np.ndarray:
        encoded = [self.prefix + self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        order = np.argsort([len(e) for e in encoded], kind="stable")
        out = np.zeros(len(texts), dtype=np.float64)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            out[rows] = self._batch([encoded[i] for i in rows])
        return out

    def _batch(self, encoded: list[list[int]]) -> np.ndarray:
        import torch

        width = max(len(e) for e in encoded)
        ids = torch.full((len(encoded), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, tokens in enumerate(encoded):
            ids[row, : len(tokens)] = torch.tensor(tokens)
            mask[row, : len(tokens)] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
        token_lp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
        scored = mask[:, 1:].float()
        scored[:, : len(self.prefix) - 1] = 0  # the prefix's own tokens are context, not scored
        return (token_lp * scored).sum(dim=1).cpu().numpy().astype(np.float64)


class SentenceLogprobActor:
    """Ray Data actor: a batch with a ``text`` column -> (text, logprob)."""

    def __init__(self, model: str, threads: int | None = None):
        self.scorer = CausalLMScorer(model, threads)

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column("text").to_pylist()
        return pa.table({"text": texts, "logprob": self.scorer.logprobs(texts)}, schema=SCORE_SCHEMA)


# Below this many sentences a one-node CPU Ray scores them in this process: an actor's
# start-up (seconds) is more than the scoring of a demo-sized expansion.
SCORE_IN_DRIVER_BELOW = 2_000


def score_sentences(texts: Sequence[str], model: str, *, backend: str = "auto") -> dict[str, float]:
    """Log-probability of every distinct sentence in ``texts`` under ``model`` (a Ray Data
    actor pool: GPUs when Ray reports them and ``backend`` allows, else one CPU actor; a
    few sentences on a one-node CPU Ray in this process, ``SCORE_IN_DRIVER_BELOW``)."""
    from checkray.actors.embed_cache import small_work_plan
    from checkray.actors.pool import map_with_actors
    from checkray.engine.runtime import cluster_resources, plan_actor_pool

    distinct = sorted(set(texts))
    if not distinct:
        return {}
    plan = small_work_plan(plan_actor_pool(cluster_resources(), backend), len(distinct), SCORE_IN_DRIVER_BELOW, backend)
    table = map_with_actors(
        pa.table({"text": distinct}),
        SentenceLogprobActor,
        dict(model=model, threads=plan.threads),
        plan,
        batch_size=256,
        schema=SCORE_SCHEMA,
    )
    return dict(zip(table.column("text").to_pylist(), table.column("logprob").to_pylist()))
