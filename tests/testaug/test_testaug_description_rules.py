"""TestAug's description-words check on cases people read at size (each one read as wrong
for the reason the check gives, or read as right and kept)."""

from __future__ import annotations

import pytest

from checkray.engine.testaug.description_rules import description_reason, word_class

NEG_NEG = "A neutral sentiment sentence with negated negative word."
NEG_NEUTRAL = "A neutral sentiment sentence with negated neutral word."
NEG_POS_MIDDLE = (
    "A negative sentiment sentence with negated positive sentiment word and neutral contents in the middle."
)
POS_Q_YES = "A positive sentiment sentence with positive sentiment question and word yes as the answer."
NEG_Q_NO = "A neutral sentiment sentence with negative sentiment question and word no as the answer."
POS_Q_NO = "A negative sentiment sentence with positive sentiment question and word no as the answer."
NEUTRAL_WORDS = "A neutral sentence with neutral words."
POSITIVE_WORDS = "A positive sentiment sentence with positive words."
WAS_POSITIVE = "I used to have positive sentiment to something, but now I have negative sentiment to it."
WAS_NEGATIVE = "I used to have negative sentiment to something, but now I have positive sentiment to it."
THOUGHT_NEGATIVE = "I thought something was negative, but it was neutral."
MINE_POSITIVE = "My opinion is more important than others' when expressing positive sentiment."
MINE_NEGATIVE = "My opinion is more important than others' when expressing negative sentiment."


@pytest.mark.parametrize(
    "description, text, reason",
    [
        (NEG_NEG, "No one loves this cabin crew.", "a positive word ('loves')"),
        (NEG_NEG, "The restaurant is not authentic.", "a positive word ('authentic')"),
        (NEG_NEG, "That tree is beautiful.", "negates nothing"),
        (NEG_NEUTRAL, "The restaurant was not very good.", "a positive word ('good')"),
        (POS_Q_YES, "Can you believe this? Yes", "holds no positive word"),
        (NEG_Q_NO, "Did we go on vacation? No", "holds no negative word"),
        (NEG_Q_NO, "Do you think the weather is warm? No", "a positive word ('warm')"),
        (NEG_Q_NO, "Did you have a good time at the concert? Yes", "answers 'Yes'"),
        (NEUTRAL_WORDS, "The flight was terrible.", "a negative word ('terrible')"),
        (NEG_POS_MIDDLE, "I can't say, given the weather, that the staff was satisfactory.", None),
        (
            WAS_POSITIVE,
            "I absolutely love this restaurant, but in the past I would not recommend it.",
            "present clause",
        ),
        (WAS_NEGATIVE, "I feel sad about this restaurant, although in the past I didn't like it at all.", "present"),
        (WAS_NEGATIVE, "I loved this restaurant, but now I regret my decision.", "its past clause 'I loved this"),
        (THOUGHT_NEGATIVE, "I thought that the weather would be sunny, but it was not.", "expectation clause"),
        (WAS_POSITIVE, "Anything.", "no change over time"),
        (
            WAS_NEGATIVE,
            "I am grateful for the job opportunity, but I am not sure about my work-life balance.",
            "no change over time",
        ),
        (MINE_POSITIVE, "I think you are so smart, I wish I could learn more.", "no one else's opinion"),
        (MINE_POSITIVE, "I appreciate your kindness, my friends appreciate your kindness.", "reads positive too"),
        (MINE_POSITIVE, "I highly value you, some people appreciate your recommendation.", "no contrast"),
    ],
)
def test_cases_against_their_description(description, text, reason):
    got = description_reason(description, text)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got, got


@pytest.mark.parametrize(
    "description, text",
    [
        (NEG_NEG, "The food was not terrible."),
        (NEG_NEG, "I'm not sure if the airline was bad."),  # "not sure" hedges, negates no sentiment
        (NEG_POS_MIDDLE, "I don't think, given it's a Monday, that the crew was friendly."),
        (POS_Q_NO, "Do I think it is an incredible restaurant? No"),  # TextBlob knows "incredible"
        (POSITIVE_WORDS, "The plane exceeded my expectations."),  # no word against it: kept
        (NEUTRAL_WORDS, "The flight leaves at noon."),
        (WAS_POSITIVE, "I used to love this restaurant, but now I dislike going there."),
        (WAS_POSITIVE, "I dislike this restaurant, in the past I would value it."),  # past clause second
        (WAS_NEGATIVE, "I like this restaurant, but I was unhappy in the past."),
        (WAS_NEGATIVE, "I really enjoy this new book, but in the past I was never a big reader."),  # neutral past: kept
        (THOUGHT_NEGATIVE, "I thought I would be frustrated with the flight, but I was not."),
        (WAS_NEGATIVE, "I really admire this book, even though I was skeptical at first."),  # a present tense
        (MINE_POSITIVE, "I think you are brilliant, but I had heard you were boring."),
        (MINE_NEGATIVE, "I think you are awful, although people say you are wonderful."),
        (MINE_NEGATIVE, "I dislike this service even though my friends adore it."),
        (
            "I thought something was neutral, but it was not neutral.",
            "I thought it was an action movie, but it wasn't.",
        ),
    ],
)
def test_cases_that_fit_their_description_pass(description, text):
    assert description_reason(description, text) is None


def test_word_classes_use_every_lexicon_and_negating_prefixes():
    assert word_class("terrible") == "negative" and word_class("good") == "positive"
    assert word_class("tiresome") == "negative"  # TextBlob only
    assert word_class("unsatisfactory") == "negative"  # "satisfactory" negated by its prefix
    assert word_class("new") == "neutral"  # TextBlob's faint 0.14 is not polarity
