"""Gate rows carry the wall time of their step (Li et al. at size: time per step in the report)."""

from checkray.engine.mft.suite import GateLog
from checkray.jobs.mft.generate import GATE_SCHEMA


def test_gate_rows_have_seconds_and_fit_the_stage_schema():
    import pyarrow as pa

    printed = []
    log = GateLog(on_add=printed.append)
    log.add("label check", "test", 1, 10, 2, "agree 10, hard 2", seconds=12.345)
    log.add("de-duplication", "test", 1, 12, 0)
    assert log.rows[0]["seconds"] == 12.3 and log.rows[1]["seconds"] is None
    table = pa.Table.from_pylist(log.rows, schema=GATE_SCHEMA)
    assert table.column("seconds").to_pylist() == [12.3, None]
    assert printed == log.rows
