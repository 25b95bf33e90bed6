"""Which inputs each model must score (pure): suites it can answer, optionally sampled.

A model is only run on the suites whose labels it can produce (the others are a
label-map mismatch, reported without spending time on them); a question-answering model
only on the QA suites (task "qa"), and a classifier never on them. For slow models (an LLM
zero-shot classifier scores a few inputs per second on CPU) ``max_cases`` samples the
suites: whole CheckList test cases (an original with all its perturbations), spread over
every test in proportion to its size, chosen by a seeded hash so reruns pick the same ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.expectations import ExpectationSettings, case_groups, label_map_error, wanted_labels
from checkray.engine.benchmark.families import answers
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.schema import TASK_QA


def _rank(seed: int, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}\x1f{key}".encode(), digest_size=8).digest(), "big")


def sample_mask(cases: pa.Table, max_cases: int | None, seed: int = 0) -> np.ndarray:
    """Rows kept when at most ``max_cases`` cases may be run (all when None or enough)."""
    n = cases.num_rows
    if max_cases is None or n <= max_cases:
        return np.ones(n, dtype=bool)
    groups = case_groups(cases)
    tests = list(
        zip(
            cases.column("suite").to_pylist(),
            cases.column("capability").to_pylist(),
            cases.column("topic").to_pylist(),
        )
    )
    rows_of: dict[tuple, dict[str, list[int]]] = {}
    for i, (test, group) in enumerate(zip(tests, groups)):
        rows_of.setdefault(test, {}).setdefault(group, []).append(i)
    keep = np.zeros(n, dtype=bool)
    for by_group in rows_of.values():
        size = sum(len(r) for r in by_group.values())
        quota = max(1, round(max_cases * size / n))
        taken = 0
        for group in sorted(by_group, key=lambda g: _rank(seed, g)):
            if taken >= quota:
                break
            keep[by_group[group]] = True
            taken += len(by_group[group])
    # An INV/DIR case needs the case it perturbs, wherever the sample put it.
    ids = {cid: i for i, cid in enumerate(cases.column("case_id").to_pylist())}
    for p in {p for p, k in zip(cases.column("perturbs").to_pylist(), keep) if k and p is not None}:
        if p in ids:
            keep[ids[p]] = True
    return keep


def model_case_rows(cases: pa.Table, spec: ModelSpec, max_cases: int | None, seed: int) -> np.ndarray:
    """Indices of the cases a model is evaluated on: the sample (``spec.max_cases`` first,
    else ``max_cases``) of every case."""
    return np.flatnonzero(sample_mask(cases, spec.max_cases or max_cases, seed))


def qa_suites(cases: pa.Table) -> set[str]:
    """The suites whose cases ask a question (task "qa")."""
    if "task" not in cases.column_names:
        return set()
    task = np.asarray(cases.column("task").to_pylist(), dtype=object)
    return set(np.asarray(cases.column("suite").to_pylist(), dtype=object)[task == TASK_QA].tolist())


def needed_inputs(
    cases: pa.Table,
    specs: Sequence[ModelSpec],
    settings: ExpectationSettings,
    max_cases: int | None = None,
    seed: int = 0,
) -> dict[str, list[int]]:
    """Per model, the ``input_key`` values it must score: its sampled cases of the suites
    whose labels it can produce (by its spec)."""
    suites = np.asarray(cases.column("suite").to_pylist(), dtype=object)
    keys = cases.column("input_key").to_numpy()
    wanted = wanted_labels(cases)
    qa = qa_suites(cases)
    out = {}
    for spec in specs:
        if answers(spec):  # an answering model reads the QA suites only
            ok = sorted(qa)
        else:
            ok = [
                s
                for s, labels in wanted.items()
                if s not in qa and label_map_error(s, labels, spec.labels, settings) is None
            ]
        rows = model_case_rows(cases, spec, max_cases, seed)
        rows = rows[np.isin(suites[rows], np.asarray(ok, dtype=object))] if ok else rows[:0]
        out[spec.name] = sorted(set(keys[rows].tolist()))
    return out
