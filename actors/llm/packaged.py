"""Which LLM file a config names: ``builtin:<alias>`` (from the asset table in
``actors/assets.py``: Qwen2.5-Coder-0.5B-Instruct as a GGUF joined from six PyPI wheels)
or a local GGUF file / model directory."""

from __future__ import annotations

from pathlib import Path

from checkray.actors.assets import resolve_builtin
from checkray.engine.errors import InputError


def resolve_llm(model: str) -> str:
    """A local GGUF file or model directory for ``builtin:<alias>`` or a path."""
    if model.startswith("builtin:"):
        return resolve_builtin("llm", model)
    path = Path(model).expanduser()
    if not path.exists():
        raise InputError(f"{model}: LLM path does not exist")
    return str(path)
