"""Faults that must not lose, duplicate or mix results: an embedding actor SIGKILLed
mid-stage, a driver SIGKILLed mid-job (the rerun's published outputs equal an
uninterrupted run's), two runs racing for one directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.core.test_console import is_own_line

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_embedding_actor_killed_mid_stage_loses_and_duplicates_nothing(ray_session, rt_corpus, minilm_path, tmp_path):
    from checkray.actors.pool import map_with_actors
    from checkray.engine.runtime import ActorPlan
    from tests.fakes.actors import ReportingEmbeddingActor

    texts = rt_corpus.slice(0, 480).select(["id", "text"])
    plan = ActorPlan("cpu", 1, num_cpus=1.0, num_gpus=0.0, threads=1)
    kwargs = dict(model="builtin:minilm", encode_batch_size=32, threads=1)
    report = tmp_path / "report"
    report.mkdir()
    killed: list[int] = []

    def kill_after_first_batches():
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline:
            done = (report / "batches").read_text().split() if (report / "batches").exists() else []
            if len(done) >= 2:
                pid = int(done[0])
                os.kill(pid, signal.SIGKILL)  # as the OOM killer would
                killed.append(pid)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_after_first_batches, daemon=True)
    killer.start()
    out = map_with_actors(texts, ReportingEmbeddingActor, dict(kwargs, report_dir=str(report)), plan, batch_size=24)
    killer.join()
    assert killed, "the actor was never killed"
    assert len(list(report.glob("actor-*.pid"))) >= 2, "no replacement actor started"
    assert out.num_rows == texts.num_rows
    assert out.column("id").to_pylist() == texts.column("id").to_pylist()  # every row once, in order
    from checkray.actors.embedder import EmbeddingActor

    clean = EmbeddingActor(**kwargs)(texts)
    a = np.stack(out.column("embedding").to_numpy(zero_copy_only=False))
    b = np.stack(clean.column("embedding").to_numpy(zero_copy_only=False))
    assert np.allclose(a, b, atol=1e-5)


def _topics(out: Path, corpus: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("RAY_ADDRESS", None)
    args = ["topics", "--corpus", str(corpus), "--clusters", "3", "--top-k", "3", "--out", str(out)]
    return subprocess.Popen(
        [sys.executable, "-m", "checkray.jobs.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the kill takes its Ray with it
    )


def _published(out: Path) -> dict[str, pa.Table]:
    return {
        name: pq.read_table(out / name)
        for name in ("clusters.parquet", "assignments.parquet", "representatives.parquet")
    }


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_driver_killed_mid_job_resumes_to_an_uninterrupted_result_and_a_racer_is_refused(rt_corpus, tmp_path):
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(rt_corpus.slice(0, 600).select(["id", "text", "label"]), corpus)
    out = tmp_path / "run"
    first = _topics(out, corpus)

    # A second run into the same directory stops at once, naming the first.
    deadline = time.monotonic() + 120
    while not (out / ".checkray-lock.json").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.stderr.read().decode()[-2000:]
        time.sleep(0.1)
    racer = _topics(out, corpus)
    assert racer.wait(timeout=120) == 2
    err = racer.stderr.read().decode().strip()
    assert err.startswith("error: ") and "in use by another checkray run ('topics' run, pid" in err
    assert len(err.splitlines()) == 1

    # SIGKILL the first run once a stage is committed and the embedding is under way.
    committed = out / "stages" / "corpus" / "_SUCCESS.json"
    while not committed.exists():
        assert first.poll() is None and time.monotonic() < deadline + 120, first.stderr.read().decode()[-2000:]
        time.sleep(0.1)
    time.sleep(1.0)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert not (out / "clusters.parquet").exists()

    resumed = _topics(out, corpus)  # the dead run's lock is stale: replaced
    assert resumed.wait(timeout=400) == 0, resumed.stderr.read().decode()[-2000:]
    assert "corpus: cached" in resumed.stderr.read().decode()
    cold = tmp_path / "cold"
    clean = _topics(cold, corpus)
    assert clean.wait(timeout=400) == 0, clean.stderr.read().decode()[-2000:]
    # A healthy run's console: checkray's own lines only; Ray's went to the log file.
    console = clean.stderr.read().decode().splitlines()
    assert console and all(is_own_line(line) for line in console), console
    # ... e.g. umap-learn's UserWarning (topics embeds through actors, not Ray Data, since the cache)
    assert "umap_.py" in (cold / "logs" / "checkray.log").read_text()
    a, b = _published(out), _published(cold)
    for name in a:
        assert a[name].equals(b[name]), name
    assert not (out / ".checkray-lock.json").exists()
