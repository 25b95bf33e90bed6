"""QA verdicts as CheckList scores its SQuAD suite: answers compared, INV = answer unchanged."""

from __future__ import annotations

from checkray.engine.benchmark.qa import judge_answers, normalize_answer
from checkray.engine.schema import make_cases


def qa_cases():
    ctx = "Ann is taller than Bo."
    rows = [
        {
            "case_id": "m1",
            "suite": "squad",
            "method": "checklist",
            "capability": "Taxonomy",
            "text": ctx,
            "text_pair": "Who is taller?",
            "expected_label": "Ann",
        },
        {
            "case_id": "m2",
            "suite": "squad",
            "method": "checklist",
            "capability": "Taxonomy",
            "text": ctx,
            "text_pair": "Who is shorter?",
            "expected_labels": ["Bo", "Bo."],
        },
        {
            "case_id": "o",
            "suite": "squad",
            "method": "checklist",
            "capability": "Robustness",
            "text": ctx,
            "text_pair": "Who is taller?",
            "test_type": "INV",
            "testcase": "t",
        },
        {
            "case_id": "p1",
            "suite": "squad",
            "method": "checklist",
            "capability": "Robustness",
            "text": ctx,
            "text_pair": "Who is tallr?",
            "test_type": "INV",
            "perturbs": "o",
            "relation": "same",
            "testcase": "t",
        },
        {
            "case_id": "p2",
            "suite": "squad",
            "method": "checklist",
            "capability": "Robustness",
            "text": ctx,
            "text_pair": "Who's taller?",
            "test_type": "INV",
            "perturbs": "o",
            "relation": "same",
            "testcase": "t",
        },
    ]
    return make_cases(rows)


def test_mft_answer_matches_and_inv_answer_unchanged():
    passed, errors = judge_answers(qa_cases(), ["Ann", "Bo.", "Ann", "Ann", "Bo"])
    assert passed.tolist() == [True, True, None, True, False] and errors == [None] * 5


def test_exact_by_default_normalised_on_request():
    cases = qa_cases()
    answers = ["the Ann", "bo", "Ann", "ann!", "Ann"]
    assert judge_answers(cases, answers)[0].tolist() == [False, False, None, False, True]
    assert judge_answers(cases, answers, normalize=True)[0].tolist() == [True, True, None, True, True]
    assert normalize_answer("  The  Eiffel-Tower! ") == "eiffeltower"


def test_missing_answers_are_errors_not_failures():
    passed, errors = judge_answers(qa_cases(), ["Ann", None, None, "Ann", "Ann"])
    assert passed.tolist() == [True, None, None, None, None]
    assert errors[1] == "the model gave no answer" and "has no answer" in errors[3]
