"""Which models under test each S²LCT evaluation step uses, and what a model trained on (pure).

Neuron coverage needs a model's hidden units (a family with the ``neurons`` trait, the
zoo's torch classifiers); explanations only need predictions. The label judge must not
have trained on the corpus sentences it reads (``engine/s2lct/consistency.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from checkray.engine.benchmark.families import FAMILIES, has_trait
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.s2lct.config import S2lctConfig


@dataclass(frozen=True)
class EvaluationModels:
    benchmark: tuple[ModelSpec, ...]  # every model under test
    coverage: tuple[ModelSpec, ...]  # whose neuron coverage is measured
    explain: tuple[ModelSpec, ...]  # whose failures are explained (Eq. 5)
    notes: tuple[str, ...] = ()  # for the report: a step that has no model to run on


def evaluation_models(specs: Sequence[ModelSpec], s: S2lctConfig) -> EvaluationModels:
    """The coverage models: those exposing neurons (``coverage.models`` narrows them);
    the explained ones: ``explain.models``, else the coverage models, else the first model."""
    neurons = [
        sp for sp in specs if has_trait(sp, "neurons") and (s.coverage.models is None or sp.name in s.coverage.models)
    ]
    if s.explain.models is not None:
        explain_names = list(s.explain.models)
    elif neurons:
        explain_names = [sp.name for sp in neurons]
    else:
        explain_names = [specs[0].name] if specs else []
    notes = []
    if s.coverage.enabled and not neurons:
        families = ", ".join(f.name for f in FAMILIES.records() if f.neurons)
        notes.append(f"neuron coverage: no torch model (family {families}) among the models under test")
    return EvaluationModels(
        benchmark=tuple(specs),
        coverage=tuple(neurons) if s.coverage.enabled else (),
        explain=tuple(sp for sp in specs if sp.name in explain_names) if s.explain.failures else (),
        notes=tuple(notes),
    )


def training_split(spec: ModelSpec, corpus_path: str) -> list[str]:
    """The texts of the zoo's train split of ``corpus_path`` that ``spec`` learned from
    (its recorded ``held_out`` share and ``split_seed``)."""
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus
    from checkray.engine.splits import split_ids

    corpus = read_corpus(CorpusConfig(path=corpus_path))
    split = split_ids(corpus, float(spec.meta.get("held_out", 0.2)), int(spec.meta.get("split_seed", 0)))
    ids, texts = corpus.column("id").to_pylist(), corpus.column("text").to_pylist()
    return [t for i, t in zip(ids, texts) if split[i] == "train"]
