"""``bench/annotate.py``'s draw: a case read before is not drawn again, even when the run
that made it numbered its triples differently."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _annotate():
    spec = importlib.util.spec_from_file_location("annotate", ROOT / "bench" / "annotate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cases_read_before_are_left_out_by_id_or_by_texts(tmp_path):
    annotate = _annotate()
    triple = dict(capability="CR3", text="It is bad.", text_pair=None, closer="It is awful.", farther="It is good.")
    batch = tmp_path / "read.jsonl"
    batch.write_text(json.dumps({"case_id": "t7", **triple}) + "\n" + json.dumps({"case_id": "c1", "text": "x"}) + "\n")
    pool = [
        {"case_id": "t9", **triple},  # the same triple, renumbered by a later run
        {"case_id": "c1", "capability": "CR1", "text": "y"},  # the same id
        {"case_id": "t8", **triple, "farther": "It is great."},
    ]
    assert [u["case_id"] for u in annotate.unread_units(pool, [batch])] == ["t8"]
    assert annotate.unread_units(pool, []) == pool


def test_testaug_yield_counts_every_description_prompted(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    annotate = _annotate()
    run = tmp_path / "testaug"
    (run / "stages" / "generate").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"config": {}}))
    # three descriptions prompted (two prompts of d1), one of them kept cases
    pq.write_table(pa.table({"key": ["d1", "d1", "d2", "d3"]}), run / "stages" / "generate" / "data.parquet")
    cases = [{"description": "A positive sentence."}] * 6
    monkeypatch.setattr(annotate, "units_of_run", lambda root: ({"testaug": cases}, {}))
    monkeypatch.setattr(annotate, "job_runs", lambda root: [("testaug", run)])
    assert annotate.run_yields(tmp_path) == {"testaug": "2.00 per description (6/3)"}


def test_a_census_carries_the_verdict_given_to_the_same_texts(tmp_path):
    annotate = _annotate()
    triple = dict(capability="CR1", text="It is bad.", text_pair=None, closer="It is awful.", farther="It is good.")
    verdicts = dict(label_valid=1, fluent=0, on_capability=1)
    old = tmp_path / "final-x-costello_cr1.jsonl"
    old.write_text(
        json.dumps({"case_id": "t1", **triple, **verdicts, "note": "a slip"})
        + "\n"
        + json.dumps({"case_id": "t2", **triple, "closer": "It is poor.", "label_valid": None})
        + "\n"
    )
    pool = [{"case_id": "t5", **triple}, {"case_id": "t6", **triple, "closer": "It is poor."}]
    rows = annotate.carried_rows(pool, annotate.judged_by_texts([old]))
    assert rows[0]["case_id"] == "t5" and {k: rows[0][k] for k in verdicts} == verdicts
    assert rows[0]["note"] == "carried from final-x-costello_cr1: a slip"
    assert rows[1]["label_valid"] is None and rows[1]["note"] == ""  # judged nowhere: left to judge
