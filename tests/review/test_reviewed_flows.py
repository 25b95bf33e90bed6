"""Reviews flow on: a named suite is read in its reviewed version by the benchmark (and
compare, and `checkray run`) while it is fresh, and reviewed cases train a validity filter
for any generator (`validity train --reviews`, `validity filter`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from checkray.engine.benchmark.inputs import suite_file
from checkray.engine.errors import InputError
from checkray.engine.review import ReviewStore, decision_row, training_rows, units_of_run, write_reviewed
from checkray.engine.rundir import RunDir
from checkray.jobs.benchmark.job import read_named_suites
from tests.review.runs import make_run


def _reviewed(root: Path) -> tuple[Path, dict]:
    """A demo-like run whose first template cases were reviewed: a reject, a relabel, an
    edit, accepts and a skip; ``review apply`` done."""
    run = make_run(root)
    store = ReviewStore(run)
    cases = [u for u in units_of_run(run) if u["kind"] == "case"]
    decisions = [
        {"decision": "reject", "reason": "wrong label"},
        {"decision": "relabel", "new_label": "positive"},
        {"decision": "edit", "new_text": "An edited case."},
        {"decision": "accept"},
        {"decision": "accept"},
        {"decision": "skip"},
    ]
    store.append([decision_row(u, "alice", d) for u, d in zip(cases, decisions)])
    store.append(
        [decision_row(next(u for u in units_of_run(run) if u["kind"] == "triple"), "alice", {"decision": "accept"})]
    )
    write_reviewed(run)
    return run, {d["decision"]: u for u, d in zip(cases, decisions)}


def test_a_named_suite_is_read_reviewed_while_fresh(tmp_path, capsys):
    run, _ = _reviewed(tmp_path / "demo")
    named = str(run / "templates" / "suite.parquet")
    chosen = suite_file(named)
    assert chosen.reviewed and chosen.read.endswith("templates/reviewed_suite.parquet")
    assert "reading its reviewed version reviewed_suite.parquet (1 reject, 1 relabel, 1 edit)" in chosen.note
    tables, files = read_named_suites([named], True, "benchmark")
    assert tables[0].num_rows == 29 and files == [chosen.read]
    assert "benchmark · " in capsys.readouterr().err

    as_generated = suite_file(named, use_reviewed=False)
    assert not as_generated.reviewed and "--as-generated" in as_generated.note
    assert suite_file(chosen.read).note is None  # naming the reviewed file reads it as named

    # a rerun of the job that changed the suite makes the review stale: read as generated
    table = pq.read_table(named)
    RunDir(str(run / "templates")).write_table("suite.parquet", table.slice(1))
    stale = suite_file(named)
    assert not stale.reviewed and "earlier version of this suite" in stale.note
    plain = tmp_path / "plain.parquet"
    pq.write_table(table, plain)
    assert suite_file(str(plain)) == suite_file(str(plain), use_reviewed=False)
    assert suite_file(str(plain)).note is None


def test_reviews_are_training_rows_per_generator(tmp_path):
    run, by = _reviewed(tmp_path / "demo")
    rows = training_rows(run, ["templates"])
    texts = {r["text"]: r["validity"] for r in rows}
    assert texts[by["reject"]["text"]] == 0 and texts[by["relabel"]["text"]] == 0
    assert texts[by["edit"]["text"]] == 0 and texts["An edited case."] == 1  # the fix is a valid case
    assert texts[by["accept"]["text"]] == 1
    assert by["skip"]["text"] not in texts and len(rows) == 6  # a skip has no verdict; triples are no rows
    assert all(r["description"] for r in rows)
    with pytest.raises(InputError, match="no such generator"):
        training_rows(run, ["nope"])
    with pytest.raises(InputError, match="no reviewed case of costello_cr1"):
        training_rows(run, ["costello_cr1"])


@pytest.mark.slow  # loads the packaged MiniLM encoder
@pytest.mark.timeout(300)
def test_validity_train_on_reviews_then_filter_any_suite(tmp_path):
    from checkray.jobs.cli import app

    run, _ = _reviewed(tmp_path / "demo")
    clf = tmp_path / "clf"
    args = ["validity", "train", "--reviews", str(run), "--generator", "templates", "--backend", "embedding_lr"]
    res = CliRunner().invoke(app, [*args, "--out", str(clf)])
    assert res.exit_code == 0, (res.output, res.exception)
    meta = json.loads((clf / "metadata.json").read_text())
    assert meta["trained_on"] == [{"reviews": str(run), "generators": ["templates"], "rows": 6, "valid": 3}]

    out = tmp_path / "filtered.parquet"
    suite = run / "templates" / "suite.parquet"
    res = CliRunner().invoke(app, ["validity", "filter", "--model", str(clf), "--suite", str(suite), "--out", str(out)])
    assert res.exit_code == 0, (res.output, res.exception)
    kept = pq.read_table(out)
    line = next(x for x in res.output.splitlines() if x.startswith("validity filter:"))
    assert f"kept {kept.num_rows} of 30 cases" in line
    assert set(kept.column("case_id").to_pylist()) <= set(pq.read_table(suite).column("case_id").to_pylist())
    # nothing is kept at threshold 1 (no P(valid) reaches 1)
    res = CliRunner().invoke(
        app, ["validity", "filter", "-m", str(clf), "-s", str(suite), "-o", str(out), "--threshold", "1"]
    )
    assert res.exit_code == 0 and "kept 0 of 30" in res.output


def test_validity_train_needs_something_to_train_on(tmp_path, capsys):
    from checkray.jobs.cli import main

    for args, needle in (
        ([], "pass --annotations FILE and/or --reviews RUN"),
        (["--annotations", str(tmp_path / "a.jsonl"), "--generator", "templates"], "pass --reviews RUN too"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["validity", "train", *args, "--out", str(tmp_path / "clf")])
        assert exc.value.code == 2 and needle in capsys.readouterr().err


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(240)
def test_benchmark_reads_the_reviewed_suite_and_says_so(ray_session, tmp_path):
    from checkray.jobs.cli import app

    run, by = _reviewed(tmp_path / "demo")
    registry = tmp_path / "zoo.yaml"
    keyword = {"name": "keyword", "family": "callable", "path": "tests.fakes.models:keyword_sentiment"}
    registry.write_text(yaml.safe_dump({"models": [keyword]}))
    out = tmp_path / "bench"
    suite = str(run / "templates" / "suite.parquet")
    res = CliRunner().invoke(app, ["benchmark", "--models", str(registry), "--suites", suite, "--out", str(out)])
    assert res.exit_code == 0, (res.output, res.exception)
    assert "reading its reviewed version reviewed_suite.parquet" in res.output
    results = pq.read_table(out / "results.parquet")
    assert results.num_rows == 29 and by["reject"]["case_id"] not in results.column("case_id").to_pylist()
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["suite_files"][0]["reviewed"] is True
    assert provenance["suite_files"][0]["file"].endswith("reviewed_suite.parquet")
    assert "1 suite file(s), 1 of them reviewed by people" in (out / "leaderboard.html").read_text()


def test_a_rerun_of_the_job_keeps_the_review_and_finds_it_stale_when_the_suite_changed(tmp_path):
    from checkray.engine.schema import make_cases
    from checkray.engine.stages import Stage
    from checkray.jobs.base import Job, run_job
    from checkray.jobs.config import CheckrayConfig

    class SuiteJob(Job):
        name, title, report_file = "templates", "templates", None
        published, suite_file = ("suite.parquet",), "suite.parquet"
        uses_ray = False
        n = 6

        def stages(self):
            rows = [
                {"suite": "s", "method": "template", "capability": "Vocabulary", "text": f"case {i} is good."}
                | {"expected_label": "positive", "test_type": "MFT"}
                for i in range(self.n)
            ]
            yield Stage("make", lambda ctx: {"data": make_cases(rows)}, config=[self.n])

        def publish(self, runner):
            runner.run.write_table("suite.parquet", runner.output("make"))
            return []

    out = tmp_path / "templates"
    run_job(SuiteJob(CheckrayConfig()), str(out))
    store = ReviewStore(out)
    unit = units_of_run(out)[0]
    store.append([decision_row(unit, "alice", {"decision": "reject", "reason": "unusable"})])
    write_reviewed(out)
    run_job(SuiteJob(CheckrayConfig()), str(out))  # the same suite again
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["reviewed"]["file"] == "reviewed_suite.parquet"
    assert {"reviewed_suite.parquet", "reviewed_validity.parquet"} <= set(manifest["published"])
    assert suite_file(str(out / "suite.parquet")).reviewed
    # the report's validity table now stands on this run's review, not the shipped estimates
    (row,) = pq.read_table(out / "validity_estimate.parquet").to_pylist()
    assert (row["generator"], row["judged"], row["judged_on"]) == ("templates", 1, "this run (reviews)")
    assert row["all_three"] == 0.0
    SuiteJob.n = 7
    run_job(SuiteJob(CheckrayConfig()), str(out))  # a rerun that changed the suite
    assert not suite_file(str(out / "suite.parquet")).reviewed
