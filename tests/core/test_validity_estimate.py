"""Every generating job's report and the run index say how far its cases can be trusted:
``validity_estimate.parquet`` joins the suite's cases per generator and capability with
the candidates its checks rejected and people's verdicts (engine/suite_validity.py,
jobs/validity_estimate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from checkray.engine.case_checks import rejected_table
from checkray.engine.report import Section
from checkray.engine.stages import Stage
from checkray.engine.suite_validity import (
    build_estimates,
    estimate_rows,
    generator_of,
    load_estimates,
    read_batches,
)
from checkray.jobs.base import Job, run_job
from checkray.jobs.config import CheckrayConfig
from checkray.jobs.index import find_runs

ROOT = Path(__file__).resolve().parents[2]


def _batch(folder: Path, name: str, rows: list[dict], **meta) -> Path:
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / f"{name}.meta.json").write_text(json.dumps(meta))
    return path


def _judged(generator: str, capability: str, n: int, good: int) -> list[dict]:
    return [
        {
            "case_id": f"{generator}-{capability}-{i}",
            "generator": generator,
            "capability": capability,
            "label_valid": int(i < good),
            "fluent": 1,
            "on_capability": 1,
        }
        for i in range(n)
    ]


def test_generator_of_each_suite_row():
    assert generator_of("templates", {}) == "templates"
    assert generator_of("s2lct", {"meta": json.dumps({"kind": "expansion"})}) == "s2lct_expansion"
    assert generator_of("s2lct", {"meta": None}) == "s2lct_seed"
    assert generator_of("costello", {"capability": "CR2"}) == "costello_cr2"
    assert generator_of("costello", {"capability": "CR9"}) is None
    # the authors' released triples, scored beside ours, are not our CR1 generator's cases
    given = {"capability": "CR1", "provenance": {"generator": "given", "template_id": "CR1"}}
    assert generator_of("costello", given) is None
    assert generator_of("costello", {"capability": "CR1", "provenance": {"generator": "seed"}}) == "costello_cr1"
    assert generator_of("benchmark", {}) is None


def test_estimates_use_the_final_part_and_the_newest_version(tmp_path):
    _batch(tmp_path, "old", _judged("mft", "A", 10, 2), part="dev", code_version="v1", drawn="2026-01-01")
    _batch(tmp_path, "new", _judged("mft", "A", 12, 12), part="dev", code_version="v2", drawn="2026-02-01")
    est = build_estimates(read_batches([tmp_path]))
    assert est["mft"]["judged_on"]["code_version"] == "v2" and est["mft"]["overall"]["label_valid"] == 1.0
    assert est["mft"]["capabilities"]["A"]["n"] == 12  # enough of capability A: its own row

    _batch(tmp_path, "fin", _judged("mft", "A", 4, 3), part="final", code_version="v2", drawn="2026-01-15")
    est = build_estimates(read_batches([tmp_path]))
    assert est["mft"]["judged_on"]["part"] == "final" and est["mft"]["overall"]["n"] == 4
    assert est["mft"]["capabilities"] == {}  # 4 judged: too few for a capability figure


def test_rows_fall_back_to_the_generator_and_say_so():
    est = {
        "mft": {
            "judged_on": {"code_version": "v2", "part": "final"},
            "overall": {"n": 40, "label_valid": 0.9, "label_valid_low": 0.77, "label_valid_high": 0.96},
            "capabilities": {"A": {"n": 20, "label_valid": 1.0, "label_valid_low": 0.84, "label_valid_high": 1.0}},
        }
    }
    rows = estimate_rows({("mft", "A"): 5, ("mft", "B"): 7, ("testaug", "C"): 1}, {("mft", "B"): 3}, est)
    by = {(r["generator"], r["capability"]): r for r in rows}
    assert by[("mft", "A")]["basis"] == "capability" and by[("mft", "A")]["label_valid"] == 1.0
    assert by[("mft", "B")]["basis"] == "generator" and by[("mft", "B")]["judged"] == 40
    assert by[("mft", "B")]["rejected"] == 3 and by[("mft", "B")]["cases"] == 7
    assert by[("testaug", "C")]["basis"] == "not judged" and by[("testaug", "C")]["label_valid"] is None


def test_shipped_estimates_cover_every_generator_the_jobs_write():
    shipped = load_estimates()
    for generator in ("templates", "mft", "testaug", "s2lct_seed", "s2lct_expansion", "costello_cr1"):
        assert shipped[generator]["overall"]["n"] > 0, generator


class SuiteJob(Job):
    """Publishes a tiny S²LCT-shaped suite and what its checks rejected."""

    name, title = "s2lct", "checkray · s2lct"
    suite_file = "suite.parquet"
    published = ("suite.parquet", "rejected.parquet")
    uses_ray = False

    def stages(self):
        yield Stage("make", lambda ctx: {"data": pa.table({"x": [1]})})

    def publish(self, runner):
        rows = [
            {"case_id": "a", "capability": "LC1", "text": "It is a film.", "meta": None},
            {"case_id": "b", "capability": "LC1", "text": "It is a long film.", "meta": '{"kind": "expansion"}'},
            {"case_id": "c", "capability": "LC2", "text": "I liked it.", "meta": None},
        ]
        runner.run.write_table("suite.parquet", pa.Table.from_pylist(rows))
        runner.run.write_table(
            "rejected.parquet",
            rejected_table([{"case_id": "z", "capability": "LC1", "text": "A superb film.", "check": "neutral"}]),
        )
        return [Section("Suite", [], "3 cases")]


def test_a_suite_job_publishes_its_estimate_in_report_manifest_and_index(tmp_path):
    result = run_job(SuiteJob(CheckrayConfig.model_validate({"seed": 0})), str(tmp_path / "run"))
    rows = {(r["generator"], r["capability"]): r for r in result.table("validity_estimate.parquet").to_pylist()}
    assert rows[("s2lct_seed", "LC1")]["cases"] == 1 and rows[("s2lct_seed", "LC1")]["rejected"] == 1
    assert rows[("s2lct_expansion", "LC1")]["cases"] == 1 and rows[("s2lct_seed", "LC2")]["cases"] == 1
    assert rows[("s2lct_seed", "LC1")]["judged"] > 0  # the shipped estimates
    assert result.sections[0].title == "How far to trust these cases"
    assert "How far to trust these cases" in result.text("report.html")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "validity_estimate.parquet" in manifest["published"]
    assert manifest["quality"][0]["file"] == "validity_estimate.parquet"
    (run,) = find_runs(str(tmp_path))
    assert run.quality[0].title.startswith("Estimated validity")
    assert {r["generator"] for r in run.quality[0].rows} == {"s2lct_seed", "s2lct_expansion"}


def test_every_generating_job_declares_its_suite():
    from checkray.jobs.costello.job import CostelloJob
    from checkray.jobs.mft.job import MFTJob
    from checkray.jobs.s2lct.job import S2lctJob
    from checkray.jobs.templates.job import TemplatesJob
    from checkray.jobs.testaug.job import TestAugJob

    for cls in (TemplatesJob, MFTJob, TestAugJob, S2lctJob, CostelloJob):
        assert cls.suite_file in cls.published, cls.name


def test_a_handful_of_cases_does_not_replace_a_larger_estimate(tmp_path):
    _batch(tmp_path, "big", _judged("mft", "A", 30, 24), part="final", code_version="v1", drawn="2026-01-01")
    _batch(tmp_path, "few", _judged("mft", "A", 5, 0), part="final", code_version="v2", drawn="2026-02-01")
    est = build_estimates(read_batches([tmp_path]))
    assert est["mft"]["judged_on"]["code_version"] == "v1" and est["mft"]["overall"]["n"] == 30
    _batch(tmp_path, "more", _judged("mft", "B", 15, 15), part="final", code_version="v2", drawn="2026-02-02")
    est = build_estimates(read_batches([tmp_path]))  # v2 now has 20 judged: it describes the generator
    assert est["mft"]["judged_on"]["code_version"] == "v2" and est["mft"]["overall"]["n"] == 20


def test_a_batch_of_a_setting_off_by_default_does_not_become_the_estimate(tmp_path):
    _batch(
        tmp_path, "default", _judged("costello_cr1", "CR1", 30, 24), part="final", code_version="v1", drawn="2026-01-01"
    )
    _batch(
        tmp_path,
        "seed_grammar",
        _judged("costello_cr1", "CR1", 30, 30),
        part="final",
        code_version="v2",
        drawn="2026-02-01",
        for_estimates=False,
    )
    est = build_estimates(read_batches([tmp_path]))
    assert est["costello_cr1"]["judged_on"]["batches"] == ["default.jsonl"]
