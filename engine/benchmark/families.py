"""Model families: what each kind of model under test *is*, in one record.

A registry entry's ``family`` (``hf``, ``sklearn``, ``vader`` ...) names one of these
records. The record says how to load such a model (``ref``: an adapter in
``actors/models/``, imported only when a model of the family is loaded, so ``vader``
never imports transformers) and its traits, which every job asks here instead of keeping
its own set of family names: the benchmark gives a ``heavy`` model a host process of its
own and feeds ``shared_encoder`` heads from one encoder; TestAug's patch refits
``trainable`` models; S²LCT measures neuron coverage of models that expose ``neurons`` and
picks its label judge among models that were ``trained_on_corpus``.

A new family is its adapter module in ``actors/models/`` and one ``ModelFamily(...)``
line below (docs/architecture.md, "Add a model backend").
"""

from __future__ import annotations

from dataclasses import dataclass

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.lazy import LazyRegistry


@dataclass(frozen=True)
class ModelFamily:
    """One family of models under test; ``ref`` is ``"module:function"`` taking a
    ``ModelSpec`` and returning a ``ModelUnderTest``."""

    name: str
    ref: str
    # Holds a network (a transformer, an LLM): gets a benchmark host process of its own;
    # the others are cheap enough that several share one. ``options: {heavy: ...}`` overrides.
    heavy: bool = False
    # A classifier head on a sentence encoder's embeddings: the benchmark encodes each
    # input once for all heads of one encoder (actors/benchmark/shared_encoder.py).
    shared_encoder: bool = False
    # Refitted in seconds from the zoo's training split (TestAug's patched failure rate).
    trainable: bool = False
    # Trained by the zoo on ``spec.meta["corpus"]``: its training split is known.
    trained_on_corpus: bool = False
    # A word-list model: never the label judge (VADER is the second judge anyway).
    lexicon: bool = False
    # An LLM asked for a label: trained on nothing, may answer none of its labels.
    zero_shot: bool = False
    # A torch network whose hidden units can be read (S²LCT neuron coverage).
    neurons: bool = False
    # Runs a transformer checkray runs itself: its outputs depend on the encoder runtime
    # (engine/inference.py: PyTorch, ONNX fp32 or int8), which its cache key records.
    encoder: bool = False
    # Answers questions (``AnsweringModel``): reads QA cases (task "qa": context + question)
    # and returns answer strings, judged by engine/benchmark/qa.py; it has no label map.
    answers: bool = False
    # Runs no user code and loads in seconds: when a benchmark's work is small
    # (``benchmark.in_process_below``) its models predict in the driver, with no host process.
    in_process: bool = False


FAMILIES: LazyRegistry = LazyRegistry("model family")
for _family in [
    ModelFamily("callable", "checkray.actors.models.callable_model:load_callable"),
    ModelFamily(
        "hf",
        "checkray.actors.models.hf_model:load_hf",
        heavy=True,
        trained_on_corpus=True,
        neurons=True,
        encoder=True,
        in_process=True,
    ),
    ModelFamily("vader", "checkray.actors.models.lexicon_models:load_vader", lexicon=True, in_process=True),
    ModelFamily("textblob", "checkray.actors.models.lexicon_models:load_textblob", lexicon=True, in_process=True),
    ModelFamily("llm_zero_shot", "checkray.actors.models.llm_zero_shot:load_llm_zero_shot", heavy=True, zero_shot=True),
    ModelFamily(
        "sklearn",
        "checkray.actors.models.sklearn_models:load_sklearn",
        trainable=True,
        trained_on_corpus=True,
        in_process=True,
    ),
    ModelFamily(
        "st_head",
        "checkray.actors.models.sklearn_models:load_st_head",
        heavy=True,
        shared_encoder=True,
        encoder=True,
        trainable=True,
        trained_on_corpus=True,
        in_process=True,
    ),
    ModelFamily("qa_callable", "checkray.actors.models.qa_models:load_qa_callable", answers=True),
    ModelFamily("qa_llm", "checkray.actors.models.qa_models:load_qa_llm", heavy=True, zero_shot=True, answers=True),
    ModelFamily("qa_hf", "checkray.actors.models.qa_models:load_qa_hf", heavy=True, answers=True),
]:
    FAMILIES.register(_family)


def families() -> list[str]:
    """The registered family names, sorted."""
    return FAMILIES.names()


def family_of(spec: ModelSpec) -> ModelFamily:
    """The record of ``spec``'s family; an unknown family is a one-line error naming the model."""
    if spec.family not in FAMILIES:
        raise InputError(f"model '{spec.name}': unknown family '{spec.family}' (have: {', '.join(families())})")
    return FAMILIES.record(spec.family)


def is_heavy(spec: ModelSpec) -> bool:
    """Whether a model gets its own host; ``options: {heavy: true|false}`` overrides the family."""
    flag = spec.options.get("heavy")
    if flag is not None:
        return bool(flag)
    return spec.family in FAMILIES and FAMILIES.record(spec.family).heavy


# The largest weights a model may have to run in the driver: a small fine-tuned encoder
# (MiniLM: ~90 MB) is, a user's multi-GB transformer keeps a process of its own.
IN_PROCESS_MAX_BYTES = 512 * 2**20


def runs_in_process(spec: ModelSpec) -> bool:
    """Whether ``spec`` may predict in the driver: its family runs no user code
    (``in_process``), ``options: {heavy: true}`` does not ask for a process of its own, and
    its local weights (with a head's sentence encoder) are at most ``IN_PROCESS_MAX_BYTES``."""
    if not has_trait(spec, "in_process") or spec.options.get("heavy") is True:
        return False
    encoder = spec.options.get("encoder")
    sizes = [weights_bytes(spec.path), weights_bytes(encoder if isinstance(encoder, str) else None)]
    return None not in sizes and sum(sizes) <= IN_PROCESS_MAX_BYTES


def weights_bytes(path: str | None) -> int | None:
    """Bytes of a local weights file or folder; 0 for none or a packaged ``builtin:`` model;
    None when unknown (a hub id, whose size is not on this disk)."""
    from pathlib import Path

    if not path or path.startswith("builtin:"):
        return 0
    p = Path(path)
    if not p.exists():
        return None
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def answers(spec: ModelSpec) -> bool:
    """Whether ``spec`` is a question-answering model (its family answers, no label map)."""
    return has_trait(spec, "answers")


def has_trait(spec: ModelSpec, trait: str) -> bool:
    """Whether ``spec``'s family has ``trait`` (False for an unknown family)."""
    return spec.family in FAMILIES and bool(getattr(FAMILIES.record(spec.family), trait))
