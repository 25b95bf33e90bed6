"""Automatic checks of generated cases (engine/case_checks.py) and the annotation
figures people's verdicts give (engine/suite_validity.py)."""

from __future__ import annotations

import json

import pytest

from checkray.engine.case_checks import Check, apply_checks, rejected_table, rejection_summary, row_check
from checkray.engine.errors import InputError
from checkray.engine.schema import make_cases
from checkray.engine.suite_validity import latest_per_case, read_batch, summarize, wilson


def _rows():
    return [
        {"case_id": "a", "text": "A fine film.", "expected_label": "positive"},
        {"case_id": "b", "text": "Explanation: a fine film.", "expected_label": "positive"},
        {"case_id": "c", "text": "A fine film.", "expected_label": "positive"},
        {"case_id": "d", "text": "A dull film.", "expected_label": "negative"},
    ]


def _no_prefix(row):
    return "leftover 'Explanation:' prefix" if row["text"].startswith("Explanation:") else None


def _no_duplicates(rows):
    seen, out = set(), []
    for r in rows:
        out.append(f"duplicate of an earlier case: {r['text']!r}" if r["text"] in seen else None)
        seen.add(r["text"])
    return out


def test_a_case_leaves_at_the_first_check_it_fails_and_keeps_its_reason():
    checks = [row_check("prefix", _no_prefix), Check("dedupe", _no_duplicates)]
    out = apply_checks(_rows(), checks)
    assert [r["case_id"] for r in out.kept] == ["a", "d"]
    assert all(r["checks"] == ["prefix", "dedupe"] for r in out.kept)
    assert [(r["case_id"], r["check"]) for r in out.rejected] == [("b", "prefix"), ("c", "dedupe")]
    assert out.rejected[1]["reason"] == "duplicate of an earlier case: 'A fine film.'"
    assert out.rejected_counts() == {"prefix": 1, "dedupe": 1}
    # nothing silently dropped: every candidate is kept or rejected
    assert len(out.kept) + len(out.rejected) == len(_rows())


def test_rejected_rows_become_a_table_and_a_summary():
    out = apply_checks(_rows(), [row_check("prefix", _no_prefix)])
    table = rejected_table(out.rejected)
    assert table.column("check").to_pylist() == ["prefix"] and table.column("case_id").to_pylist() == ["b"]
    summary = rejection_summary(table, kept=len(out.kept))
    assert summary[0] == {"check": "(kept)", "cases": 3, "share": 0.75}
    assert summary[1]["check"] == "prefix" and summary[1]["cases"] == 1


def test_a_check_must_answer_every_row():
    broken = Check("broken", lambda rows: [None])
    with pytest.raises(ValueError, match="returned 1 verdicts for 4 rows"):
        apply_checks(_rows(), [broken])


def test_a_suite_carries_the_checks_each_case_passed():
    out = apply_checks(_rows()[:1], [row_check("prefix", _no_prefix)])
    table = make_cases([{**r, "suite": "s", "method": "m", "capability": "c"} for r in out.kept])
    assert table.column("checks").to_pylist() == [["prefix"]]


def test_wilson_interval_is_sound_at_the_edges():
    low, high = wilson(0, 10)
    assert low == 0.0 and 0.25 < high < 0.35
    low, high = wilson(100, 100)
    assert high == 1.0 and 0.95 < low < 0.97
    assert wilson(0, 0) == (0.0, 1.0)


def _batch(tmp_path, rows, part="dev"):
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "b.meta.json").write_text(json.dumps({"run": "r", "code_version": "v", "part": part}))
    return path


def test_annotation_batches_summarise_per_generator_and_capability(tmp_path):
    rows = [
        {
            "case_id": str(i),
            "generator": "templates",
            "capability": cap,
            "label_valid": lv,
            "fluent": fl,
            "on_capability": 1,
        }
        for i, (cap, lv, fl) in enumerate([("Negation", 1, 1), ("Negation", 1, 0), ("Vocabulary", 0, 1)])
    ]
    batch = read_batch(_batch(tmp_path, rows))
    table = {(r.generator, r.capability): r for r in summarize(latest_per_case([batch]))}
    whole = table[("templates", "")]
    assert whole.n == 3 and whole.shares["label_valid"].k == 2 and whole.shares["all_three"].k == 1
    assert table[("templates", "Negation")].shares["fluent"].text().startswith("50.0 %")


def test_an_unjudged_or_unknown_row_is_a_one_line_error(tmp_path):
    row = {"case_id": "1", "generator": "templates", "capability": "x", "label_valid": 1, "fluent": None}
    with pytest.raises(InputError, match=r"row 1: no verdict for fluent, on_capability"):
        read_batch(_batch(tmp_path, [row]))
    bad = {"case_id": "1", "generator": "gpt9", "capability": "x", "label_valid": 1, "fluent": 1, "on_capability": 1}
    with pytest.raises(InputError, match="unknown generator 'gpt9'"):
        read_batch(_batch(tmp_path, [bad]))


def test_a_batch_whose_text_holds_a_next_line_character_reads_as_one_row_per_case(tmp_path):
    # Rotten Tomatoes writes an ellipsis as U+0085; str.splitlines() would cut the row in two.
    row = {
        "case_id": "1",
        "generator": "costello_cr1",
        "capability": "CR1",
        "text": "a long wait\x85 worth it .",
        "label_valid": 1,
        "fluent": 1,
        "on_capability": 1,
    }
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    (tmp_path / "b.meta.json").write_text(json.dumps({"run": "r", "code_version": "v", "part": "dev"}))
    batch = read_batch(path)
    assert [c.row["text"] for c in batch.cases] == ["a long wait\x85 worth it ."]
