"""mft and the corpus label map: numeric labels named with --labels, label_words keyed either way."""

import pytest

from checkray.engine.errors import InputError
from checkray.engine.mft.suite import check_label_words, named_label_words

WORDS = {"positive": "positive", "negative": "negative"}


def test_words_keyed_by_raw_labels_are_translated_through_the_map():
    names = {"0": "negative", "1": "positive"}
    assert named_label_words({"0": "negative", "1": "positive"}, names) == WORDS
    assert named_label_words(WORDS, names) == WORDS  # already names: unchanged
    assert named_label_words(WORDS, None) == WORDS


def test_numeric_labels_without_names_stop_with_the_flag():
    with pytest.raises(InputError) as err:
        check_label_words({"0", "1"}, WORDS, None)
    message = str(err.value)
    assert "\n" not in message
    assert "--labels 0=...,1=..." in message


def test_a_label_outside_a_given_map_shows_the_map_extended():
    with pytest.raises(InputError, match=r"--labels 0=negative,1=positive,2=\.\.\."):
        check_label_words({"negative", "positive", "2"}, WORDS, {"0": "negative", "1": "positive"})


def test_a_named_label_without_a_word_points_at_label_words():
    with pytest.raises(InputError, match=r"mft.label_words has no entry for corpus label\(s\) \['neutral'\]"):
        check_label_words({"negative", "neutral"}, WORDS, None)
    check_label_words({"negative", "positive"}, WORDS, {"0": "negative", "1": "positive"})  # covered: no error
