"""A real two-node Ray cluster on one machine, as docs/cluster.md describes it for AWS:
a head and a worker started with ``ray start`` (separate temp dirs, ports and processes),
token authentication on, jobs submitted with ``ray job submit``, and the run directory on
an S3-compatible object store (a local moto server, ``--out s3://bucket/run``).

Resources make the work land on the worker: the head has no CPU (as on a cluster whose
head only drives jobs), so every actor and task that needs a CPU, which is all of the
job's work, must be scheduled on the worker; the job's driver runs on the head. The test
reads Ray's state API afterwards and checks the node of every actor and task.

Ray 2.60 cannot keep a multi-node cluster on loopback: a worker's ``ray start`` resolves
``127.0.0.1`` to the machine's address and refuses to start with the loopback switch
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), so these nodes listen on the machine's address;
token auth is what guards them (an unauthenticated job-API call is checked to fail). The
dashboard is bound to 127.0.0.1.

Everything is stopped by process id (never ``ray stop``, which would kill every Ray on the
machine, the session fixture's included).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from checkray.engine.schema import make_cases
from tests.core.test_job_submit import PORT_FLAGS, UPLOAD_EXCLUDES, free_ports, stop_head
from tests.fakes.s3_server import local_s3

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Per-node ports: two nodes on one machine must not share any of them.
NODE_PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)
WORKER_CPUS = 2
DOCS = 300
CLUSTERS = 3


def cluster_env(token: str, bin_dir: Path = BIN) -> dict[str, str]:
    env = dict(os.environ)
    # This process may run the session's local Ray: none of its settings may leak in.
    for var in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "CHECKRAY_TRUST_CODE"):
        env.pop(var, None)
    env.update(
        {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": token,  # every node, the submitting CLI and (inherited) the job
            "RAY_USAGE_STATS_ENABLED": "0",
            # A loaded machine can take longer than Ray's default to start a node's agents.
            "RAY_agent_register_timeout_ms": "120000",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAY_DATA_DISABLE_PROGRESS_BARS": "1",
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",  # `checkray` for the job's entrypoint
        }
    )
    return env


def start_node(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    ray = Path(env["PATH"].split(os.pathsep)[0]) / "ray"  # the venv cluster_env put first
    return subprocess.Popen(
        [str(ray), "start", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def api(dashboard: str, path: str, token: str | None) -> dict:
    req = urllib.request.Request(f"{dashboard}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def state(dashboard: str, kind: str, token: str, **filters: str) -> list[dict]:
    """Ray's state API (``ray list tasks/actors/nodes``) over the dashboard's HTTP."""
    query = [("detail", "1"), ("limit", "10000")]
    for key, value in filters.items():
        query += [("filter_keys", key), ("filter_predicates", "="), ("filter_values", value)]
    body = api(dashboard, f"/api/v0/{kind}?{urllib.parse.urlencode(query)}", token)
    return body["data"]["result"]["result"]


def wait_for_dashboard(dashboard: str, token: str, head: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise AssertionError(f"ray start --head exited with {head.returncode}")
        try:
            api(dashboard, "/api/version", token)
            return
        except (OSError, ValueError):
            time.sleep(1)
    raise AssertionError(f"dashboard at {dashboard} not up after {timeout:.0f}s")


def wait_for_nodes(dashboard: str, token: str, n: int, procs: list[subprocess.Popen], timeout: float) -> list[dict]:
    deadline = time.monotonic() + timeout
    alive: list[dict] = []
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"ray start exited with {proc.returncode}")
        try:
            alive = [node for node in state(dashboard, "nodes", token) if node["state"] == "ALIVE"]
        except (OSError, KeyError):
            alive = []
        if len(alive) >= n:
            return alive
        time.sleep(2)
    raise AssertionError(f"{len(alive)} of {n} nodes alive after {timeout:.0f}s")


def submit(dashboard: str, env: dict, runtime_env: dict, submission_id: str, *entrypoint: str) -> dict:
    ray = Path(env["PATH"].split(os.pathsep)[0]) / "ray"
    proc = subprocess.run(
        [str(ray), "job", "submit", "--address", dashboard, "--submission-id", submission_id]
        + ["--working-dir", str(ROOT), "--runtime-env-json", json.dumps(runtime_env), "--", *entrypoint],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    job = api(dashboard, f"/api/jobs/{submission_id}", env["RAY_AUTH_TOKEN"])
    assert job["status"] == "SUCCEEDED", job
    return job


def _cpus(item: dict) -> float:
    return float((item.get("required_resources") or {}).get("CPU", 0))


def placements(dashboard: str, token: str, job_id: str, work: str) -> tuple[list[dict], list[dict]]:
    """The job's actors and the tasks that ran (state API); waits for an actor whose class
    names ``work`` to show (task events reach the dashboard in batches)."""
    deadline = time.monotonic() + 60
    while True:
        actors = state(dashboard, "actors", token, job_id=job_id)
        # Actor-creation tasks carry no node id in the state API; the actor itself does.
        tasks = [
            t for t in state(dashboard, "tasks", token, job_id=job_id) if t["node_id"] and t["type"] != "DRIVER_TASK"
        ]
        if any(work in a["class_name"] for a in actors) or time.monotonic() > deadline:
            return actors, tasks
        time.sleep(2)


def check_placement(actors: list[dict], tasks: list[dict], work: str, worker: str, head: str) -> str:
    """Every actor and task that needs a CPU ran on the worker, the ``work`` actor and its
    calls included; what ran on the head needs no CPU (Ray Data's bookkeeping actors).
    Returns a one-line summary."""
    cpu_actors = [a for a in actors if _cpus(a) > 0]
    assert cpu_actors and all(a["node_id"] == worker for a in cpu_actors), cpu_actors
    assert any(work in a["class_name"] for a in cpu_actors), [a["class_name"] for a in actors]
    elsewhere = [t["name"] for t in tasks if _cpus(t) > 0 and t["node_id"] != worker]
    assert not elsewhere, elsewhere
    calls = [t for t in tasks if work in t["name"]]
    assert calls and all(t["node_id"] == worker for t in calls), calls
    on_head = [a for a in actors if a["node_id"] == head] + [t for t in tasks if t["node_id"] == head]
    assert all(_cpus(x) == 0 for x in on_head), on_head
    return (
        f"{work}: {len(cpu_actors)} CPU actor(s) and {sum(_cpus(t) > 0 for t in tasks)} CPU task(s) on the worker, "
        f"{len(calls)} call(s) of {work} on the worker; on the head: "
        f"{sorted({x.get('class_name') or x['name'] for x in on_head})} (0 CPU)"
    )


def suite_table():
    rows = []
    for i, (text, label) in enumerate(
        [
            ("a good movie", "positive"),
            ("a great film, I loved it", "positive"),
            ("excellent acting", "positive"),
            ("an awful plot", "negative"),
            ("terrible pacing and a boring story", "negative"),
            ("I hate the ending", "negative"),
        ]
    ):
        rows.append(
            {
                "case_id": f"voc-{i}",
                "suite": "basics",
                "method": "hand",
                "capability": "Vocabulary",
                "text": text,
                "expected_label": label,
            }
        )
    return make_cases(rows)


@dataclass
class Cluster:
    dashboard: str
    env: dict[str, str]
    token: str
    head_id: str
    worker_id: str


@contextmanager
def two_node_cluster(bin_dir: Path = BIN) -> Iterator[Cluster]:
    """A head (no CPU: it only drives jobs) and a worker (``WORKER_CPUS``), each started by
    ``ray start`` from ``bin_dir``'s venv with its own temp dir and ports, token auth on;
    stopped by process id at exit."""
    ray_address_before = os.environ.get("RAY_ADDRESS")
    token = secrets.token_hex(32)
    env = cluster_env(token, bin_dir)
    head_dir = tempfile.mkdtemp(prefix="crh", dir="/tmp")  # short: Unix socket paths < 108 bytes
    worker_dir = tempfile.mkdtemp(prefix="crw", dir="/tmp")
    head_ports = dict(zip(PORT_FLAGS, free_ports(len(PORT_FLAGS))))
    worker_ports = dict(zip(NODE_PORT_FLAGS, free_ports(len(NODE_PORT_FLAGS))))
    dashboard = f"http://127.0.0.1:{head_ports['--dashboard-port']}"
    nodes: list[subprocess.Popen] = []
    try:
        nodes.append(
            start_node(
                [
                    "--head",
                    "--num-cpus=0",  # the head only drives: all work must go to the worker
                    "--num-gpus=0",
                    f"--temp-dir={head_dir}",
                    "--include-dashboard=true",
                    "--dashboard-host=127.0.0.1",
                    f"--object-store-memory={150 * 1024 * 1024}",
                    *(f"{flag}={port}" for flag, port in head_ports.items()),
                ],
                env,
            )
        )
        wait_for_dashboard(dashboard, token, nodes[0], timeout=180)
        nodes.append(
            start_node(
                [
                    f"--address=127.0.0.1:{head_ports['--port']}",
                    f"--num-cpus={WORKER_CPUS}",
                    "--num-gpus=0",
                    f"--temp-dir={worker_dir}",
                    f"--object-store-memory={200 * 1024 * 1024}",
                    *(f"{flag}={port}" for flag, port in worker_ports.items()),
                ],
                env,
            )
        )
        alive = wait_for_nodes(dashboard, token, 2, nodes, timeout=180)
        head_id = next(n["node_id"] for n in alive if n["is_head_node"])
        worker_id = next(n["node_id"] for n in alive if not n["is_head_node"])
        resources = {n["node_id"]: n["resources_total"] for n in alive}
        assert resources[head_id].get("CPU", 0) == 0 and resources[worker_id]["CPU"] == WORKER_CPUS
        yield Cluster(dashboard, env, token, head_id, worker_id)
    finally:
        for proc, temp_dir in reversed(list(zip(nodes, [head_dir, worker_dir]))):
            stop_head(proc, temp_dir)
        shutil.rmtree(head_dir, ignore_errors=True)
        shutil.rmtree(worker_dir, ignore_errors=True)
        assert os.environ.get("RAY_ADDRESS") == ray_address_before


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_topics_and_benchmark_on_a_two_node_cluster_write_to_s3(tmp_path):
    registry = tmp_path / "models.yaml"
    registry.write_text(
        yaml.safe_dump({"models": [{"name": "vader", "family": "vader"}, {"name": "textblob", "family": "textblob"}]})
    )
    stamp = f"{os.getpid()}-{int(time.time())}"
    with local_s3() as s3:
        fs = s3.filesystem()
        pq.write_table(suite_table(), f"{s3.bucket}/suites/basics.parquet", filesystem=fs)
        runtime_env = {"excludes": UPLOAD_EXCLUDES, "env_vars": s3.env}
        with two_node_cluster() as cluster:
            dashboard, env, token = cluster.dashboard, cluster.env, cluster.token
            head_id, worker_id = cluster.head_id, cluster.worker_id

            # Token auth is on: the job API refuses a caller without the token.
            with pytest.raises(urllib.error.HTTPError) as refused:
                api(dashboard, "/api/jobs/", None)
            assert refused.value.code == 401

            topics_out = f"s3://{s3.bucket}/topics"
            topics = submit(
                dashboard,
                env,
                runtime_env,
                f"checkray-topics-{stamp}",
                *("checkray", "topics", "--corpus", "builtin:rotten_tomatoes", "--sample", str(DOCS)),
                *("--clusters", str(CLUSTERS), "--top-k", "3", "--out", topics_out),
            )
            topics_placed = placements(dashboard, token, topics["job_id"], "EmbedWorker")

            bench_out = f"s3://{s3.bucket}/bench"
            bench = submit(
                dashboard,
                env,
                runtime_env,
                f"checkray-benchmark-{stamp}",
                *("checkray", "benchmark", "--models", str(registry)),
                *("--suites", f"s3://{s3.bucket}/suites/basics.parquet", "--out", bench_out),
            )
            bench_placed = placements(dashboard, token, bench["job_id"], "ModelHost")

        # What ran where: the drivers on the head, every CPU actor and task on the worker.
        assert topics["driver_node_id"] == head_id and bench["driver_node_id"] == head_id
        print(check_placement(*topics_placed, "EmbedWorker", worker_id, head_id))
        print(check_placement(*bench_placed, "ModelHost", worker_id, head_id))

        # The runs' published files, read back from the object store.
        def read(run: str, name: str):
            return pq.read_table(f"{s3.bucket}/{run}/{name}", filesystem=fs)

        assert read("topics", "clusters.parquet").num_rows == CLUSTERS
        assignments = read("topics", "assignments.parquet")
        assert assignments.num_rows == DOCS
        assert set(assignments.column("cluster").to_pylist()) == set(range(CLUSTERS))
        reps = read("topics", "representatives.parquet")
        assert set(reps.column("cluster").to_pylist()) == set(range(CLUSTERS))
        embeddings = pq.read_table(f"{s3.bucket}/topics/stages/embed/embeddings", filesystem=fs)
        assert embeddings.num_rows == DOCS  # embedded on the worker (actors.embed_cache), written by the driver

        models = read("bench", "models.parquet")
        assert sorted(models.column("model").to_pylist()) == ["textblob", "vader"]
        assert models.column("error").null_count == models.num_rows
        results = read("bench", "results.parquet")
        assert results.num_rows == 2 * suite_table().num_rows
        assert read("bench", "summary.parquet").num_rows >= 2

        for run, job, report in (("topics", "topics", "report.html"), ("bench", "benchmark", "leaderboard.html")):
            with fs.open_input_stream(f"{s3.bucket}/{run}/manifest.json") as src:
                manifest = json.loads(src.read())
            assert manifest["job"] == job and report in manifest["published"]
            with fs.open_input_stream(f"{s3.bucket}/{run}/.checkray-run.json") as src:
                assert json.loads(src.read())["job"] == job
            # The lease lock was released when the run finished.
            assert fs.get_file_info(f"{s3.bucket}/{run}/.checkray-lock.json").type.name == "NotFound"
