"""transformers backend: a causal LM on CPU (or CUDA when torch sees one).

A GGUF file is dequantized by transformers (``from_pretrained(dir, gguf_file=...)``:
slow, 40 s to minutes for 0.5B, 630M fp32 parameters) and then cached once as a plain
safetensors directory next to it, which reloads in about a second. The GGUF-loaded
model refuses ``save_pretrained`` (it is flagged as quantized), so the weights go
through a fresh ``from_config`` model. A directory is loaded as is.

Prompts are generated one at a time: each prompt's sampling is seeded with
``params.seed`` so its output does not depend on which batch it travelled in.

A GBNF ``params.grammar`` is NOT enforced here (transformers has no grammar-constrained
decoding built in): the output is free text, which the job's parsers read leniently, and
a warning says so once per process.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

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

log = logging.getLogger(__name__)


def converted_dir(gguf: Path) -> Path:
    return gguf.parent / f"{gguf.stem}-hf"


def convert_gguf(gguf: Path) -> Path:
    """Dequantize ``gguf`` into a safetensors model + tokenizer dir (once; atomic)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = converted_dir(gguf)
    if (target / "config.json").is_file():
        return target
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config)
        plain.load_state_dict(loaded.state_dict())
        plain.generation_config = loaded.generation_config
        plain.save_pretrained(work)
        tokenizer.save_pretrained(work)
        try:
            os.replace(work, target)
        except OSError:
            if not (target / "config.json").is_file():  # another process won the race: keep its copy
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_causal_lm(model: str, threads: int | None = None):
    """``(tokenizer, model, device)`` for ``model`` (builtin alias, GGUF file converted once,
    or model directory), in eval mode on CUDA when torch sees one, else on CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(threads)
    path = Path(resolve_llm(model))
    if path.suffix == ".gguf":
        path = convert_gguf(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        loaded = AutoModelForCausalLM.from_pretrained(str(path)).eval()
    except (OSError, ValueError) as exc:
        raise LLMError(f"{model}: cannot load with transformers: {str(exc).splitlines()[0]}") from None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return tokenizer, loaded.to(device), device


class TransformersGenerator:
    """``Generator`` over ``AutoModelForCausalLM``; chat uses the tokenizer's chat template."""

    def __init__(self, model: str, threads: int | None = None):
        self.tokenizer, self.model, self.device = load_causal_lm(model, threads)
        self.name = f"transformers:{model}"
        self._warned_grammar = False
        self.n_ctx = getattr(self.model.config, "max_position_embeddings", None)
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            self.eos_ids.add(self.tokenizer.eos_token_id)

    def __repr__(self) -> str:
        return f"TransformersGenerator({self.name!r})"

    def _one(self, prompt_ids: list[int], params: GenerationParams) -> Generation:
        import torch

        if params.grammar and not self._warned_grammar:
            log.warning("%s: the transformers engine cannot enforce a GBNF grammar; generating freely", self.name)
            self._warned_grammar = True

        ids = torch.tensor([prompt_ids], device=self.device)
        sampling = params.temperature > 0
        kwargs = dict(
            max_new_tokens=params.max_tokens,
            do_sample=sampling,
            pad_token_id=self.tokenizer.pad_token_id or next(iter(self.eos_ids), 0),
            eos_token_id=sorted(self.eos_ids) or None,
            repetition_penalty=params.repetition_penalty,
        )
        if sampling:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
            torch.manual_seed(params.seed)
        else:  # greedy: clear the model's sampling defaults so transformers does not warn
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self.tokenizer)
        with torch.inference_mode():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        new = out[0, len(prompt_ids) :].tolist()
        hit_eos = bool(new) and new[-1] in self.eos_ids
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        stopped_by_string = False
        for stop in params.stop:  # transformers keeps the stop string; the OpenAI convention drops it
            cut = text.find(stop)
            if cut >= 0:
                text, stopped_by_string = text[:cut], True
        reason = "stop" if hit_eos or stopped_by_string or len(new) < params.max_tokens else "length"
        return make_generation(text, reason, len(prompt_ids), len(new))

    def _run(self, encoded: Sequence[list[int] | Exception], params: GenerationParams) -> list[Generation]:
        results = []
        for ids in encoded:
            if isinstance(ids, Exception):
                results.append(failed_generation(ids))
                continue
            if not ids:
                results.append(failed_generation("the prompt encodes to no tokens"))
            elif self.n_ctx and len(ids) + params.max_tokens > self.n_ctx:
                # RoPE models run past their context without an error, into garbage: refuse, as llama.cpp does
                results.append(
                    failed_generation(
                        f"prompt of {len(ids)} tokens + max_tokens {params.max_tokens} "
                        f"exceeds the context of {self.n_ctx}",
                        len(ids),
                    )
                )
            else:
                try:
                    results.append(self._one(ids, params))
                except (RuntimeError, ValueError, IndexError) as exc:
                    results.append(failed_generation(exc, len(ids)))
        return results

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]:
        return self._run([self.tokenizer(str(p))["input_ids"] for p in prompts], params)

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]:
        encoded: list[list[int] | Exception] = []
        for messages in messages_list:
            try:
                text = self.tokenizer.apply_chat_template(
                    [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
                )
                encoded.append(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            except Exception as exc:  # a malformed conversation fails alone  # noqa: BLE001
                encoded.append(exc)
        return self._run(encoded, params)


def build_transformers(cfg: LLMConfig, threads: int | None = None) -> TransformersGenerator:
    """The ``transformers`` local engine (``engine.llm.LOCAL_ENGINES``): always installed."""
    return TransformersGenerator(cfg.model, threads=threads)
