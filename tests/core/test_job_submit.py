"""`ray job submit` of `checkray topics` to a separately started local head, the way a
laptop submits to a cluster (docs/cluster.md).

The head is a child process of this test, reached over the CLI/HTTP only: no
``ray.init`` here, no RAY_ADDRESS in this process's environment, all of its ports
picked free, and its own temp dir, so it cannot clash with the session ``ray_session``
fixture (or anyone else's Ray on the machine). It is stopped by process id, not with
``ray stop``, which would kill every Ray process on the machine, the fixture's
included.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Never uploaded with the working dir: the venv alone is hundreds of MB, over Ray's
# package limit; runs/ and .git are large and useless to the job.
UPLOAD_EXCLUDES = [".venv", ".git", "runs", "**/__pycache__", ".pytest_cache", "*.egg-info"]
PORT_FLAGS = (
    "--port",
    "--dashboard-port",
    "--ray-client-server-port",
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def head_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        env.pop(var, None)  # the fixture's cluster must not be the one we talk to
    env.update(
        {
            # Ray 2.60: token auth would need ~/.ray/auth_token on both sides; this head
            # listens on 127.0.0.1 only, so disable it on both sides (OFFLINE.md).
            "RAY_AUTH_MODE": "disabled",
            "RAY_USAGE_STATS_ENABLED": "0",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAY_DATA_DISABLE_PROGRESS_BARS": "1",
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # `checkray` for the job's entrypoint
        }
    )
    return env


def wait_for_dashboard(url: str, head: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise AssertionError(f"ray start exited with {head.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/api/version", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"dashboard at {url} not up after {timeout:.0f}s")


def stop_head(head: subprocess.Popen, temp_dir: str) -> None:
    """Terminate the head and every process it started, by pid."""
    import psutil

    procs = []
    try:
        procs = [psutil.Process(head.pid), *psutil.Process(head.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        pass
    # Workers re-parented after their raylet died still name our unique temp dir.
    known = {p.pid for p in procs}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.pid not in known and temp_dir in " ".join(proc.info["cmdline"] or []):
                procs.append(proc)
        except psutil.Error:
            pass
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=15)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)
    head.wait(timeout=5)


@pytest.fixture()
def small_corpus_csv(tmp_path) -> Path:
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus

    table = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes", sample=300))
    path = tmp_path / "corpus.csv"
    pacsv.write_csv(table.select(["text", "label"]), path)
    return path


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(480)
def test_topics_job_submitted_to_a_local_head(tmp_path, small_corpus_csv):
    ray_address_before = os.environ.get("RAY_ADDRESS")
    temp_dir = tempfile.mkdtemp(prefix="crj", dir="/tmp")  # short: Unix socket paths <108 bytes
    ports = dict(zip(PORT_FLAGS, free_ports(len(PORT_FLAGS))))
    env = head_env()
    head = subprocess.Popen(
        [
            str(BIN / "ray"),
            "start",
            "--head",
            "--block",
            "--num-cpus=2",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            "--node-ip-address=127.0.0.1",
            f"--object-store-memory={200 * 1024 * 1024}",
            *(f"{flag}={port}" for flag, port in ports.items()),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out = tmp_path / "run"
    submission_id = f"checkray-topics-{os.getpid()}-{int(time.time())}"
    dashboard = f"http://127.0.0.1:{ports['--dashboard-port']}"
    try:
        wait_for_dashboard(dashboard, head, timeout=120)
        submit = subprocess.run(
            [
                str(BIN / "ray"),
                "job",
                "submit",
                "--address",
                dashboard,
                "--submission-id",
                submission_id,
                "--working-dir",
                str(ROOT),
                "--runtime-env-json",
                json.dumps({"excludes": UPLOAD_EXCLUDES}),
                "--",
                "checkray",
                "topics",
                "--corpus",
                str(small_corpus_csv),
                "--text-column",
                "text",
                "--label-column",
                "label",
                "--clusters",
                "3",
                "--top-k",
                "3",
                "--out",
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        log = submit.stdout[-4000:] + submit.stderr[-4000:]
        assert submit.returncode == 0, log
        with urllib.request.urlopen(f"{dashboard}/api/jobs/{submission_id}", timeout=10) as resp:
            job = json.load(resp)
        assert job["status"] == "SUCCEEDED", job
        assert job["entrypoint"].startswith("checkray topics")
    finally:
        stop_head(head, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert os.environ.get("RAY_ADDRESS") == ray_address_before

    clusters = pq.read_table(out / "clusters.parquet")
    assignments = pq.read_table(out / "assignments.parquet")
    reps = pq.read_table(out / "representatives.parquet")
    assert clusters.num_rows == 3
    assert assignments.num_rows == 300
    assert sorted(assignments.column("id").to_pylist(), key=int) == [str(i) for i in range(300)]
    assert set(assignments.column("cluster").to_pylist()) == {0, 1, 2}
    per_cluster = reps.group_by("cluster").aggregate([("cluster", "count")]).column("cluster_count").to_pylist()
    assert len(per_cluster) == 3 and all(1 <= c <= 3 for c in per_cluster)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<html" in html.lower() and "topics" in html
