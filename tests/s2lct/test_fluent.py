"""S²LCT's fluent wrappers and the checks around them: seed forms, clear and truly neutral
polarity, fills that fit their context, rejected candidates kept with their reasons, and
the paper's literal wording still available."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from checkray.actors.s2lct.parser import token_dicts
from checkray.engine.s2lct.fluent import (
    back_reference_reason,
    comparison_reason,
    corpus_polar_words,
    degree_reason,
    denial_reason,
    disputed_reason,
    exclusive_reason,
    open_quote_reason,
    polarity_reason,
    scope_reason,
    seed_form,
)
from checkray.engine.s2lct.mask_fill import BigramLM, context_reason, modifier_reason
from checkray.engine.s2lct.search import checked_seed_rows, matching_rules
from checkray.engine.s2lct.spec import load_capabilities


@pytest.fixture(scope="module")
def nlp():
    from checkray.actors.spacy_nlp import load_spacy

    return load_spacy("builtin:sm")


@pytest.fixture(scope="module")
def caps():
    return {c.id: c for c in load_capabilities()}


def toks(nlp, text):
    return token_dicts(nlp(text))


def searched(nlp, caps, pairs):
    rows = []
    for i, (text, label) in enumerate(pairs):
        t = toks(nlp, text)
        matches = {cid: r for cid, cap in caps.items() if (r := matching_rules(cap, t, label, neutral_proxy=True))}
        rows.append({"id": f"d{i}", "matches": json.dumps(matches), "tokens": json.dumps(t)})
    return pa.Table.from_pylist(rows)


def test_seed_forms_clause_noun_phrase_and_refusals(nlp):
    views, why = seed_form(toks(nlp, "The plot is a complete mess."))
    assert (
        why is None
        and views["clause"] == "the plot is a complete mess"
        and views["past"] == "the plot was a complete mess"
    )
    views, why = seed_form(toks(nlp, "A compelling film about grief."))
    assert why is None and views == {"np": "a compelling film about grief"}
    # "it's <predicate>": the predicate is what the film is (an "np" view besides the clause).
    views, why = seed_form(toks(nlp, "It's a smart, compelling drama."))
    assert why is None and views["np"] == "a smart, compelling drama"
    # A second clause: no "np" view ("call it" cannot take it), no "past" view when a verb
    # would stay in the present; a relative clause is part of the noun phrase.
    views, _ = seed_form(
        toks(nlp, "it's a travesty of the musical genre and even as spoof takes itself too seriously .")
    )
    assert set(views) == {"clause"}
    views, _ = seed_form(toks(nlp, "this picture is so referential that the final product is a ghost ."))
    assert set(views) == {"clause"}
    views, _ = seed_form(toks(nlp, "it's a film that takes itself too seriously ."))
    assert views["np"] == "a film that takes itself too seriously" and views["past"].startswith("it was a film")
    for text, reason in [
        ("The acting is great. The plot is not.", "several sentences"),
        ("Is this the worst film of the year?", "punctuation"),
        ("The cast is fine, but the script is awful.", "contrast word 'but'"),
        ("I loved every minute of it.", "first/second person"),
        ("The film sparkles with the the wisdom of its subjects.", "repeated word 'the the'"),
        ("Go see it and enjoy.", "no subject"),
        ("a film about female friendship that men can embrace and women will talk about for hours .", "two subjects"),
        ("Say this for the soundtrack, it drowns out the dialogue.", "starts with the bare verb 'Say'"),
        ("top-notch action powers this romantic drama .", "noun phrase with 'powers this'"),
    ]:
        views, why = seed_form(toks(nlp, text))
        assert not views and why.startswith(reason), (text, why)


def test_polar_words_are_refused_as_neutral(nlp):
    for text in ["Kinnear gives a tremendous performance.", "A riveting documentary.", "A vivid cinematic portrait."]:
        why = polarity_reason(toks(nlp, text), text, "neutral")
        assert why and why.startswith("polar word"), (text, why)
    # A word the lexicons miss but a labeled corpus uses in one label only.
    corpus = corpus_polar_words(
        ["an erratic mess ."] * 4 + ["a film ."] * 6 + ["a fine film ."] * 6, ["negative"] * 10 + ["positive"] * 6
    )
    assert corpus["erratic"] < 0 and corpus["film"] == 0.0
    text = "A picture as erratic as its central character."
    assert "erratic" in polarity_reason(toks(nlp, text), text, "neutral", corpus_polarity=corpus)
    text = "The film is set in a town."
    assert polarity_reason(toks(nlp, text), text, "neutral") is None
    # Polar seeds: the sentence scores must agree with the corpus label.
    assert polarity_reason(None, "A wonderful, moving film.", "positive") is None
    assert polarity_reason(None, "A wonderful, moving film.", "negative")


def test_fluent_wrappers_on_a_clause_and_on_a_fragment(nlp, caps):
    pairs = [
        ("The acting is good.", "positive"),
        ("A beautiful and moving story.", "positive"),
        ("The plot is dull and boring.", "negative"),
        ("A terrible waste of time.", "negative"),
        ("The cast is fine, but the script is awful.", "negative"),  # mixed: refused
    ]
    table = searched(nlp, {k: caps[k] for k in ("LC9", "LC10", "LC3", "LC6")}, pairs)
    specs = [caps[k] for k in ("LC9", "LC10", "LC3", "LC6")]
    rows, rejected = checked_seed_rows(specs, table, suite="s", max_seeds=10, seed=0, neutral_proxy=True)
    texts = {(r["capability_id"], r["text"], r["label"]) for r in rows}
    assert ("LC9", "Do I think that the acting is good? Yes, I do.", "positive") in texts
    assert ("LC9", "Would I call it a beautiful and moving story? Yes, I would.", "positive") in texts
    assert ("LC10", "Do I think that the acting is good? No, I don't.", "negative") in texts
    assert ("LC6", "I thought it would be a terrible waste of time, but it wasn't.", "positive") in texts or (
        "LC6",
        "I expected a terrible waste of time, but that's not what I got.",
        "positive",
    ) in texts
    lc3 = [r for r in rows if r["capability_id"] == "LC3"]
    # A change over time: the past opinion is the opposite of the present one.
    for r in lc3:
        past_negative = "dull" in r["text"] or "terrible" in r["text"]
        assert r["label"] == ("positive" if past_negative else "negative"), r["text"]
    assert any("the plot was dull and boring" in r["text"] for r in lc3)
    # Every seed names the checks it passed; the mixed sentence is rejected with its reason.
    # LC10 and LC6 deny their seed: a third check says the denial flips the whole clause.
    denied = {"LC10", "LC6"}
    for r in rows:
        extra = ["seed-denied-whole"] if r["capability_id"] in denied else []
        assert json.loads(r["checks"]) == ["seed-form", "seed-polarity", *extra], r
    mixed = [r for r in rejected if "script is awful" in r["text"]]
    assert mixed and all(r["check"] == "seed-form" and "contrast word" in r["reason"] for r in mixed)
    # The expansion inserts into the seed sentence (core), then the wrapper is put back.
    r = next(r for r in rows if r["text"].startswith("Do I think that the acting"))
    assert r["core"] == "the acting is good" and r["wrap"].replace("{s}", r["core"]) == r["text"]


def test_paper_wording_is_still_available(nlp, caps):
    table = searched(nlp, {"LC9": caps["LC9"]}, [("The acting is wonderful.", "positive")])
    rows, rejected = checked_seed_rows(
        [caps["LC9"]], table, suite="s", max_seeds=2, seed=0, neutral_proxy=True, wrappers="paper"
    )
    assert rows and rows[0]["text"] in {
        "Do I think that the acting is wonderful? yes",
        "Do I agree that the acting is wonderful? yes",
    }
    assert rejected == []


def test_fill_checks_refuse_unattested_context_and_function_words():
    from checkray.actors.s2lct.mask_filler import word_rejection

    lm = BigramLM({"a": 10, "main": 5, "character": 5, "central": 3}, {("a", "main"): 2, ("main", "character"): 3})
    assert lm.attested("a", "main", "character") is None
    assert "unseen" in lm.attested("central", "main", "character")  # "central main character"
    assert lm.attested(None, "main", ".") is None  # nothing to check at the edges / next to punctuation

    def items(*words, mask_at):
        out = [{"t": w, "ws": " ", "tag": "NN" if w == "character" else "DT"} for w in words]
        out.insert(mask_at, {"mask": "JJ", "ws": " "})
        return out

    trigrams = {"a main character": 2}
    assert context_reason(items("a", "character", mask_at=1), 0, "main", lm, trigrams) is None
    # The bigram "central main" was never seen: "its central [main] character" is refused.
    assert "unseen" in context_reason(items("its", "central", "character", mask_at=2), 0, "main", lm, trigrams)
    # Both bigrams seen but not the trigram; not before a noun; first word.
    assert context_reason(items("a", "character", mask_at=1), 0, "main", lm, {}).endswith(
        "unseen in the reference text"
    )
    assert (
        context_reason(items("a", "the", mask_at=1), 0, "main", lm, trigrams) == "not right before a noun or adjective"
    )
    assert context_reason(items("character", mask_at=0), 0, "main", lm, trigrams) == "first word of the sentence"
    # Before a compound noun the fill must be attested with the compound: "a [main]
    # character arc" is refused until "main character arc" is seen; "a [main] character
    # is" and "a [main] character ." are not (the noun phrase has ended).
    lm.bi[("character", "arc")] = lm.bi[("character", "is")] = 1
    compound = items("a", "character", "arc", mask_at=1)
    compound[3]["tag"] = "NN"
    assert "'main character arc' unseen" in context_reason(compound, 0, "main", lm, trigrams)
    assert context_reason(compound, 0, "main", lm, trigrams | {"main character arc": 1}) is None
    assert context_reason(items("a", "character", "is", mask_at=1), 0, "main", lm, trigrams) is None
    assert context_reason(items("a", "character", ".", mask_at=1), 0, "main", lm, trigrams) is None
    assert word_rejection(["not"]) == "negation"
    assert word_rejection(["never"]) == "negation"
    for word in ("twice", "still", "so", "second", "someone", "again"):
        assert word_rejection([word]) == "function-word", word
    assert word_rejection(["hardly"]) is not None  # polar in a lexicon, and a degree word
    assert word_rejection(["tremendous"]) == "polarity"
    # No lexicon lists "formulaic"; the labeled corpora use it in pans (read wrong: "Do I
    # think that the [formulaic] plot grinds on ...? No" keeps the new blame standing).
    assert word_rejection(["formulaic"]) is None
    assert word_rejection(["formulaic"], {"formulaic": -0.58}) == "polarity"
    assert word_rejection(["visual"], {"visual": 0.0}) is None
    assert word_rejection(["documentary"]) is None
    # a fill never adds who a person is (read off-capability: "a fat man", "white words")
    for word in ("white", "male", "Jewish", "elderly"):
        assert word_rejection([word]) == "identity", word
    assert word_rejection(["french"]) is None and word_rejection(["american"]) is None
    # a nationality fits a film, not a person the seed named without one
    from checkray.actors.s2lct.mask_filler import nationality_reason

    masked = [{"t": "a"}, {"mask": "JJ"}, {"t": "man"}]
    assert "nationality" in nationality_reason(masked, ["japanese"])
    assert nationality_reason([{"t": "a"}, {"mask": "JJ"}, {"t": "film"}], ["japanese"]) is None
    assert nationality_reason(masked, ["quiet"]) is None
    for people in ("cast", "person", "crew"):  # WordNet files these as a group or a top category
        assert nationality_reason([{"t": "the"}, {"mask": "JJ"}, {"t": people}], ["japanese"]), people


def test_seeds_that_only_read_right_inside_their_review_are_refused(nlp):
    """Read wrong at size (SST-2): "Do I think that a fast-moving and remarkable film that
    appears destined to become a landmark ...?" (a noun phrase), "Would I call it
    stupider?" (than what?), "Would I call it a dream cast of solid female talent ...?"
    (the film is not a cast)."""
    cases = {
        "A fast-moving and remarkable film that appears destined to become a landmark in Japanese animation .": "relative pronoun 'that'",
        "stupider .": "comparative 'stupider' without its standard",
        "it is stupider .": "comparative 'stupider' without its standard",
        "A dream cast of solid female talent who build a seamless ensemble .": "naming people ('cast')",
        # read wrong in the seed-24/25 draws and at size: "Do I think that a backstage
        # must-see ...?", "to me it was the tone shifts abruptly ..."
        "a backstage must-see for true fans of comedy .": "inside a hyphenated word",
        "the tone shifts abruptly from tense to celebratory to soppy .": "'shifts abruptly' (a verb tagged as a noun)",
    }
    for text, why in cases.items():
        views, reason = seed_form(toks(nlp, text))
        assert not views and why in reason, (text, reason)
    assert seed_form(toks(nlp, "it 's a fast-moving thriller ."))[0]["np"] == "a fast-moving thriller"
    views, reason = seed_form(toks(nlp, "it is better than the first one ."))
    assert reason is None and views["np"] == "better than the first one"
    views, reason = seed_form(toks(nlp, "the film is a gift to anyone who loves dance ."))
    assert reason is None and views["np"] == "a gift to anyone who loves dance"


def test_denying_the_top_of_a_scale_is_not_the_opposite_verdict(nlp):
    """Read wrong under denying wrappers: "Would I call it a masterpiece four years in the
    making? No" (not a pan), "... brilliant as the conflicted daniel? No", "the leanest
    and meanest of solondz's comedies? No"; "not good" and "not impressive" are pans."""
    for text in (
        "a masterpiece four years in the making",
        "ryan gosling is , in a word , brilliant as the conflicted daniel",
        "one of the outstanding thrillers of recent years",
        "the leanest and meanest of solondz's misanthropic comedies",
        "the most repellent movie of 2002",
        "the worst film of the year",
        "an extremely unpleasant film",
        "an exceedingly clever piece of cinema",  # read wrong at size, 0e82c66
        "a cop story that understands the medium amazingly well",
        "a marvellous journey from childhood idealism to adolescent self-absorption",  # British spelling
    ):
        assert degree_reason(toks(nlp, text), text), text
    for text in (
        "the acting is good",
        "it is impressive",
        "it is a great film",
        "most people will like it",
        "a very dull film",
    ):
        assert degree_reason(toks(nlp, text), text) is None, text


def test_denying_what_an_exclusive_word_singles_out_is_unclear():
    """Read wrong at size: "Do I think that William Shatner, as a pompous professor, is
    the sole bright spot? No, I don't." (the praise already blames the rest)."""
    for text in (
        "William Shatner , as a pompous professor , is the sole bright spot",
        "the only good thing about it is the soundtrack",
        "it is just a bad movie",
    ):
        assert exclusive_reason(text), text
    for text in ("a bright spot in a dull year", "it is a sweet and sexy film"):
        assert exclusive_reason(text) is None, text
    # read wrong in the seed-27 draw: "not always fascinating" is fascinating most of the time
    assert "universal" in exclusive_reason("it's always fascinating to watch marker the essayist at work")
    # read wrong at size: "not both a necessary political work and a fascinating documentary" may be one
    assert "both" in exclusive_reason("it is both a necessary political work and a fascinating documentary")


def test_denying_a_whole_span_or_an_expectation_may_deny_less_than_the_verdict():
    """Read wrong in demo draws: "I wouldn't say ... that it is a story that zings all the
    way through with originality" (it may zing part of the way), "... a deviant topical
    comedy which is funny from start to finish", "... a surprisingly funny movie" (the
    "no" may take back only the surprise)."""
    for text in (
        "a story that zings all the way through with originality , humour and pathos",
        "a deviant topical comedy which is funny from start to finish",
        "a surprisingly funny movie",
        "it is gripping throughout",
    ):
        assert scope_reason(text), text
    for text in ("a funny movie", "a story that zings with originality", "the finish is weak"):
        assert scope_reason(text) is None, text


def test_a_fill_may_only_restrict_its_noun():
    """Read wrong in annotated expansions: "a [deep] movie", "the [ultimate] price of a
    ticket" (judging adjectives), "the [plot] lines" (a lexicalised compound), "the
    [feature] actors" (a pair seen once; and people), "food for [deep] thought" (a split
    idiom), "the [voice] actors" (other people)."""
    counts = {("french", "film"): 5, ("deep", "movie"): 3, ("sports", "scenes"): 1, ("plot", "lines"): 13}
    counts |= {("voice", "actors"): 9}
    counts |= {("story", "arc"): 4, ("deep", "thought"): 3, ("french", "thought"): 3}
    lm = BigramLM({}, counts)

    def items(*words, tags=None):
        tags = tags or {}
        return [{"mask": "JJ", "ws": " "} if w == "_" else {"t": w, "ws": " ", "tag": tags.get(w, "NN")} for w in words]

    assert modifier_reason(items("a", "_", "film", "about", "love"), 0, "french", "JJ", lm) is None
    assert "not a classifying adjective" in modifier_reason(items("a", "_", "movie"), 0, "deep", "JJ", lm)
    assert "not a classifying adjective" in modifier_reason(items("the", "_", "price"), 0, "ultimate", "JJ", lm)
    assert "lexicalised compound" in modifier_reason(items("the", "_", "lines"), 0, "plot", "NN", lm)
    assert modifier_reason(items("the", "_", "arc"), 0, "story", "NN", lm) is None
    assert "fewer than 2 times" in modifier_reason(items("the", "_", "scenes"), 0, "sports", "NN", lm)
    assert modifier_reason(items("the", "_", "scenes"), 0, "sports", "NN", lm, compound_min_count=1) is None
    # "the [voice] actors are forced to grapple with ...": other people than the seed's actors
    assert "names other people" in modifier_reason(items("the", "_", "actors"), 0, "voice", "NN", lm)
    split = items("offers", "food", "for", "_", "thought")
    assert "fixed expression" in modifier_reason(split, 0, "french", "JJ", lm)
    # The offline filler does not even offer a judging adjective as a candidate.
    from checkray.actors.s2lct.mask_filler import OfflineFiller
    from checkray.engine.s2lct.config import FillerConfig

    assert OfflineFiller.may_modify("french", "JJ", FillerConfig()) and OfflineFiller.may_modify(
        "deep", "NN", FillerConfig()
    )
    assert not OfflineFiller.may_modify("deep", "JJ", FillerConfig())
    assert OfflineFiller.may_modify("deep", "JJ", FillerConfig(modifier_check=False))


def test_rejected_fills_keep_their_reason_and_wrapped_text():
    from checkray.engine.s2lct.suite import suite_table

    seeds = pa.Table.from_pylist(
        [
            {
                "case_id": "c1",
                "capability_id": "LC9",
                "capability": "LC9: q",
                "suite": "s-LC9",
                "text": "Do I think that the plot is a mess? Yes, I do.",
                "label": "negative",
                "sources": json.dumps(["d1"]),
                "rules": json.dumps(["neg_sent"]),
                "template_id": "LC9.fluent1.clause",
                "accepts": json.dumps([]),
                "label_source": "corpus",
                "core": "the plot is a mess",
                "wrap": "Do I think that {s}? Yes, I do.",
                "checks": json.dumps(["seed-form", "seed-polarity"]),
            }
        ]
    )
    expansions = [
        {
            "masked": "the {MASK} plot is a mess",
            "tags": ["JJ"],
            "production": "NP -> DT NN",
            "reference": "NP -> DT JJ NN",
            "reference_count": 3,
            "rejected": {"ngram": 1},
            "refused": [["the main plot is a mess", "ngram", "'the main' unseen"]],
            "fills": [{"text": "the whole plot is a mess", "words": ["whole"], "score": -3.0}],
        }
    ]
    expanded = pa.Table.from_pylist(
        [{"case_id": "c1", "tree": "(S)", "parser": "spacy-dep2const", "expansions": json.dumps(expansions)}]
    )
    suite, rejected = suite_table(seeds, expanded, "bigram-lm", 0, with_rejected=True)
    texts = suite.column("text").to_pylist()
    assert texts == [
        "Do I think that the plot is a mess? Yes, I do.",
        "Do I think that the whole plot is a mess? Yes, I do.",
    ]
    checks = suite.column("checks").to_pylist()
    assert checks[0] == ["seed-form", "seed-polarity"] and "fill-ngram" in checks[1]
    [rej] = rejected.to_pylist()
    assert rej["check"] == "fill-ngram" and rej["reason"] == "'the main' unseen"
    assert rej["text"] == "Do I think that the main plot is a mess? Yes, I do." and rej["source"] == "c1"


def test_a_denied_clause_carries_its_sentiment_in_its_predicate(nlp):
    """ "Do I think that <clause>? No, I don't." denies the predicate: praise in the subject or
    in a fronted modifier survives the "no" (both cases read wrong by a reviewer)."""
    for text, word in [
        ("its engaging simplicity is driven by appealing leads.", "engaging"),
        ("hailed as a clever exercise in neo-hitchcockianism, this picture is more accurately chabrolian.", "hailed"),
    ]:
        why = denial_reason(toks(nlp, text))
        assert why and f"'{word}'" in why, (text, why)
    assert (
        denial_reason(toks(nlp, "the film takes place in a town."))
        == "no polar word in the predicate the wrapper denies"
    )
    # Two coordinated clauses: the "no" may or may not take the second one.
    for text in [
        "it is amusing , and that's all it needs to be .",
        "the emotion is impressively true for being so hot-blooded , and both leads are up to the task .",
    ]:
        why = denial_reason(toks(nlp, text))
        assert why and why.startswith("two coordinated clauses"), (text, why)
    for text in [
        "the case is a convincing one , and should give anyone with a conscience reason to pause .",
        "the acting is superb.",
        "the cast delivers wonderful performances.",
        "the story drags.",
        "the director has made such a wonderful film.",
    ]:
        assert denial_reason(toks(nlp, text)) is None, text
    # What the main claim takes as given survives the "no" too.
    for text, word in [
        ("scott delivers a terrific performance in this fascinating portrait of a modern lothario.", "fascinating"),
        ("diggs and lathan are among the chief reasons brown sugar is such a sweet and sexy film.", "sweet"),
    ]:
        why = denial_reason(toks(nlp, text))
        assert why and f"'{word}' is presupposed" in why, (text, why)


def test_a_seed_of_mixed_polarity_is_refused_and_its_embedded_part_must_carry_the_label(nlp, caps):
    """Read wrong by a reviewer: "Would I call it a smart, arch and rather cold-blooded
    comedy? No, I wouldn't." (mixed: the denial says nothing clear) and "Would I call it
    somewhat clumsy? No, I wouldn't." (the review praised; the part embedded is negative)."""
    from checkray.engine.case_checks import apply_checks
    from checkray.engine.s2lct.fluent import mixed_reason
    from checkray.engine.s2lct.search import seed_checks

    assert "'cold-blooded' is negative" in mixed_reason("a smart , arch and rather cold-blooded comedy", "positive")
    assert "'tepid' is negative" in mixed_reason("effective but tepid biopic", "positive", {"tepid": -0.8})
    assert mixed_reason("a wonderful , funny and touching film", "positive") is None
    assert mixed_reason("a dull and stereotypical tale", "neutral") is None  # neutral seeds have their own check

    checks = seed_checks("neutral", caps["LC10"].fluent[0])
    texts = [
        "it's a good , funny and touching film .",
        "charming and witty , it's also somewhat clumsy .",
        "it's a smart , arch and rather cold-blooded comedy .",
    ]
    rows = [{"id": t, "text": t, "label": "positive", "tokens": toks(nlp, t)} for t in texts]
    out = apply_checks(rows, checks)
    assert [r["core"] for r in out.kept] == ["a good , funny and touching film"]
    reasons = {r["id"]: (r["check"], r["reason"]) for r in out.rejected}
    assert reasons[texts[1]][0] == "seed-polarity" and reasons[texts[1]][1].startswith(
        "the embedded np 'somewhat clumsy'"
    )
    assert reasons[texts[2]][0] == "seed-polarity" and "'cold-blooded' is negative" in reasons[texts[2]][1]


def test_british_spellings_are_read_as_american_ones():
    """The lexicons are American: "marvellous" and "humourless" were neutral to them."""
    from checkray.engine.lang.polarity import american_spelling, polar_sources

    assert polar_sources("marvellous") and polar_sources("marvellous") == polar_sources("marvelous")
    assert polar_sources("humourless")["vader"] < 0 and polar_sources("favourite")
    assert american_spelling("theatres") == "theaters" and american_spelling("four") is None
    assert polar_sources("four") == {} and polar_sources("our") == {}


def _tagged(text: str) -> list[dict]:
    """Items of a masked sentence: ``word/TAG`` tokens, ``_`` the mask."""
    out = []
    for tok in text.split():
        if tok == "_":
            out.append({"mask": "JJ", "ws": " "})
        else:
            word, tag = tok.rsplit("/", 1)
            out.append({"t": word, "tag": tag, "ws": " "})
    return out


def test_a_fill_may_not_add_to_what_a_wrapper_denies():
    """Read wrong in the seed-24 draw: "Would I call it a [british] film that affirms ...?
    No" (the denial may target 'british'); a fill in the subject of a denied clause stays."""
    from checkray.engine.s2lct.mask_fill import denied_fill_reason

    np_seed = _tagged("a/DT _ film/NN that/WDT affirms/VBZ love/NN")
    assert denied_fill_reason(np_seed, ["british"], "np")
    hybrid = _tagged("it/PRP is/VBZ an/DT entertaining/JJ _ hybrid/NN of/IN comedy/NN")
    assert denied_fill_reason(hybrid, ["british"], "clause")
    subject = _tagged("the/DT _ film/NN suffers/VBZ from/IN a/DT simplistic/JJ narrative/NN")
    assert denied_fill_reason(subject, ["american"], "clause") is None
    # a noun phrase is denied whole: a fill on any of its nouns may be what the "no" is
    # about (read wrong in the seed-28 draw: "an unsuccessful attempt at a [british] movie
    # of ideas? No")
    inside_pp = _tagged("an/DT unsuccessful/JJ attempt/NN at/IN a/DT _ movie/NN of/IN ideas/NNS")
    assert "denies whole" in denied_fill_reason(inside_pp, ["british"], "np")
    no_noun = _tagged("fun/JJ and/CC _ ./.")
    assert denied_fill_reason(no_noun, ["wise"], "np") is None
    possessive = _tagged("this/DT time/NN Kaufman/NNP 's/POS _ imagination/NN has/VBZ failed/VBN him/PRP")
    assert denied_fill_reason(possessive, ["visual"], "clause") is None  # 's is no copula here


def test_a_fill_may_not_repeat_a_word_of_the_sentence():
    from checkray.engine.s2lct.mask_fill import repeat_reason

    seed = _tagged("an/DT entertaining/JJ british/JJ hybrid/NN of/IN _ comedy/NN")
    assert repeat_reason(seed, ["british"])
    assert repeat_reason(seed, ["french"]) is None


def test_a_seed_resting_on_a_word_used_both_ways_is_refused(nlp, caps):
    # read at size: "Do I think that it 's haunting? No, I don't." expected positive or
    # neutral, but "haunting" is praise in most reviews (VADER -0.28, AFINN +0.2)
    assert "disputed" in disputed_reason("it 's haunting")
    assert "disputed" in disputed_reason("a dark tale", {"dark": 0.8})  # the corpus against a weak lexicon value
    assert disputed_reason("a tale of grief", {"grief": 0.8}) is None  # not against a clear one
    assert disputed_reason("a terrible waste of time") is None
    pairs = [("It's haunting.", "negative"), ("It's dreadful.", "negative")]
    table = searched(nlp, {"LC11": caps["LC11"]}, pairs)
    rows, rejected = checked_seed_rows([caps["LC11"]], table, suite="s", max_seeds=10, seed=0, neutral_proxy=True)
    assert [r for r in rows if "dreadful" in r["text"]] and not [r for r in rows if "haunting" in r["text"]]
    assert any("haunting" in r["reason"] and "disputed" in r["reason"] for r in rejected)


def test_a_sentence_that_goes_on_from_another_is_no_seed(nlp, caps):
    # read at size under LC2: "Or some damn thing ." has no verdict of its own
    pairs = [("Or some damn thing .", "negative"), ("A damn fine movie .", "positive")]
    table = searched(nlp, {"LC2": caps["LC2"]}, pairs)
    rows, rejected = checked_seed_rows([caps["LC2"]], table, suite="s", max_seeds=10, seed=0, neutral_proxy=True)
    assert "Or some damn thing ." not in {r["text"] for r in rows}
    assert any(r["check"] == "seed-form" and "goes on from" in r["reason"] for r in rejected)


def test_a_denied_comparison_is_refused(nlp, caps):
    # read at size under LC7: denying "impresses almost as much as her work in Safe" may
    # only say the performance is less than her best
    pairs = [
        ("Moore 's performance impresses almost as much as her work with Haynes in 1995 's Safe .", "positive"),
        ("The sequel is better than the original .", "positive"),
        ("The acting is lovely .", "positive"),
    ]
    table = searched(nlp, {"LC10": caps["LC10"]}, pairs)
    rows, rejected = checked_seed_rows([caps["LC10"]], table, suite="s", max_seeds=10, seed=0, neutral_proxy=True)
    assert [r["text"] for r in rows] == ["Do I think that the acting is lovely? No, I don't."]
    why = {r["text"]: r["reason"] for r in rejected if r["check"] == "seed-denied-whole"}
    assert sum("comparison" in w for w in why.values()) == 2, why
    assert comparison_reason([], "the acting as well as the script") is None


def test_a_sentence_that_points_back_into_its_review_is_no_seed(nlp):
    """Read as not fluent at size: "... I think the voices are fine as well." and "...
    Hugh Grant and Sandra Bullock are two such likeable actors." (its "that ..." was cut)."""
    for text in (
        "the voices are fine as well .",
        "Hugh Grant and Sandra Bullock are two such likeable actors .",
        "the script is clumsy too .",
        "after that , it just gets stupid and maudlin .",
    ):
        assert back_reference_reason(toks(nlp, text)), text
        assert seed_form(toks(nlp, text))[1], text
    for text in (
        "brown sugar is such a sweet and sexy film .",
        "they are two such likeable actors that you forgive the plot .",
        "the voices are fine .",
        "too long by half .",
        "it gets stupid after that .",
    ):
        assert back_reference_reason(toks(nlp, text)) is None, text


def test_a_sentence_cut_inside_a_quotation_is_no_seed(nlp):
    """Read wrong at size (LC2, taken as found): "As Hugh Grant says repeatedly throughout
    the movie , ` Lovely !" is the character's word, cut before the review goes on."""
    assert open_quote_reason(toks(nlp, "As Hugh Grant says repeatedly throughout the movie , ` Lovely !"))
    assert open_quote_reason(toks(nlp, "The best movie of its kind since ` Brazil . '")) is None
    assert open_quote_reason(toks(nlp, "The film 's score is lovely .")) is None
