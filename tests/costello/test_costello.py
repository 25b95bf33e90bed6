"""COSTELLO pure parts: WordNet assembly, mutation operators (polarity guard), CR assembly,
distances and thresholds on toy data, the Wilcoxon ground-truth direction, and one repair
epoch on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from checkray.engine.costello.distances import distance
from checkray.engine.costello.metrics import ground_truth, thresholds, violates
from checkray.engine.costello.mutations import (
    Variant,
    gender_lexicon,
    gender_swap,
    inversion,
    read_inversions,
    shared_substitutions,
    substitutions,
    tokens_from_doc,
)
from checkray.engine.costello.neighbours import nearest_neighbour_distances
from checkray.engine.costello.tables import costello_table2
from checkray.engine.costello.triples import Seed, combine, triple_table, triples_to_cases
from checkray.engine.errors import InputError
from checkray.engine.lang.polarity import polarity_class
from checkray.engine.schema import validate_cases


@pytest.fixture(scope="module")
def nlp():
    from checkray.actors.spacy_nlp import load_spacy

    return load_spacy("builtin:sm", disable=("parser", "ner"))


def toks(nlp, text):
    return tokens_from_doc(nlp(text))


# ------------------------------------------------------------------ WordNet


def test_lexnames_are_the_45_lexicographer_files():
    from checkray.engine.lang.wordnet import lexnames_text

    lines = lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0].split("\t") == ["00", "adj.all", "3"]
    assert lines[3].split("\t") == ["03", "noun.Tops", "1"]
    assert lines[44].split("\t") == ["44", "adj.ppl", "3"]
    assert [int(line.split("\t")[0]) for line in lines] == list(range(45))


def test_wordnet_reads_nouns_from_both_halves_and_relations():
    from checkray.engine.lang.wordnet import antonyms, synonyms, wordnet

    wn = wordnet()
    # data.noun is rebuilt from two halves: a noun far into the second half must resolve.
    assert wn.synset("zucchini.n.02").lexname() == "noun.food"
    assert wn.synset("dog.n.01").lexname() == "noun.animal"
    assert "bad" in antonyms("good", "ADJ")
    assert "hate" in antonyms("love", "VERB")
    assert "dull" in synonyms("boring", "ADJ")


def test_missing_wordnet_package_is_one_line(monkeypatch):
    import importlib.util

    from checkray.engine.lang import wordnet

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError) as err:
        wordnet.source_dict_dir()
    assert "patternfork-nosql-fix" in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------ operators


def test_polarity_guard_synonym_keeps_sign_antonym_flips(nlp):
    tokens = toks(nlp, "The acting is good and the plot is boring .")
    syn = substitutions(tokens, "synonym")
    ant = substitutions(tokens, "antonym")
    assert {v.word for v in syn} == {"good", "boring"} and {v.word for v in ant} == {"good", "boring"}
    for v in syn:
        assert polarity_class(v.replacement) == polarity_class(v.word) != "neutral"
        assert v.text.split()[v.index] == v.replacement
    flips = {"positive": "negative", "negative": "positive"}
    for v in ant:
        assert polarity_class(v.replacement) == flips[polarity_class(v.word)]
    assert any(v.replacement == "bad" and v.text == "The acting is bad and the plot is boring ." for v in ant)


def test_guard_skips_neutral_words_and_fixes_articles(nlp):
    neutral = toks(nlp, "The man walked to the blue house .")
    assert substitutions(neutral, "synonym") == [] and substitutions(neutral, "antonym") == []
    assert substitutions(neutral, "synonym", guard=False)  # WordNet alone would substitute
    variants = substitutions(toks(nlp, "It is a good film ."), "antonym")
    assert all(not v.text.startswith("It is a e") or v.text.startswith("It is an") for v in variants)
    assert substitutions(toks(nlp, "a low-key comedy ."), "antonym") == []  # half of a hyphenated word


def test_gender_swap_pronouns_words_and_names(nlp):
    (v,) = gender_swap(toks(nlp, "He said his sister loves her job ."))
    assert v.op == "gender" and v.text == "She said her brother loves his job ."
    (v,) = gender_swap(toks(nlp, "I saw her yesterday ."))
    assert v.text == "I saw him yesterday ."
    _, names = gender_lexicon()
    (v,) = gender_swap(toks(nlp, "John met the actress ."))
    swapped = v.text.split()[0]
    assert swapped == names["John"] and names[swapped] == "John" and "actor" in v.text
    assert gender_swap(toks(nlp, "The plot is thin .")) == []


def test_inversion_table_matches_and_rejects_bad_lines(tmp_path):
    table_file = tmp_path / "inv.jsonl"
    table_file.write_text(json.dumps({"sentence": "A  Great film .", "reversed": "A terrible film ."}) + "\n")
    table = read_inversions(table_file)
    assert inversion("a great   film .", table) == [Variant("inversion", "A terrible film .")]
    assert inversion("another film .", table) == []
    table_file.write_text('{"sentence": "x"}\n')
    with pytest.raises(InputError, match=r"inv.jsonl:1: expected a JSON object"):
        read_inversions(table_file)


def test_shared_word_substitution_changes_both_sentences(nlp):
    a = toks(nlp, "The company bought a new building .")
    b = toks(nlp, "A new building was bought by the company .")
    (syn,) = shared_substitutions(a, b, "synonym")
    assert syn.word.lower() in syn.text.lower() or syn.replacement in syn.text.lower()
    assert syn.replacement in syn.text.lower() and syn.replacement in syn.text_pair.lower()
    (ant,) = shared_substitutions(a, b, "antonym")
    assert ant.replacement == "old" and "old building" in ant.text and "old building" in ant.text_pair
    # the article before the swapped word follows it in both sentences ("a old building" read at size)
    assert "an old building" in ant.text and ant.text_pair.startswith("An old building")


# ------------------------------------------------------------------ CR assembly


def test_combine_builds_each_cr_and_links_variants_to_seed():
    seed = Seed("d1", "he is good and brave .", "positive")
    variants = [
        Variant("synonym", "he is estimable and brave .", index=2, word="good", replacement="estimable"),
        Variant("antonym", "he is good and cowardly .", index=4, word="brave", replacement="cowardly"),
        Variant("synonym", "he is good and courageous .", index=4, word="brave", replacement="courageous"),
        Variant("gender", "she is good and brave .", index=0, word="he", replacement="she"),
        Variant("inversion", "he is bad and cowardly ."),
    ]
    triples = {t.capability: t for t in combine(seed, variants)}
    assert set(triples) == {"CR1", "CR2", "CR3"}
    # CR1: synonym and antonym of the SAME word (brave), not the first synonym (good).
    assert triples["CR1"].positive.replacement == "courageous" and triples["CR1"].negative.replacement == "cowardly"
    assert triples["CR2"].positive.op == "gender" and triples["CR2"].negative.op == "antonym"  # a real change
    assert triples["CR3"].negative.op == "inversion"

    cases = validate_cases(triples_to_cases(list(triples.values()), "t"))
    assert cases.num_rows == 9
    rows = cases.to_pylist()
    seeds = {r["case_id"]: r for r in rows if r["test_type"] == "MFT"}
    assert all(r["method"] == "costello" and r["expected_label"] == "positive" for r in seeds.values())
    for r in rows:
        if r["test_type"] == "DIR":
            assert r["perturbs"] in seeds and seeds[r["perturbs"]]["capability"] == r["capability"]
            assert r["relation"] == ("closer" if json.loads(r["meta"])["role"] == "positive" else "farther")
    wide = triple_table(cases)
    assert sorted(wide.column("capability").to_pylist()) == ["CR1", "CR2", "CR3"]
    cr3 = [r for r in wide.to_pylist() if r["capability"] == "CR3"][0]
    assert (cr3["seed"], cr3["negative"]) == ("he is good and brave .", "he is bad and cowardly .")


def test_no_triple_without_matching_variants():
    seed = Seed("d", "a b c")
    only_syn = [Variant("synonym", "a x c", index=1), Variant("antonym", "a b y", index=2)]
    assert combine(seed, only_syn) == []  # different words: no CR1
    pair = Seed("p", "a b", text_pair="b a")
    cr4 = combine(pair, [Variant("pair_synonym", "a x", "x a", 1), Variant("pair_antonym", "a y", "y a", 1)])
    assert [t.capability for t in cr4] == ["CR4"]


# ------------------------------------------------------------------ metrics


def test_distances_on_known_vectors():
    a, b = np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[3.0, 4.0], [0.0, 2.0]])
    np.testing.assert_allclose(distance(a, b, "l1"), [7.0, 3.0])
    np.testing.assert_allclose(distance(a, b, "l2"), [5.0, np.sqrt(5.0)])
    np.testing.assert_allclose(distance(a[1:], b[1:], "cos"), [1.0])
    assert violates([2.0, 2.0, 1.0], [1.0, 1.5, 3.0], 0.5).tolist() == [True, False, False]


def test_thresholds_on_a_toy_dictionary():
    words = np.array([[1.0], [2.0], [4.0], [7.0], [0.0]])  # nearest-neighbour distances 1, 1, 2, 3
    nn = nearest_neighbour_distances(words, "l2")  # the zero vector (an unknown word) is left out
    np.testing.assert_allclose(sorted(nn), [1.0, 1.0, 2.0, 3.0])
    mu, sigma = 1.75, np.sqrt(0.6875)
    th = thresholds(nn)
    assert th["zero"] == 0.0 and th["min"] == 1.0
    assert th["mu-sigma"] == pytest.approx(mu - sigma)
    assert th["mu-2sigma"] == pytest.approx(mu - 2 * sigma)
    assert th["mu-2sigma"] != pytest.approx(mu - 2 * np.sqrt(sigma))  # not the original code's 2*sqrt(sigma)
    # one far-away word: mu - sigma < 0 and is clamped to 0
    wide = thresholds(nearest_neighbour_distances(np.array([[1.0], [2.0], [3.0], [11.0]]), "l1"))
    assert wide["mu-sigma"] == 0.0 and wide["mu-2sigma"] == 0.0 and wide["min"] == 1.0


def test_wilcoxon_direction():
    rng = np.random.default_rng(0)
    small = rng.uniform(0.0, 0.1, size=(14, 1))
    big = small + rng.uniform(0.3, 0.5, size=(14, 1))
    # F = shift to s+, G = shift to s-. s+ moving the classifiers more than s-: clearly buggy.
    buggy = ground_truth(big, small)
    assert buggy["p_greater"][0] < 0.05 and buggy["gt_a"][0] and buggy["gt_b"][0]
    fine = ground_truth(small, big)
    assert fine["p_less"][0] < 0.05 and not fine["gt_a"][0] and not fine["gt_b"][0]
    same = ground_truth(small, small)  # no evidence either way: potentially buggy only
    assert same["p_greater"][0] == 1.0 and not same["gt_a"][0] and same["gt_b"][0]


def test_table2_layout_and_precision():
    rows = []
    for model, verdicts, gta in (("m1", [1, 1, 0, 0], [1, 0, 1, 0]), ("m2", [1, 0, 0, 0], [1, 1, 1, 1])):
        for v, g in zip(verdicts, gta):
            rows.append(
                {
                    "model": model,
                    "capability": "CR1",
                    "distance": "l2",
                    "threshold": "zero",
                    "verdict": bool(v),
                    "gt_a": bool(g),
                    "gt_b": True,
                }
            )
    (rec,) = costello_table2(rows, ["CR1", "CR2"])
    assert rec["CR1 N_M"] == 2 and rec["CR1 N_V"] == 1.5
    assert rec["CR1 P_A%"] == 75.0 and rec["CR1 P_B%"] == 100.0  # mean of 50% and 100%
    assert rec["CR2 N_M"] == 0 and rec["CR2 P_A%"] is None


# ------------------------------------------------------------------ repair


def test_epoch_plan_halves_and_upsamples():
    from checkray.actors.costello.repair import epoch_plan

    batches = epoch_plan(3, 10, 4, np.random.default_rng(0))
    assert sum(len(b) for _, b in batches) == 10 and sum(len(v) for v, _ in batches) == 10
    assert all(len(v) == len(b) == 2 for v, b in batches)
    assert set(np.concatenate([v for v, _ in batches]).tolist()) == {0, 1, 2}  # every violated triple used
    assert sorted(np.concatenate([b for _, b in batches]).tolist()) == list(range(10))
    capped = epoch_plan(30, 10, 4, np.random.default_rng(0), max_triples=6)
    assert [(len(v), len(b)) for v, b in capped] == [(2, 2)] * 3


@pytest.mark.timeout(120)
def test_one_repair_epoch_lowers_the_triplet_loss(tmp_path):
    from checkray.actors.costello.repair import mean_triplet_loss, train_repair
    from checkray.actors.costello.st_embedder import load_encoder
    from checkray.engine.costello.config import EmbedderSpec, RepairSettings
    from tests.fakes.tiny_hf import build_tiny_bert

    violated = [
        ("the film is good", "the film is bad", "the film is fine"),
        ("he loves the plot", "she hates the plot", "he likes the plot"),
        ("a great movie", "an awful movie", "a fine movie"),
    ]
    benign = [
        ("the cast is fine", "the cast is good", "the cast is awful"),
        ("a dull story", "a boring story", "a lively story"),
    ]
    words = [w for tr in violated + benign for s in tr for w in s.split()]
    path = build_tiny_bert(tmp_path / "tiny", words, seed=0, initializer_range=0.2)
    model = load_encoder(
        EmbedderSpec(name="tiny", model=str(path), pooling="mean"), device="cpu", threads=1, backend="torch"
    )
    before = mean_triplet_loss(model, violated)
    assert before > 0
    result = train_repair(model, violated, benign, RepairSettings(epochs=1, learning_rate=0.05, batch_size=4))
    assert result.loss_before == pytest.approx(before)
    assert result.loss_after < result.loss_before
    assert len(result.history) == 1 and result.history[0]["batches"] >= 1


def test_shipped_embedder_lists_and_inversion_table_parse(tmp_path):
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.jobs.costello.job import read_embedders

    specs = read_embedders("configs/costello/embedders.yaml")
    assert {s.pooling for s in specs} >= {"mean", "cls"} and any(s.kind == "spacy" for s in specs)
    zoo = [ModelSpec(name="minilm_ft", family="hf", path=str(tmp_path / "ft"))]
    demo = read_embedders("configs/costello/embedders_demo.yaml", zoo)
    assert [s.model for s in demo if s.name == "minilm_ft"] == [str(tmp_path / "ft")]
    from pathlib import Path

    table = read_inversions(Path(__file__).resolve().parents[2] / "configs" / "costello" / "inversions.jsonl")
    assert len(table) >= 40 and all(k != v.lower() for k, v in table.items())


def test_paper_config_and_its_embedder_lists_load():
    """configs/costello_paper.yaml validates without opening its data paths (they are outside the repository)."""
    from checkray.engine.costello.config import CostelloConfig, RepairConfig
    from checkray.engine.costello.mutations import read_gender_pairs
    from checkray.jobs.config import load_config
    from checkray.jobs.costello.job import read_embedders

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "configs" / "costello_paper.yaml", {})
    cc, rc = cfg.section(CostelloConfig), cfg.section(RepairConfig)
    assert (
        cc.dictionary_size is None and cc.classifiers >= 14 and cc.inversion_seeds and cc.cr3_synonym == "word"
    )  # dense: the authors' option only
    assert (rc.learning_rate, rc.epochs, rc.alpha, rc.threshold) == (1e-4, 8, 0.5, "mu-2sigma")
    names = [s.name for s in read_embedders(str(root / cc.embedders))]
    names += [s.name for s in read_embedders(str(root / "configs/costello/embedders_paper_mpnet.yaml"))]
    assert {"minilm_mean", "minilm_cls", "spacy_md", "mpnet_mean"} <= set(names)
    assert len(read_gender_pairs(root / cc.gender_pairs)) >= 20


def test_the_grammar_check_is_asked_of_single_sentences_only(tmp_path):
    from checkray.engine.errors import ConfigError
    from checkray.jobs.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text("costello:\n  inversion_grammar: true\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match="inversion_grammar checks single sentences: it needs inversion_unit: sentence"
    ):
        load_config(path, {})
    path.write_text("costello:\n  inversion_grammar: true\n  inversion_unit: sentence\n", encoding="utf-8")
    from checkray.engine.costello.config import CostelloConfig

    assert load_config(path, {}).section(CostelloConfig).inversion_grammar


# ------------------------------------------------------------------ embedder kinds, repair choices


def test_embedder_kinds_are_records_with_traits():
    from checkray.engine.costello.embedder_kinds import EMBEDDER_KINDS, embedder_kind

    assert EMBEDDER_KINDS.names() == ["sentence-transformers", "spacy"]
    st, spacy = embedder_kind("sentence-transformers"), embedder_kind("spacy")
    assert st.shares_cpus and st.trainable and st.pooling_variants
    assert not (spacy.shares_cpus or spacy.trainable or spacy.pooling_variants)
    for name in EMBEDDER_KINDS:  # every ref imports and implements the Embedder methods
        cls = EMBEDDER_KINDS.get(name)
        assert all(callable(getattr(cls, m)) for m in ("check", "identity", "vocabulary", "encode"))


def test_an_unknown_embedder_kind_is_a_one_line_error(tmp_path):
    from checkray.engine.errors import ConfigError
    from checkray.jobs.costello.inputs import read_embedders

    path = tmp_path / "emb.yaml"
    path.write_text("embedders:\n  - {name: a, model: builtin:minilm}\n  - {name: b, kind: glove, model: x}\n")
    with pytest.raises(ConfigError) as err:
        read_embedders(str(path))
    assert str(err.value) == (
        f"{path}: embedders[1].kind: unknown embedder kind 'glove' (have: sentence-transformers, spacy)"
    )


def test_repair_picks_the_most_violated_trainable_model_and_splits_its_triples():
    import pyarrow as pa
    import pyarrow.compute as pc

    from checkray.engine.costello.repair import most_violated_model, split_triples

    def row(model, triple, verdict, threshold="zero", suite="s"):
        return {
            "model": model,
            "triple": triple,
            "suite": suite,
            "distance": "l2",
            "threshold": threshold,
            "verdict": verdict,
        }

    v = pa.Table.from_pylist(
        [row("a", "t1", True), row("a", "t2", False), row("b", "t1", True), row("b", "t2", True)]
        + [row("a", "t1", True, "min"), row("a", "t2", True, "min"), row("c", "t1", True), row("c", "t2", True)]
        + [row("a", "t3", True, suite="other")] * 3
    )
    assert most_violated_model(v, {"a", "b"}, "l2", "zero", "s") == "b"  # c is not trainable
    assert most_violated_model(v, {"a", "b"}, "l2", "min", "s") == "a"
    assert most_violated_model(v, {"a"}, "l2", "zero", "missing") == "a"  # a suite not scored: every suite
    with pytest.raises(InputError):
        most_violated_model(v, set(), "l2", "zero", "s")
    wide = pa.Table.from_pylist(
        [
            {"triple": t, "seed": f"{t}s", "positive": f"{t}p", "negative": f"{t}n", "seed_pair": pair}
            for t, pair in (("t1", None), ("t2", None), ("t3", "x"))
        ]
    )
    a = v.filter(pc.equal(v["model"], "a"))
    assert split_triples(wide, a, "l2", "zero") == ([("t1s", "t1p", "t1n")], [("t2s", "t2p", "t2n")])


def test_costello_table3_fixing_rates():
    import pyarrow as pa

    from checkray.engine.costello.tables import costello_table3, violation_counts

    def rows(verdicts):
        return pa.Table.from_pylist(
            [
                {"capability": cr, "distance": "l2", "threshold": "zero", "verdict": v, "gt_a": v, "gt_b": True}
                for cr, v in verdicts
            ]
        )

    before = violation_counts(rows([("CR1", True), ("CR1", True), ("CR2", True), ("CR2", False)]), "l2", "zero")
    after = violation_counts(rows([("CR1", False), ("CR1", True), ("CR2", True), ("CR2", False)]), "l2", "zero")
    n_v, gt_a, gt_b, acc = costello_table3(before, after, 0.8, 0.75)
    assert (n_v["CR1"], n_v["CR2"], n_v["CR3"], n_v["ALL"]) == (50.0, 0.0, None, pytest.approx(33.33))
    assert n_v["CR1 before→after"] == "2→1" and gt_b["ALL"] == 0.0 and gt_a["metric"] == "GT_A"
    assert acc == {"metric": "downstream accuracy", "ALL": -5.0, "ALL before→after": "0.8→0.75"}


def test_repair_config_settings_are_the_training_fields():
    from checkray.engine.costello.config import RepairConfig, RepairSettings

    rc = RepairConfig(model="m", epochs=2, learning_rate=0.01, threshold="zero")
    assert rc.settings() == RepairSettings(epochs=2, learning_rate=0.01)
