"""COSTELLO's LM fluency check: the rule on given scores, the packaged scorer on real
sentences (no Ray), and the job's stage through the CLI."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from checkray.engine.costello.fluency import (
    FluencyCheck,
    apply_fluency,
    checked_rows,
    sentence_drop,
    sentences_to_score,
)

SEEDS = {"s1": ("the food was good .", None), "p1": ("prices closed at $ 21 .", "shares closed higher .")}


def _row(seed_id, op, text, text_pair=None, check=None, checks="sense"):
    return dict(
        seed_id=seed_id,
        op=op,
        text=text,
        text_pair=text_pair,
        index=3,
        word="good",
        replacement=text.split()[3],
        checks=checks,
        check=check,
        reason=None,
    )


def test_drop_over_the_limit_rejects_with_reason_and_passing_rows_record_the_check():
    rows = [
        _row("s1", "synonym", "the food was fine ."),
        _row("s1", "antonym", "the food was evil ."),
        _row("s1", "gender", "the food was bad ."),  # not a listed operator: untouched
        _row("s1", "synonym", "the food was nice .", check="sense"),  # already rejected: untouched
    ]
    scores = {"the food was good .": -10.0, "the food was fine .": -12.0, "the food was evil .": -16.5}
    out = apply_fluency(rows, SEEDS, scores, FluencyCheck(max_drop=5.0, operators=["synonym", "antonym"]))
    assert out[0]["check"] is None and out[0]["checks"] == "sense,fluency"
    assert out[1]["check"] == "fluency" and out[1]["checks"] == "sense"
    assert "costs the sentence 6.5 nats" in out[1]["reason"] and "(limit 5)" in out[1]["reason"]
    assert out[2] == rows[2] and out[3] == rows[3]
    assert rows[1]["check"] is None  # the input rows are not modified


def test_a_pair_is_judged_by_its_worse_sentence_and_only_checked_rows_are_scored():
    seed = SEEDS["p1"]
    variant = ("prices shut at $ 21 .", "shares shut higher .")
    scores = {seed[0]: -20.0, seed[1]: -9.0, variant[0]: -22.0, variant[1]: -17.0}
    assert sentence_drop(seed, variant, scores) == pytest.approx(8.0)
    assert sentence_drop(seed, seed, scores) == 0.0
    antonym = ("prices opened at $ 21 .", "shares opened higher .")
    alone = _row("p1", "pair_synonym", "prices closed at $ 22 .", "shares closed high .")
    alone["index"] = 5  # a word with a synonym but no antonym: no triple can use it
    rows = [
        _row("p1", "pair_synonym", *variant),
        _row("p1", "pair_antonym", *antonym),
        alone,
        _row("s1", "synonym", "the food was nice .", check="sense"),
    ]
    assert sentences_to_score(rows, SEEDS, ["pair_synonym", "pair_antonym"]) == {*seed, *variant, *antonym}
    assert sentences_to_score(rows, SEEDS, ["pair_synonym"]) == set()  # its partner is not checked


def test_first_synonyms_of_a_seed_are_checked_for_cr2_and_cr3():
    rows = [_row("s1", "synonym", f"the food was {w} .") for w in ("fine", "nice", "tasty", "decent")]
    for i, r in enumerate(rows):
        r["index"] = i
    assert checked_rows(rows, ["synonym"], first=3) == [0, 1, 2]


@pytest.mark.timeout(300)
def test_packaged_scorer_prefers_the_natural_word_and_ignores_batching():
    from checkray.actors.lm_scorer import CausalLMScorer

    scorer = CausalLMScorer("builtin:smollm2-135m-instruct", threads=2)
    texts = [
        "The deal is expected to close next month.",
        "The deal is expected to shut next month.",
        "He ordered the raw beef with a side of rice and a glass of red wine.",
        "He ordered the rude beef with a side of rice and a glass of red wine.",
    ]
    together = scorer.logprobs(texts)
    assert together[0] > together[1] and together[2] > together[3]
    alone = [scorer.logprobs([t])[0] for t in texts]
    assert together == pytest.approx(alone, abs=1e-3)  # padding in a batch changes no score


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_costello_job_runs_the_fluency_stage(ray_session, rt_corpus, tmp_path, capsys):
    from tests.costello.test_costello_job import run_small_costello

    code, out = run_small_costello(rt_corpus, tmp_path, "  fluency: {max_drop: 4.0, operators: [synonym, antonym]}\n")
    assert code == 0, capsys.readouterr()
    variants = pq.read_table(out / "stages" / "fluency" / "data.parquet").to_pylist()
    substituted = [v for v in variants if v["op"] in ("synonym", "antonym") and v["check"] in (None, "fluency")]
    assert substituted and all(
        (v["check"] == "fluency") != ("fluency" in (v["checks"] or "").split(",")) for v in substituted
    )
    cases = pq.read_table(out / "triples.parquet").to_pylist()
    word_edits = [c for c in cases if c["relation"] and '"operator": "synonym"' in (c["meta"] or "")]
    assert word_edits and all("fluency" in c["checks"] for c in word_edits)
    rejected = pq.read_table(out / "rejected.parquet").to_pylist()
    assert sum(v["check"] == "fluency" for v in substituted) == sum(r["check"] == "fluency" for r in rejected)


def test_only_word_substitutions_can_be_scored():
    from pydantic import ValidationError

    assert FluencyCheck().operators == ["pair_synonym", "pair_antonym"]
    with pytest.raises(ValidationError, match="cannot be scored"):
        FluencyCheck(operators=["gender"])


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_few_sentences_are_scored_in_the_driver_like_the_pool(ray_session, monkeypatch, pool_placements):
    from checkray.actors import lm_scorer

    texts = ["The deal is expected to close next month.", "The deal is expected to shut next month."]
    here = lm_scorer.score_sentences(texts * 2, "builtin:smollm2-135m-instruct")
    monkeypatch.setattr(lm_scorer, "SCORE_IN_DRIVER_BELOW", 1)  # 2 sentences: over the limit
    pooled = lm_scorer.score_sentences(texts, "builtin:smollm2-135m-instruct")
    assert pool_placements == [True, False]
    assert sorted(here) == sorted(texts) and here == pytest.approx(pooled, abs=1e-3)
    assert here[texts[0]] > here[texts[1]]
