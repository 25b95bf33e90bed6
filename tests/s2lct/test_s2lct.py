"""S²LCT pieces without Ray: capability rules and transforms on hand-made sentences,
the dependency -> constituency conversion, Algorithm 1 on the paper's running example,
mask-fill validation, Table 3 counting, coverage and minimal-token explanations."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pytest

from checkray.actors.s2lct.parser import dep_to_const, token_dicts
from checkray.engine.errors import ConfigError
from checkray.engine.s2lct.grammar import (
    count_productions,
    expansion_candidates,
    grammar_table,
    reference_index,
    tree_productions,
)
from checkray.engine.s2lct.mask_fill import BigramLM, fill, validate_fill
from checkray.engine.s2lct.search import build_seeds, matching_rules
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


def seeds_for(cap, nlp, sentences, label_of):
    """Run a capability's rules on (text, corpus label) pairs, then its transforms."""
    found = {}
    for i, text in enumerate(sentences):
        t = toks(nlp, text)
        for rule in matching_rules(cap, t, label_of[text]):
            found.setdefault(rule, []).append({"id": f"d{i}", "tokens": t})
    return found, build_seeds(cap, found, max_seeds=10, seed=0)


def test_builtin_specs_are_the_eleven_capabilities_of_table_1(caps):
    assert sorted(caps, key=lambda c: int(c[2:])) == [f"LC{i}" for i in range(1, 12)]
    assert caps["LC1"].name == "LC1: Short sentences with neutral adjectives and nouns"
    assert caps["LC1"].recheck_rule and caps["LC2"].recheck_rule and not caps["LC3"].recheck_rule


def test_lc1_and_lc2_rules(nlp, caps):
    neutral = "The meeting is in the small room."
    labels = {
        neutral: "neutral",
        "The beautiful room is small.": "neutral",
        "A wonderful film.": "positive",
        "A wonderful but bad film.": "positive",
        "A boring film.": "negative",
        "The meeting is in the small room on the left side of the old building.": "neutral",
    }
    found, seeds = seeds_for(caps["LC1"], nlp, list(labels), labels)
    assert [s["text"] for s in seeds] == [neutral]  # polar adjective and >9 words are out
    assert seeds[0]["label"] == "neutral"
    found, seeds = seeds_for(caps["LC2"], nlp, list(labels), labels)
    assert {(s["text"], s["label"]) for s in seeds} == {
        ("A wonderful film.", "positive"),
        ("A boring film.", "negative"),
    }


def test_neutral_proxy_on_a_binary_corpus(nlp, caps):
    rule = caps["LC1"].search[0]
    t = toks(nlp, "The meeting is in the small room.")
    assert matching_rules(caps["LC1"], t, "positive") == []
    assert matching_rules(caps["LC1"], t, "positive", neutral_proxy=True) == [rule.name]
    polar = toks(nlp, "The meeting is in the small ugly room.")
    assert matching_rules(caps["LC1"], polar, "positive", neutral_proxy=True) == []


def test_negation_capabilities_lc4_lc5(nlp, caps):
    labels = {
        "This is a bad film.": "negative",
        "It is a bad film.": "negative",
        "This is not a bad film.": "negative",
        "These are the actors of the film.": "neutral",
    }
    _, seeds = seeds_for(caps["LC4"], nlp, list(labels), labels)
    assert [s["text"] for s in seeds] in (["This is not a bad film."], ["This isn't a bad film."])
    assert seeds[0]["label"] == "positive" and seeds[0]["accepts"] == ["positive", "neutral"]
    _, seeds = seeds_for(caps["LC5"], nlp, list(labels), labels)
    assert [s["text"] for s in seeds] in (
        ["These are not the actors of the film."],
        ["These aren't the actors of the film."],
    )
    assert seeds[0]["label"] == "neutral"


def test_template_capabilities_lc3_lc6_to_lc11(nlp, caps):
    pos, neg, neu = "The acting is wonderful.", "The plot is dull and boring.", "The film is about a family."
    labels = {pos: "positive", neg: "negative", neu: "neutral"}
    body = {pos: "the acting is wonderful", neg: "the plot is dull and boring", neu: "the film is about a family"}
    expected = {  # capability -> {regex: label}
        "LC3": {
            r"^(Previously, I used to like it saying that|Last time, I agreed with saying that|I liked it much "
            r"as to say that) (POS|NEG) (but|although|on the other hand) now I (don't like|hate) it\.$": "negative",
            r"^(I used to disagree with saying that|Last time, I didn't like it saying that|I hated it much as to "
            r"say that) (NEG|POS) (but|although|on the other hand) now I like it\.$": "positive",
        },
        "LC6": {r"^I (agreed|thought) that NEG but (it wasn't|I didn't)\.$": "positive"},
        "LC7": {r"^I (wouldn't say|do not think|don't agree with), NEU, POS$": "negative"},
        "LC8": {
            r"^(Some people think that|Many people agree with that|They think that|You agree with that) POS but I "
            r"think that NEG$": "negative",
            r"^(Some people think that|Many people agree with that|They think that|You agree with that) NEG but I "
            r"think that POS$": "positive",
        },
        "LC9": {r"^Do I (think|agree) that POS\? yes$": "positive", r"^Do I (think|agree) that NEG\? yes$": "negative"},
        "LC10": {r"^Do I (think|agree) that POS\? no$": "negative"},
        "LC11": {r"^Do I (think|agree) that NEG\? no$": "positive"},
    }
    for cap_id, patterns in expected.items():
        _, seeds = seeds_for(caps[cap_id], nlp, [pos, neg, neu], labels)
        assert seeds, cap_id
        compiled = {
            re.compile(p.replace("POS", body[pos]).replace("NEG", body[neg]).replace("NEU", body[neu])): lab
            for p, lab in patterns.items()
        }
        for seed in seeds:
            hits = [lab for rx, lab in compiled.items() if rx.match(seed["text"])]
            assert hits == [seed["label"]], (cap_id, seed["text"])


def test_capability_file_errors(tmp_path):
    bad = tmp_path / "lc_bad.yaml"
    bad.write_text("id: X1\nname: x\nsearch:\n  - {name: a, label: positive, lenght: 5}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"lc_bad\.yaml: search\.0\.lenght: unknown field"):
        load_capabilities([str(bad)])
    dangling = tmp_path / "lc_ref.yaml"
    dangling.write_text(
        "id: X2\nname: x\nsearch: [{name: a, label: positive}]\n"
        "transforms: [{label: negative, parts: [{sentence: [b]}]}]\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="unknown search rule 'b'"):
        load_capabilities([str(dangling)])
    with pytest.raises(ConfigError, match="capability file not found"):
        load_capabilities([str(tmp_path / "nope.yaml")])


def test_dep_to_const_running_example_and_a_clause(nlp):
    # "Or both." as the paper's Figure 3 parses it: FRAG -> CC NP . and NP -> DT.
    or_both = [
        {"t": "Or", "tag": "CC", "dep": "cc", "head": 1},
        {"t": "both", "tag": "DT", "dep": "ROOT", "head": 1},
        {"t": ".", "tag": ".", "dep": "punct", "head": 1},
    ]
    assert dep_to_const(or_both) == "(FRAG (CC Or) (NP (DT both)) (. .))"
    assert (
        dep_to_const(toks(nlp, "The film is good."))
        == "(S (NP (DT The) (NN film)) (VP (VBZ is) (ADJP (JJ good))) (. .))"
    )
    tree = dep_to_const(toks(nlp, "It is not bad because the actors are very funny."))
    assert "(SBAR (IN because) (S (NP (DT the) (NNS actors)) (VP (VBP are) (ADJP (RB very) (JJ funny)))))" in tree
    assert "(VP (VBZ is) (RB not) (ADJP (JJ bad))" in tree
    assert dep_to_const(toks(nlp, "Do I think that the film is great?")).startswith("(SQ (VBP Do) (NP (PRP I)) (VP")


def test_algorithm_1_on_the_papers_running_example():
    seed_tree = "(FRAG (CC Or) (NP (DT both)) (. .))"
    seed_tokens = [{"t": "Or", "ws": " "}, {"t": "both", "ws": ""}, {"t": ".", "ws": ""}]
    assert [str(p) for p in tree_productions(seed_tree)] == ["NP -> DT", "FRAG -> CC NP ."]
    grammar = grammar_table(
        count_productions(["(NP (DT some) (NNS things))", "(NP (NP (DT the) (NN way)) (PP (IN of) (NP (NNS things))))"])
    )
    found = expansion_candidates(seed_tree, seed_tokens, reference_index(grammar))
    assert sorted((m["masked"], m["tags"], m["reference"]) for m in found) == [
        ("Or both {MASK}.", ["NN"], "NP -> DT NN"),
        ("Or both {MASK}.", ["NNS"], "NP -> DT NNS"),
    ]
    # NP -> NP PP would insert a phrase, not a word: no mask for it; nor for a reference
    # right side that does not contain the seed's in order.
    assert (
        expansion_candidates(
            seed_tree,
            seed_tokens,
            reference_index(grammar_table(count_productions(["(NP (NNS things) (NP (DT both)))", "(NP (NNS all))"]))),
        )
        == []
    )


def test_algorithm_1_places_masks_where_the_symbols_stand():
    tree = "(S (NP (DT The) (NN film)) (VP (VBZ is) (ADJP (JJ good))) (. .))"
    tokens = [{"t": w, "ws": " " if w not in ("good",) else ""} for w in ["The", "film", "is", "good"]] + [
        {"t": ".", "ws": ""}
    ]
    grammar = grammar_table(
        count_productions(
            ["(NP (DT a) (JJ long) (NN film))", "(ADJP (RB very) (JJ good))", "(VP (VBZ is) (RB not) (ADJP (JJ fine)))"]
        )
    )
    masked = {m["masked"]: m["tags"] for m in expansion_candidates(tree, tokens, reference_index(grammar))}
    assert masked == {"The {MASK} film is good.": ["JJ"], "The film is {MASK} good.": ["RB"]}


def test_validation_rejects_wrong_tag_polar_words_negators_and_broken_rules(nlp, caps):
    items = [{"t": "Or", "ws": " "}, {"t": "both", "ws": " "}, {"mask": "NNS", "ws": ""}, {"t": ".", "ws": ""}]

    def check(word, rule=None, it=items, tags=("NNS",)):
        text, offsets = fill(it, [word])
        doc = nlp(text)
        tokens = [{"t": t.text, "tag": t.tag_, "pos": t.pos_, "lemma": t.lemma_, "idx": t.idx} for t in doc]
        return validate_fill(tokens, offsets, [word], list(tags), rule).reason

    assert fill(items, ["ways"]) == ("Or both ways.", [8])
    assert check("ways") == "ok" and check("things") == "ok"
    assert check("disasters") == "polarity"  # NNS, but negative in VADER/AFINN
    assert check("quickly") == "tag"  # neutral, but an adverb
    rb = [
        {"t": "It", "ws": " "},
        {"t": "is", "ws": " "},
        {"mask": "RB", "ws": " "},
        {"t": "red", "ws": ""},
        {"t": ".", "ws": ""},
    ]
    assert check("not", it=rb, tags=("RB",)) == "negation"
    assert check("very", it=rb, tags=("RB",)) == "ok"
    # LC1's rule (fewer than 10 words) re-checked on the expansion
    lc1 = caps["LC1"].search[0]
    long_items = [{"t": w, "ws": " "} for w in "the meeting is in the small room on".split()] + [
        {"mask": "DT", "ws": " "},
        {"t": "side", "ws": ""},
        {"t": ".", "ws": ""},
    ]
    assert check("the", rule=lc1, it=long_items, tags=("DT",)) == "rule"
    assert check("the", rule=None, it=long_items, tags=("DT",)) == "ok"


def test_bigram_lm_prefers_the_seen_continuation():
    lm = BigramLM({"both": 5, "ways": 3, "of": 9, ".": 9}, {("both", "ways"): 3, ("ways", "."): 3})
    assert lm.local_logprob("both", "ways", ".") > lm.local_logprob("both", "of", ".")


def test_table3_counts_pass_to_fail():
    from checkray.engine.s2lct.tables import s2lct_table3
    from checkray.engine.schema import make_cases

    def case(cid, kind, seed=None):
        meta = {"kind": kind, **({"seed_case_id": seed} if seed else {})}
        return {
            "case_id": cid,
            "suite": "s",
            "method": "s2lct",
            "capability": "LC9",
            "text": cid,
            "expected_label": "positive",
            "meta": meta,
        }

    suite = make_cases(
        [
            case("s1", "seed"),
            case("s2", "seed"),
            case("e1", "expansion", "s1"),
            case("e2", "expansion", "s1"),
            case("e3", "expansion", "s2"),
        ]
    )
    outcome = {"s1": True, "s2": False, "e1": False, "e2": True, "e3": False}
    results = pa.table({"model": ["m"] * 5, "case_id": list(outcome), "pass": list(outcome.values())})
    [row] = s2lct_table3(results, suite).to_pylist()
    assert row == {
        "model": "m",
        "capability": "LC9",
        "seeds": 2,
        "seed_fail_pct": 50.0,
        "expansions": 3,
        "exp_fail_pct": 66.67,
        "pass_to_fail": 1,
    }


def test_failures_explained_first_are_pass_to_fail_one_per_capability():
    from checkray.engine.s2lct.explain import pick_failures

    meta = {"s1": {"kind": "seed"}, "e1": {"kind": "expansion", "seed_case_id": "s1"}, "s2": {"kind": "seed"}}
    meta |= {"e2": {"kind": "expansion", "seed_case_id": "s1"}, "s3": {"kind": "seed"}}

    def row(cid, cap, passed, predicted="negative"):
        return {"case_id": cid, "capability": cap, "pass": passed, "predicted": predicted}

    rows = [
        row("s1", "LC1", True),
        row("s2", "LC1", False),
        row("s3", "LC2", False),
        row("e1", "LC1", False),
        row("e2", "LC1", False),
        row("x", "LC3", False, predicted="neutral"),  # not one of the model's labels: cannot be explained
    ]
    meta["x"] = {"kind": "seed"}
    picked = [r["case_id"] for r in pick_failures(rows, meta, ["negative", "positive"], 3)]
    assert picked == ["e1", "s3", "e2"]  # pass-to-fail first, then one of another capability, then the rest
    assert [r["case_id"] for r in pick_failures(rows, meta, ["negative", "positive"], 1)] == ["e1"]


def test_evaluation_models_follow_the_family_traits():
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.engine.s2lct.config import S2lctConfig
    from checkray.engine.s2lct.models import evaluation_models

    torch = ModelSpec(name="minilm_ft", family="hf", path="x")
    lr = ModelSpec(name="tfidf_lr", family="sklearn", path="y")
    vader = ModelSpec(name="vader", family="vader")
    plan = evaluation_models([lr, torch, vader], S2lctConfig())
    assert [sp.name for sp in plan.coverage] == [sp.name for sp in plan.explain] == ["minilm_ft"]
    assert len(plan.benchmark) == 3 and not plan.notes
    plan = evaluation_models([lr, vader], S2lctConfig())
    assert not plan.coverage and [sp.name for sp in plan.explain] == ["tfidf_lr"]  # no neurons: the first model
    assert plan.notes == ("neuron coverage: no torch model (family hf) among the models under test",)
    off = S2lctConfig.model_validate({"coverage": {"enabled": False}, "explain": {"failures": 0}})
    plan = evaluation_models([lr, torch], off)
    assert not plan.coverage and not plan.explain and not plan.notes
    chosen = S2lctConfig.model_validate({"explain": {"models": ["vader"]}, "coverage": {"models": []}})
    plan = evaluation_models([lr, torch, vader], chosen)
    assert not plan.coverage and [sp.name for sp in plan.explain] == ["vader"]


def test_filler_backends_are_registry_records():
    from pydantic import ValidationError

    from checkray.engine.s2lct.config import FillerConfig, filler_backend, filler_name
    from checkray.engine.s2lct.fillers import FILLERS

    assert FILLERS.names() == ["hf", "offline"]
    assert FILLERS.record("offline").lm_scored and not FILLERS.record("hf").lm_scored
    assert filler_backend(FillerConfig()) == "offline" and filler_name(FillerConfig()) == "bigram-lm+vectors:builtin:md"
    mlm = FillerConfig(hf_model="some/mlm")
    assert filler_backend(mlm) == "hf" and filler_name(mlm) == "hf:some/mlm"
    assert filler_backend(FillerConfig(backend="offline", hf_model="some/mlm")) == "offline"
    with pytest.raises(ValidationError, match=r"one of: auto, hf, offline \(got 'bert'\)"):
        FillerConfig(backend="bert")


def reversed_bounds(values, low, high):
    """(upper values, lower values) and bounds in corner_coverage's argument order."""
    upper, lower = values
    return upper, low, high, lower


def test_boundary_coverage_and_minimal_tokens():
    from checkray.engine.s2lct.coverage import corner_coverage, minimal_tokens, neuron_bounds, neuron_values

    low, high = neuron_bounds(np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    cov = corner_coverage(np.array([[2.0, 0.5, -1.0], [0.5, 0.5, 0.5]]), low, high)
    assert (cov.upper, cov.lower, cov.neurons) == (1, 1, 3)
    assert cov.bound_cov == pytest.approx(2 / 6) and cov.sact_cov == pytest.approx(1 / 3)
    # Token readings: the upper bound meets token maxima, the lower bound token minima.
    train = {"max": np.array([[1.0, 1.0, 1.0]]), "min": np.array([[0.0, 0.0, 0.0]]), "mean": np.array([[0.5] * 3])}
    low, high = neuron_bounds(*neuron_values(train, "token"))
    assert low.tolist() == [0.0] * 3 and high.tolist() == [1.0] * 3
    suite = {"max": np.array([[1.5, 0.9, 0.9]]), "min": np.array([[0.2, -0.1, 0.5]]), "mean": np.array([[0.6] * 3])}
    cov = corner_coverage(*reversed_bounds(neuron_values(suite, "token"), low, high))
    assert (cov.upper, cov.lower) == (1, 1)
    cov = corner_coverage(*reversed_bounds(neuron_values(suite, "mean"), low, high))
    assert (cov.upper, cov.lower) == (0, 0)  # the means stay inside
    with pytest.raises(ValueError, match="unknown neuron reading"):
        neuron_values(suite, "cls")

    def predict(texts):  # P(negative) rises with "dull"; "film" helps a little
        p = np.array([0.2 + 0.6 * ("dull" in t.split()) + 0.1 * ("film" in t.split()) for t in texts])
        return np.column_stack([p, 1 - p])

    expl = minimal_tokens("the film is dull".split(), predict, label=0, p_thresh=0.75)
    assert expl.kept == [3] and expl.reached and expl.probability == pytest.approx(0.8)
    expl = minimal_tokens("the film is dull".split(), predict, label=0, p_thresh=0.85)
    assert expl.kept == [1, 3]


def test_layer_summaries_of_a_tiny_bert(tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from checkray.engine.s2lct.coverage import layer_summaries
    from tests.fakes.tiny_hf import build_tiny_bert

    texts = ["the film is good", "the film is bad", "a dull film"]
    path = build_tiny_bert(tmp_path / "bert", texts)
    model = AutoModelForSequenceClassification.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    acts = layer_summaries(model, tok, texts, batch_size=1)["mean"]  # no padding at all
    assert acts.shape == (3, 2 * 32)  # 2 layers x hidden 32
    assert not np.allclose(acts[0], acts[2])
    assert json.dumps(acts.tolist())  # finite numbers
    summary = layer_summaries(model, tok, texts, batch_size=2)
    assert np.allclose(summary["mean"], acts, atol=1e-5)  # padding does not count in the mean
    assert np.all(summary["max"] >= summary["mean"] - 1e-6) and np.all(summary["min"] <= summary["mean"] + 1e-6)
    assert np.any(summary["max"] > summary["mean"] + 1e-3)  # a unit varies over the tokens
    # Padding is not a token: a sentence's extremes do not change with the batch it is in.
    alone = layer_summaries(model, tok, texts[2:], batch_size=1)
    assert np.allclose(alone["max"][0], summary["max"][2], atol=1e-5)
    assert np.allclose(alone["min"][0], summary["min"][2], atol=1e-5)


def test_expansion_actor_with_an_hf_fill_mask_model(tmp_path):
    """The hf backend end to end in one actor (no Ray): a tiny masked LM whose vocabulary
    holds only plural nouns and one polar noun proposes the fills; validation keeps the
    neutral ones, in score order."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    from checkray.actors.s2lct.mask_filler import ExpansionActor
    from checkray.engine.s2lct.config import FillerConfig
    from checkray.engine.s2lct.grammar import MaskSampling
    from checkray.engine.s2lct.reference import ReferenceGrammar

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = ["or", "both", ".", "films", "songs", "disasters"]
    tokenizer = BertTokenizerFast(vocab={t: i for i, t in enumerate(specials + words)}, do_lower_case=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(specials) + len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    tokenizer.save_pretrained(tmp_path / "mlm")
    filler = FillerConfig(
        backend="hf", hf_model=str(tmp_path / "mlm"), candidates=len(specials) + len(words), keep=3, ngram_check=False
    )
    grammar = ReferenceGrammar(productions={"NP": [(("DT", "NNS"), 3)]}, vocabulary={}, unigrams={}, bigrams={})
    actor = ExpansionActor(filler, grammar, MaskSampling(k=2), keep_columns=("case_id",))
    out = actor(pa.table({"case_id": ["s1"], "text": ["Or both."], "rule": pa.nulls(1, pa.string())})).to_pylist()[0]
    assert out["tree"] == "(FRAG (CC Or) (NP (DT both)) (. .))" and out["parser"] == "spacy-dep2const"
    [masked] = json.loads(out["expansions"])
    assert masked["masked"] == "Or both {MASK}." and masked["reference"] == "NP -> DT NNS"
    fills = [f["text"] for f in masked["fills"]]
    assert set(fills) == {"Or both films.", "Or both songs."}  # "disasters" is negative
    assert masked["rejected"].get("polarity", 0) >= 1
    scores = [f["score"] for f in masked["fills"]]
    assert scores == sorted(scores, reverse=True)


def test_saved_grammar_is_read_back_and_a_wrong_file_is_one_line_error(tmp_path):
    import pyarrow.parquet as pq

    from checkray.engine.errors import InputError
    from checkray.jobs.s2lct.stages import read_grammar

    grammar = grammar_table(count_productions(["(NP (DT some) (NNS things))", "(NP (DT all))"]))
    pq.write_table(grammar, tmp_path / "grammar.parquet")
    assert read_grammar(str(tmp_path / "grammar.parquet")).equals(grammar)
    pq.write_table(pa.table({"lhs": ["NP"]}), tmp_path / "other.parquet")
    with pytest.raises(InputError, match=r"other\.parquet: a grammar has columns \['lhs', 'rhs', 'count'\]"):
        read_grammar(str(tmp_path / "other.parquet"))
    with pytest.raises(InputError, match="grammar file not found"):
        read_grammar(str(tmp_path / "missing.parquet"))
