"""The tables of TestAug's paper (Yang et al., COLING 2022) that the testaug job fills:

* ``testaug_table3``: patched failure rate per model and suite, mean ± std over seeds (§5.2.1);
* ``testaug_table4``: effort saved, seed vs new sentences and templates (§5.1);
* ``testaug_table5``: linguistic diversity, Self-BLEU-4 and unique dependency paths (§5.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.testaug.diversity import suite_diversity
from checkray.engine.testaug.patch import TABLE3_SUITES, UNPATCHED
from checkray.engine.testaug.prompt import Description


def _mean_std(values: np.ndarray) -> str:
    """``mean±std`` in percent (std over seeds; 0 for one seed), "" for no value."""
    values = values[~np.isnan(values)]
    if not len(values):
        return ""
    return f"{100 * values.mean():.1f}±{100 * values.std(ddof=1) if len(values) > 1 else 0:.1f}"


def testaug_table3(
    rows: Sequence[Mapping], specs: Sequence[ModelSpec], columns: Sequence[str] = TABLE3_SUITES
) -> list[dict]:
    """Table 3 layout from the patch stage's per-seed rows (model, seed, column,
    failure_rate): model, Original (held-out error from the zoo), Unpatched and one column
    per suite, as "mean ± std" failure rates in percent over the seeds."""
    accuracy = {s.name: s.accuracy for s in specs}
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        line = {"model": model, "Original": "" if accuracy.get(model) is None else f"{100 * (1 - accuracy[model]):.1f}"}
        for column in [UNPATCHED, *columns]:
            line[column] = _mean_std(
                np.array([r["failure_rate"] for r in rows if r["model"] == model and r["column"] == column])
            )
        out.append(line)
    return out


def testaug_table4(descs: Sequence[Description], suite: pa.Table, new_templates: Sequence[str]) -> list[dict]:
    """Table 4 layout: unique seed sentences vs unique new sentences of the TestAug suite,
    seed templates vs new templates (``new_templates``: the expansion's template texts)."""
    seeds = {(s.text, s.text_pair) for d in descs for s in d.seeds}
    new = set(zip(suite.column("text").to_pylist(), suite.column("text_pair").to_pylist()))
    return [
        {
            "unique seed sentences": len(seeds),
            "unique new sentences": len(new - seeds),
            "ratio": round(len(new - seeds) / max(1, len(seeds)), 1),
            "seed templates": len({x.template_id for d in descs for x in d.templates}),
            "new templates": len(set(new_templates)),
        }
    ]


def sentences_by_topic(table: pa.Table) -> dict[str, list[str]]:
    """A suite's sentences grouped by description (``topic``); a pair is its texts joined."""
    out: dict[str, list[str]] = {}
    for topic, text, pair in zip(
        table.column("topic").to_pylist(), table.column("text").to_pylist(), table.column("text_pair").to_pylist()
    ):
        out.setdefault(topic, []).append(text if pair is None else f"{text} {pair}")
    return out


def table5_suites(suite: pa.Table, baseline: pa.Table, suite_name: str) -> dict[str, pa.Table]:
    """Table 5's suites: T_TestAug, T_GPT (its generated cases only) and T_CheckList."""
    gpt = suite.filter(pc.equal(suite.column("suite"), f"{suite_name}-gpt"))
    return {"T_TestAug": suite, "T_GPT": gpt, "T_CheckList": baseline}


def testaug_table5(suites: Mapping[str, pa.Table], nlp, per_description: int) -> list[dict]:
    """Table 5 layout: Self-BLEU-4 and unique dependency paths (``nlp``: spaCy) of each
    non-empty suite, on the same number of sentences per description."""
    return [
        {"suite": name, **suite_diversity(sentences_by_topic(table), nlp, per_description)}
        for name, table in suites.items()
        if table.num_rows
    ]
