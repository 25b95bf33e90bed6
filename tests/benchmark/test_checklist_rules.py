"""CheckList's verdict rules (its ``expect.py``: ``Expect.eq``, ``Expect.inv``,
``Expect.monotonic``, ``agg_fn``) case by case, the test-case summary, sampling for slow
models, and how models are placed into hosts."""

from __future__ import annotations

import numpy as np
import pytest

from checkray.engine.benchmark.expectations import ExpectationSettings, case_groups, evaluate_cases
from checkray.engine.benchmark.inputs import prepare_cases
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.benchmark.results import model_results
from checkray.engine.benchmark.sampling import needed_inputs, sample_mask
from checkray.engine.benchmark.summary import summarize
from checkray.engine.errors import InputError
from checkray.engine.schema import make_cases

THREE = ["negative", "neutral", "positive"]
S = ExpectationSettings()


def cases(*rows):
    base = {"suite": "s", "method": "checklist", "capability": "Vocabulary"}
    return make_cases([{**base, **r} for r in rows])


def test_mft_label_set_passes_any_listed_label():
    # CheckList's "not negative": Expect.single(lambda x, pred, *a: pred != 0)
    t = cases(
        *[{"case_id": c, "text": c, "expected_labels": ["neutral", "positive"]} for c in ("a", "b", "c")],
    )
    probs = np.array([[0.1, 0.2, 0.7], [0.2, 0.6, 0.2], [0.8, 0.1, 0.1]])
    assert evaluate_cases(t, probs, THREE, S).passed.tolist() == [True, True, False]


def inv_case(tolerance):
    return cases(
        {"case_id": "o", "text": "orig", "test_type": "INV"},  # the original: scored, not judged
        {"case_id": "p", "text": "pert", "test_type": "INV", "perturbs": "o", "tolerance": tolerance},
    )


@pytest.mark.parametrize(
    "before, after, tolerance, verdict",
    [
        # Expect.inv: same prediction passes whatever the probabilities do
        ([0.6, 0.1, 0.3], [0.9, 0.05, 0.05], 0.1, True),
        # changed prediction, P(original label) moved by 0.10 <= 0.1: passes (CheckList uses <=)
        ([0.45, 0.1, 0.45 + 1e-9], [0.35, 0.1, 0.55], 0.1, True),
        # changed prediction, moved by 0.2 > 0.1: fails
        ([0.5, 0.1, 0.4], [0.3, 0.1, 0.6], 0.1, False),
        # no tolerance (null): any change of label fails, as Expect.inv(tolerance=0)
        ([0.5, 0.1, 0.4], [0.49, 0.02, 0.49 + 1e-6], None, False),
    ],
)
def test_inv_with_a_probability_tolerance(before, after, tolerance, verdict):
    ev = evaluate_cases(inv_case(tolerance), np.array([before, after]), THREE, S)
    assert ev.passed.tolist() == [None, verdict]
    assert ev.error == [None, None]


def dir_case(relation, label, tolerance=0.1):
    return cases(
        {"case_id": "o", "text": "orig", "test_type": "DIR"},
        {
            "case_id": "p",
            "text": "pert",
            "test_type": "DIR",
            "perturbs": "o",
            "relation": relation,
            "expected_label": label,
            "tolerance": tolerance,
        },
    )


@pytest.mark.parametrize(
    "relation, label, p_before, p_after, verdict",
    [
        # Expect.monotonic(label=2, increasing=True, tolerance=0.1): conf_diff + tol >= 0
        ("up", "positive", 0.5, 0.41, True),
        ("up", "positive", 0.5, 0.39, False),
        # "can't fail" when orig_conf <= tolerance: None, not counted
        ("up", "positive", 0.1, 0.0, None),
        # decreasing: conf_diff - tol <= 0; can't fail when orig_conf >= 1 - tol
        ("down", "positive", 0.5, 0.59, True),
        ("down", "positive", 0.5, 0.61, False),
        ("down", "positive", 0.95, 1.0, None),
    ],
)
def test_dir_monotonic_on_a_named_label(relation, label, p_before, p_after, verdict):
    def row(p):
        return [(1 - p) / 2, (1 - p) / 2, p]

    ev = evaluate_cases(dir_case(relation, label), np.array([row(p_before), row(p_after)]), THREE, S)
    assert ev.passed.tolist() == [None, verdict]


def test_dir_without_a_label_follows_the_original_prediction():
    # Expect.monotonic(label=None): the label is the original's prediction (negative here)
    probs = np.array([[0.6, 0.1, 0.3], [0.55, 0.1, 0.35]])
    assert evaluate_cases(dir_case("up", None), probs, THREE, S).passed.tolist() == [None, True]
    probs = np.array([[0.6, 0.1, 0.3], [0.45, 0.1, 0.45]])
    assert evaluate_cases(dir_case("up", None), probs, THREE, S).passed.tolist() == [None, False]


def test_mft_cannot_perturb_and_tolerance_must_be_a_probability():
    with pytest.raises(InputError, match="MFT case has a 'perturbs'"):
        cases(
            {"case_id": "a", "text": "a", "expected_label": "positive"}, {"case_id": "b", "text": "b", "perturbs": "a"}
        )
    with pytest.raises(InputError, match="tolerance"):
        cases(
            {"case_id": "a", "text": "a", "test_type": "INV"},
            {"case_id": "b", "text": "b", "test_type": "INV", "perturbs": "a", "tolerance": 2.0},
        )


def checklist_inv_suite():
    """Two INV test cases of 1 original + 2 perturbations, one MFT of two examples."""
    rows = []
    for g in ("g1", "g2"):
        rows.append({"case_id": f"{g}-0", "text": f"{g} orig", "test_type": "INV", "topic": "typos"})
        for k in (1, 2):
            rows.append(
                {
                    "case_id": f"{g}-{k}",
                    "text": f"{g} typo {k}",
                    "test_type": "INV",
                    "perturbs": f"{g}-0",
                    "topic": "typos",
                    "tolerance": 0.1,
                }
            )
    for k in (0, 1):
        rows.append(
            {"case_id": f"m-{k}", "text": f"mft {k}", "expected_label": "positive", "topic": "words", "testcase": "m"}
        )
    return cases(*rows)


def test_a_test_case_fails_when_any_of_its_perturbations_fails():
    t = checklist_inv_suite()
    assert case_groups(t) == ["g1-0"] * 3 + ["g2-0"] * 3 + ["m", "m"]
    positive, negative = [0.1, 0.1, 0.8], [0.8, 0.1, 0.1]
    # g1: second perturbation flips (fails); g2: all same; the MFT test case: one example fails
    probs = np.array([positive, positive, negative, positive, positive, positive, positive, negative])
    prepared, _ = prepare_cases([t], dedup=False)
    results = model_results(prepared, "m", THREE, None, probs, S)
    assert results.column("pass").to_pylist() == [None, True, False, None, True, True, True, False]
    by_test = {r["topic"]: r for r in summarize(results).to_pylist()}
    assert (by_test["typos"]["n"], by_test["typos"]["failures"]) == (4, 1)
    assert (by_test["typos"]["testcases"], by_test["typos"]["testcase_failures"]) == (2, 1)
    assert (by_test["words"]["testcases"], by_test["words"]["testcase_failure_rate"]) == (1, 1.0)


def test_sampling_keeps_whole_test_cases_from_every_test_and_is_repeatable():
    rows = []
    for topic, groups in (("big", 40), ("small", 4)):
        for g in range(groups):
            rows.append({"case_id": f"{topic}{g}", "text": f"{topic} {g}", "test_type": "INV", "topic": topic})
            for k in range(3):
                rows.append(
                    {
                        "case_id": f"{topic}{g}-{k}",
                        "text": f"{topic} {g} {k}",
                        "test_type": "INV",
                        "perturbs": f"{topic}{g}",
                        "topic": topic,
                    }
                )
    t = cases(*rows)
    keep = sample_mask(t, 40, seed=1)
    assert np.array_equal(keep, sample_mask(t, 40, seed=1))
    kept_groups = {k for k, m in zip(case_groups(t), keep) if m}
    for g in kept_groups:  # a kept test case is kept whole
        assert all(m for k, m in zip(case_groups(t), keep) if k == g)
    topics = {tp for tp, m in zip(t.column("topic").to_pylist(), keep) if m}
    assert topics == {"big", "small"} and 36 <= keep.sum() <= 48
    assert sample_mask(t, None).all() and sample_mask(t, 10_000).all()

    prepared, _ = prepare_cases([t])
    slow = ModelSpec(name="llm", family="llm_zero_shot", max_cases=20)
    fast = ModelSpec(name="lr", family="sklearn")
    needed = needed_inputs(prepared, [slow, fast], S)
    assert len(needed["lr"]) == t.num_rows and 16 <= len(needed["llm"]) <= 28


def test_heavy_models_get_a_host_each_and_cheap_ones_share_one_per_cpu():
    from checkray.actors.benchmark.predictor import plan_hosts

    cheap = [ModelSpec(name=f"lr{i}", family="sklearn") for i in range(12)]
    heavy = [ModelSpec(name="bert", family="hf"), ModelSpec(name="qwen", family="llm_zero_shot")]
    forced = [ModelSpec(name="big_callable", family="callable", options={"heavy": True})]
    heads = [ModelSpec(name=f"head{i}", family="st_head") for i in range(4)]
    specs = cheap + heavy + forced + heads
    rows = {s.name: [0, 1, 2] for s in specs}
    rows["lr11"] = [0]  # another suite set: never mixed with the others in a host
    hosts = plan_hosts(specs, rows, {f"head{i}": "feed-a" for i in range(4)}, cpus=2)
    sizes = sorted((len(h.members), h.head_only) for h in hosts)
    assert sizes == [(1, False)] * 4 + [(2, True), (2, True), (5, False), (6, False)]
    assert {h.members[0].name for h in hosts if len(h.members) == 1} == {"bert", "qwen", "big_callable", "lr11"}
    assert len(plan_hosts(cheap, rows, {}, cpus=2, models_per_host=1)) == 12


def test_suites_written_before_the_checklist_columns_read_unchanged(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from checkray.engine.benchmark.inputs import read_suite
    from checkray.engine.schema import TEST_CASE_SCHEMA

    old_fields = [f for f in TEST_CASE_SCHEMA if f.name not in ("expected_labels", "tolerance", "testcase")]
    old = cases({"case_id": "a", "text": "good", "expected_label": "positive"}).select([f.name for f in old_fields])
    assert old.schema.names == [f.name for f in old_fields]
    pq.write_table(old, tmp_path / "old.parquet")
    table = read_suite(str(tmp_path / "old.parquet"))
    assert table.column("expected_labels").to_pylist() == [None] and table.column("tolerance").to_pylist() == [None]
    assert evaluate_cases(table, np.array([[0.2, 0.8]]), ["negative", "positive"], S).passed.tolist() == [True]
    assert isinstance(table, pa.Table)
