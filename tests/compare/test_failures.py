"""export-failures: failing cases with training labels, originals, template neighbours."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from checkray.engine.benchmark.inputs import check_suite
from checkray.engine.compare.neighbours import neighbours, observed_pools
from checkray.engine.errors import InputError
from checkray.engine.templates.expand import expand, read_spec
from checkray.jobs.compare.failures import export_failures
from tests.compare.helpers import fake_run, regress_suite, write_spec


def test_failing_cases_with_labels_and_originals(tmp_path):
    run = fake_run(tmp_path / "run", regress_suite(tmp_path))
    out = export_failures(str(run), tmp_path / "f.parquet")
    rows = out.to_pylist()
    fails = [r for r in rows if r["source"] == "failure"]
    # naive fails the 9 negations and the INV 'popcorn' case; keyword fails the INV case only
    assert len(fails) == 10
    negation = [r for r in fails if r["capability"] == "Negation"]
    assert {r["label"] for r in negation} == {"negative"} and all(r["failed_by"] == ["naive"] for r in negation)
    assert all(r["predicted"] == ["positive"] for r in negation)
    (inv,) = [r for r in fails if r["test_type"] == "INV"]
    assert inv["case_id"] == "p-1" and inv["failed_by"] == ["naive", "keyword"] and inv["label"] is None
    (original,) = [r for r in rows if r["source"] == "original"]
    assert original["case_id"] == "o-1"
    # The Parquet file is a suite: it validates and its perturbs ids resolve.
    check_suite(pq.read_table(tmp_path / "f.parquet"), "f.parquet")
    only = export_failures(str(run), tmp_path / "k.jsonl", models=["keyword"])
    assert [r["case_id"] for r in only.to_pylist()] == ["p-1", "o-1"]
    lines = [json.loads(x) for x in (tmp_path / "k.jsonl").read_text().splitlines()]
    assert lines[0]["id"] == "p-1" and lines[0]["text"].startswith("a great film but") and "label" in lines[0]


def test_neighbours_from_the_suite_and_from_the_spec(tmp_path):
    spec = write_spec(tmp_path)
    suite = expand(read_spec(spec), suite="regress", nsamples=4, seed=1).cases  # 4 of 12 and 4 of 9 combinations
    run = fake_run(tmp_path / "run", suite, models=("naive",))
    observed = export_failures(str(run), tmp_path / "o.jsonl", neighbours_per_case=3).to_pylist()
    fails = [r for r in observed if r["source"] == "failure"]
    near = [r for r in observed if r["source"] == "neighbour"]
    assert len(fails) == 4 and near
    texts = set(suite.column("text").to_pylist())
    for r in near:
        assert r["text"] not in texts  # never a case of the suite (no held-out case leaks)
        assert r["label"] == "negative" and r["capability"] == "Negation" and r["neighbour_of"]
        meta = json.loads(r["meta"])
        parent = next(f for f in fails if f["case_id"] == r["neighbour_of"])
        changed = [k for k in meta["fillings"] if meta["fillings"][k] != json.loads(parent["meta"])["fillings"][k]]
        assert changed == [meta["changed_slot"]]
    assert len({r["text"] for r in near}) == len(near)
    # With the spec, the slots take every value of their pools: at least as many neighbours.
    full = export_failures(str(run), tmp_path / "s.jsonl", neighbours_per_case=10, spec=spec).to_pylist()
    assert sum(r["source"] == "neighbour" for r in full) >= len(near)
    again = export_failures(str(run), tmp_path / "o2.jsonl", neighbours_per_case=3).to_pylist()
    assert again == observed  # seeded


def test_a_case_without_a_template_has_no_neighbours(tmp_path):
    suite = regress_suite(tmp_path)
    rows = {r["case_id"]: r for r in suite.to_pylist()}
    assert neighbours(rows["p-1"], observed_pools(suite), set(), 5) == []


def test_bad_inputs(tmp_path):
    run = fake_run(tmp_path / "run", regress_suite(tmp_path))
    with pytest.raises(InputError, match="must end in .jsonl"):
        export_failures(str(run), tmp_path / "f.csv")
    with pytest.raises(InputError, match="no model nobody"):
        export_failures(str(run), tmp_path / "f.jsonl", models=["nobody"])
    with pytest.raises(InputError, match="not a finished 'benchmark' run"):
        export_failures(str(tmp_path), tmp_path / "f.jsonl")
    edited = regress_suite(tmp_path)
    texts = edited.column("text").to_pylist()
    texts = [t.replace("not", "never") for t in texts]
    edited = edited.set_column(edited.schema.get_field_index("text"), "text", pa.array(texts))
    pq.write_table(edited, tmp_path / "edited.parquet")
    with pytest.raises(InputError, match="differ from what the run tested"):
        export_failures(str(run), tmp_path / "f.jsonl", suite_files=[str(tmp_path / "edited.parquet")])
