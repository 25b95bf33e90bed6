"""The repair's decisions over a COSTELLO run's published tables: which model to repair
(``most-violated``), which suite, and which triples are trained on as violated and which
as benign anchors. The training itself holds a model: ``actors/costello/repair.py``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.costello.config import CostelloConfig, EmbedderSpec, RepairSettings
from checkray.engine.costello.embedder_kinds import EMBEDDER_KINDS
from checkray.engine.errors import InputError

Triple = tuple[str, str, str]  # (seed, positive, negative)


@dataclass(frozen=True)
class RepairInputs:
    """What a repair reads of the costello run, resolved before Ray starts."""

    cc: CostelloConfig  # the run's section, with the repair's verdict
    spec: EmbedderSpec  # the model repaired
    suite: str  # the suite trained on and re-tested
    wide: pa.Table  # its triples, one row each
    before: pa.Table  # the model's violations on it
    violated: list[Triple]
    benign: list[Triple]
    source_seed: int  # the run's seed: the re-test's classifiers get the same splits
    settings: RepairSettings


def under_verdict(violations: pa.Table, distance: str, threshold: str) -> pa.Table:
    """The rows of one verdict (distance x threshold)."""
    return violations.filter(
        pc.and_(pc.equal(violations["distance"], distance), pc.equal(violations["threshold"], threshold))
    )


def most_violated_model(
    violations: pa.Table, trainable: Collection[str], distance: str, threshold: str, suite: str
) -> str:
    """The trainable model with the most violations under the verdict, on ``suite`` when
    the run scored it (else on every suite); with none violated, the first trainable name."""
    if not trainable:
        kinds = ", ".join(r.name for r in EMBEDDER_KINDS.records() if r.trainable)
        raise InputError(f"repair: no embedder to repair (only {kinds} models can be fine-tuned)")
    v = under_verdict(violations, distance, threshold)
    if suite in set(v["suite"].to_pylist()):
        v = v.filter(pc.equal(v["suite"], suite))
    counts = Counter(m for m, bad in zip(v["model"].to_pylist(), v["verdict"].to_pylist()) if bad and m in trainable)
    return counts.most_common(1)[0][0] if counts else sorted(trainable)[0]


def repair_suite(suites: Sequence[str], asked: str | None, generated: str, source: str) -> str:
    """The suite repaired and re-tested: the one asked for, else the run's generated suite
    (the paper repairs on its own test results), else the first given one. ``source``: the
    run, for the error."""
    suite = asked or (generated if generated in suites else suites[0])
    if suite not in suites:
        raise InputError(f"repair: suite '{suite}' is not in {source} (have: {', '.join(suites)})")
    return suite


def split_triples(
    wide: pa.Table, violations: pa.Table, distance: str, threshold: str
) -> tuple[list[Triple], list[Triple]]:
    """(violated, benign) single-sentence triples of ``wide`` under one verdict; pair
    triples (CR4) are scored, not trained on."""
    v = under_verdict(violations, distance, threshold)
    bad = {t for t, verdict in zip(v["triple"].to_pylist(), v["verdict"].to_pylist()) if verdict}
    violated, benign = [], []
    for r in wide.to_pylist():
        if r["seed_pair"] is not None:
            continue
        (violated if r["triple"] in bad else benign).append((r["seed"], r["positive"], r["negative"]))
    return violated, benign
