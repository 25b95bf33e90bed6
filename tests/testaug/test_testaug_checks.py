"""TestAug's automatic checks: cleaned cases, prompt leaks, near-copies, duplicates,
wrongly labelled and self-contradicting cases rejected with their reasons (and never
expanded), and the polarity checks' false rejections on the hand-written template suite."""

from __future__ import annotations

import json

import pytest

from checkray.actors.spacy_nlp import load_spacy
from checkray.engine.case_checks import rejected_table
from checkray.engine.llm_output import contradiction_reason, polarity_reason
from checkray.engine.templates.expand import expand_template, read_spec
from checkray.engine.testaug import config as testaug_config
from checkray.engine.testaug.expand import ExpansionSettings, expand_cases
from checkray.engine.testaug.generate import ask_round, parse_answers
from checkray.engine.testaug.judges import GeneratedCase, cases_table
from checkray.engine.testaug.prompt import ParseCount, describe_templates, parse_single_cases
from checkray.engine.testaug.suites import build_suites, rejected_rows
from tests.fakes.llm import RuleBasedAugChat
from tests.testaug.test_testaug_job import SPEC


@pytest.fixture
def descs(tmp_path):
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(r) + "\n" for r in SPEC), encoding="utf-8")
    return describe_templates(read_spec(str(spec), None), 10, 0)


def _flawed_round(descs):
    t = testaug_config.TestAugConfig(spec="unused", prompts_per_description=1)
    answers = ask_round(RuleBasedAugChat(malformed_every=0, flawed=True), t, descs, 0, 0, range(len(descs)))
    rejected: list[dict] = []
    kept, parsing = parse_answers(descs, answers, t.near_copy_overlap, rejected)
    return kept, rejected, parsing


def test_an_explanation_label_is_cleaned_off_before_the_case_is_read():
    raw = (
        "Test Case 1:\n- { The script had a dreadful start, but the ending was brilliant. }\n"
        "  - Sentiment: Positive\n"
        "  - Explanation: The story had a terrible start but the ending was amazing.\n"
        'Answer: "The cast had an awful start, but the ending was enjoyable."'
    )
    cases = parse_single_cases(raw, ParseCount())
    assert cases == [
        "The script had a dreadful start, but the ending was brilliant.",
        "The story had a terrible start but the ending was amazing.",
        "The cast had an awful start, but the ending was enjoyable.",
    ]


def test_flawed_answers_are_rejected_with_one_reason_each_and_the_rest_kept_checked(descs):
    kept, rejected, parsing = _flawed_round(descs)
    checks = {r["check"] for r in rejected}
    assert {"prompt leak", "near copy", "polarity", "contradiction"} <= checks
    texts = {r["text"] for r in kept}
    assert "No one enjoys the captain." in texts  # the Explanation: line, cleaned
    assert not any("Explanation" in t or "description" in t or "wonderful, it is" in t for t in texts)
    assert all(r["checks"][:2] == ["artefact", "prompt leak"] and len(r["checks"]) == 7 for r in kept)
    assert all(r["reason"] and r["capability"] and r["expected_label"] for r in rejected)
    assert sum(p["rejected"] for p in parsing) == sum(r["check"] != "duplicate" for r in rejected)
    table = rejected_table(rejected)
    assert table.num_rows == len(rejected) and set(table.column("check").to_pylist()) == checks


def test_seed_copies_and_repeats_are_kept_in_the_rejected_table(descs):
    d = descs[0]
    seed = d.seeds[0].text
    answers = [
        {
            "key": d.key,
            "prompt": 0,
            "answer": f"- {{ {seed} }}\n- {{ A new flight nobody enjoys at all. }}\n"
            "- { a new flight nobody enjoys at all }",
            "finish_reason": "stop",
            "seeds": "[]",
        }
    ]
    rejected: list[dict] = []
    kept, parsing = parse_answers([d], answers, 0.9, rejected)
    assert [r["text"] for r in kept] == ["A new flight nobody enjoys at all."]
    # a seed copied is a near copy of it (overlap 1.0); a case written twice, a duplicate
    assert [r["check"] for r in rejected] == ["near copy", "duplicate"] and parsing[0]["duplicates"] == 1


def test_a_wrongly_labelled_generated_case_is_not_expanded(descs):
    kept, rejected, _ = _flawed_round(descs)
    wrong = "No one admires that food, it is wonderful."
    assert wrong in {r["text"] for r in rejected if r["check"] == "polarity"}
    settings = ExpansionSettings()
    cases = expand_cases(descs, kept, load_spacy("builtin:sm"), settings, 0).select(settings)["data"].to_pylist()
    assert cases and wrong not in {c["source"] for c in cases}
    assert not any("wonderful" in c["text"] for c in cases if c["key"] == "d01")
    assert all(
        c["checks"] == ["artefact", "duplicate", "description_words", "polarity", "contradiction"] for c in cases
    )


def test_suite_rows_carry_their_checks_and_rejections_include_the_validity_filter(descs):
    kept, rejected, _ = _flawed_round(descs)
    judged = [GeneratedCase.from_row(r) for r in kept]
    for i, c in enumerate(judged):
        c.kept, c.decided_by = i % 2 == 0, "llm labeler"
    valid = cases_table(judged)
    expanded = expand_cases(descs, kept[:0], None, ExpansionSettings(), 0).select(ExpansionSettings())
    suite, _, _ = build_suites(
        descs, valid, expanded["data"], suite="testaug", baseline_nsamples=2, generator="fake", seed=0
    )
    assert all(c[-1] == "validity (llm labeler)" and "polarity" in c for c in suite.column("checks").to_pylist())
    table = rejected_rows(rejected_table(rejected), valid, expanded["rejected"], descs, "testaug")
    checks = table.column("check").to_pylist()
    assert checks.count("validity") == sum(not c.kept for c in judged) and "polarity" in checks


def test_the_annotated_demo_failures_are_refused_and_the_paper_shapes_kept():
    assert polarity_reason("The story is not lousy at all, it is very disappointing.", "positive")
    assert contradiction_reason("The plot is not disappointing at all, it is very disappointing.")
    assert contradiction_reason("Doug pray's scratch makes the documentary interesting, leaving you cold.")
    for text, label in [
        ("The film is not poor at all, it is truly remarkable.", "positive"),
        ("The script had a disappointing start but the ending was brilliant.", "positive"),
        ("The service is not enjoyable.", "negative"),
        ("I didn't think this was a great movie.", "negative"),
    ]:
        assert polarity_reason(text, label) is None and contradiction_reason(text) is None, text


def test_the_hand_written_template_suite_is_not_rejected():
    """The polarity checks' false rejections on cases label-valid by construction: none
    in 20 cases of each of the 15 templates (the whole expansion, 2,450 cases: none either)."""
    cases = 0
    for t in read_spec("configs/suites/sentiment_templates.jsonl", None):
        for texts, _ in expand_template(t, 20, 0, 100_000):
            cases += 1
            assert polarity_reason(texts[0], t.label) is None and contradiction_reason(texts[0]) is None, texts
    assert cases == 300


def test_a_case_two_descriptions_wrote_alike_is_kept_once_and_the_repeat_recorded():
    """Read in a TestAug run: "I thought the weather would be rainy, but it wasn't." kept
    under two "I thought ..." descriptions of one label gave two rows of one case id."""
    from checkray.engine.testaug.suites import first_of_each_case

    def row(key, text, label="neutral"):
        return {
            "suite": "testaug-gpt",
            "capability": "Temporal",
            "text": text,
            "text_pair": None,
            "expected_label": label,
            "meta": {"description_key": key},
        }

    rows = [
        row("d14", "It rained."),
        row("d16", "It rained."),
        row("d16", "It rained.", "negative"),
        row("d16", "Sun."),
    ]
    unique, repeats = first_of_each_case(rows)
    assert [(r["meta"]["description_key"], r["expected_label"]) for r in unique] == [
        ("d14", "neutral"),
        ("d16", "negative"),
        ("d16", "neutral"),
    ]
    assert [(r["check"], r["meta"]["description"]) for r in repeats] == [("duplicate", "d16")]
    assert "description d14" in repeats[0]["reason"]
    assert rejected_table(repeats).num_rows == 1
