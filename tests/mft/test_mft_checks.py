"""The MFT job's automatic checks: artefacts cleaned off, prompt leaks, near-copies of the
representative, self-contradictions and duplicates (within and across versions) rejected
with their reasons; the kept cases carry the checks they passed."""

from __future__ import annotations

from contextlib import nullcontext

import pyarrow as pa

from checkray.actors.spacy_nlp import load_spacy
from checkray.engine.case_checks import REJECTED_SCHEMA
from checkray.engine.llm_output import pair_pronoun_reason, prompt_leak_reason, word_overlap
from checkray.engine.mft.checks import one_sentence_reason, prompt_instructions, sentence_count
from checkray.engine.mft.config import MFTConfig
from checkray.engine.mft.generation import (
    CASE_ROW_SCHEMA,
    VersionTarget,
    collect_versions,
    generate_version,
    version_tables,
)
from checkray.engine.mft.parsing import ParseStats, parse_mft_cases, parse_paraphrases
from checkray.engine.mft.suite import GateLog, to_suite
from tests.fakes.llm import RuleBasedChat
from tests.mft.test_mft_gates import DOCS, _embed

LEIGH = (  # the demo's representative rotten_tomatoes-3105
    "[leigh] has a true talent for drawing wrenching performances from his actors ( improvised over many months ) "
    "and for conveying the way tiny acts of kindness make ordinary life survivable ."
)


class _FlawedChat(RuleBasedChat):
    def __init__(self):
        super().__init__(flawed=True)

    def step(self, label, total):
        return nullcontext()


def test_labels_and_commentary_are_cleaned_off_before_parsing():
    raw = (
        "Test Case 1: mood\nCustomer Review: Explanation: The soundtrack alone is worth the ticket.\n"
        'Test Case 2: cast\nCustomer Review: "The cast is superb." (This review is positive.)'
    )
    assert [r for _, r in parse_mft_cases(raw)] == ["The soundtrack alone is worth the ticket.", "The cast is superb."]
    raw = '1. Rephrased review: "A fine cast."\n2. Answer: The cast is fine - Sentiment: Positive\n3. Sentence 3: A great cast.'
    assert parse_paraphrases(raw, "The cast is superb.", 3, ParseStats()) == [
        "A fine cast.",
        "The cast is fine",
        "A great cast.",
    ]


def test_near_copies_of_the_representative_are_refused_at_the_stated_threshold():
    near = (
        "leigh is a true talent for drawing wrenching performances from his actors and for conveying "
        "the way tiny acts of kindness make ordinary life survivable."
    )
    assert word_overlap(near, LEIGH) >= MFTConfig().near_copy_overlap  # annotated: a near-copy
    reworded = (
        "Leigh's talent for drawing wrenching performances from his actors and conveying the way tiny acts "
        "of kindness make ordinary life survivable is evident."
    )
    assert word_overlap(reworded, LEIGH) < MFTConfig().near_copy_overlap  # annotated: fine


def test_flawed_answers_are_rejected_with_reasons_and_the_kept_cases_carry_their_checks():
    m = MFTConfig(paraphrases=1, label_words={"positive": "positive", "negative": "negative"})
    rejected: list[dict] = []
    target = VersionTarget("test", 1, 7)
    cases = generate_version(DOCS, DOCS, m, _FlawedChat(), _embed, target, GateLog(), rejected, parse=load_spacy())
    reasons = {r["check"]: r["reason"] for r in rejected}
    checks = {"one sentence", "pair pronoun", "prompt leak", "near copy", "duplicate", "polarity", "contradiction"}
    assert checks | {"llm label"} <= set(reasons)
    assert "'neither' stands for a pair" in reasons["pair pronoun"]
    assert "minimum" in reasons["prompt leak"] or "functional" in reasons["prompt leak"]
    texts = [c["text"] for c in cases]
    assert not any(d["text"] in texts for d in DOCS)  # no representative copied
    # a near-copy is still paraphrased (its paraphrases checked against the representative)
    copied = {d["text"] for d in DOCS}
    assert any(r.get("paraphrase_of") in copied for r in [*rejected, *cases])
    assert not any("minimum" in t or "Explanation" in t or "truly terrible" in t or "neither" in t for t in texts)
    assert len(texts) == len({t.lower() for t in texts})
    for c in cases:
        assert c["checks"][:7] == [
            "artefact",
            "one sentence",
            "pair pronoun",
            "prompt leak",
            "near copy",
            "polarity",
            "contradiction",
        ]
        assert c["checks"][-1] == "llm label"
    tables = version_tables(cases, GateLog(), rejected)
    assert tables["rejected"].schema == REJECTED_SCHEMA and tables["rejected"].num_rows == len(rejected)
    assert all(r["suite"] and r["expected_label"] and r["source"] for r in tables["rejected"].to_pylist())
    suite = to_suite(tables["data"].append_column("mft_topic", pa.array(["t"] * len(cases))), generator="fake")
    assert all(c and c[-1] == "llm label" for c in suite.column("checks").to_pylist())


def test_duplicates_across_versions_are_removed_and_kept_with_their_reason():
    def case(text, version):
        return {
            "text": text,
            "label": "positive",
            "source_id": "p1",
            "source_topic": "0_film",
            "split": "test",
            "version": version,
            "checks": ["duplicate"],
        }

    parts = [
        version_tables([case("A fine film.", 1), case("Great cast.", 1)], GateLog()),
        version_tables([case("a fine film", 2), case("A warm story.", 2)], GateLog()),
    ]
    merged = collect_versions(parts)
    assert merged["data"].schema == CASE_ROW_SCHEMA
    assert merged["data"].column("text").to_pylist() == ["A fine film.", "Great cast.", "A warm story."]
    (row,) = merged["rejected"].to_pylist()
    assert row["check"] == "duplicate across versions" and row["text"] == "a fine film"


def test_neither_or_both_of_a_pair_the_sentence_never_names_is_refused():
    nlp = load_spacy()
    # read in a demo MFT: its source named "both the crime story and the love story"
    demo = "One crime story is unusual but it doesn't fit well together, and neither is well told."
    assert "'neither' stands for a pair" in pair_pronoun_reason(demo, nlp)
    assert pair_pronoun_reason("Both are great.", nlp)
    fine = [
        "both the crime story and the love story are unusual . but they don't fit well together and neither is well told .",
        "The acting and the script are weak, and neither is worth your time.",
        "The leads are fine but neither is memorable.",
        "Neither film works.",  # a determiner
        "I liked both of them.",
        "It's not a particularly good film , but neither is it a monsterous one .",  # inversion: "nor"
        "And neither do cliches , no matter how ` inside ' they are .",
        "Muccino either does n't notice when his story ends or just ca n't tear himself away .",
    ]
    for text in fine:
        assert pair_pronoun_reason(text, nlp) is None, text


def test_an_mft_is_one_sentence():
    # annotated demo answers: the second sentence is where they leave the review
    assert one_sentence_reason(
        "Good documentary can make interesting a subject you thought would leave you cold. "
        "A case in point: doug pray's scratch."
    )
    assert one_sentence_reason(
        "Lame comedy is a type of comedy that does not include any humor or any plot elements. "
        "It's a very basic and simple comedy that lacks any entertainment or plot elements."
    )
    # one sentence: a spaced ellipsis, abbreviations, initials
    assert one_sentence_reason("The film is . . . quite amusing as you peek at it through the fingers.") is None
    assert one_sentence_reason("Mr. Lee and J. J. Abrams make the U.S. remake soar!") is None
    assert sentence_count("It was fine... Then it got better. Really!") == 3


def test_a_prompt_word_is_a_leak_in_any_inflection():
    # an at-size answer of the 1.5B coder model, which passed when only "test" was matched
    instructions = prompt_instructions("mft_generate")
    family = 'almost everyone growing up believes their family must look like " the addams family "'
    leak = "The tone is soft and gentle, testing the accuracy of family photos without any harsh criticism or sarcasm."
    assert "testing" in (prompt_leak_reason(leak, instructions, [family]) or "")
    # the same word in the representative is the review's own
    assert prompt_leak_reason(leak, instructions, [family + " , a test of nerves"]) is None
    assert prompt_leak_reason("The pace of the film is brisk and never rushed.", instructions, [family]) is None
