"""COSTELLO at paper scale, the parts that make it so: whole-dictionary nearest neighbours
(block-wise torch / numba, and on Ray actors), the inversion table and CR3 seeds taken
from a released-triples file, released triples read as a suite, the fuller gender
lexicon, the authors' dense synonym operator, CR4 on one shared word, the classifier
sample and the whole tokenizer vocabulary as dictionary."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from checkray.engine.costello.mutations import (
    dense_synonyms,
    gender_lexicon,
    gender_swap,
    inversion_sentences,
    read_gender_pairs,
    read_inversions,
    tokens_from_doc,
)
from checkray.engine.costello.neighbours import brute_force, nearest_neighbour_distances
from checkray.engine.costello.released import read_triples
from checkray.engine.costello.triples import Seed, combine, triple_table
from checkray.engine.errors import InputError


@pytest.fixture(scope="module")
def nlp():
    from checkray.actors.spacy_nlp import load_spacy

    return load_spacy("builtin:sm", disable=("parser", "ner"))


# ------------------------------------------------------------------ nearest neighbours

# A zero vector (an unknown word, left out) and five 2-d "word vectors":
#   b=(1,0) c=(1,2) d=(4,2) e=(0,-3) f=(3,0); their neighbours are worked out below.
TOY = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 2.0], [4.0, 2.0], [0.0, -3.0], [3.0, 0.0]], dtype=np.float32)


def test_nearest_neighbours_by_hand():
    words = TOY[1:]  # b c d e f (a is the zero vector)
    # b=(1,0) c=(1,2) d=(4,2) e=(0,-3) f=(3,0)
    # L1: b->f 2 (c is 2 too), c->b 2, d->f 3 (c is 3 too), e->b 4, f->b 2
    np.testing.assert_allclose(nearest_neighbour_distances(words, "l1"), [2, 2, 3, 4, 2])
    # L2: b->c 2 / f 2, c->b 2, d->f sqrt(5), e->b sqrt(10), f->b 2
    np.testing.assert_allclose(nearest_neighbour_distances(words, "l2"), [2, 2, np.sqrt(5), np.sqrt(10), 2], rtol=1e-6)
    # cos (1 - cosine): b and f point the same way (0); c->d 1 - 8/(sqrt5 sqrt20) = 0.2;
    # d->b 1 - 4/sqrt20; e is orthogonal to b and f (1) and points away from c and d (> 1)
    cos_cd, cos_db = 1 - 8 / (np.sqrt(5) * np.sqrt(20)), 1 - 4 / np.sqrt(20)
    np.testing.assert_allclose(nearest_neighbour_distances(words, "cos"), [0, cos_cd, cos_db, 1.0, 0], atol=1e-6)
    # the zero vector is left out, not a neighbour at distance |x|
    np.testing.assert_allclose(nearest_neighbour_distances(TOY, "l2"), [2, 2, np.sqrt(5), np.sqrt(10), 2], rtol=1e-6)


@pytest.mark.parametrize("metric", ["l1", "l2", "cos"])
def test_blocks_and_row_ranges_equal_the_full_matrix(metric):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 24)).astype(np.float32)
    X[7] = X[8]  # a duplicate word: distance 0
    expected = brute_force(X, metric)
    got = nearest_neighbour_distances(X, metric, block=64)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    assert got[7] == 0 and got[8] == 0
    halves = np.concatenate(
        [nearest_neighbour_distances(X, metric, rows=(0, 130)), nearest_neighbour_distances(X, metric, rows=(130, 300))]
    )
    np.testing.assert_allclose(halves, expected, rtol=1e-6, atol=1e-7)


def test_a_sampled_dictionary_inflates_the_threshold():
    """The documented bias of costello.dictionary_size: neighbours in a sparse sample are farther."""
    from checkray.engine.costello.metrics import thresholds

    X = np.random.default_rng(0).normal(size=(2000, 8)).astype(np.float32)
    whole = thresholds(nearest_neighbour_distances(X, "l2"))
    sample = thresholds(nearest_neighbour_distances(X[:200], "l2"))
    assert sample["mu-2sigma"] > whole["mu-2sigma"] and sample["min"] > whole["min"]


@pytest.mark.ray
def test_dictionary_nn_on_ray_actors_matches_the_local_code(ray_session):
    from checkray.actors.costello.neighbours import dictionary_nn

    rng = np.random.default_rng(1)
    mats = {"a": rng.normal(size=(150, 16)).astype(np.float32), "b": TOY}
    out = dictionary_nn(mats, ("l1", "l2", "cos"), "cpu", rows_per_task=64)
    for name, X in mats.items():
        for metric in ("l1", "l2", "cos"):
            np.testing.assert_allclose(out[name][metric], brute_force(X, metric), rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ released triples


def _released(tmp_path, data) -> str:
    path = tmp_path / "released.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_released_triples_json_becomes_a_suite(tmp_path):
    path = _released(
        tmp_path,
        {
            "SenWordFuzz": [["a good film .", "a beneficial film .", "a bad film ."]],
            "swapGender_sentiSynonymSubstitution": [["he is fine .", "she is fine .", "he is ok ."]],
            "synon_contr": [["Great fun !", "Big fun !", "Dull stuff ."]],
            "CR4": [["a b [SEP] b a", "a x [SEP] x a", "a y [SEP] y a"]],
        },
    )
    wide = triple_table(read_triples(path))
    rows = {r["capability"]: r for r in wide.to_pylist()}
    assert set(rows) == {"CR1", "CR2", "CR3", "CR4"} and set(wide.column("suite").to_pylist()) == {"released"}
    assert (rows["CR1"]["seed"], rows["CR1"]["positive"], rows["CR1"]["negative"]) == (
        "a good film .",
        "a beneficial film .",
        "a bad film .",
    )
    assert (rows["CR4"]["seed"], rows["CR4"]["seed_pair"], rows["CR4"]["negative_pair"]) == ("a b", "b a", "y a")
    # a suite Parquet reads back the same triples
    import pyarrow.parquet as pq

    pq.write_table(read_triples(path), tmp_path / "suite.parquet")
    again = triple_table(read_triples(str(tmp_path / "suite.parquet"), "again"))
    assert sorted(again.column("seed").to_pylist()) == sorted(wide.column("seed").to_pylist())
    assert set(again.column("suite").to_pylist()) == {"again"}


def test_released_triples_errors_are_one_line(tmp_path):
    with pytest.raises(InputError, match="unknown relation 'Fuzz'"):
        read_triples(_released(tmp_path, {"Fuzz": [["a", "b", "c"]]}))
    with pytest.raises(InputError, match=r"SenWordFuzz\[1\]: expected \[seed, closer, farther\]"):
        read_triples(_released(tmp_path, {"SenWordFuzz": [["a", "b", "c"], ["a", "b"]]}))
    with pytest.raises(InputError, match="triples file not found"):
        read_triples(str(tmp_path / "none.json"))


def test_inversion_table_and_cr3_seeds_from_released_triples(tmp_path):
    path = _released(
        tmp_path,
        {"SenWordFuzz": [["x", "y", "z"]], "synon_contr": [["A great  film .", "A big film .", "A dull film ."]]},
    )
    table = read_inversions(path)
    assert table == {"a great film .": "A dull film ."}
    assert inversion_sentences(path) == ["A great  film ."]
    with pytest.raises(InputError, match="no inversion relation"):
        read_inversions(_released(tmp_path, {"SenWordFuzz": [["x", "y", "z"]]}))


# ------------------------------------------------------------------ operators and CRs


def test_gender_pairs_file_and_countergen_names(nlp, tmp_path):
    extra = tmp_path / "pairs.tsv"
    extra.write_text("# comment\nspokesman\tspokeswoman\n")
    assert read_gender_pairs(extra) == [("spokesman", "spokeswoman")]
    (v,) = gender_swap(tokens_from_doc(nlp("The spokesman smiled .")), str(extra))
    assert v.text == "The spokeswoman smiled ."
    assert gender_swap(tokens_from_doc(nlp("The spokesman smiled ."))) == []  # not in countergen's pairs
    _, names = gender_lexicon()
    assert "Aamir" in names  # from countergen's name list, not CheckList's
    assert "Abbey" not in names  # on both of countergen's lists: ambiguous, never swapped
    extra.write_text("one two three\n")
    gender_lexicon.cache_clear()
    with pytest.raises(InputError, match=r"pairs.tsv:1: expected"):
        read_gender_pairs(extra)


def test_dense_synonyms_are_seeded_and_change_many_words(nlp):
    tokens = tokens_from_doc(nlp("The acting is good , the script is clever and the music is beautiful ."))
    (a,) = dense_synonyms(tokens, seed=1)
    (b,) = dense_synonyms(tokens, seed=1)
    assert a == b and a.op == "synonym_dense"
    changed = sum(
        x != y
        for x, y in zip(
            a.text.split(), "The acting is good , the script is clever and the music is beautiful .".split()
        )
    )
    assert changed >= 2
    assert dense_synonyms(tokens, seed=1, prob=0.0) == []


def test_cr3_positive_operator_and_cr4_same_word():
    from checkray.engine.costello.mutations import Variant

    seed = Seed("s", "good film")
    variants = [
        Variant("synonym", "estimable film", index=0),
        Variant("synonym_dense", "beneficial movie", index=0),
        Variant("inversion", "bad film"),
    ]
    (word,) = combine(seed, variants)
    (dense,) = combine(seed, variants, cr3_positive="synonym_dense")
    assert word.positive.text == "estimable film" and dense.positive.text == "beneficial movie"
    pair = Seed("p", "a b", text_pair="b a")
    different_words = [Variant("pair_synonym", "x b", "b x", 0), Variant("pair_antonym", "a y", "y a", 1)]
    assert combine(pair, different_words) == []
    same = different_words + [Variant("pair_antonym", "z b", "b z", 0)]
    (cr4,) = combine(pair, same)
    assert cr4.negative.text == "z b"


def test_classifier_rows_prefer_non_seeds_then_top_up():
    from checkray.jobs.costello.inputs import classifier_rows

    corpus = pa.table({"label": pa.array(["p", "n", None, "p", "n", "p"], pa.string())})
    seeds = np.array([0, 1, 3])
    rows = classifier_rows(corpus, seeds, 2, seed=0)
    assert set(rows) == {4, 5}  # the labeled non-seeds
    rows = classifier_rows(corpus, seeds, 4, seed=0)
    assert {4, 5} <= set(rows) and len(rows) == 4 and 2 not in rows  # unlabeled row 2 never


def test_whole_tokenizer_vocabulary_is_the_dictionary(tmp_path):
    from checkray.actors.costello.st_embedder import tokenizer_vocabulary
    from checkray.engine.costello.config import EmbedderSpec
    from tests.fakes.tiny_hf import build_tiny_bert

    path = build_tiny_bert(tmp_path / "bert", ["good film", "bad 2 films"])
    spec = EmbedderSpec(name="t", model=str(path), pooling="mean")
    vocab = tokenizer_vocabulary(spec, "all")
    assert {"good", "film", "bad", "2", "films"} <= set(vocab)
    assert not {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"} & set(vocab)
    assert "2" not in tokenizer_vocabulary(spec, "words")
