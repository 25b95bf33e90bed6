"""Stage runner: atomic outputs, fingerprint skipping, resume after a crash."""

import pyarrow as pa
import pytest

from checkray.engine.stages import RunDir, Stage, StageRunner


def _stages(calls, fail_at=None, factor=2):
    def make(ctx):
        calls.append("make")
        return {"data": pa.table({"x": list(range(5))})}

    def double(ctx):
        calls.append("double")
        if fail_at == "double":
            raise RuntimeError("crash")
        x = ctx.input("make").column("x").to_pylist()
        return {"data": pa.table({"y": [v * factor for v in x]})}

    return [Stage("make", make), Stage("double", double, inputs=("make",), config={"factor": factor})]


def test_rerun_skips_unchanged_stages(tmp_path):
    calls = []
    StageRunner(RunDir(str(tmp_path))).run_all(_stages(calls))
    assert calls == ["make", "double"]
    runner = StageRunner(RunDir(str(tmp_path)))
    records = runner.run_all(_stages(calls))
    assert calls == ["make", "double"] and all(r.skipped for r in records.values())
    assert runner.output("double").column("y").to_pylist() == [0, 2, 4, 6, 8]


def test_config_change_reruns_only_dependents(tmp_path):
    calls = []
    StageRunner(RunDir(str(tmp_path))).run_all(_stages(calls))
    runner = StageRunner(RunDir(str(tmp_path)))
    runner.run_all(_stages(calls, factor=3))
    assert calls == ["make", "double", "double"]
    assert runner.output("double").column("y").to_pylist() == [0, 3, 6, 9, 12]


def test_resume_after_crash_equals_uninterrupted_run(tmp_path):
    crashed, clean = tmp_path / "crashed", tmp_path / "clean"
    calls = []
    with pytest.raises(RuntimeError):
        StageRunner(RunDir(str(crashed))).run_all(_stages(calls, fail_at="double"))
    assert not (crashed / "stages" / "double" / "_SUCCESS.json").exists()
    # debris of the crashed stage is removed before it runs again
    (crashed / "stages" / "double").mkdir(parents=True, exist_ok=True)
    (crashed / "stages" / "double" / "data.parquet").write_bytes(b"half-written")
    calls.clear()
    resumed = StageRunner(RunDir(str(crashed)))
    resumed.run_all(_stages(calls))
    assert calls == ["double"]  # 'make' was committed before the crash
    reference = StageRunner(RunDir(str(clean)))
    reference.run_all(_stages([]))
    assert resumed.output("double").equals(reference.output("double"))


def test_atomic_write_leaves_no_partial_file(tmp_path):
    run = RunDir(str(tmp_path))

    with pytest.raises(AttributeError):
        run.write_table("out.parquet", "not a table")  # fails while writing
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_run_dir_on_a_uri_filesystem(tmp_path):
    run = RunDir(f"file://{tmp_path}/viauri")
    run.write_table("t.parquet", pa.table({"a": [1]}))
    assert (tmp_path / "viauri" / "t.parquet").exists() and run.read_table("t.parquet").num_rows == 1


def test_file_digest_of_a_missing_or_unreadable_input_is_one_line(tmp_path):
    import pytest

    from checkray.engine.errors import InputError
    from checkray.engine.stages import file_digest

    (tmp_path / "a.csv").write_text("text\nx\n")
    assert file_digest(str(tmp_path / "a.csv")) == file_digest(str(tmp_path / "a.csv"))
    with pytest.raises(InputError, match="nope.csv: file not found"):
        file_digest(str(tmp_path / "nope.csv"))
    with pytest.raises(InputError, match="not a file"):
        file_digest(str(tmp_path))
