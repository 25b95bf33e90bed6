"""No lost results: models that die, hang or return garbage fail alone; every finished
model is committed on its own; a rerun (also after the driver is SIGKILLed) runs only
what did not finish and retries what failed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.fakes.suites import typo_suite

ROOT = Path(__file__).resolve().parents[2]


def suite(n: int):
    return typo_suite(n, "faults", tolerance=0.1)


def model(name, fn, **extra):
    return {"name": name, "family": "callable", "path": f"tests.fakes.models:{fn}", **extra}


def models_table(out: Path) -> dict[str, dict]:
    return {r["model"]: r for r in pq.read_table(out / "models.parquet").to_pylist()}


@pytest.mark.trusts_code
def test_a_model_that_failed_gives_its_error_to_every_batch_already_queued():
    """Batches are pipelined: those queued before a model's failure was read still name it.
    Each must carry the cause, whichever answer the scheduler happens to read first (a
    "not loaded" there once hid a NaN error when a host died and its models were rerun)."""
    from checkray.actors.benchmark.host import ModelHost

    host = ModelHost([model("garbage", "garbage_sentiment"), model("keyword", "keyword_sentiment")])
    first = host.predict(["garbage", "keyword"], ["good", "bad"], None)
    second = host.predict(["garbage", "keyword"], ["fine", "awful"], None)
    assert "NaN" in first["garbage"] and second["garbage"] == first["garbage"]
    assert second["keyword"].shape == (2, 2)


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_dying_hanging_and_garbage_models_fail_alone_and_are_retried(ray_session, tmp_path):
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.jobs.base import run_job
    from checkray.jobs.benchmark.config import BenchmarkConfig
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.config import CheckrayConfig

    specs = [
        ModelSpec.model_validate(m)
        for m in (
            model("keyword", "keyword_sentiment"),
            model("naive", "naive_sentiment"),
            model("suicidal", "suicidal_sentiment"),  # kills its shared host while predicting
            model("garbage", "garbage_sentiment"),
            model("hanging", "hanging_sentiment"),
            {"name": "dies_loading", "family": "callable", "path": "tests.fakes.crash_on_import:predict"},
        )
    ]
    cfg = CheckrayConfig().with_section(BenchmarkConfig(batch_size=16, batch_timeout_s=4, load_timeout_s=60))
    out = tmp_path / "run"
    job = BenchmarkJob(cfg, specs, [suite(20)])
    run_job(job, str(out))
    first = models_table(out)
    assert first["keyword"]["error"] is None and first["naive"]["error"] is None
    assert "died" in first["suicidal"]["error"].lower() or "exit" in first["suicidal"]["error"].lower()
    assert "NaN" in first["garbage"]["error"]
    assert "timed out" in first["hanging"]["error"]
    assert first["dies_loading"]["error"]
    for name in ("suicidal", "garbage", "hanging", "dies_loading"):
        assert "\n" not in first[name]["error"] and len(first[name]["error"]) <= 300
    results = pq.read_table(out / "results.parquet")
    kept = [r for r in results.to_pylist() if r["model"] == "keyword"]
    assert len(kept) == 40 and all(r["error"] is None for r in kept)
    assert '"incomplete": "4 model(s) failed' in (out / "stages" / "predict" / "_SUCCESS.json").read_text()

    # Rerun: finished models come from their checkpoints, failed ones are tried again.
    job = BenchmarkJob(cfg, specs, [suite(20)])
    run_job(job, str(out))
    second = models_table(out)
    assert second["keyword"]["cached"] and second["naive"]["cached"]
    assert not second["garbage"]["cached"] and second["garbage"]["error"]
    assert pq.read_table(out / "results.parquet").num_rows == 6 * 40


def _run_cli(out: Path, registry: Path, suite_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "checkray.jobs.cli",
            "benchmark",
            "--models",
            str(registry),
            "--suites",
            str(suite_path),
            "--out",
            str(out),
            "--batch-size",
            "8",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the kill takes its Ray with it
    )


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_driver_killed_mid_run_resumes_with_the_finished_models(tmp_path):
    suite_path = tmp_path / "suite.parquet"
    pq.write_table(suite(150), suite_path)
    registry = tmp_path / "zoo.yaml"
    registry.write_text(
        yaml.safe_dump(
            {
                "models": [
                    model("keyword", "keyword_sentiment"),
                    model("slow", "slow_sentiment", options={"heavy": True}),
                ]
            }
        )
    )
    out = tmp_path / "run"
    proc = _run_cli(out, registry, suite_path)
    parts = out / "stages" / "predict.parts"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (parts.exists() and any(parts.glob("*.parquet"))):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.2)
    assert any(parts.glob("*.parquet")), "no model was committed"
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its local Ray, at once
    proc.wait()
    assert not (out / "results.parquet").exists()

    proc = _run_cli(out, registry, suite_path)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-2000:]
    resumed = models_table(out)
    assert resumed["keyword"]["cached"] and not resumed["slow"]["cached"]

    cold = tmp_path / "cold"
    proc = _run_cli(cold, registry, suite_path)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-2000:]
    cols = ["model", "case_id", "predicted", "pass", "error"]
    a = pq.read_table(out / "results.parquet", columns=cols).sort_by([("model", "ascending"), ("case_id", "ascending")])
    b = pq.read_table(cold / "results.parquet", columns=cols).sort_by(
        [("model", "ascending"), ("case_id", "ascending")]
    )
    assert a.equals(b)
