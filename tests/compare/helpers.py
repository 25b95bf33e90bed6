"""Tiny suites and in-process (no Ray) results for the comparison tests.

The two fake models of ``tests/fakes/models.py`` differ on one capability: ``naive``
ignores negation, ``keyword`` understands it. On ``regress_suite()``:

* Vocabulary (12 template cases, "This is a good movie."): both pass every case.
* Negation (9 template cases, "This movie is not good."): naive fails all 9, keyword passes all.
* Robustness (INV): 2 originals with 3 perturbations; "but the popcorn was bad" flips the
  keyword model's prediction (fail) while naive's also flips (fail); "said Maria" passes both.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

from checkray.engine.benchmark.expectations import ExpectationSettings
from checkray.engine.benchmark.inputs import prepare_cases
from checkray.engine.benchmark.results import model_results
from checkray.engine.schema import make_cases
from checkray.engine.templates.expand import expand, read_spec
from tests.fakes import models as fake

SPEC = [
    {
        "capability": "Vocabulary",
        "template": "This is {a:adj} {noun}.",
        "label": "positive",
        "pool": {"adj": ["good", "great", "excellent", "fun"], "noun": ["movie", "film", "plot"]},
    },
    {
        "capability": "Negation",
        "template": "This {noun} is not {adj}.",
        "label": "negative",
        "pool": {"adj": ["good", "great", "fun"], "noun": ["movie", "film", "plot"]},
    },
]


def write_spec(folder: Path) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def regress_suite(folder: Path | None = None, suite: str = "regress") -> pa.Table:
    """The template cases plus a small INV test (see the module docstring)."""
    import tempfile

    where = Path(folder or tempfile.mkdtemp())
    templates = expand(read_spec(write_spec(where)), suite=suite, nsamples=None).cases
    inv = make_cases(
        [
            {
                "case_id": "o-0",
                "suite": suite,
                "method": "hand",
                "capability": "Robustness",
                "text": "a good movie",
                "test_type": "INV",
            },
            {
                "case_id": "o-1",
                "suite": suite,
                "method": "hand",
                "capability": "Robustness",
                "text": "a great film",
                "test_type": "INV",
            },
            {
                "case_id": "p-0",
                "suite": suite,
                "method": "hand",
                "capability": "Robustness",
                "text": "a good movie, said Maria",
                "test_type": "INV",
                "perturbs": "o-0",
                "relation": "same",
            },
            {
                "case_id": "p-1",
                "suite": suite,
                "method": "hand",
                "capability": "Robustness",
                "text": "a great film but the popcorn was bad and awful",
                "test_type": "INV",
                "perturbs": "o-1",
                "relation": "same",
            },
            {
                "case_id": "p-2",
                "suite": suite,
                "method": "hand",
                "capability": "Robustness",
                "text": "a good movie with Maria",
                "test_type": "INV",
                "perturbs": "o-0",
                "relation": "same",
            },
        ]
    )
    return pa.concat_tables([templates, inv])


def results_for(cases: pa.Table, model: str) -> pa.Table:
    """A benchmark results table of one fake model, computed in-process."""
    fn = {"naive": fake.naive_sentiment, "keyword": fake.keyword_sentiment}[model]
    prepared, inputs = prepare_cases([cases])
    probs = np.asarray(fn(inputs.column("text").to_pylist()), dtype=np.float32)
    return model_results(prepared, model, ["negative", "positive"], None, probs, ExpectationSettings())


def registry(folder: Path) -> Path:
    path = folder / "models.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {"name": "naive", "family": "callable", "path": "tests.fakes.models:naive_sentiment"},
                    {"name": "keyword", "family": "callable", "path": "tests.fakes.models:keyword_sentiment"},
                ]
            }
        )
    )
    return path


def fake_run(folder: Path, suite: pa.Table, models=("naive", "keyword")) -> Path:
    """A benchmark run directory written by hand (results, manifest, the suite as its cases
    checkpoint), for tests of what reads finished runs without starting Ray."""
    import json

    import pyarrow.parquet as pq

    from checkray.engine.benchmark.inputs import prepare_cases

    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.concat_tables([results_for(suite, m) for m in models]), folder / "results.parquet")
    (folder / "stages" / "cases").mkdir(parents=True)
    pq.write_table(prepare_cases([suite])[0], folder / "stages" / "cases" / "data.parquet")
    (folder / "manifest.json").write_text(json.dumps({"job": "benchmark", "published": ["results.parquet"]}))
    return folder
