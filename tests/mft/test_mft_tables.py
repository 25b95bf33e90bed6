"""Li et al.'s Tables 7 and 8 from benchmark results (pure: no models run)."""

import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.mft.tables import mft_table7, mft_table8, rows_table


def _results(rows):
    """Benchmark result rows: (model, suite, topic, version, pass)."""
    keys = ("model", "suite", "topic", "version", "pass")
    return pa.Table.from_pylist([dict(zip(keys, r)) for r in rows])


RESULTS = _results(
    [
        # version 1: 2 of 2 pass; version 2: 1 of 2 -> pooled 75%, per-version 100% and 50%
        ("a", "mft-test-original", "t0", 1, True),
        ("a", "mft-test-original", "t1", 1, True),
        ("a", "mft-test-original", "t0", 2, True),
        ("a", "mft-test-original", "t1", 2, False),
        ("a", "mft-test-extended", "t0", 1, False),
        ("a", "mft-test-extended", "t0", 1, None),  # a case the model could not score: not counted
        ("b", "mft-test-original", "t0", 1, False),
    ]
)


def test_table7_pools_versions_and_shows_their_spread():
    specs = [
        ModelSpec(name="a", family="callable", path="m:f", accuracy=0.9, meta={"train_accuracy": 0.95}),
        ModelSpec(name="b", family="callable", path="m:f"),
    ]
    a, b = mft_table7(RESULTS, specs)
    assert a == {
        "model": "a",
        "Train": "95.0%",
        "Train MFT (Original)": "—",
        "Train MFT (Extended)": "—",
        "Test": "90.0%",
        "Test MFT (Original)": "75.0% (±35.4)",  # std of 100% and 50%
        "Test MFT (Extended)": "0.0%",  # one version: no spread
    }
    assert b["Train"] == b["Test"] == "—" and b["Test MFT (Original)"] == "0.0%"


def test_table8_has_one_column_per_topic_of_the_original_cases():
    rows = mft_table8(RESULTS)
    assert rows == [{"model": "a", "t0": "100.0% (±0.0)", "t1": "50.0% (±70.7)"}, {"model": "b", "t0": "0.0%"}]
    assert mft_table8(_results([("a", "mft-test-extended", "t0", 1, True)])) == []


def test_rows_table_keeps_every_column_in_first_seen_order():
    table = rows_table(mft_table8(RESULTS)[::-1])  # model b first: it has no t1
    assert table.column_names == ["model", "t0", "t1"]
    assert table.to_pylist()[0] == {"model": "b", "t0": "0.0%", "t1": None}
    assert rows_table([]).num_rows == 0
