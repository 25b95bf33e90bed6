"""checkray's WordNet reader skips nltk's OMW sense map and reads the lemma index as a
plain file; what it answers must be what nltk's own reader answers on the same files."""

from __future__ import annotations

import warnings

from checkray.engine.lang.wordnet import build_corpus_dir, wordnet


def test_the_fast_reader_answers_as_nltks_own_reader():
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    ours = wordnet()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stock = WordNetCorpusReader(str(build_corpus_dir()), None)
    assert ours._lemma_pos_offset_map == stock._lemma_pos_offset_map
    assert ours.get_version() == stock.get_version() == "3.0"
    for word in ("good", "glad", "run", "bitches", "quickly", "movies", "better"):
        assert ours.synsets(word) == stock.synsets(word)
        assert [s.definition() for s in ours.synsets(word)] == [s.definition() for s in stock.synsets(word)]
    assert ours.map30 is None  # the Open Multilingual WordNet's map: never built
