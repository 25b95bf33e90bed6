"""vLLM backend: an actor-held ``vllm.LLM`` on a GPU node. Thin on purpose.

Used only when Ray reports a GPU and vLLM is installed (``checkray.engine.llm.choose_backend``);
vLLM is imported inside ``__init__``, which runs in an actor scheduled with
``num_gpus`` on a GPU node: importing it on CPU costs seconds and ``LLM(...)`` then fails
with misleading errors. vLLM batches the whole list itself (continuous batching), so a
call hands every prompt over at once. ``model`` is a local directory or GGUF the GPU
node can read (no hub downloads).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checkray.actors.llm.packaged import resolve_llm
from checkray.engine.llm import (
    Generation,
    GenerationParams,
    LLMConfig,
    LLMError,
    Message,
    failed_generation,
    make_generation,
)


class VLLMGenerator:
    def __init__(
        self, model: str, max_model_len: int | None = None, dtype: str = "auto", gpu_memory_utilization: float = 0.85
    ):
        try:
            import vllm
        except ImportError:
            raise LLMError("the vllm backend needs the vllm package (pip install 'checkray[gpu-llm]')") from None
        self._vllm = vllm
        try:
            self.llm = vllm.LLM(
                model=resolve_llm(model),
                dtype=dtype,
                max_model_len=max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise LLMError(f"{model}: vLLM cannot load it: {str(exc).splitlines()[0] if str(exc) else exc!r}") from None
        self.name = f"vllm:{model}"

    def __repr__(self) -> str:
        return f"VLLMGenerator({self.name!r})"

    def _sampling(self, params: GenerationParams):
        structured = None
        if params.grammar:  # GBNF through vLLM's structured outputs (xgrammar backend)
            from vllm.sampling_params import StructuredOutputsParams

            structured = StructuredOutputsParams(grammar=params.grammar)
        return self._vllm.SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            repetition_penalty=params.repetition_penalty,
            structured_outputs=structured,
        )

    @staticmethod
    def _convert(results: Sequence[Any]) -> list[Generation]:
        out = []
        for res in results:
            if not res.outputs:
                out.append(failed_generation("vLLM returned no output"))
                continue
            first = res.outputs[0]
            reason = first.finish_reason if first.finish_reason in ("stop", "length") else "stop"
            if first.finish_reason == "abort":
                out.append(failed_generation("vLLM aborted the request"))
                continue
            out.append(make_generation(first.text, reason, len(res.prompt_token_ids or ()), len(first.token_ids or ())))
        return out

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]:
        return self._convert(self.llm.generate([str(p) for p in prompts], self._sampling(params), use_tqdm=False))

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]:
        conversations = [[dict(m) for m in ms] for ms in messages_list]
        return self._convert(self.llm.chat(conversations, self._sampling(params), use_tqdm=False))


def build_vllm(cfg: LLMConfig, threads: int | None = None) -> VLLMGenerator:
    """The ``vllm`` backend (``engine.llm.BACKENDS``): the engine on this actor's GPU."""
    return VLLMGenerator(cfg.model, max_model_len=cfg.max_model_len, dtype=cfg.dtype)
