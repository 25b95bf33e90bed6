"""QA verdicts as CheckList scores its SQuAD suite: answers compared as its notebook's
``clean`` reads them; INV = answer unchanged, or renamed as the perturbation renamed."""

from __future__ import annotations

from checkray.engine.benchmark.qa import checklist_clean, judge_answers, normalize_answer
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


def test_checklists_clean_by_default_normalised_on_request():
    cases = qa_cases()
    answers = ["the Ann", "bo", "Ann", "ann!", "Ann"]
    # clean() strips leading characters of "[a,the,an,in,at] " and a final ".": "the Ann" is
    # Ann, "bo" is not Bo; an INV compares the answers as given
    assert judge_answers(cases, answers)[0].tolist() == [True, False, None, False, True]
    assert judge_answers(cases, answers, normalize=True)[0].tolist() == [True, True, None, True, True]
    assert normalize_answer("  The  Eiffel-Tower! ") == "eiffeltower"


def test_missing_answers_are_errors_not_failures():
    passed, errors = judge_answers(qa_cases(), ["Ann", None, None, "Ann", "Ann"])
    assert passed.tolist() == [True, None, None, None, None]
    assert errors[1] == "the model gave no answer" and "has no answer" in errors[3]


def test_checklist_clean_is_the_notebooks_character_strip():
    assert checklist_clean("an engineer.") == checklist_clean("engineer") == "gineer"  # its quirk, both sides
    assert checklist_clean("the Eiffel Tower.") == "Eiffel Tower"


def test_a_renamed_perturbation_expects_the_renamed_answer():
    """CheckList's expect_same: a name changed in the context and the question (meta
    [old, new]) must change the answer the same way; without meta, unchanged."""
    rows = [
        {"case_id": "o", "text": "Ann met Bo in Rome.", "text_pair": "Who met Bo?", "test_type": "INV"},
        {
            "case_id": "r1",
            "text": "Cy met Bo in Rome.",
            "text_pair": "Who met Bo?",
            "test_type": "INV",
            "perturbs": "o",
            "relation": "renamed",
            "meta": {"checklist_meta": ["Ann", "Cy"]},
        },
        {
            "case_id": "r2",
            "text": "Di met Bo in Rome.",
            "text_pair": "Who met Bo?",
            "test_type": "INV",
            "perturbs": "o",
            "relation": "renamed",
            "meta": {"checklist_meta": ["Ann", "Di"]},
        },
    ]
    common = {"suite": "squad", "method": "checklist", "capability": "NER", "testcase": "t"}
    cases = make_cases([{**common, **r} for r in rows])
    assert judge_answers(cases, ["Ann", "Cy", "Ann"])[0].tolist() == [None, True, False]
    assert judge_answers(cases, ["Annabel", "Annabel", "Di"])[0].tolist() == [None, True, False]  # whole words
