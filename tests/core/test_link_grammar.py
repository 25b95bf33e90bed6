"""Link Grammar as a grammaticality check: the words a parse must leave out, and a clear
error where the parser is asked for and not installed (`make test` installs it with apt)."""

from __future__ import annotations

import pytest

from checkray.engine.errors import InputError
from checkray.engine.lang import link_grammar

needs_parser = pytest.mark.skipif(not link_grammar.available(), reason="Link Grammar not installed (make grammar)")


@needs_parser
@pytest.mark.parametrize(
    "sentence",
    ["The theme music is excellent!", "This must be one of the worst movies I have seen.", "I loved it."],
)
def test_a_grammatical_sentence_links_every_word(sentence):
    assert link_grammar.unlinked_words(sentence) == ()


@needs_parser
@pytest.mark.parametrize(
    "sentence",
    [
        "This must me one of the worst movies I have seen.",  # "me" for "be"
        "The jokes and script was terrible!",  # agreement
        "I thought is was impossible to make a sequel.",  # "is" for "it"
    ],
)
def test_a_writers_slip_leaves_words_out(sentence):
    left_out = link_grammar.unlinked_words(sentence)
    assert left_out and all(word in sentence.lower() or word in sentence for word in left_out)


def test_asking_for_a_missing_parser_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(link_grammar, "_module", lambda: None)
    assert not link_grammar.available()
    with pytest.raises(InputError, match="Link Grammar parser: apt-get install python3-link-grammar"):
        link_grammar.require()


def test_a_parse_past_the_time_limit_counts_as_no_parse(monkeypatch):
    """The parser raises when a long sentence runs out of time; the check must not fail
    the job (a Ray task) but count the sentence as unparsed, as when no parse is found."""

    class TimerExhausted(Exception):
        pass

    class Sentence:
        def __init__(self, *_):
            pass

        def parse(self):
            raise TimerExhausted()

    class FakeLG:
        LG_TimerExhausted = TimerExhausted
        LG_Error = Exception

    monkeypatch.setattr(
        link_grammar, "_parser", lambda: (type("LG", (FakeLG,), {"Sentence": Sentence}), None, None, None)
    )
    link_grammar.unlinked_words.cache_clear()
    try:
        assert link_grammar.unlinked_words("a very long sentence .") == ("a very long sentence .",)
    finally:
        link_grammar.unlinked_words.cache_clear()
