"""The validity filter's two phases (``engine/testaug/judges.py``) over plain records, with
a stand-in classifier and labeler: who annotates phase 1, which descriptions are filtered,
who decides each case in phase 2, and the decision table; Table 3's layout."""

from __future__ import annotations

import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.testaug import tables  # not its functions: pytest would collect testaug_* as tests
from checkray.engine.testaug.judges import (
    CaseJudges,
    GeneratedCase,
    add_topup,
    cases_table,
    decision_rows,
    judge_cases,
    judge_new_cases,
    read_cases,
)
from checkray.engine.testaug.prompt import Description, SeedCase

NEGATED = "A negative sentence with a negated positive verb."
PRAISE = "A positive sentence with a positive adjective."
DESCS = [
    Description("d01", "Negation", NEGATED, "negative", False, [], [SeedCase("No one likes it.", None, "t1", {})]),
    Description("d02", "Vocabulary", PRAISE, "positive", False, []),
]


class Covers:
    """A classifier trained for d01's description only: valid unless the text says 'really'."""

    threshold = 0.5
    reads_description = False

    def covers(self, description: str) -> bool:
        return description == NEGATED

    def predict_proba(self, texts):
        return [0.1 if "really" in t else 0.9 for t in texts]


def _labeler(asked: list[dict]):
    def label(requests):
        asked.extend(requests)
        return [None if "hmm" in r["text"] else "pilot" not in r["text"] for r in requests]

    return label


def _cases(key: str, texts: list[str]) -> list[GeneratedCase]:
    return [GeneratedCase(key, 0, t, None, "[]") for t in texts]


def test_phase_one_picks_the_annotator_and_phase_two_the_decider():
    d01 = _cases("d01", ["No one enjoys the pilot.", "No one likes the crew.", "No one really likes it.", "x"])
    d02 = _cases("d02", ["The pilot was great.", "The seat was fun.", "hmm", "The food was good."])
    cases = d01 + d02
    people = {("", "no one likes the crew", ""): 1}  # one of d01's first sample: people annotate d01
    asked: list[dict] = []
    judges = CaseJudges(DESCS, people=people, classifier=Covers(), labeler=_labeler(asked), labeler_examples=1)
    decisions = judge_cases(cases, DESCS, judges, first_sample=3, threshold=0.9)

    assert [c.first_sample for c in cases] == [True, True, True, False] * 2
    assert decisions["d01"].source == "people" and decisions["d01"].n == 1 and not decisions["d01"].needs_filter
    assert decisions["d02"].source == "llm" and decisions["d02"].valid_share == 0.5 and decisions["d02"].needs_filter
    assert {c.decided_by for c in d01} == {"no filter (phase 1)"} and all(c.kept for c in d01)
    assert [c.valid_clf for c in d01] == [1, 1, 0, 1] and all(c.valid_clf is None for c in d02)
    # d02 is filtered: its first sample was labelled in phase 1, the fourth case in phase 2
    assert [(c.kept, c.decided_by) for c in d02] == [
        (False, "llm labeler"),
        (True, "llm labeler"),
        (True, "unfiltered (no classifier or labeler)"),  # the labeler named no verdict
        (True, "llm labeler"),
    ]
    # never a case of d01; a case the labeler named no verdict for is asked again in phase 2
    assert [r["text"] for r in asked] == [c.text for c in d02[:3]] + ["hmm", "The food was good."]
    assert asked[0]["description"] == PRAISE and asked[0]["examples"] == []

    rows = {r["key"]: r for r in decision_rows(cases, DESCS, decisions, judges.judged)}
    assert rows["d01"]["classifier"] and not rows["d02"]["classifier"]
    assert (rows["d02"]["generated"], rows["d02"]["kept"], rows["d02"]["dropped"]) == (4, 3, 1)
    assert rows["d01"]["classifier_accuracy"] == 1.0 and rows["d01"]["classifier_vs_llm"] is None

    again = read_cases(cases_table(cases))
    assert again == cases  # the stage's table holds every field of the records


def test_without_labeler_the_classifier_annotates_what_it_covers():
    cases = _cases("d01", ["No one enjoys it.", "No one really likes it."]) + _cases("d02", ["Great seat."])
    judges = CaseJudges(DESCS, classifier=Covers())
    decisions = judge_cases(cases, DESCS, judges, first_sample=5, threshold=0.9)
    assert decisions["d01"].source == "classifier" and decisions["d01"].valid_share == 0.5
    assert decisions["d02"].source == "none" and decisions["d02"].needs_filter  # nothing annotated: filter
    assert [(c.kept, c.decided_by) for c in cases] == [
        (True, "classifier"),
        (False, "classifier"),
        (True, "unfiltered (no classifier or labeler)"),
    ]


def test_top_up_cases_are_judged_as_phase_two_and_counted():
    asked: list[dict] = []
    judges = CaseJudges(DESCS, labeler=_labeler(asked), labeler_examples=1)
    new = _cases("d01", ["Nobody likes the pilot.", "Nobody likes the seat."]) + _cases("d02", ["Fun."])
    judge_new_cases(new, judges, {"d01": True, "d02": False})
    assert [(c.kept, c.decided_by, c.first_sample) for c in new] == [
        (False, "llm labeler", False),
        (True, "llm labeler", False),
        (True, "no filter (phase 1)", False),
    ]
    assert len(asked) == 2 and asked[0]["examples"] == ["No one likes it."]  # d01's seed shown as valid
    before = [
        {"key": "d01", "generated": 4, "kept": 2, "dropped": 2},
        {"key": "d02", "generated": 1, "kept": 1, "dropped": 0},
    ]
    after = add_topup(before, new, {"d01": 1, "d02": 1})
    assert after[0] == {"key": "d01", "generated": 6, "kept": 3, "dropped": 3, "topup_prompts": 1, "topup_cases": 2}
    assert list(after[1]) == ["key", "generated", "kept", "dropped", "topup_prompts", "topup_cases"]


def test_table3_reports_mean_and_std_over_seeds_in_percent():
    rows = [
        {"model": "m", "seed": s, "column": c, "failure_rate": r}
        for s, c, r in [
            (11, "Unpatched", 0.5),
            (14, "Unpatched", 0.7),
            (11, "T_TestAug", 0.2),
            (14, "T_TestAug", float("nan")),
        ]
    ]
    spec = ModelSpec(name="m", family="sklearn", path="/m.joblib", accuracy=0.8)
    (line,) = tables.testaug_table3(rows, [spec])
    assert line["model"] == "m" and line["Original"] == "20.0"
    assert line["Unpatched"] == "60.0±14.1" and line["T_TestAug"] == "20.0±0.0"  # NaN runs are left out
    assert line["T_CheckList"] == ""  # no run of that suite
    assert pa.Table.from_pylist([line]).num_columns == 7
