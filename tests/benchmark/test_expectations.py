"""Pure parts of the benchmark: CheckList expectations, the neutral band, label maps,
suite checks, de-duplicated inputs, the summary with versions, actor planning."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from checkray.engine.benchmark.expectations import ExpectationSettings, evaluate_cases, label_map_error, predict_labels
from checkray.engine.benchmark.inputs import case_versions, check_suite, prepare_cases
from checkray.engine.benchmark.summary import capability_matrix, model_leaderboard, summarize
from checkray.engine.errors import InputError
from checkray.engine.schema import make_cases

BINARY = ["negative", "positive"]
S = ExpectationSettings()


def binary(p_pos):
    p = np.asarray(p_pos, dtype=float)
    return np.column_stack([1 - p, p])


def cases(*rows):
    base = {"suite": "s", "method": "test", "capability": "Vocabulary"}
    return make_cases([{**base, **r} for r in rows])


def test_mft_passes_when_prediction_equals_expected_label():
    t = cases(
        {"case_id": "a", "text": "x", "expected_label": "positive"},
        {"case_id": "b", "text": "y", "expected_label": "positive"},
    )
    ev = evaluate_cases(t, binary([0.9, 0.2]), BINARY, S)
    assert ev.predicted.tolist() == ["positive", "negative"]
    assert ev.passed.tolist() == [True, False]
    assert ev.error == [None, None]


def test_inv_compares_with_the_perturbed_case_prediction():
    t = cases(
        {"case_id": "o", "text": "orig", "expected_label": "positive"},
        {"case_id": "same", "text": "o2", "test_type": "INV", "perturbs": "o", "relation": "same"},
        {"case_id": "flip", "text": "o3", "test_type": "INV", "perturbs": "o"},
    )
    ev = evaluate_cases(t, binary([0.2, 0.4, 0.7]), BINARY, S)
    # The original is wrong (negative) but INV only asks for the same prediction.
    assert ev.passed.tolist() == [False, True, False]


def test_dir_up_and_down_respect_the_tolerance():
    t = cases(
        {"case_id": "o", "text": "orig", "expected_label": "positive"},
        {
            "case_id": "up_ok",
            "text": "a",
            "test_type": "DIR",
            "perturbs": "o",
            "relation": "up",
            "expected_label": "positive",
        },
        {
            "case_id": "up_small_drop",
            "text": "b",
            "test_type": "DIR",
            "perturbs": "o",
            "relation": "up",
            "expected_label": "positive",
        },
        {
            "case_id": "up_big_drop",
            "text": "c",
            "test_type": "DIR",
            "perturbs": "o",
            "relation": "up",
            "expected_label": "positive",
        },
        {
            "case_id": "down_rise",
            "text": "d",
            "test_type": "DIR",
            "perturbs": "o",
            "relation": "down",
            "expected_label": "positive",
        },
    )
    probs = binary([0.6, 0.9, 0.55, 0.3, 0.8])
    ev = evaluate_cases(t, probs, BINARY, ExpectationSettings(dir_tolerance=0.1))
    assert ev.passed.tolist()[1:] == [True, True, False, False]
    strict = evaluate_cases(t, probs, BINARY, ExpectationSettings(dir_tolerance=0.0))
    assert strict.passed.tolist()[1:] == [True, False, False, False]


def test_dir_without_expected_label_uses_the_perturbed_prediction():
    t = cases(
        {"case_id": "o", "text": "orig", "expected_label": "negative"},
        {"case_id": "d", "text": "more", "test_type": "DIR", "perturbs": "o", "relation": "up"},
    )
    # The original is predicted negative (P(neg)=0.7); "up" means P(negative) must not fall.
    assert evaluate_cases(t, binary([0.3, 0.1]), BINARY, S).passed.tolist()[1] is True
    assert evaluate_cases(t, binary([0.3, 0.6]), BINARY, S).passed.tolist()[1] is False


def test_binary_model_meets_neutral_expectations_inside_the_band():
    t = cases(*({"case_id": str(i), "text": str(i), "expected_label": "neutral"} for i in range(5)))
    ev = evaluate_cases(t, binary([0.2, 1 / 3, 0.5, 2 / 3, 0.8]), BINARY, S)
    assert ev.predicted.tolist() == ["negative", "neutral", "neutral", "neutral", "positive"]
    assert ev.passed.tolist() == [False, True, True, True, False]
    wide = ExpectationSettings(neutral_band=(0.1, 0.9))
    assert evaluate_cases(t, binary([0.2, 1 / 3, 0.5, 2 / 3, 0.8]), BINARY, wide).passed.tolist() == [True] * 5


def test_binary_suite_is_predicted_by_argmax_not_the_band():
    t = cases({"case_id": "a", "text": "x", "expected_label": "positive"})
    assert evaluate_cases(t, binary([0.55]), BINARY, S).predicted.tolist() == ["positive"]
    assert predict_labels(binary([0.55]), BINARY, neutral=True, s=S).tolist() == ["neutral"]


def test_three_label_model_predicts_neutral_by_argmax():
    t = cases({"case_id": "a", "text": "x", "expected_label": "neutral"})
    probs = np.array([[0.2, 0.5, 0.3]])
    ev = evaluate_cases(t, probs, ["negative", "neutral", "positive"], S)
    assert ev.passed.tolist() == [True]


def test_label_map_mismatch_errors_only_that_suite():
    t = make_cases(
        [
            {
                "case_id": "a",
                "suite": "sentiment",
                "method": "m",
                "capability": "c",
                "text": "x",
                "expected_label": "positive",
            },
            {
                "case_id": "b",
                "suite": "nli",
                "method": "m",
                "capability": "c",
                "text": "y",
                "expected_label": "entailment",
            },
        ]
    )
    ev = evaluate_cases(t, binary([0.9, 0.9]), BINARY, S)
    assert ev.passed.tolist() == [True, None]
    assert ev.error[0] is None and "label-map mismatch" in ev.error[1] and "entailment" in ev.error[1]
    assert label_map_error("s", {"neutral"}, ["bad", "good"], S) is not None  # no positive/negative: no rule


def test_unsupported_relation_is_a_case_error_not_a_crash():
    t = cases(
        {"case_id": "o", "text": "o", "expected_label": "positive"},
        {"case_id": "c", "text": "c", "test_type": "DIR", "perturbs": "o", "relation": "closer"},
    )
    ev = evaluate_cases(t, binary([0.9, 0.9]), BINARY, S)
    assert ev.passed.tolist() == [True, None] and "closer" in ev.error[1]


def test_check_suite_rejects_empty_bad_schema_and_dangling_perturbs():
    with pytest.raises(InputError, match="no test cases"):
        check_suite(make_cases([]), "empty.parquet")
    with pytest.raises(InputError, match="bad.parquet: .*missing column"):
        check_suite(pa.table({"text": ["x"]}), "bad.parquet")
    dangling = cases({"case_id": "i", "text": "x", "test_type": "INV", "perturbs": "nowhere"})
    with pytest.raises(InputError, match="perturbs id"):
        check_suite(dangling, "d.parquet")


def test_versions_come_from_meta_then_seed_and_inputs_are_deduplicated():
    t = cases(
        {"case_id": "a", "text": "same", "meta": {"version": 2}, "provenance": {"seed": 7}},
        {"case_id": "b", "text": "same", "provenance": {"seed": 7}},
        {"case_id": "c", "text": "other"},
    )
    assert case_versions(t).to_pylist() == ["2", "7", None]
    other = cases({"case_id": "z", "text": "other"})
    prepared, inputs = prepare_cases([t, other])
    assert inputs.column("text").to_pylist() == ["same", "other"]
    assert prepared.column("input_key").to_pylist() == [0, 0, 1, 1]
    assert prepared.column("part").to_pylist() == [0, 0, 0, 1]
    _, no_dedup = prepare_cases([t, other], dedup=False)
    assert no_dedup.num_rows == 4


def _results(rows):
    keys = ["model", "suite", "capability", "topic", "version", "pass", "error", "test_type", "case_id"]
    return pa.Table.from_pylist([dict(zip(keys, r)) for r in rows])


def test_summary_pools_versions_and_reports_their_mean_and_std():
    rows = []
    # version 1: 1 failure of 4; version 2: 3 of 4 -> pooled 4/8, mean 0.5, std(ddof=1) 0.3536
    for version, fails in (("1", 1), ("2", 3)):
        for i in range(4):
            rows.append(("m", "s", "Negation", None, version, i >= fails, None, "MFT", f"{version}-{i}"))
    rows.append(("m", "s", "Vocabulary", "t", None, True, None, "MFT", "v"))
    rows.append(("m", "s", "Vocabulary", "t", None, None, "model cannot score", "DIR", "w"))
    summary = {(r["capability"], r["test_type"]): r for r in summarize(_results(rows)).to_pylist()}
    neg = summary["Negation", "MFT"]
    assert (neg["n"], neg["failures"], neg["failure_rate"], neg["n_versions"]) == (8, 4, 0.5, 2)
    assert neg["failure_rate_mean"] == pytest.approx(0.5)
    assert neg["failure_rate_std"] == pytest.approx(np.std([0.25, 0.75], ddof=1))
    assert (neg["testcases"], neg["testcase_failures"]) == (8, 4)  # one case per test case
    voc = summary["Vocabulary", "MFT"]
    assert (voc["n"], voc["failures"], voc["errors"], voc["error"]) == (1, 0, 0, None)
    assert voc["failure_rate_mean"] is None and voc["n_versions"] == 0
    dirs = summary["Vocabulary", "DIR"]
    assert (dirs["n"], dirs["errors"], dirs["error"], dirs["testcases"]) == (0, 1, "model cannot score", 0)


def test_leaderboard_ranks_by_failure_rate_and_puts_failed_models_last():
    rows = [
        ("good", "s", "c", None, None, True, None, "MFT", "1"),
        ("good", "s", "c", None, None, False, None, "MFT", "2"),
        ("bad", "s", "c", None, None, False, None, "MFT", "1"),
        ("bad", "s", "c", None, None, False, None, "MFT", "2"),
        ("broken", "s", "c", None, None, None, "boom", "MFT", "1"),
        ("best", "s", "c", None, None, True, None, "MFT", "1"),
    ]
    board = model_leaderboard(summarize(_results(rows)), {"good": 0.8}).to_pylist()
    assert [r["model"] for r in board] == ["best", "good", "bad", "broken"]
    assert board[1]["accuracy"] == 0.8 and board[1]["failure_rate"] == 0.5
    assert board[3]["failure_rate"] is None and board[3]["error"] == "boom" and board[3]["failed_suites"] == 1
    matrix = capability_matrix(summarize(_results(rows)))
    assert matrix.loc["bad", "c"] == 1.0 and np.isnan(matrix.loc["broken", "c"])


def test_actor_plan_never_asks_for_a_missing_gpu_and_shares_gpus_evenly():
    from checkray.actors.benchmark.predictor import plan_predictors

    cpu = plan_predictors({"CPU": 2}, "auto", n_models=12)
    assert cpu.device == "cpu" and cpu.num_gpus == 0 and cpu.pool_size == 12
    assert cpu.num_cpus * 12 <= 2 and cpu.threads == 1
    gpu = plan_predictors({"CPU": 4, "GPU": 1}, "auto", n_models=4)
    assert gpu.device == "gpu" and gpu.num_gpus == pytest.approx(0.25) and gpu.num_cpus * 4 <= 4
    limited = plan_predictors({"CPU": 2}, "cpu", n_models=12, max_concurrent=3)
    assert limited.pool_size == 3
