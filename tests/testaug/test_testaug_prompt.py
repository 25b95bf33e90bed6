"""TestAug prompt building, parsing of single and pair cases (incl. malformed answers),
de-duplication and the two-phase validity rule. Pure Python, no models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from checkray.engine.prompts import load_prompt
from checkray.engine.templates.expand import read_spec
from checkray.engine.testaug.prompt import (
    ParseCount,
    dedupe,
    describe_templates,
    format_case,
    parse_pair_cases,
    parse_single_cases,
    prompt_examples,
    sample_seeds,
    seed_keys,
)
from checkray.engine.testaug.validity import THRESHOLDS, parse_validity_answer, phase_decision, threshold_for

NEG = {
    "template": "No one {pos_verb} {the} {air_noun}.",
    "label": 0,
    "capability": "Negation",
    "description": "A negative sentiment sentence with negated positive word.",
    "pool": {
        "pos_verb": ["enjoys", "admires", "appreciates"],
        "the": ["that", "the"],
        "air_noun": ["pilot", "seat", "airline"],
    },
}
PAIR = {
    "template": ["Who do {x} think is the best {noun}?", "Who is the best {noun} according to {x}?"],
    "label": 1,
    "capability": "SRL",
    "description": "Two sentences are equivalent when using according to.",
    "pool": {"x": ["analysts", "students"], "noun": ["footballer", "gamer"]},
}


def _spec(tmp_path, *records):
    path = tmp_path / "spec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return read_spec(path)


def test_descriptions_group_templates_and_draw_seeds(tmp_path):
    second = {**NEG, "template": "Nobody {pos_verb} {the} {air_noun}."}
    descs = describe_templates(_spec(tmp_path, NEG, second, PAIR, PAIR), seeds_per_template=4, seed=0)
    assert [(d.capability, d.label, d.is_pair) for d in descs] == [
        ("Negation", "negative", False),
        ("SRL", "duplicate", True),
    ]
    assert len(descs[0].templates) == 2 and len(descs[0].seeds) == 8
    assert len(descs[1].templates) == 1  # a repeated record adds no template
    assert all(s.text_pair for s in descs[1].seeds)


def test_prompt_has_description_then_three_seed_lines(tmp_path):
    desc = describe_templates(_spec(tmp_path, NEG), seeds_per_template=6, seed=0)[0]
    seeds = sample_seeds(desc, 3, np.random.default_rng(1))
    examples = prompt_examples(seeds)
    messages = load_prompt("testaug_generate").render(description=desc.description, examples=examples, n=5)
    user = messages[-1]["content"].splitlines()
    assert user[0] == "A negative sentiment sentence with negated positive word."
    assert user[1:4] == [f"- {{ {s.text} }}" for s in seeds]
    assert len({s.text for s in seeds}) == 3


def test_pair_format_is_table_7():
    assert (
        format_case("Who do analysts think?", "Who according to analysts?")
        == "- {{ Who do analysts think? }\n- { Who according to analysts? }}"
    )


def test_parse_single_cases_lenient_and_counted():
    raw = (
        "Sure! Here are some sentences:\n"
        "- { No one likes that crew. }\n"
        "- {No one admires the cabin staff.} - { Nobody loves this meal. }\n"
        "3. No one enjoys the landing.\n"
        "I cannot help with that because it is a strange request\n"
        "- { ok }\n"
    )
    count = ParseCount()
    cases = parse_single_cases(raw, count)
    assert cases == [
        "No one likes that crew.",
        "No one admires the cabin staff.",
        "Nobody loves this meal.",
        "No one enjoys the landing.",
    ]
    assert (count.outputs, count.items, count.unparsed) == (1, 4, 2)
    assert any("strange request" in e for e in count.examples)


def test_parse_pair_cases_and_malformed():
    raw = (
        "- {{ Who do readers think is the worst gamer? }\n- { Who is the worst gamer according to readers? }}\n\n"
        "- {{ What do fans think is the best team? } - { What is the best team according to fans? }}\n"
        "- { Who do kids think is the tallest player? }\n"
        "random words without any format here\n"
    )
    count = ParseCount()
    pairs = parse_pair_cases(raw, count)
    assert pairs == [
        ("Who do readers think is the worst gamer?", "Who is the worst gamer according to readers?"),
        ("What do fans think is the best team?", "What is the best team according to fans?"),
    ]
    assert count.items == 2 and count.unparsed == 2  # the lone item and the free text


def test_garbage_answer_gives_no_case_and_never_raises():
    count = ParseCount()
    assert parse_single_cases("", count) == [] and parse_pair_cases("{{{ }}} {", count) == []
    assert count.outputs == 2 and count.items == 0


def test_dedupe_drops_seeds_and_repeats(tmp_path):
    desc = describe_templates(_spec(tmp_path, NEG), seeds_per_template=20, seed=0)[0]
    seen = seed_keys(desc)
    cases = [
        {"text": desc.seeds[0].text.upper()},
        {"text": "No one loves the food."},
        {"text": "no one loves the food"},
        {"text": "Nobody loves the food!"},
    ]
    kept, dropped = dedupe(cases, seen)
    assert [c["text"] for c in kept] == ["No one loves the food.", "Nobody loves the food!"] and dropped == 2


@pytest.mark.parametrize(
    "flags, task, needs",
    [
        ([True] * 9 + [False], "sentiment", False),  # 0.9 >= 0.9: no filter
        ([True] * 8 + [False] * 2, "sentiment", True),
        ([True] * 8 + [False] * 2, "nli", False),  # NLI threshold is 0.8
        ([True] * 17 + [False] * 3, "paraphrase", True),
        ([None, None], "sentiment", True),  # nothing annotated: filter
    ],
)
def test_two_phase_rule(flags, task, needs):
    decision = phase_decision(flags, threshold_for(task), "people")
    assert decision.needs_filter is needs
    assert THRESHOLDS == {"sentiment": 0.9, "paraphrase": 0.9, "nli": 0.8}


def test_llm_verdicts():
    assert parse_validity_answer("Valid.") is True
    assert parse_validity_answer("Invalid: it is positive") is False
    assert parse_validity_answer("The answer is not valid") is False
    assert parse_validity_answer("I think so") is None


def test_small_model_habits_are_parsed_or_counted():
    raw = (
        'Test 1: "This is a beautiful park."\n'
        'Expected Output: "The film was truly outstanding."\n'
        "- A positive sentence with a positive intensifier.\n"
        "- This test case uses an intensifier (lousy) to convey a negative sentiment.\n"
        "- The plot was very terrible.\n"
        "- A negative"
    )
    count = ParseCount()
    cases = parse_single_cases(raw, count, truncated=True)
    assert cases == ["This is a beautiful park.", "The film was truly outstanding.", "The plot was very terrible."]
    assert count.unparsed == 3 and "A negative" in count.examples[0]  # the cut-off last line comes first
