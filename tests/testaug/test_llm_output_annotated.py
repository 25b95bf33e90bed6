"""Failure shapes a careful reader found in the demo's TestAug cases (final annotation of
0996219), each now handled by the output cleaning or the polarity check."""

from __future__ import annotations

from checkray.engine.llm_output import artefact_reason, clean_output, polarity_reason


def test_an_echoed_instruction_is_cut_off():
    raw = 'The soundtrack is not lousy at all, it is good. " - Should return: "The soundtrack is not lousy at all, it is good.'
    assert clean_output(raw) == "The soundtrack is not lousy at all, it is good."
    assert artefact_reason("The plot should return: the ending") is not None


def test_a_negated_clause_after_but_decides_against_a_positive_label():
    for text in (
        "The movie had a bad start, but the ending was not great.",
        "The book had a terrible start, but the ending was not very good.",
        "The movie had a horrible start, but the ending was not enjoyable.",
    ):
        assert polarity_reason(text, "positive") is not None, text


def test_a_clause_level_negation_vader_misses_is_not_a_false_rejection():
    # VADER scores "didn't think this was great" positive: not sure enough to reject negative
    assert polarity_reason("I didn't think this was a great director.", "negative") is None
    assert polarity_reason("The plot is not horrible at all, it is lovely.", "positive") is None
    assert polarity_reason("The acting is not excellent.", "negative") is None


def test_a_positive_label_resting_on_a_negated_negative_is_faint_praise():
    # all 18 annotated cases of this shape were read as not positive; none label-valid
    for text in (
        "The script had a bad start, but the ending was not very bad.",
        "The plot had a disappointing start, but the ending was not very disappointing.",
        "It is never boring.",
    ):
        reason = polarity_reason(text, "positive")
        assert reason is not None and "negated negative" in reason, text
    # praise beside the negated negative decides; negative labels are not litotes' concern
    assert polarity_reason("The movie is not bad, it is wonderful.", "positive") is None
    assert polarity_reason("The acting was never dull and the plot was great.", "positive") is None


def test_a_negated_negative_word_never_makes_a_sentence_negative():
    # the 5 cases of this shape in a seed-11 demo draw were all label-invalid
    for text in ("The cast is not sad.", "The soundtrack isn't sad.", "It is not good, not bad."):
        reason = polarity_reason(text, "negative")
        assert reason is not None and "cannot make it negative" in reason, text
    for text in ("The plot is not exciting.", "The movie is not bad, it is terrible.", "The plot wasn't great."):
        assert polarity_reason(text, "negative") is None, text


def test_a_generation_cut_off_mid_phrase_is_an_artefact():
    """Read in the demo's MFT cases (final annotation of b42cd49): "Lame comedy, a comedy
    that is not funny. He has been working on a new" (the answer hit its token limit)."""
    assert "cut off" in artefact_reason("Lame comedy, a comedy that is not funny. He has been working on a new")
    assert "cut off" in artefact_reason("The story is good and")
    for text in ("Lame comedy", "The plot is dull.", "I loved her", '"Great fun"', "It was a joy (mostly)"):
        assert artefact_reason(text) is None, text


def test_an_article_right_before_a_verb_is_a_word_missing():
    """Read in a TestAug run of configs/testaug_sentiment.yaml: "I don't think, given the time
    that I've been eating, that the was a bad meal." (a kept case, then 13 expansions of it)."""
    reason = artefact_reason("I don't think, given the time that I've been eating, that the was a bad meal.")
    assert reason and "word missing" in reason and "'the was'" in reason
    assert "word missing" in artefact_reason("Was a is good.")
    for text in (
        "A will was found.",
        "The have-nots lost.",
        "The film was bad.",
        "An is-this-real moment.",
        "The can is empty.",
    ):
        assert artefact_reason(text) is None, text


def test_an_article_that_does_not_fit_the_next_word_is_an_artefact():
    """Read in a TestAug run: "Do I think that was an European service? Yes", "an Swiss
    airline" (kept cases, then 10 expansions of them); SST-2 itself holds "an small slice"."""
    for text in ("Do I think that was an European service? Yes", "It was an Swiss airline.", "a excellent one"):
        assert "article does not fit" in artefact_reason(text), text
    for text in (
        "an hour ago",
        "a European airline",
        "a unique film",
        "an unimaginative plot",
        "He has an MBA",
        "a UN report",
        "an honest man",
        "an historical epic",
        "a historical epic",
        "a one-off",
        "an uninspired end",
    ):
        text += "."  # complete sentences: a phrase ending on its noun is not cut off
        assert artefact_reason(text) is None, text


def test_a_brace_or_an_unbalanced_bracket_is_markup_left_in_the_case():
    # read in a TestAug run at size: a JSON answer's opening brace kept in the case
    assert artefact_reason("{ I have been confused about the terms, but now I understand them.") is not None
    assert artefact_reason("The plot (if there is one) drags.") is None
    assert artefact_reason("The plot (if there is one drags.") is not None
    assert artefact_reason("The plot if there is one) drags.") is not None
    assert artefact_reason("The cast [all of it] shines.") is None


def test_a_clause_without_its_verb_or_a_wrong_verb_form_is_a_word_missing():
    """Read in a small at-size TestAug run (final-atsize-97706f3-seed3-small-testaug): "We
    found that the staff.", "We have saw that the company.", "No one disapproves that crew."."""
    for text, part in (
        ("We found that the staff.", "verb missing"),
        ("We find that the company!", "verb missing"),
        ("We have saw that the company.", "simple past after 'have'"),
        ("She's went home.", None),  # "'s" is "is" as often as "has": not read
        ("No one disapproves that crew.", "'of' missing"),
    ):
        reason = artefact_reason(text)
        assert (reason is None) if part is None else (part in reason), text
    for text in (
        "I like that movie.",
        "We found that the staff was rude.",
        "I have seen that the company cares.",
        "No one disapproves of that crew.",
        "They had eaten.",
    ):
        assert artefact_reason(text) is None, text


def test_an_open_question_answered_yes_and_would_with_a_state_verb_are_not_english():
    """Read in a small at-size TestAug run (final-atsize-471a564-seed4-small-testaug)."""
    for text, part in (
        ("What do you think about the staff? Yes", "open question"),
        ("How was the flight? No", "open question"),
        ("I abhor this movie, even though in the past I would admire it.", "habitual 'would'"),
        ("I dislike this restaurant, in the past I would like it.", "habitual 'would'"),
    ):
        reason = artefact_reason(text)
        assert reason and part in reason, text
    for text in (
        "Do you think the staff was rude? Yes",
        "What a flight! Yes, really.",
        "In the past I would go there every week.",
        "I would like it if the food were warmer.",
    ):
        assert artefact_reason(text) is None, text


def test_a_statement_given_a_question_mark_and_an_answer_is_not_english():
    """Read in a small at-size TestAug run (final-atsize-6ba0c6d-seed6-small-testaug): "I
    don't think the plane is ridiculous? No" and five expansions like it."""
    reason = artefact_reason("I don't think the plane is ridiculous? No")
    assert reason and "a statement given a question mark" in reason
    for text in (
        "Do I think the chef was lazy? No",
        "Isn't the crew friendly? Yes",
        "Would you fly with them again? No",
        "i can't say, given it's a Monday, that the food is British.",  # the spec's own casing
    ):
        assert artefact_reason(text) is None, text
