"""Pairing two models' results: the same suites case for case, or a one-line refusal."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from checkray.engine.benchmark.provenance import case_digests, suite_digests
from checkray.engine.compare.compare import compare_paired
from checkray.engine.compare.pairing import pair_results
from checkray.engine.errors import CheckrayError, InputError
from tests.compare.helpers import regress_suite, results_for


def _edit(table: pa.Table, case: str, column: str, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[table.column("case_id").to_pylist().index(case)] = value
    return table.set_column(
        table.schema.get_field_index(column), column, pa.array(values, table.schema.field(column).type)
    )


def test_pairs_every_judged_case_and_counts_flips(tmp_path):
    suite = regress_suite(tmp_path)
    pairing = pair_results(results_for(suite, "naive"), results_for(suite, "keyword"))
    assert len(pairing.paired) == 24  # 26 cases minus the 2 INV originals (not judged)
    assert (pairing.unpaired_baseline, pairing.unpaired_candidate) == (0, 0)
    table = compare_paired(pairing.paired, samples=200).to_pylist()
    neg = next(r for r in table if r["level"] == "capability" and r["capability"] == "Negation")
    assert (neg["n"], neg["pass_to_fail"], neg["fail_to_pass"]) == (9, 0, 9)
    assert neg["p_value"] == pytest.approx(2 / 2**9)
    overall = next(r for r in table if r["level"] == "overall")
    assert overall["baseline_pass_rate"] == pytest.approx(14 / 24)
    assert overall["candidate_pass_rate"] == pytest.approx(23 / 24)


def test_case_digest_covers_what_decides_a_verdict(tmp_path):
    suite = regress_suite(tmp_path)
    before = case_digests(suite).to_pylist()
    first = suite.column("case_id")[0].as_py()
    for column, value in (("text", "changed"), ("expected_label", "negative"), ("capability", "Other")):
        after = case_digests(_edit(suite, first, column, value)).to_pylist()
        assert after[0] != before[0] and after[1:] == before[1:]
    # meta (generation notes) is not content
    assert case_digests(_edit(suite, first, "meta", '{"x": 1}')).to_pylist() == before
    digests = suite_digests(suite.column("suite").to_pylist(), suite.column("case_id").to_pylist(), before)
    assert digests["regress"]["cases"] == 26 and len(digests["regress"]["digest"]) == 20


@pytest.mark.parametrize(
    "change, needle",
    [
        ("text", "1 case(s) with different content"),
        ("drop", "1 case(s) only in the baseline"),
        ("rename", "only the candidate ran suite(s) renamed"),
    ],
)
def test_a_suite_changed_between_the_runs_is_refused(tmp_path, change, needle):
    suite = regress_suite(tmp_path)
    victim = suite.column("case_id")[3].as_py()
    if change == "text":
        other = _edit(suite, victim, "text", "This is a good movie!")
    elif change == "drop":
        other = suite.filter(pc.not_equal(suite.column("case_id"), victim))
    else:
        other = regress_suite(tmp_path, suite="renamed")
    with pytest.raises(InputError) as err:
        pair_results(results_for(suite, "naive"), results_for(other, "keyword"))
    message = str(err.value)
    assert needle in message and "\n" not in message
    if change != "rename":
        assert message.startswith("suite 'regress' changed between the runs") and victim in message


def test_recorded_suite_digests_must_agree(tmp_path):
    suite = regress_suite(tmp_path)
    base, cand = results_for(suite, "naive"), results_for(suite, "keyword")
    same = {"regress": {"cases": 26, "digest": "aaa"}}
    pair_results(base, cand, same, same)
    with pytest.raises(InputError, match="recorded digests aaa .* and bbb"):
        pair_results(base, cand, same, {"regress": {"cases": 27, "digest": "bbb"}})
    # A sampled candidate (fewer cases in its results) is fine when the recorded suites agree.
    sampled = cand.filter(pc.not_equal(cand.column("case_id"), suite.column("case_id")[0].as_py()))
    pairing = pair_results(base, sampled, same, same)
    assert (len(pairing.paired), pairing.unpaired_baseline) == (23, 1)
    with pytest.raises(InputError, match="only in the baseline"):
        pair_results(base, sampled)  # no record: a missing case is a changed suite


def test_results_without_digests_are_refused(tmp_path):
    suite = regress_suite(tmp_path)
    old = results_for(suite, "naive").drop_columns(["case_digest"])
    with pytest.raises(CheckrayError, match="no case content digests"):
        pair_results(old, results_for(suite, "keyword"))
