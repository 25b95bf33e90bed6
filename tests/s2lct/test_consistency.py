"""Labels the capabilities need vs the corpus's, and the label-consistency judge (pure
parts and the judge choice), without Ray."""

from __future__ import annotations

import csv

import pytest

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.s2lct.consistency import NO_ANSWER, lexicon_label, sample_cases, summarize, verdicts
from checkray.engine.s2lct.spec import check_corpus_labels, load_capabilities


@pytest.fixture(scope="module")
def specs():
    return load_capabilities()


def test_binary_corpus_warns_once_per_neutral_capability(specs):
    notes = {n.capability: n for n in check_corpus_labels(specs, {"negative", "positive"})}
    assert sorted(notes) == ["LC1", "LC5", "LC7"]
    assert all("neutral proxy stands in" in n.message and not n.seedless for n in notes.values())
    assert notes["LC7"].message.endswith("; it still gets seeds")
    assert all("\n" not in n.message for n in notes.values())
    off = {n.capability: n for n in check_corpus_labels(specs, {"negative", "positive"}, neutral_proxy=False)}
    assert off["LC1"].seedless and off["LC5"].seedless and off["LC7"].seedless
    assert "neutral proxy is off" in off["LC1"].message and "NO seeds" in off["LC7"].message
    # The fluent wrappers (the default) build LC7 from positive sentences and a fixed
    # neutral middle: it keeps its seeds without the proxy; LC1 and LC5 do not.
    fluent = {
        n.capability: n for n in check_corpus_labels(specs, {"negative", "positive"}, neutral_proxy=False, fluent=True)
    }
    assert fluent["LC1"].seedless and fluent["LC5"].seedless and not fluent["LC7"].seedless
    assert fluent["LC7"].message.endswith("; it still gets seeds")


def test_missing_polar_label_says_what_still_works(specs):
    notes = {n.capability: n for n in check_corpus_labels(specs, {"positive", "neutral"})}
    assert notes["LC2"].transforms == 1 and "only 1 of its 2 search rules" in notes["LC2"].message
    assert notes["LC9"].transforms == 1 and "only 1 of its 2 transforms" in notes["LC9"].message
    assert notes["LC6"].seedless and notes["LC11"].seedless and notes["LC4"].seedless
    assert "it still gets seeds (all 2 transforms can build them)" in notes["LC3"].message  # either rule fills its part
    assert "LC10" not in notes and "LC1" not in notes


def test_numeric_labels_are_an_error_naming_the_map(specs):
    with pytest.raises(InputError, match=r"corpus labels \(0, 1\) match none .* --labels 0=negative,1=positive"):
        check_corpus_labels(specs, {"0", "1"})


def _rows():
    rows = []
    for cap, n_seeds, n_exp in (("LC1", 6, 2), ("LC2", 2, 10), ("LC5", 3, 0)):
        for i in range(n_seeds):
            rows.append({"case_id": f"{cap}-s{i}", "capability_id": cap, "kind": "seed"})
        for j in range(n_exp):
            rows.append(
                {"case_id": f"{cap}-e{j}", "capability_id": cap, "kind": "expansion", "seed_case_id": f"{cap}-s{j % 2}"}
            )
    return rows


def test_sampling_takes_seeds_and_expansions_of_sampled_seeds_for_every_capability():
    picked = sample_cases(_rows(), per_capability=4, seed=0)
    by_cap = {}
    for r in picked:
        by_cap.setdefault(r["capability_id"], []).append(r)
    assert sorted(by_cap) == ["LC1", "LC2", "LC5"]
    lc1 = by_cap["LC1"]
    assert len(lc1) == 4 and sum(r["kind"] == "expansion" for r in lc1) == 2
    lc2 = by_cap["LC2"]  # 2 seeds, then 2 expansions, one of each sampled seed first
    assert [r["kind"] for r in lc2] == ["seed", "seed", "expansion", "expansion"]
    assert {r["seed_case_id"] for r in lc2 if r["kind"] == "expansion"} == {"LC2-s0", "LC2-s1"}
    assert len(by_cap["LC5"]) == 3  # fewer cases than asked: all of them
    assert sample_cases(_rows(), 4, seed=0) == picked and sample_cases(_rows(), 4, seed=1) != picked


def fake_judge(texts):
    """Reads 'bad' as negative, 'good' as positive, 'meh' as no answer, else neutral (binary band)."""
    out = []
    for t in texts:
        if "meh" in t:
            out.append({"label": NO_ANSWER, "neutral": False})
        elif "bad" in t:
            out.append({"label": "negative", "neutral": False})
        elif "good" in t:
            out.append({"label": "positive", "neutral": False})
        else:
            out.append({"label": "positive", "neutral": True})
    return out


def test_composed_and_direct_verdicts():
    cases = [
        # LC2 seed: the part is the text; the judge agrees
        {"capability_id": "LC2", "kind": "seed", "text": "a good film", "expected_label": "positive",
         "parts": [{"text": "a good film", "needs": "positive"}]},
        # LC10 template seed: the part reads positive as required; the judge misreads the whole text
        {"capability_id": "LC10", "kind": "seed", "text": "Do I think that it is good? no",
         "expected_label": "negative", "parts": [{"text": "it is good", "needs": "positive"}]},
        # expansion whose inserted word changed the judge's reading of the seed
        {"capability_id": "LC2", "kind": "expansion", "text": "a good bad film", "expected_label": "positive",
         "seed_text": "a good film", "parts": [{"text": "a good film", "needs": "positive"}]},
        # a neutral part (lexicon proxy): the binary judge's band says neutral
        {"capability_id": "LC1", "kind": "seed", "text": "the room is small", "expected_label": "neutral",
         "parts": [{"text": "the room is small", "needs": "neutral"}]},
        # LC4: accepts positive or neutral; the part is negative as required
        {"capability_id": "LC4", "kind": "seed", "text": "This is not a bad film", "expected_label": "positive",
         "accepts": ["positive", "neutral"], "parts": [{"text": "This is a bad film", "needs": "negative"}]},
        # no answer from the judge: left out
        {"capability_id": "LC1", "kind": "seed", "text": "meh", "expected_label": "neutral",
         "parts": [{"text": "meh", "needs": "neutral"}]},
    ]  # fmt: skip
    rows = verdicts(cases, fake_judge)
    assert [r["agree_judge"] for r in rows] == [True, True, False, True, True, None]
    assert [r["agree_direct"] for r in rows] == [True, False, False, True, False, None]
    assert rows[2]["judge_seed"] == "positive" and rows[2]["judge_text"] == "negative"
    assert rows[0]["parts"][0]["lexicon"] == "positive" and rows[3]["lexicon_text"] == "neutral"
    table = {r["capability"]: r for r in summarize(rows)}
    assert table["LC2"]["agreement"] == 0.5 and table["LC2"]["agreement (expansions)"] == 0.0
    assert table["LC1"]["no answer"] == 1 and table["LC1"]["agreement"] == 1.0
    assert table["all"]["seeds"] == 5 and table["all"]["expansions"] == 1 and table["all"]["agreement"] == 0.8


def test_lexicon_rule_is_vaders_compound():
    assert lexicon_label("a wonderful film")["label"] == "positive"
    assert lexicon_label("a horrible film")["label"] == "negative"
    assert lexicon_label("the film is about a family")["label"] == "neutral"


def test_judge_choice_avoids_models_trained_on_the_seed_sentences(tmp_path):
    from checkray.engine.s2lct.consistency import choose_judge

    sentences = [f"sentence number {i} is here" for i in range(50)]
    corpus = tmp_path / "train.csv"
    with corpus.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label"])
        w.writerows((t, "positive" if i % 2 else "negative") for i, t in enumerate(sentences))
    meta = {"corpus": str(corpus), "held_out": 0.2, "split_seed": 0}
    seen = ModelSpec(name="seen", family="sklearn", path="x", accuracy=0.9, meta=meta)
    zero = ModelSpec(name="zero", family="llm_zero_shot", accuracy=0.7)
    lex = ModelSpec(name="lex", family="vader", accuracy=0.95)
    judge = choose_judge([seen, zero, lex], None, sentences, 0.05)
    assert judge.spec.name == "zero" and judge.overlap == 0.0 and "WARNING" not in " ".join(judge.notes)
    judge = choose_judge([seen, lex], None, sentences, 0.05)
    assert judge.spec.name == "seen" and 0.7 <= judge.overlap <= 0.9 and "WARNING" in judge.notes[1]  # 80% train split
    judge = choose_judge([seen, zero], None, ["never seen before"], 0.05)
    assert judge.spec.name == "seen" and judge.overlap == 0.0  # other data: the stronger model judges
    with pytest.raises(InputError, match="no model named nope"):
        choose_judge([seen], "nope", sentences, 0.05)
