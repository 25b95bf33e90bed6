"""Stage fingerprints carry the code: an edited module or another checkray version never
reuses a checkpoint; code a stage does not import does not invalidate it."""

from __future__ import annotations

import pyarrow as pa

from checkray.engine import code
from checkray.engine.code import code_digest, module_closure
from checkray.engine.stages import RunDir, Stage, StageRunner


def test_closure_follows_imports_including_lazy_ones():
    closure = module_closure("checkray.jobs.topics.job")
    assert {
        "checkray.jobs.topics.job",
        "checkray.engine.stages",
        "checkray.engine.topics.describe",
        "checkray.jobs.base",
    } <= set(closure)
    assert "checkray.actors.embedder" in closure  # imported inside a stage function
    assert "checkray.engine.costello.metrics" not in closure  # another method's code


def test_digest_changes_with_the_version_and_the_source(monkeypatch):
    digest = code._module_digest.__wrapped__  # uncached
    before, costello = digest("checkray.jobs.topics.job"), digest("checkray.jobs.costello.job")
    assert digest("checkray.jobs.topics.job") == before
    monkeypatch.setattr("checkray.engine.__version__", "99.0")
    assert digest("checkray.jobs.topics.job") != before
    monkeypatch.undo()
    real = code._source

    def edited(module):
        found = real(module)
        return (found[0], found[1] + "\n# edited") if found and module == "checkray.engine.topics.ctfidf" else found

    monkeypatch.setattr(code, "_source", edited)
    assert digest("checkray.jobs.topics.job") != before
    assert digest("checkray.jobs.costello.job") == costello  # code it does not import changed


def test_prompt_files_are_part_of_the_digest_of_code_that_reads_them():
    assert code.DATA_OF_MODULE["checkray.engine.prompts"][0].is_dir()
    assert "checkray.engine.prompts" in module_closure("checkray.jobs.mft.job")


def test_the_substitutes_table_is_part_of_the_digest_of_costellos_mutation(monkeypatch, tmp_path):
    """An edit of engine/data/costello_substitutes.yaml changes the mutate stage's variants."""
    digest = code._module_digest.__wrapped__  # uncached
    assert "checkray.engine.costello.substitutes" in module_closure("checkray.jobs.costello.job")
    before = digest("checkray.jobs.costello.job")
    table = tmp_path / "costello_substitutes.yaml"
    table.write_text(code.DATA_OF_MODULE["checkray.engine.costello.substitutes"][0].read_text() + "\n# edited\n")
    monkeypatch.setitem(code.DATA_OF_MODULE, "checkray.engine.costello.substitutes", (table,))
    assert digest("checkray.jobs.costello.job") != before


def test_runner_reruns_a_stage_whose_code_changed(tmp_path, monkeypatch):
    calls = []

    def make(ctx):
        calls.append(1)
        return {"data": pa.table({"x": [1]})}

    def run():
        StageRunner(RunDir(str(tmp_path)), on_stage=lambda *a: None).run_stage(Stage("make", make))

    run()
    run()
    assert len(calls) == 1
    monkeypatch.setattr("checkray.engine.stages.code_digest", lambda fn: "other-code")
    run()
    assert len(calls) == 2


def test_foreign_functions_are_digested_by_their_source():
    def a():
        return 1

    assert code_digest(a) == code_digest(a)
    assert len(code_digest(a)) == 20
