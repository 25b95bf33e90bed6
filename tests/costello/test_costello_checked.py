"""COSTELLO's checked operators (engine/costello/checked.py): candidates chosen in context,
fixed expressions and titles left alone, person-only consistent gender swaps, no added
profanity, and rejected candidates kept with their reasons. The reference corpus here is
a tiny hand-written one (``context.build``), so every verdict is traceable."""

from __future__ import annotations

import pytest

from checkray.engine.costello.checked import (
    added_profanity,
    checked_gender_swap,
    checked_substitutions,
    profanity_checked,
)
from checkray.engine.costello.context import build, from_arrays, tokenize
from checkray.engine.costello.mutations import Token, Variant, dense_synonyms, tokens_from_doc
from checkray.engine.costello.triples import Seed, combine, rejected_variants


@pytest.fixture(scope="module")
def nlp():
    from checkray.actors.spacy_nlp import load_spacy

    return load_spacy("builtin:sm", disable=("parser",))


def ref_of(*texts: str, times: int = 25):
    return from_arrays(build([t for t in texts for _ in range(times)]))


def run(nlp, text):
    doc = nlp(text)
    return tokens_from_doc(doc), [t.ent_type_ for t in doc]


def test_tokenize_splits_like_spacy():
    assert tokenize("It's <br /> don't") == ["It", "'s", "do", "n't"]


def test_reference_model_counts_ngrams_and_capitalisation():
    ref = ref_of("we saw The Bad News Bears today .", "a bad day .", times=3)
    assert ref.count("bad") == 6 and ref.count("news", "bears") == 3 and ref.count("a", "bad", "day") == 3
    assert ref.title_like("news", "bears") and not ref.title_like("bad", "day")
    assert ref.fits(["a"], "bad", "good", ["day"]) is not None  # "a good" never seen
    assert ref.fits(["a"], "bad", "bad", ["day"]) is None


def test_wrong_sense_refused_in_one_context_accepted_in_another(nlp):
    # smart: sense 2 (chic, fashionable) fits a dress, sense 3 (bright, clever) a script.
    ref = ref_of("she wore a chic dress .", "a bright script .", "a smart dress .", "a smart script .")
    dress, ents = run(nlp, "she wore a smart dress .")
    kept = [v for v in checked_substitutions(dress, "synonym", ref, ents=ents, guard=False) if not v.check]
    assert [v.replacement for v in kept] == ["chic"]
    script, ents = run(nlp, "a smart script .")
    out = checked_substitutions(script, "synonym", ref, ents=ents, guard=False)
    assert [v.replacement for v in out if not v.check] == ["bright"]
    (chic,) = [v for v in out if v.replacement == "chic"]
    assert (
        chic.check == "context_fit"
        and "chic script" in chic.reason
        and chic.checks == "sense,fixed_expression,named_entity,common_word"
    )


def test_rare_and_unattested_candidates_are_rejected_with_reasons(nlp):
    ref = ref_of("the acting is good .", "the acting is great .")
    tokens, ents = run(nlp, "the acting is good .")
    out = checked_substitutions(tokens, "synonym", ref, ents=ents)
    assert out and all(v.check and v.reason for v in out)  # nothing fits this tiny corpus
    assert {v.check for v in out} <= {"common_word", "polarity", "context_fit"}


def test_fixed_expression_and_title_left_alone(nlp):
    ref = ref_of("it is too bad .", "a bad film .", "we saw The Bad News Bears today .", "a big film .")
    tokens, ents = run(nlp, "it is too bad .")
    out = checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False)
    assert out and all(v.check == "fixed_expression" and "too bad" in v.reason for v in out)
    tokens, ents = run(nlp, "the bad news bears is a remake .")
    out = [v for v in checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False) if v.word == "bad"]
    assert out and all(v.check == "named_entity" for v in out)


def test_gender_swap_skips_non_person_words(nlp):
    ref = ref_of("the film is host to some sequences .", "a female director .", "a male director .")
    tokens, ents = run(nlp, "a female empowerment picture .")
    (v,) = checked_gender_swap(tokens, ref, ents=ents)
    assert v.check == "person" and "female" in v.reason
    tokens, ents = run(nlp, "the film is host to some sequences .")
    (v,) = checked_gender_swap(tokens, ref, ents=ents)
    assert v.check == "person" and "'host' -> 'hostess'" in v.reason and "unattested" in v.reason
    tokens, ents = run(nlp, "a female director .")
    (v,) = checked_gender_swap(tokens, ref, ents=ents)
    assert v.check is None and v.text == "a male director ." and "consistent" in v.checks


def test_gender_swap_refuses_a_partial_person_swap():
    ref = ref_of("a film .")
    words = ["Spielberg", "said", "she", "loved", "it", "."]
    tags = [("PROPN", "NNP"), ("VERB", "VBD"), ("PRON", "PRP"), ("VERB", "VBD"), ("PRON", "PRP"), ("PUNCT", ".")]
    tokens = [Token(w, " ", p, t, w.lower()) for w, (p, t) in zip(words, tags)]
    ents = ["PERSON", "", "", "", "", ""]
    (v,) = checked_gender_swap(tokens, ref, ents=ents)
    assert v.check == "consistent" and "Spielberg" in v.reason
    (v,) = checked_gender_swap(tokens, ref, ents=[""] * 6)  # no name: the pronoun alone is swapped
    assert v.check is None and v.text.startswith("Spielberg said he loved")


def test_profanity_the_seed_lacked_is_refused():
    assert added_profanity("a silly plot .", "a bullshit plot .") == ["bullshit"]
    assert added_profanity("what a bullshit plot .", "what a bullshit story .") == []
    v = profanity_checked("a silly plot .", Variant("inversion", "a crap plot ."))
    assert v.check == "profanity" and "crap" in v.reason
    assert profanity_checked("a silly plot .", Variant("inversion", "a clever plot .")).check is None
    # the authors' dense rewrite never draws a profane synonym ("bull" -> "bullshit")
    tokens = [Token("bull", " ", "NOUN", "NN", "bull")]
    for seed in range(20):
        for v in dense_synonyms(tokens, seed, prob=1.0):
            assert not added_profanity("bull", v.text)


def test_rejected_variants_become_rows_with_reasons_and_kept_ones_carry_checks():
    seed = Seed("s1", "he is a good actor .")
    ok_syn = Variant("synonym", "he is a great actor .", None, 3, "good", "great", "sense,common_word")
    bad = Variant("synonym", "he is a honorable actor .", None, 3, "good", "honorable", "sense", "context_fit", "why")
    ant = Variant("antonym", "he is a bad actor .", None, 3, "good", "bad", "sense,polarity")
    gender = Variant("gender", "she is a good actress .", None, 0, "he", "she", "person,consistent")
    triples = combine(seed, [bad, ok_syn, ant, gender])
    assert {t.capability for t in triples} == {"CR1", "CR2", "CR3"} or {t.capability for t in triples} >= {"CR1"}
    assert all(t.positive.check is None and t.negative.check is None for t in triples)
    (cr2,) = [t for t in triples if t.capability == "CR2"]
    assert cr2.negative.replacement in ("great", "bad")  # a real change of meaning, not a tie
    table = rejected_variants([seed], {"s1": [bad, ok_syn, ant, gender]}, triples, "costello").to_pylist()
    assert [(r["check"], r["reason"], r["source"]) for r in table] == [("context_fit", "why", seed.text)]


def test_cr2_without_a_meaning_change_is_rejected():
    seed = Seed("s2", "he is tired .")
    same = Variant("synonym", "he is weary .", None, 2, "tired", "weary", "sense")
    gender = Variant("gender", "she is tired .", None, 0, "he", "she", "person")
    triples = combine(seed, [same, gender])
    assert not [t for t in triples if t.capability == "CR2"]
    rows = rejected_variants([seed], {"s2": [same, gender]}, triples, "costello").to_pylist()
    assert [r["check"] for r in rows] == ["cr2_farther"]
