"""TestAug template expansion (§4.3) on the paper's example, Self-BLEU-4 on hand-computed
cases (serial and as Ray tasks) and dependency paths."""

from __future__ import annotations

import json
import math

import pytest

from checkray.actors.spacy_nlp import load_spacy
from checkray.engine.templates.expand import read_spec
from checkray.engine.testaug.diversity import bleu_against_others, dependency_paths, self_bleu, token_paths
from checkray.engine.testaug.expand import case_template, expand_new_template, seed_candidates
from checkray.engine.testaug.prompt import SeedCase

SEED_RECORD = {
    "template": "No one {pos_verb} {the} {air_noun}.",
    "label": 0,
    "capability": "Negation",
    "description": "A negative sentiment sentence with negated positive word.",
    "pool": {
        "pos_verb": ["enjoys", "admires", "appreciates"],
        "the": ["that", "the"],
        "air_noun": ["airline", "seat", "pilot", "service", "plane", "aircraft", "crew", "captain"],
    },
}


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("builtin:sm")


@pytest.fixture
def seed_template(tmp_path):
    path = tmp_path / "spec.jsonl"
    path.write_text(json.dumps(SEED_RECORD) + "\n", encoding="utf-8")
    return read_spec(path)[0]


def _seed(t, verb="appreciates", the="that", noun="airline"):
    return SeedCase(
        f"No one {verb} {the} {noun}.", None, t.template_id, {"pos_verb": verb, "the": the, "air_noun": noun}
    )


def test_paper_example_slot_detection(nlp, seed_template):
    cands = seed_candidates([_seed(seed_template)], {seed_template.template_id: seed_template})
    new = case_template([nlp("No one appreciates that air traffic controller.")], cands)
    assert new.texts == ["No one {pos_verb} that air traffic controller."]  # 'that' is not a content word
    template, cases = expand_new_template(new, "Negation", "negative", SEED_RECORD["description"], 10, 0, "t")
    assert sorted(texts[0] for texts, _ in cases) == sorted(
        f"No one {v} that air traffic controller." for v in ("enjoys", "admires", "appreciates")
    )


def test_two_words_of_one_slot_become_two_slots(nlp, seed_template):
    seeds = [_seed(seed_template, noun="plane"), _seed(seed_template, verb="admires", noun="aircraft")]
    new = case_template(
        [nlp("No one admires the plane. No one admires the aircraft.")],
        seed_candidates(seeds, {seed_template.template_id: seed_template}),
    )
    assert new.texts == ["No one {pos_verb} the {air_noun}. No one {pos_verb} the {air_noun2}."]
    _, cases = expand_new_template(new, "Negation", "negative", "d", 20, 0, "t")
    # the artifacts of the pool (airline, plane, aircraft), two different ones, 3 verbs
    assert len(cases) == 18 and all(
        c[0][0].split(". ")[0].split()[-1] != c[0][0].split()[-1].rstrip(".") for c in cases
    )  # {air_noun} and {air_noun2} never take the same noun


def test_a_noun_slot_is_filled_with_its_kind_of_noun(nlp, seed_template):
    """Read at size: "The pilot was unhappy." expanded to "The airline was unhappy.", "The
    service was unhappy."; a slot that held a person takes persons only."""
    templates = {seed_template.template_id: seed_template}
    new = case_template(
        [nlp("The pilot was unhappy.")], seed_candidates([_seed(seed_template, noun="pilot")], templates)
    )
    assert new.texts == ["The {air_noun} was unhappy."] and new.slots["air_noun"].pool == ["pilot", "captain"]
    _, cases = expand_new_template(new, "Negation", "negative", "d", 10, 0, "t")
    assert sorted(c[0][0] for c in cases) == ["The captain was unhappy.", "The pilot was unhappy."]
    # a slot that held no noun keeps the whole pool
    new = case_template(
        [nlp("No one admires that crew.")],
        seed_candidates([_seed(seed_template, verb="admires", noun="crew")], templates),
    )
    assert new.slots["pos_verb"].pool == SEED_RECORD["pool"]["pos_verb"]


def test_pool_matching_and_articles(nlp, seed_template):
    templates = {seed_template.template_id: seed_template}
    doc = nlp("This is not an easy service to appreciate.")
    assert case_template([doc], seed_candidates([_seed(seed_template)], templates)) is None  # 'service' not filled
    new = case_template([doc], seed_candidates([_seed(seed_template)], templates, match="pool"))
    assert new.texts == ["This is not an easy {air_noun} to appreciate."]  # Table 12, first row
    new = case_template(
        [nlp("I would never call it a plane worth the money.")],
        seed_candidates([_seed(seed_template, noun="plane")], templates),
    )
    assert new.texts == ["I would never call it {a:air_noun} worth the money."]
    _, cases = expand_new_template(new, "Negation", "negative", "d", 10, 0, "t")
    assert "I would never call it an airline worth the money." in [c[0][0] for c in cases]


def test_self_bleu_hand_computed():
    # "a b c d e" vs "a b c d f": precisions 4/5, 3/4, 2/3, 1/2, equal lengths (BP = 1)
    expected = (4 / 5 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25
    assert bleu_against_others(["a b c d e", "a b c d f"], [0, 1]) == pytest.approx([expected, expected], abs=1e-4)
    assert self_bleu(["a b c d e", "a b c d f"]) == pytest.approx(expected, abs=1e-4)
    assert self_bleu(["the cat sat down", "the cat sat down"]) == pytest.approx(1.0)
    assert self_bleu(["one two three four", "five six seven eight"]) == pytest.approx(0.0, abs=1e-9)
    assert math.isnan(self_bleu(["alone"]))


def test_self_bleu_equals_sacrebleu_sentence_score():
    from sacrebleu.metrics import BLEU

    sents = [
        "the seat was not good",
        "the seat was good",
        "no one likes the seat",
        "the the seat seat was",
        "a b",
        "no one likes that crew at all , really",
        "the seat was not good",
    ]
    scorer = BLEU(max_ngram_order=4, effective_order=True)
    expected = [scorer.sentence_score(s, sents[:i] + sents[i + 1 :]).score / 100 for i, s in enumerate(sents)]
    assert bleu_against_others(sents, range(len(sents))) == pytest.approx(expected, abs=1e-12)


@pytest.mark.timeout(120)
def test_self_bleu_ray_tasks_equal_serial(ray_session):
    words = "flight seat crew food pilot airline service cabin plane staff".split()
    sents = [f"the {a} was not as {b} as the {c}" for a in words for b in ("good", "bad") for c in words[:3]]
    assert len(sents) == 60
    assert self_bleu(sents, chunks=3, min_parallel=2) == pytest.approx(self_bleu(sents, parallel=False), abs=1e-12)


def test_dependency_paths(nlp):
    assert token_paths(nlp("I love chicken")) == {"PRON→VERB", "VERB→NOUN", "PRON→VERB→NOUN"}
    two = token_paths(nlp("I love chicken. We hate fish."))  # two trees: no path across them
    assert two == token_paths(nlp("I love chicken.")) | token_paths(nlp("We hate fish."))
    unique, mean = dependency_paths(["I love chicken", "I love chicken", "We hate the long flight ."], nlp)
    assert (
        mean > 3
        and unique > 3
        and unique == len(token_paths(nlp("I love chicken")) | token_paths(nlp("We hate the long flight .")))
    )


def test_closest_other_length_matches_sacrebleu():
    import random
    from collections import Counter

    from sacrebleu.metrics import BLEU

    from checkray.engine.testaug.diversity import _closest_other_length

    rng = random.Random(0)
    scorer = BLEU()
    for _ in range(300):
        lens = [rng.randint(1, 12) for _ in range(rng.randint(2, 8))]
        counts, sizes = Counter(lens), sorted(set(lens))
        for i, h in enumerate(lens):
            assert _closest_other_length(h, counts, sizes) == scorer._get_closest_ref_len(h, lens[:i] + lens[i + 1 :])


# ---------------------------------------------------------------- the LM fluency check


def _draw(key, source, texts, refused=()):
    from checkray.engine.testaug.expand import TemplateDraw

    cands = [{"text": t, "text_pair": None, "filling": {"noun": t}, "checks": ["duplicate"]} for t in texts]
    gone = [{"text": t, "text_pair": None, "check": "polarity", "reason": "r"} for t in refused]
    return TemplateDraw(key, [f"{key} {{noun}}"], ["noun"], f"t-{source}", (source, None), cands, gone)


def _expansion(*draws):
    from checkray.engine.testaug.expand import Expansion

    out = Expansion(list(draws))
    for draw in draws:  # what with_description reads of a description
        out.descriptions[draw.key] = type("D", (), {"key": draw.key, "capability": "Vocabulary", "label": "negative"})()
    return out


def test_a_case_the_lm_finds_much_worse_than_its_source_is_refused_and_the_next_drawn_kept():
    from checkray.engine.lm_fluency import LMFluencyCheck
    from checkray.engine.testaug.expand import ExpansionSettings

    scores = {
        "The food is bad.": -20.0,
        "The meal is bad.": -22.0,
        "The airline is bad.": -31.0,
        "The dish is bad.": -23.0,
        "The plate is bad.": -24.0,
    }
    draw = _draw(
        "d01",
        "The food is bad.",
        ["The meal is bad.", "The airline is bad.", "The dish is bad.", "The plate is bad."],
        refused=["The cake is bad."],
    )
    settings = ExpansionSettings(per_template=2, candidates=6)
    out = _expansion(draw).select(settings, LMFluencyCheck(max_drop=5.0), scores)
    kept = out["data"].to_pylist()
    assert [c["text"] for c in kept] == ["The meal is bad.", "The dish is bad."]
    assert all(c["checks"] == ["duplicate", "fluency"] for c in kept)
    rejected = out["rejected"].to_pylist()
    # the rule check's refusal and the LM's, with its drop; "The plate" was never looked at
    assert [(r["text"], r["check"]) for r in rejected] == [
        ("The cake is bad.", "polarity"),
        ("The airline is bad.", "fluency"),
    ]
    assert "11.0 nats" in rejected[1]["reason"] and "limit 5" in rejected[1]["reason"]
    assert out["templates"].to_pylist()[0]["cases"] == 2


def test_without_the_check_the_first_drawn_cases_are_kept_up_to_each_limit():
    from checkray.engine.testaug.expand import ExpansionSettings

    a = _draw("d01", "A.", ["a1", "a2", "a3"], refused=["a0"])
    b = _draw("d01", "B.", ["b1", "b2"], refused=["b0"])
    c = _draw("d01", "C.", ["c1"], refused=["c0"])  # met once d01 is full: not used, refusals not counted
    out = _expansion(a, b, c).select(ExpansionSettings(per_template=2, max_per_description=3))
    assert [r["text"] for r in out["data"].to_pylist()] == ["a1", "a2", "b1"]
    assert [r["text"] for r in out["rejected"].to_pylist()] == ["a0", "b0"]
    assert [t["cases"] for t in out["templates"].to_pylist()] == [2, 1]


def test_the_check_draws_three_times_the_kept_cases_unless_told_and_is_off_with_null():
    from checkray.engine.testaug.config import TestAugConfig

    assert TestAugConfig().expansion_fluency is not None and TestAugConfig().expansion_candidates() == 15
    assert TestAugConfig(expansion_fluency=None).expansion_candidates() == 5
    assert TestAugConfig(expansion_draws=8).expansion_candidates() == 8


def test_the_validity_stage_fingerprint_ignores_the_later_expansion_fields():
    """A run made before the fluency check existed keeps its LLM labeler's checkpoint."""
    from checkray.engine.stages import _jsonable
    from checkray.engine.testaug.config import LATER_EXPANSION_FIELDS, TestAugConfig

    def validity_view(t):
        return t.view(*(f for f in TestAugConfig.model_fields if f not in LATER_EXPANSION_FIELDS))

    on, off = TestAugConfig(), TestAugConfig(expansion_fluency=None, expansion_draws=3)
    assert _jsonable(validity_view(on)) == _jsonable(validity_view(off))
    before = {k: v for k, v in _jsonable(on).items() if k not in LATER_EXPANSION_FIELDS}
    assert _jsonable(validity_view(on)) == before
    assert _jsonable(on) != _jsonable(off)  # the expand stage, which reads them, does rerun
