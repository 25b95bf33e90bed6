"""Stage parts and incomplete stages: a long stage commits items one by one, a stage that
ends with failed items is rerun (with its parts reused), and so is everything after it."""

from __future__ import annotations

import pyarrow as pa

from checkray.engine.stages import RunDir, Stage, StageRunner


def test_incomplete_stages_rerun_with_their_parts_and_their_dependents(tmp_path):
    calls = {"items": [], "after": 0}
    failing = {"b"}

    def items(ctx):
        rows = []
        for key in ("a", "b"):
            part = ctx.read_part(key)
            if part is None:
                calls["items"].append(key)
                if key in failing:
                    continue
                part = pa.table({"x": [key]})
                ctx.write_part(key, part)
            rows.append(part)
        if len(rows) < 2:
            ctx.incomplete = "b failed"
        return {"data": pa.concat_tables(rows)}

    def after(ctx):
        calls["after"] += 1
        return {"data": ctx.input("items")}

    def run():
        runner = StageRunner(RunDir(str(tmp_path)), on_stage=lambda *a: None)
        runner.run_stage(Stage("items", items))
        runner.run_stage(Stage("after", after, inputs=("items",)))
        return runner

    first = run()
    assert calls == {"items": ["a", "b"], "after": 1} and first.done["after"].incomplete
    failing.clear()
    second = run()  # only b is computed again; the dependent stage reruns too
    assert calls == {"items": ["a", "b", "b"], "after": 2}
    assert not second.done["items"].incomplete and second.output("after").column("x").to_pylist() == ["a", "b"]
    third = run()  # complete now: both stages come from their checkpoints
    assert calls["after"] == 2 and third.done["items"].skipped and third.done["after"].skipped
    # a part no longer used is pruned when the stage completes
    # (a part's file name is its key and the code that made it)
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "stages" / "items.parts").iterdir()) == ["a", "b"]


def test_a_job_run_inside_a_stage_passes_its_incompleteness_up(tmp_path):
    """The benchmark that s2lct, mft and testaug run inside a stage: a model that failed
    there leaves the outer stage incomplete too, so the next run retries it."""
    from checkray.jobs.base import Job, run_job
    from checkray.jobs.config import CheckrayConfig

    class Inner(Job):
        name, title, uses_ray, report_file = "inner", "inner", False, None

        def stages(self):
            def flaky(ctx):
                ctx.item_errors(1, 4, "models")
                return {"data": pa.table({"x": [1]})}

            yield Stage("predict", flaky)

        def publish(self, runner):
            return []

    def outer(ctx):
        run_job(Inner(CheckrayConfig()), str(tmp_path / "inner"))
        return {"data": pa.table({"y": [1]})}

    runner = StageRunner(RunDir(str(tmp_path / "outer")), on_stage=lambda *a: None)
    rec = runner.run_stage(Stage("evaluate", outer))
    assert rec.incomplete and "'inner' run" in rec.incomplete and "1 of 4 models failed" in rec.incomplete
