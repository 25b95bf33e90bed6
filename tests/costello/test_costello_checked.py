"""COSTELLO's checked operators (engine/costello/checked.py): candidates chosen in context,
fixed expressions and titles left alone, person-only consistent gender swaps, no added
profanity, and rejected candidates kept with their reasons. The reference corpus here is
a tiny hand-written one (``context.build``), so every verdict is traceable."""

from __future__ import annotations

import re

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
    # sharp (not curated, so WordNet's senses): sense 1 (crisp) fits a photo, sense 3
    # (keen) a script.
    ref = ref_of("she took a crisp photo .", "a keen script .", "a sharp photo .", "a sharp script .")
    photo, ents = run(nlp, "she took a sharp photo .")
    kept = [v for v in checked_substitutions(photo, "synonym", ref, ents=ents, guard=False) if not v.check]
    assert [v.replacement for v in kept] == ["crisp"]
    script, ents = run(nlp, "a sharp script .")
    out = checked_substitutions(script, "synonym", ref, ents=ents, guard=False)
    assert [v.text for v in out if not v.check] == ["a keen script ."]
    (crisp,) = [v for v in out if v.replacement == "crisp"]
    assert (
        crisp.check == "context_fit"
        and "crisp script" in crisp.reason
        and crisp.checks == "sense,fixed_expression,named_entity,common_word"
    )


def test_curated_words_take_a_persons_candidates_or_none(nlp):
    """WordNet offers "full" for "good" ("a good hour"); the curated table does not, and a
    word whose sense a review cannot show locally ("big") is no substitution site."""
    ref = ref_of("good acting .", "full acting .", "fine acting .", "bad acting .", "big acting .", "large acting .")
    tokens, ents = run(nlp, "good acting .")
    out = checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False)
    assert [v.replacement for v in out if not v.check] == ["fine"]
    assert "full" not in {v.replacement for v in out}
    antonyms = checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False)
    assert [v.replacement for v in antonyms if not v.check] == ["bad"]
    tokens, ents = run(nlp, "big acting .")
    assert checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) == []


@pytest.mark.parametrize(
    "text, error",
    [
        ("ADJ:\n  good: {synonyms: [fine]}\n  good: {synonyms: [nice]}\n", "good listed twice"),
        ("ADJ:\n  big: {synonyms: [large], never: size}\n", "candidates and `never` both"),
        ("ADJECTIVE:\n  good: {synonyms: [fine]}\n", "unknown part of speech 'ADJECTIVE'"),
        ("ADJ:\n  good: {synonyms: [good]}\n", "lists itself"),
        ("ADJ:\n  good: {synonyms: [fine], antonym: [bad]}\n", "unknown keys ['antonym']"),
        ("ADJ:\n  good: {synonyms: [fine], fixed: [good]}\n", "a fixed phrase of one word"),
    ],
)
def test_a_malformed_substitutes_table_is_one_line(text, error):
    from checkray.engine.costello.substitutes import parse_substitutes
    from checkray.engine.errors import InputError

    with pytest.raises(InputError, match=re.escape(error)):
        parse_substitutes(text, "t.yaml")


def test_the_shipped_substitutes_table_parses_and_keeps_polarity():
    """Every shipped candidate that a lexicon scores has its word's class (synonym) or the
    opposite (antonym): the run-time polarity check would refuse it everywhere otherwise."""
    from checkray.engine.costello.substitutes import curated_substitutes
    from checkray.engine.lang.polarity import polarity_class

    table = curated_substitutes()
    assert len(table) >= 150 and table[("good", "ADJ")].synonyms[0] == "fine"
    wrong = []
    for (lemma, _), entry in table.items():
        cls = polarity_class(lemma, lemma)
        wrong += [(lemma, w) for w in entry.synonyms if polarity_class(w, w) not in (cls, "neutral")]
        wrong += [(lemma, w) for w in entry.antonyms if polarity_class(w, w) == cls]
    assert wrong == []


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
    # without the entity, the proper noun that opens the sentence still marks a name
    (v,) = checked_gender_swap(tokens, ref, ents=[""] * 6)
    assert v.check == "consistent" and "'Spielberg' opens the sentence" in v.reason
    critics = [Token("Critics", " ", "NOUN", "NNS", "critic")] + tokens[1:]
    (v,) = checked_gender_swap(critics, ref, ents=[""] * 6)  # no name: the pronoun alone is swapped
    assert v.check is None and v.text.startswith("Critics said he loved")


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


def test_a_substitute_already_in_the_sentence_is_refused(nlp):
    ref = ref_of("its smart wordplay and clever plot .", "its clever wordplay .", "its witty wordplay and plot .")
    tokens, ents = run(nlp, "its smart wordplay and clever plot .")
    out = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if v.word == "smart"]
    (clever,) = [v for v in out if v.replacement == "clever"]
    assert clever.check == "context_fit" and "repeats 'clever'" in clever.reason
    assert [v.replacement for v in out if not v.check] == ["witty"]


def test_a_substitute_of_a_stem_already_in_the_sentence_is_refused(nlp):
    ref = ref_of(*(f"a {w} and beautifully shot romance ." for w in ("lovely", "beautiful", "charming")))
    tokens, ents = run(nlp, "a lovely and beautifully shot romance .")
    out = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if v.word == "lovely"]
    (beautiful,) = [v for v in out if v.replacement == "beautiful"]
    assert beautiful.check == "context_fit" and "repeats 'beautifully'" in beautiful.reason
    assert [v.replacement for v in out if not v.check] == ["charming"]


def test_a_substitute_whose_adverb_is_in_the_sentence_is_refused(nlp):
    text = "it's fun , splashy and entertainingly nasty ."
    ref = ref_of(*(text.replace("fun", w) for w in ("fun", "entertaining", "enjoyable")))
    tokens, ents = run(nlp, text)
    out = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if v.word == "fun"]
    (entertaining,) = [v for v in out if v.replacement == "entertaining"]
    assert entertaining.check == "context_fit" and "repeats 'entertainingly'" in entertaining.reason


@pytest.mark.parametrize(
    "text, edited",
    [
        ("He asks what good the execution of a woman could possibly do .", False),  # a noun
        ("what good is a film like this ?", False),
        ("is it any good ?", False),
        ("there is no good film here .", True),  # before a noun: a plain adjective
    ],
)
def test_an_adjective_standing_for_a_noun_is_not_substituted(nlp, text, edited):
    ref = ref_of(text, text.replace("good", "fine"), "a fine film .", "a good film .", "a bad film .")
    tokens, ents = run(nlp, text)
    out = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if v.word == "good"]
    assert out
    refused = [v for v in out if v.check == "fixed_expression" and "uses the adjective as a noun" in v.reason]
    assert bool(refused) != edited


def test_a_fixed_phrase_of_the_table_is_not_substituted(nlp):
    from checkray.engine.costello.substitutes import curated

    assert "awkward age" in curated("awkward", "ADJ").fixed
    ref = ref_of("that awkward age .", "that clumsy age .", "an awkward scene .", "a clumsy scene .")
    for text, refused in (("that awkward age when all is new .", True), ("an awkward scene .", False)):
        tokens, ents = run(nlp, text)
        out = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if v.word == "awkward"]
        assert out and all(v.check == "fixed_expression" for v in out) == refused
        assert any("fixed phrase of the substitutes table" in (v.reason or "") for v in out) == refused


def test_table_only_substitutes_reject_a_word_the_table_lacks(nlp):
    # sharp is not in the table: WordNet's senses serve it unless the job asks for the table only
    ref = ref_of("a crisp photo .", "a sharp photo .", "a good photo .", "a fine photo .")
    tokens, ents = run(nlp, "a sharp photo .")
    kept = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if not v.check]
    assert [v.replacement for v in kept] == ["crisp"]
    out = checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False, wordnet_fallback=False)
    (sharp,) = [v for v in out if v.word == "sharp"]
    assert sharp.check == "sense" and "not in the substitutes table" in sharp.reason and sharp.replacement is None
    tokens, ents = run(nlp, "a good photo .")
    out = checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False, wordnet_fallback=False)
    assert [v.replacement for v in out if not v.check] == ["fine"]


# A swap must not change a real person's gender; spaCy misses many names: lower-cased
# reviews ("soderbergh"), a name no dictionary lists ("the dispassionate gantz brothers"), a
# critic's bracketed subject, a cased name it reads as a verb ("Silberling") or one that
# opens the sentence ("Bright").
SWAP_REFUSED = [
    ("soderbergh's best film since his debut .", ("a film by Soderbergh .",), "'soderbergh'"),
    ("revealed by the dispassionate gantz and his brothers as ordinary .", (), "'gantz' is no English word"),
    ("[ leigh ] draws wrenching performances from her actresses .", (), "'[leigh]' stands in for a person"),
    (
        "In his determination to lighten it , Silberling also trivializes the movie .",
        (),
        "'Silberling' is capitalised mid-sentence",
    ),
    (
        "Bright seems amused with this material , and he adds a few of his own touches .",
        (),
        "'Bright' opens the sentence as a proper noun",
    ),
    ("the lioness fights for her cubs and his trainer .", (), "'lioness' is gendered"),
    ("i was happy when the main character flashed her boobs .", (), "'boobs' belongs to one sex"),
]
SWAP_KEPT = [
    ("the director's best film since his debut .", "her debut"),
    ("revealed by the dispassionate brothers as ordinary .", "sisters"),
    ("In his determination to lighten it , the director also trivializes the movie .", "In her determination"),
]
SWAP_REF = ("his best film .", "her best film .", "a male director .", "the brothers .", "the sisters .")


@pytest.mark.parametrize("text, extra_ref, reason", SWAP_REFUSED)
def test_gender_swap_refused_beside_a_name_spacy_misses(nlp, text, extra_ref, reason):
    tokens, ents = run(nlp, text)
    (v,) = checked_gender_swap(tokens, ref_of(*SWAP_REF, *extra_ref), ents=ents)
    assert v.check == "consistent" and reason in v.reason


@pytest.mark.parametrize("text, swapped", SWAP_KEPT)
def test_gender_swap_kept_without_a_name(nlp, text, swapped):
    tokens, ents = run(nlp, text)
    (v,) = checked_gender_swap(tokens, ref_of(*SWAP_REF, "a film by Soderbergh ."), ents=ents)
    assert v.check is None and swapped in v.text


def test_pair_synonyms_need_a_sense_both_words_usually_have(nlp):
    """CR4 read at size: "the Lovsan worm began ..." -> "got", "Yang is the son of ..." ->
    "word". Each shares a WordNet sense with the word it replaces, a sense one of them
    almost never has (SemCor's tag counts); "purchased" -> "bought" stays."""
    from checkray.engine.costello.checked import checked_shared_substitutions
    from checkray.engine.lang.wordnet import usual_sense_pair

    assert usual_sense_pair("begin", "get", "VERB", "synonym")
    assert usual_sense_pair("son", "word", "NOUN", "synonym")
    assert usual_sense_pair("purchase", "buy", "VERB", "synonym") is None
    assert usual_sense_pair("purchase", "sell", "VERB", "antonym") is None

    ref = ref_of("the worm got going .", "the worm started spreading .", "the worm began spreading .")
    a, _ = run(nlp, "the worm began spreading .")
    b, _ = run(nlp, "the worm began spreading fast .")
    out = checked_shared_substitutions(a, b, "synonym", ref)
    got = [v for v in out if v.replacement == "got"]
    assert got and got[0].check == "sense", out
    assert [v.replacement for v in out if not v.check] == ["started"]


def test_pair_substitution_fixes_the_article(nlp):
    from checkray.engine.costello.checked import checked_shared_substitutions

    ref = ref_of("a odd boycott .", "an odd boycott .", "a strange boycott .")
    a, _ = run(nlp, "it was a strange boycott .")
    b, _ = run(nlp, "a strange boycott , they said .")
    kept = [v for v in checked_shared_substitutions(a, b, "synonym", ref) if not v.check]
    assert kept and kept[0].text.startswith("it was an ") and kept[0].text_pair.startswith("an "), kept


@pytest.fixture(scope="module")
def parsed_nlp():
    from checkray.actors.spacy_nlp import load_spacy

    return load_spacy("builtin:sm")


@pytest.mark.parametrize(
    "text, word, why",
    [
        ("the Lovsan worm began spreading around the world .", "began", "verb complement"),
        ("officials refused to share information with the press .", "refused", "verb complement"),
        ("the system would remain fully functional .", "remain", "adjective complement"),
        ("the stock closed at $ 21.63 on Friday .", "closed", "figure"),
        ("the market is expected to decline 2.1 percent .", "decline", "figure"),
        ("police are looking for the remaining three .", "remaining", "participle"),
        ("the man weighed an average 220 pounds .", "average", "figure"),
        ("the index had a weekly gain , closing at 418.40 .", "closing", "figure"),
    ],
)
def test_a_pair_word_whose_frame_belongs_to_it_is_not_swapped(parsed_nlp, text, word, why):
    """CR4 read at size: "began spreading" -> "ended spreading", "refused to share" ->
    "accepted to share", "closed at $21.63" -> "shut at": the replacement does not take
    the complement or the figure the word takes."""
    from checkray.engine.costello.checked import verb_frame

    tokens = tokens_from_doc(parsed_nlp(text))
    i = next(k for k, t in enumerate(tokens) if t.text == word)
    reason = verb_frame(tokens, i)
    assert reason and why in reason, reason


@pytest.mark.parametrize(
    "text, word",
    [
        ("FBI agents detained a former partner of the firm .", "detained"),
        ("the company purchased the plant in 2001 .", "purchased"),
        ("he acknowledged that the report was wrong .", "acknowledged"),
        ("the epidemic began in November .", "began"),
        ("a former partner of the firm was arrested .", "former"),
        ("Hoffa vanished from a parking lot about 25 miles north of Detroit .", "vanished"),
    ],
)
def test_a_pair_word_with_an_ordinary_frame_is_swapped(parsed_nlp, text, word):
    from checkray.engine.costello.checked import verb_frame

    tokens = tokens_from_doc(parsed_nlp(text))
    i = next(k for k, t in enumerate(tokens) if t.text == word)
    assert verb_frame(tokens, i) is None


def test_a_frame_is_checked_in_both_sentences_of_a_pair_and_rejected_with_its_reason(parsed_nlp):
    from checkray.engine.costello.checked import checked_shared_substitutions

    ref = ref_of("the worm started spreading .", "the worm ended spreading .")
    a = tokens_from_doc(parsed_nlp("the worm began in May ."))
    b = tokens_from_doc(parsed_nlp("the worm began spreading in May ."))
    out = checked_shared_substitutions(a, b, "antonym", ref)
    assert out and all(v.check == "verb_frame" for v in out if v.word == "began"), out


def test_a_pair_candidate_rarely_of_the_words_part_of_speech_is_refused():
    """ "employment" -> "employ" ("employ targets"): "employ" is a noun in 2 % of its uses."""
    from checkray.engine.lang.wordnet import pos_share, usual_sense_pair

    assert pos_share("employ", "n") < 0.1
    assert "rarely a noun" in usual_sense_pair("employment", "employ", "NOUN", "synonym")
    assert usual_sense_pair("purchase", "buy", "VERB", "synonym") is None


def test_the_mutation_actor_parses_pairs_only():
    """The actor's pipeline keeps its parser for matching pairs (a CR4 word's frame) and
    skips it for single sentences, whose operators do not read dependencies."""
    import pyarrow as pa

    from checkray.actors.costello.mutators import MutationActor
    from checkray.engine.costello.config import MutationSettings

    actor = MutationActor(MutationSettings())
    batch = pa.table(
        {
            "id": ["single", "pair"],
            "text": ["a wonderful , moving film .", "the worm began spreading in May ."],
            "text_pair": [None, "in May the worm began spreading fast ."],
        }
    )
    rows = actor(batch).to_pylist()
    began = [r for r in rows if r["seed_id"] == "pair" and r["word"] == "began"]
    assert began and all(r["check"] for r in began) and "verb_frame" in {r["check"] for r in began}, began
    assert any(r["seed_id"] == "single" for r in rows)
    assert "parser" in actor.nlp.pipe_names and actor.unparsed == ["parser"]


def test_a_pair_word_is_read_in_its_first_sense(parsed_nlp):
    """CR4 read at size: "was to appear before a judge" -> "look" (sense 1, seem) against
    "disappear" (the antonym of sense 2, come into view): two readings of one word. With no
    polarity or curated table to pick a sense, a pair word takes its first sense only."""
    from checkray.engine.costello.checked import checked_shared_substitutions

    ref = ref_of(
        "he will look before the judge .", "he will disappear before the judge .", "he will seem before the judge ."
    )
    a = tokens_from_doc(parsed_nlp("he will appear before the judge ."))
    b = tokens_from_doc(parsed_nlp("next week he will appear before the judge ."))
    synonyms = checked_shared_substitutions(a, b, "synonym", ref)
    assert [v.replacement for v in synonyms if not v.check] == ["look"]
    antonyms = checked_shared_substitutions(a, b, "antonym", ref)
    (disappear,) = [v for v in antonyms if v.replacement == "disappear"]
    assert disappear.check == "sense" and "sense 2" in disappear.reason
    assert not [v for v in antonyms if not v.check]


def test_another_spelling_of_the_word_is_no_synonym(nlp):
    from checkray.engine.costello.checked import spelling_variant

    pairs = [("favorite", "favourite"), ("theater", "theatre"), ("gray", "grey"), ("travelled", "traveled")]
    assert all(spelling_variant(a, b) for a, b in pairs)
    assert not any(spelling_variant(a, b) for a, b in [("bad", "bid"), ("fine", "fun"), ("awful", "terrible")])
    ref = ref_of("my favorite film .", "my favourite film .", "my preferred film .")
    tokens, ents = run(nlp, "my favorite film .")
    out = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if v.word == "favorite"]
    (british,) = [v for v in out if v.replacement == "favourite"]
    assert british.check == "sense" and "another spelling of 'favorite'" in british.reason
    assert "favourite" not in [v.replacement for v in out if not v.check]


def test_the_mutation_settings_choose_where_substitutes_come_from(nlp):
    from checkray.actors.costello.mutators import mutate_one
    from checkray.engine.costello.config import MutationSettings

    ref = ref_of("a crisp photo .", "a sharp photo .", "a blunt photo .", "a dull photo .")
    doc = nlp("a sharp photo .")
    for source, kept in (("table+wordnet", True), ("table", False)):
        settings = MutationSettings(substitutes=source, polarity_guard=False)
        out = [
            v for v in mutate_one(doc, None, doc.text, None, settings, ref) if v.word == "sharp" and v.op == "synonym"
        ]
        assert any(not v.check for v in out) == kept


def test_a_seed_with_a_slip_is_one_rejection_and_no_variant(nlp):
    from checkray.actors.costello.mutators import mutate_one
    from checkray.engine.costello.config import MutationSettings

    ref = ref_of("a solid performance .", "a decent performance .", "a weak performance .")
    doc = nlp("she gives give a solid performance .")
    (refused,) = mutate_one(doc, None, doc.text, None, MutationSettings(), ref)
    assert refused.op == "seed" and refused.check == "seed_slip" and "'gives give'" in refused.reason
    seed = Seed("s9", doc.text)
    (row,) = rejected_variants([seed], {"s9": [refused]}, [], "costello").to_pylist()
    assert row["check"] == "seed_slip" and row["capability"] == "CR1,CR2,CR3"


def test_seed_grammar_refuses_a_seed_link_grammar_cannot_parse_only_when_asked(nlp):
    from checkray.actors.costello.mutators import mutate_one
    from checkray.engine.costello.config import MutationSettings
    from checkray.engine.lang import link_grammar

    if not link_grammar.available():
        pytest.skip("Link Grammar not installed (make grammar)")
    ref = ref_of("he does a great job .", "he does a fine job .", "he does a poor job .")
    doc = nlp("The child actors in the movie do a great , too .")
    (refused,) = mutate_one(doc, None, doc.text, None, MutationSettings(seed_grammar=True), ref)
    assert refused.op == "seed" and refused.check == "seed_grammar" and "no parse" in refused.reason
    assert all(v.check != "seed_grammar" for v in mutate_one(doc, None, doc.text, None, MutationSettings(), ref))
    clean = nlp("He does a great job .")
    assert all(
        v.op != "seed" for v in mutate_one(clean, None, clean.text, None, MutationSettings(seed_grammar=True), ref)
    )


def test_an_adjective_before_a_person_is_read_in_that_sense(nlp):
    ref = ref_of(
        "the sad schlock merchant .",
        "the melancholy schlock merchant .",
        "the happy schlock merchant .",
        "good kids .",
        "poor kids .",
        "bad kids .",
        "nice kids .",
    )
    tokens, ents = run(nlp, "the sad schlock merchant .")
    out = checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False)
    assert out and all(v.check == "sense" and "before a person sad means pathetic" in v.reason for v in out)
    tokens, ents = run(nlp, "good kids .")
    antonyms = checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False)
    (poor,) = [v for v in antonyms if v.replacement == "poor"]
    assert poor.check == "sense" and "'poor kids'" in poor.reason
    assert [v.replacement for v in antonyms if not v.check] == ["bad"]


@pytest.mark.parametrize(
    "text, word, reason",
    [
        ("they meet the rich and the powerful who run the town .", "powerful", "names a group of people"),
        ("they just want you to enjoy yourselves tonight .", "enjoy", "reflexive object"),
        ("a gleefully grungy , hilariously wicked comedy .", "wicked", "polar adverb"),
        ("it is a delightfully charming slice of bliss .", "charming", "polar adverb"),
        ("a refreshingly honest tale of people .", "honest", "polar adverb"),  # TextBlob's
        ("he is fabulously funny as a butler .", "funny", "polar adverb"),  # an intensifier that judges
        ("the best you can say about it is that it ends .", "best", "opens a clause of its own"),
        ("a tribute to the courage of new york's finest and the nation .", "finest", "names a group"),
        ("none of them are ever any good or make any money .", "good", "uses the adjective as a noun"),
    ],
)
def test_a_word_whose_reading_its_neighbours_fix_is_not_substituted(nlp, text, word, reason):
    ref = ref_of(text, "a good film .", "a fine film .", "a bad film .")
    tokens, ents = run(nlp, text)
    for kind in ("synonym", "antonym"):
        out = [v for v in checked_substitutions(tokens, kind, ref, ents=ents, guard=False) if v.word == word]
        assert out and all(v.check == "fixed_expression" and reason in v.reason for v in out)


@pytest.mark.parametrize(
    "text, word",
    [
        ("the powerful film moves .", "powerful"),  # a noun follows: a plain adjective
        ("a really charming film .", "charming"),  # an adverb of degree
        ("an intermittently powerful study .", "powerful"),  # an adverb with no polarity
        ("the film is mostly boring .", "boring"),  # an adverb that frames, not judges
        ("an awfully good film .", "good"),  # an intensifier against the word's sign
        ("the best film of the year .", "best"),  # a superlative before its noun
        ("there are some good or decent moments .", "good"),  # coordinated before its noun
    ],
)
def test_the_same_words_in_plain_use_are_substituted(nlp, text, word):
    ref = ref_of(text, text.replace(word, "strong"), text.replace(word, "weak"), text.replace(word, "lovely"))
    tokens, ents = run(nlp, text)
    out = [v for v in checked_substitutions(tokens, "synonym", ref, ents=ents, guard=False) if v.word == word]
    assert out and not any(v.check == "fixed_expression" for v in out)


def test_words_in_short_single_quotes_are_mentioned_not_used(nlp):
    from checkray.engine.costello.checked import single_quoted

    tokens, _ = run(nlp, "it's more of the 'laughing at' variety than the actors ' good work .")
    words = [t.text for t in tokens]
    assert single_quoted(tokens, words.index("laughing"))
    assert not single_quoted(tokens, words.index("good"))  # a plural possessive, not a quote
    # a Penn-Treebank backtick opens a quotation, however long (SST's tokenisation)
    tokens, _ = run(nlp, "the maxim that ` the urge to destroy is also a creative urge ' , or more willing .")
    words = [t.text for t in tokens]
    assert single_quoted(tokens, words.index("creative"))
    assert not single_quoted(tokens, words.index("willing"))
    tokens, _ = run(nlp, "what critics have come to term an `` ambitious failure . ''")  # spaCy: ` ` ... ''
    assert single_quoted(tokens, [t.text for t in tokens].index("ambitious"))
    # a glued quote longer than a title: it opens after a space and closes before punctuation
    tokens, _ = run(nlp, "he might change his poem to , 'do not go gentle into that good theatre . '")
    assert single_quoted(tokens, [t.text for t in tokens].index("gentle"))
    tokens, _ = run(nlp, "it's 'em good folks , and the boys ' toys are fine .")  # an elision, then a possessive
    assert not single_quoted(tokens, [t.text for t in tokens].index("good"))


def test_an_antonym_before_a_name_is_read_in_its_person_sense(nlp):
    text = "a performance from the great daniel auteuil ."
    ref = ref_of(text, text.replace("great", "poor"), text.replace("great", "terrible"), "a great film .")
    tokens, ents = run(nlp, text)
    (poor,) = [
        v for v in checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False) if v.replacement == "poor"
    ]
    assert poor.check == "sense" and "before a person poor means" in poor.reason


@pytest.mark.parametrize("pipeline", ["nlp", "parsed_nlp"])  # single seeds are tagged, not parsed
def test_a_verb_without_an_object_takes_only_a_candidate_that_stands_alone(request, pipeline):
    parsed_nlp = request.getfixturevalue(pipeline)
    text = "go see it and enjoy ."
    ref = ref_of(text, text.replace("enjoy", "hate"), "i hate the film .", "i love the film .")
    tokens, ents = run(parsed_nlp, text)
    (hate,) = [
        v for v in checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False) if v.replacement == "hate"
    ]
    assert hate.check == "sense" and "has no object here and 'hate' needs one" in hate.reason
    text = "i enjoy the film ."  # with its object the same candidate is fine
    tokens, ents = run(parsed_nlp, text)
    out = [v for v in checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False) if v.word == "enjoy"]
    assert out and not any("needs one" in (v.reason or "") for v in out)


@pytest.mark.parametrize(
    "text, reason",
    [
        (
            "bright seems alternately amused and disgusted with this material , and he can't help throwing in a few of his own touches .",
            "opens the sentence as its subject",
        ),
        ("bow's best moments are when he scores .", "opens the sentence as its subject or owner"),
        ("it is fun to see goodall and her chimpanzees .", "first of all a name in WordNet"),
        ("this is so de palma . if you love him , you'll like it .", "'palma' is no English word"),
    ],
)
@pytest.mark.parametrize("pipeline", ["nlp", "parsed_nlp"])
def test_gender_swap_refused_beside_a_lower_cased_name(request, pipeline, text, reason):
    tokens, ents = run(request.getfixturevalue(pipeline), text)
    (v,) = checked_gender_swap(tokens, ref_of(*SWAP_REF), ents=ents)
    assert v.check == "consistent" and reason in v.reason


def test_an_antonym_that_strands_a_negative_polarity_item_is_refused(nlp):
    text = "it's difficult to feel anything much while watching this movie ."
    ref = ref_of(text, text.replace("difficult", "easy"), text.replace("difficult", "hard"))
    tokens, ents = run(nlp, text)
    out = [v for v in checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False) if v.word == "difficult"]
    assert out and all(v.check == "sense" and "strands it" in v.reason for v in out)
    plain = "it's difficult to feel much while watching this movie ."  # no such item: the antonym stays
    tokens, ents = run(nlp, plain)
    out = [v for v in checked_substitutions(tokens, "antonym", ref, ents=ents, guard=False) if v.word == "difficult"]
    assert out and not any("strands" in (v.reason or "") for v in out)


def test_a_phrase_the_edit_breaks_does_not_fit():
    """A trigram of the original whose edited form the new word's frequency predicts often
    but the corpus (almost) never shows is a phrase the edit breaks, though another trigram
    around the new word is attested; a rare word missing from a frequent frame is not."""
    texts = ["it went from bad to worse ."] * 6 + ["a good day ."] * 6 + ["from good friends ."] * 3
    ref = from_arrays(build(texts + ["from good to great ."] * 2 + ["a decent day ."]))
    why = ref.fits(["from"], "bad", "good", ["to", "worse"])
    assert why is not None and "'good to worse' breaks the phrase 'bad to worse'" in why
    assert ref.fits(["a"], "good", "decent", ["day"]) is None  # "a decent day" expected < 1 time


@pytest.mark.parametrize(
    "text, reason",
    [
        ("Man , that was a long film .", "said to someone or exclaimed"),
        ("the plastic army men were more exciting .", "'army women' is a compound the reference corpus never writes"),
    ],
)
def test_a_gendered_noun_that_names_no_person_of_the_sentence_is_not_swapped(nlp, text, reason):
    tokens, ents = run(nlp, text)
    ref = from_arrays(build(["the man and the woman .", "the men and the women ."] * 3 + ["the army men ."]))
    (v,) = checked_gender_swap(tokens, ref, ents=ents)
    assert v.check == "person" and reason in v.reason
    tokens, ents = run(nlp, "the tall man was more exciting .")
    (v,) = checked_gender_swap(tokens, ref, ents=ents)
    assert v.check is None and "tall woman" in v.text


def test_her_before_a_noun_tagged_as_a_verb_is_swapped_as_an_owner():
    """The tagger reads "her maid claims" as "her made claims"; "maid" has no verb reading."""
    words = [("at", "ADP", "IN"), ("one", "NUM", "CD"), ("point", "NOUN", "NN"), ("her", "PRON", "PRP")]
    words += [("maid", "VERB", "VBD"), ("claims", "VERB", "VBZ"), ("it", "PRON", "PRP"), (".", "PUNCT", ".")]
    tokens = [Token(w, " ", pos, tag, w) for w, pos, tag in words]
    (v,) = checked_gender_swap(tokens, ref_of("his maid .", "her maid ."), ents=[""] * len(tokens))
    assert v.check is None and "his maid claims" in v.text
    tokens[4] = Token("made", " ", "VERB", "VBD", "make")  # "we made her laugh" keeps "him"
    (v,) = checked_gender_swap(tokens, ref_of("his maid .", "her maid ."), ents=[""] * len(tokens))
    assert "him made" in v.text


def test_half_of_a_repetition_and_an_unseen_manner_adverb_pair_are_not_substituted(nlp):
    from checkray.engine.costello.checked import broken_repetition, unwritten_adverb_pair

    tokens, _ = run(nlp, "these men are the best of the best .")
    assert "repetition 'best of the best'" in broken_repetition(tokens, 4)
    assert broken_repetition(tokens, 1) is None
    ref = ref_of("a heavily flawed character .", "a perfect character .", "a really perfect day .")
    tokens, _ = run(nlp, "a heavily flawed character .")
    assert "'heavily perfect' is never written" in unwritten_adverb_pair(tokens, 2, "perfect", ref)
    tokens, _ = run(nlp, "an undeniably flawed character .")  # a stance adverb goes with any adjective
    assert unwritten_adverb_pair(tokens, 2, "perfect", ref) is None


def test_the_words_of_a_quoted_saying_are_not_substituted(nlp):
    from checkray.engine.costello.checked import quoted_saying

    tokens, _ = run(nlp, "it reiterates the old hollywood saw : evil is interesting and good is boring .")
    words = [t.text for t in tokens]
    assert "in the saw the sentence quotes" in quoted_saying(tokens, words.index("interesting"))
    assert quoted_saying(tokens, words.index("old")) is None
    tokens, _ = run(nlp, "the plot : a dull man meets an interesting woman .")  # no saying noun
    assert quoted_saying(tokens, [t.text for t in tokens].index("interesting")) is None


@pytest.mark.parametrize(
    "text, word",
    [
        ("a film with a great premise but only a great premise .", "great"),
        ("the movie is silly beyond comprehension , and even if it were n't silly , it would still be dull .", "silly"),
        ("a beautiful wife and an equally beautiful house .", "beautiful"),
    ],
)
def test_one_copy_of_an_echoed_word_is_not_substituted(nlp, text, word):
    from checkray.engine.costello.checked import broken_echo

    tokens, _ = run(nlp, text)
    i = [t.text for t in tokens].index(word)
    assert "echoes its other copy" in broken_echo(tokens, i)


@pytest.mark.parametrize(
    "text, word",
    [("it 's a boring movie about a boring man .", "boring"), ("bad writing , bad direction and bad acting .", "bad")],
)
def test_copies_of_a_word_in_different_frames_stay_substitutable(nlp, text, word):
    from checkray.engine.costello.checked import broken_echo

    tokens, _ = run(nlp, text)
    assert broken_echo(tokens, [t.text for t in tokens].index(word)) is None


def test_a_negated_prefixed_antonym_and_a_wealth_superlative_are_refused(nlp):
    from checkray.engine.costello.checked import negated_prefix_antonym, superlative_sense

    tokens, _ = run(nlp, "it is not very funny .")
    assert "double negative" in negated_prefix_antonym(tokens, 4, "unfunny")
    assert negated_prefix_antonym(tokens, 4, "humorless") is None  # no prefix
    tokens, _ = run(nlp, "it is very funny .")
    assert negated_prefix_antonym(tokens, 3, "unfunny") is None  # not negated
    tokens, _ = run(nlp, "it is far from the worst .")
    assert "least wealthy" in superlative_sense(tokens, 5, "poorest")
    assert superlative_sense(tokens, 5, "lousiest") is None


@pytest.mark.parametrize(
    "text, word, found",
    [
        ("it has been made with great evident care .", "great", "says how much"),
        ("he can give it a good , hard yank .", "good", "intensifies"),
        ("it is a great film with great care .", "great", None),  # the first "great" judges the film
        ("it is a good film .", "good", None),
    ],
)
def test_great_or_good_that_measures_an_amount_is_not_substituted(nlp, text, word, found):
    from checkray.engine.costello.checked import amount_sense

    tokens, _ = run(nlp, text)
    why = amount_sense(tokens, [t.text for t in tokens].index(word))
    assert (why is None) if found is None else (found in why)


@pytest.mark.parametrize(
    "text, word, found",
    [
        ("earnest falls short of its ideal predecessor .", "earnest", "opens the sentence as its subject"),
        ("lovely and amazing is holofcener's deep curtsy .", "lovely", "opens the sentence as its subject"),
        ("Hey , Happy !", "Happy", "capitalised mid-sentence"),
        ("smart , funny and touching , it is a gem .", "smart", None),
        ("good films are rare .", "good", None),
    ],
)
def test_an_adjective_that_names_a_title_is_not_substituted(nlp, text, word, found):
    from checkray.engine.costello.checked import named_entity

    tokens, ents = run(nlp, text)
    why = named_entity(tokens, [t.text for t in tokens].index(word), ref_of("a good film ."), ents)
    assert (why is None) if found is None else (found in why)


@pytest.mark.parametrize(
    "text, word, found",
    [
        ("i'll settle for a nice cool glass of iced tea .", "nice", "intensifies"),
        ("it is amusing for a good while .", "good", "says how much"),
        ("a nice film with a nice cast .", "nice", None),
    ],
)
def test_nice_that_intensifies_and_good_that_measures_time_are_not_substituted(nlp, text, word, found):
    from checkray.engine.costello.checked import amount_sense

    tokens, _ = run(nlp, text)
    why = amount_sense(tokens, [t.text for t in tokens].index(word))
    assert (why is None) if found is None else (found in why)
