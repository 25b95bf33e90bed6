"""Which methods ``checkray run`` runs on a corpus and its models, and why the others not.

Decided before Ray starts, from the config, the corpus's labels and the registry: each
method is a ``MethodChoice`` that runs or says in one line why it cannot serve this
task or these models. A corpus or registry that cannot work at all is an ``InputError``
here, not an hour later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.jobs.config import CheckrayConfig
from checkray.jobs.run.config import METHOD_ORDER, RunConfig

SENTIMENT_LABELS = frozenset({"negative", "positive", "neutral"})
PAIR_TASKS = frozenset({"paraphrase", "nli"})


@dataclass(frozen=True)
class MethodChoice:
    method: str
    runs: bool
    why: str  # what it generates from, or why it is skipped

    def line(self) -> str:
        return f"{self.method}: {'runs' if self.runs else 'skipped'} ({self.why})"


def _spec_file(path: str | None, setting: str) -> str | None:
    """Why a spec setting cannot serve, or None when it names a readable file."""
    from checkray.jobs.costello.inputs import repo_path

    if not path:
        return f"no capability spec: set {setting}"
    if not Path(repo_path(path)).is_file():
        raise InputError(f"{setting}: {path} not found")
    return None


def _templates(cfg: CheckrayConfig, task: str, labels: set[str]) -> MethodChoice:
    from checkray.engine.templates.config import TemplatesConfig

    spec = cfg.section(TemplatesConfig).spec
    why = _spec_file(spec, "templates.spec")
    return MethodChoice("templates", why is None, why or f"hand-written templates of {spec}")


def _mft(cfg: CheckrayConfig, task: str, labels: set[str]) -> MethodChoice:
    if task == "pair":
        return MethodChoice("mft", False, "its prompts write single texts; this run's task is pair")
    if not labels:
        return MethodChoice("mft", False, "it needs a labelled corpus: representatives are picked per label")
    return MethodChoice("mft", True, "topics of the corpus, LLM few-shot cases per topic and label")


def _s2lct(cfg: CheckrayConfig, task: str, labels: set[str]) -> MethodChoice:
    if task == "pair":
        return MethodChoice("s2lct", False, "its rules write single sentences; this run's task is pair")
    if not {"negative", "positive"} <= labels or not labels <= SENTIMENT_LABELS:
        shown = ", ".join(sorted(labels)) or "none"
        return MethodChoice("s2lct", False, f"its rules write sentiment cases; the corpus's labels are {shown}")
    return MethodChoice("s2lct", True, "rule-based seeds of 11 sentiment capabilities, grammar-guided expansion")


def _testaug(cfg: CheckrayConfig, task: str, labels: set[str]) -> MethodChoice:
    from checkray.engine.testaug.config import TestAugConfig

    t = cfg.section(TestAugConfig)
    why = _spec_file(t.spec, "testaug.spec")
    if why:
        return MethodChoice("testaug", False, why)
    if (t.task in PAIR_TASKS) != (task == "pair"):
        return MethodChoice("testaug", False, f"testaug.task is {t.task}; this run's task is {task}")
    return MethodChoice("testaug", True, f"LLM cases from the capability descriptions of {t.spec}")


def _costello(cfg: CheckrayConfig, task: str, labels: set[str]) -> MethodChoice:
    if task == "pair":
        return MethodChoice("costello", False, "its mutations are of single sentences; this run's task is pair")
    return MethodChoice("costello", True, "contrastive triples against the embedding models")


_DECIDE = {"templates": _templates, "mft": _mft, "s2lct": _s2lct, "testaug": _testaug, "costello": _costello}


def plan_methods(cfg: CheckrayConfig, labels: set[str]) -> list[MethodChoice]:
    """Every method of ``METHOD_ORDER``: those asked for (``run.methods``, default all)
    decided against the task and the corpus's ``labels``; the rest 'not asked for'."""
    run = cfg.section(RunConfig)
    asked = set(run.methods or METHOD_ORDER)
    return [
        _DECIDE[m](cfg, run.task, labels) if m in asked else MethodChoice(m, False, "not asked for (run.methods)")
        for m in METHOD_ORDER
    ]


def check_models(specs: Sequence[ModelSpec], labels: set[str]) -> None:
    """A model that can pass no case of this corpus's labels stops the run, in one line."""
    if not specs:
        raise InputError("run.models: the registry lists no model")
    for spec in specs:
        if labels and not labels & set(spec.labels):
            raise InputError(
                f"model '{spec.name}' answers {', '.join(spec.labels)} but the corpus's labels are "
                f"{', '.join(sorted(labels))}: set its labels in the registry"
            )
