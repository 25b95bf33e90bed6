"""Several checkray processes on one machine never break each other: each removes only
what it created (by handle, never by a name pattern in a shared directory), and
bookkeeping (a log another process removed) never fails a finished command.

The slow tests run real commands side by side in subprocesses and check each exits 0 with
results equal to a run alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.fakes.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
CHECKRAY = Path(sys.executable).with_name("checkray")
# a quick test the inner session of test_a_job_beside_a_test_session runs
INNER_TEST = "tests/core/test_validity_estimate.py::test_generator_of_each_suite_row"


# --------------------------------------------------------------------- bookkeeping


def _annotations(tmp_path: Path) -> Path:
    valid = ["No one likes this film.", "I never enjoyed the plot.", "Nobody admires the cast.", "We don't love it."]
    invalid = ["The film was great.", "What a wonderful cast!", "Banana purple seven the of.", "I love it."]
    rows = [{"text": t, "validity": 1} for t in valid * 2] + [{"text": t, "validity": 0} for t in invalid * 2]
    path = tmp_path / "ann.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.timeout(240)
def test_a_log_removed_mid_command_costs_a_warning_not_the_result(tmp_path, monkeypatch, capsys):
    """The reported failure: another process removed the command's temporary log while it
    ran; the classifier was saved, yet the command ended in FileNotFoundError and exit 1."""
    from checkray.actors.testaug import validity
    from checkray.jobs.runlog import RUN_LOG

    train = validity.train_validity

    def train_then_lose_the_log(*args, **kwargs):
        out = train(*args, **kwargs)
        Path(RUN_LOG.path).unlink()  # what a neighbour's clean-up by name pattern did
        return out

    monkeypatch.setattr(validity, "train_validity", train_then_lose_the_log)
    out = tmp_path / "clf"
    code = run_cli(
        "validity",
        "train",
        "--annotations",
        str(_annotations(tmp_path)),
        "--out",
        str(out),
        "--backend",
        "embedding_lr",
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert (out / "metadata.json").is_file()
    assert "Traceback" not in err and "FileNotFoundError" not in err


@pytest.mark.timeout(120)
def test_a_log_removed_before_the_run_opens_is_noted_in_the_runs_log(tmp_path, monkeypatch, capsys):
    from checkray.jobs.runlog import RUN_LOG
    from checkray.jobs.templates import job as templates_job

    check = templates_job.TemplatesJob.check

    def check_then_lose_the_log(self):
        Path(RUN_LOG.path).unlink()
        return check(self)

    monkeypatch.setattr(templates_job.TemplatesJob, "check", check_then_lose_the_log)
    out = tmp_path / "run"
    spec = ROOT / "configs" / "suites" / "sentiment_templates.jsonl"
    code = run_cli("templates", "--spec", str(spec), "--nsamples", "2", "--out", str(out))
    err = capsys.readouterr().err
    assert code == 0, err
    assert (out / "suite.parquet").is_file()
    assert "earlier lines of this log were lost" in (out / "logs" / "checkray.log").read_text()
    assert "temporary log" in err and "is gone" in err  # one warning line, no traceback
    assert "Traceback" not in err


def test_the_test_session_owns_its_temp_directory():
    """Clean-up by ownership: the session's temp files live in a directory it created."""
    import tempfile

    from tests.conftest import SESSION_TMP

    assert tempfile.gettempdir() == SESSION_TMP and os.environ["TMPDIR"] == SESSION_TMP
    assert Path(SESSION_TMP).name.startswith("checkray-tests-")


# --------------------------------------------------------------------- side by side


def _checkray(*args: str, env: dict | None = None) -> subprocess.Popen:
    if not CHECKRAY.exists():
        pytest.fail(f"{CHECKRAY}: the console script is not installed (make setup)")
    return subprocess.Popen(
        [str(CHECKRAY), *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen, timeout: float = 600) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, err
    return out


def _templates_suite(tmp_path: Path) -> Path:
    out = tmp_path / "suite"
    spec = ROOT / "configs" / "suites" / "sentiment_templates.jsonl"
    _finish(_checkray("templates", "--spec", str(spec), "--nsamples", "4", "--out", str(out)))
    return out / "suite.parquet"


def _zoo(tmp_path: Path) -> Path:
    path = tmp_path / "zoo.yaml"
    models = [{"name": "vader", "family": "vader"}, {"name": "textblob", "family": "textblob"}]
    path.write_text(yaml.safe_dump({"models": models}))
    return path


def _benchmark(suite: Path, zoo: Path, out: Path, cache: Path | str, env: dict | None = None) -> subprocess.Popen:
    return _checkray(
        "benchmark", "--models", str(zoo), "--suites", str(suite), "--out", str(out),
        env={"CHECKRAY_CACHE_URI": str(cache), **(env or {})},
    )  # fmt: skip


def _verdicts(run: Path) -> list[tuple]:
    table = pq.read_table(run / "results.parquet", columns=["model", "case_id", "predicted", "pass"])
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names)), key=repr)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_jobs_start_local_rays_at_the_same_moment_sharing_a_cache_on_an_object_store(tmp_path):
    """Two benchmarks start their own local Ray at the same moment (ports, temp dirs,
    session names) into different run directories, with one content cache on an object
    store (a local S3 server) that both fill at once: the same keys written concurrently."""
    from tests.fakes.s3_server import local_s3

    suite, zoo = _templates_suite(tmp_path), _zoo(tmp_path)
    alone = tmp_path / "alone"
    _finish(_benchmark(suite, zoo, alone, tmp_path / "cache-alone"))
    with local_s3() as store:
        cache = f"s3://{store.bucket}/cache"
        pair = [_benchmark(suite, zoo, tmp_path / f"side{i}", cache, store.env) for i in (1, 2)]
        for proc in pair:
            _finish(proc)
        for i in (1, 2):
            assert _verdicts(tmp_path / f"side{i}") == _verdicts(alone)
        from pyarrow.fs import FileSelector

        written = store.filesystem().get_file_info(FileSelector(f"{store.bucket}/cache", recursive=True))
        assert any(f.size for f in written if f.type.name == "File")  # the predictions went to the store


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_cache_prune_beside_a_benchmark_reading_and_writing_the_same_cache(tmp_path):
    suite, zoo, cache = _templates_suite(tmp_path), _zoo(tmp_path), tmp_path / "cache"
    alone = tmp_path / "alone"
    _finish(_benchmark(suite, zoo, alone, tmp_path / "cache-alone"))
    _finish(_benchmark(suite, zoo, tmp_path / "warm", cache))  # the cache holds every prediction
    running = _benchmark(suite, zoo, tmp_path / "beside", cache)
    prunes = 0
    while running.poll() is None:  # empty the cache again and again while the benchmark reads it
        _finish(_checkray("cache", "prune", "--max-size", "0", "--dir", str(cache)), timeout=120)
        prunes += 1
    _finish(running)
    assert prunes >= 1
    assert _verdicts(tmp_path / "beside") == _verdicts(alone)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_job_beside_a_test_session_that_starts_and_ends(tmp_path):
    """A test session's start and clean-up (tests/conftest.py) beside a running command
    whose temporary log lives in the same temp directory."""
    annotations = _annotations(tmp_path)
    alone = tmp_path / "alone"
    _finish(_checkray("validity", "train", "--annotations", str(annotations), "--out", str(alone), "--backend", "embedding_lr"))  # fmt: skip
    beside = tmp_path / "beside"
    logs_before = set(Path(os.environ["TMPDIR"]).glob("checkray-*.log"))
    job = _checkray("validity", "train", "--annotations", str(annotations), "--out", str(beside), "--backend", "embedding_lr")  # fmt: skip
    deadline = time.monotonic() + 120
    while not set(Path(os.environ["TMPDIR"]).glob("checkray-*.log")) - logs_before and time.monotonic() < deadline:
        time.sleep(0.2)  # the job's log exists: the session below starts after it and ends beside it
    session = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", INNER_TEST],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert session.returncode == 0, session.stdout + session.stderr
    _finish(job)
    mine, theirs = (json.loads((d / "metadata.json").read_text()) for d in (beside, alone))
    assert {k: mine[k] for k in ("backend", "n_train", "n_valid")} == {
        k: theirs[k] for k in ("backend", "n_train", "n_valid")
    }
