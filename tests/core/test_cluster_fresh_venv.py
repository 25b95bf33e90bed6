"""The cluster as ``cluster.yaml`` sets it up, in a fresh venv: its ``setup_commands`` run
as written (the lock, then the project), and a two-node cluster started from that venv
runs an S²LCT and a COSTELLO job submitted with ``ray job submit``, writing to an
S3-compatible store. This proves the nodes' setup installs what those jobs need (spaCy
models, WordNet, the packaged encoders), not just what this machine's venv happens to hold.

Building the venv takes minutes, so this test runs only when asked:
``make test-cluster`` (``CHECKRAY_FRESH_VENV_CLUSTER=1``); ``CHECKRAY_FRESH_VENV=DIR`` keeps
and reuses the venv. The two-node test of ``test_two_node_cluster.py`` (nodes from this
machine's venv) runs in every test session.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.core.test_job_submit import UPLOAD_EXCLUDES
from tests.core.test_two_node_cluster import check_placement, placements, submit, two_node_cluster
from tests.fakes.s3_server import local_s3

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_ROOT = "/home/ray/checkray"  # where cluster.yaml's file_mounts put the repository
PYTORCH_INDEX = "download.pytorch.org"

pytestmark = pytest.mark.skipif(
    os.environ.get("CHECKRAY_FRESH_VENV_CLUSTER") != "1",
    reason="builds a venv from cluster.yaml's setup commands (minutes): make test-cluster",
)


def reachable(host: str, port: int = 443, timeout: float = 5.0) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def node_setup_commands(venv: Path) -> list[str]:
    """cluster.yaml's ``setup_commands`` (every node runs them), for a venv at ``venv`` and
    this checkout in place of the cluster's mount point. One change where this machine
    cannot reach PyTorch's index: its ``--extra-index-url`` is left out, and the lock's
    ``torch==...+cpu`` comes from the indexes pip is configured with (pip.conf), which must
    then hold it (pip fails with "No matching distribution" if not)."""
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    offline_torch = not reachable(PYTORCH_INDEX)
    commands = []
    for command in cluster["setup_commands"]:
        command = " ".join(command.split()).replace(CLUSTER_ROOT, str(ROOT))
        assert command.startswith("pip "), command  # the image's pip: here, the venv's
        if offline_torch:
            command = re.sub(rf"--extra-index-url https://{re.escape(PYTORCH_INDEX)}\S*", "", command)
        commands.append(f"{venv}/bin/{command}")
    return commands


def fresh_venv() -> tuple[Path, float]:
    """A venv set up by the cluster's own commands; (its bin folder, seconds it took)."""
    keep = os.environ.get("CHECKRAY_FRESH_VENV")
    venv = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="checkray-node-venv-"))
    start = time.perf_counter()
    if not (venv / "bin" / "checkray").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        for command in node_setup_commands(venv):
            proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=3600)
            assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
    return venv / "bin", time.perf_counter() - start


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_s2lct_and_costello_on_a_cluster_set_up_by_its_own_commands(tmp_path):
    bin_dir, setup_s = fresh_venv()
    print(f"fresh venv from cluster.yaml's setup_commands: {setup_s:.0f} s ({bin_dir})")
    embedders = tmp_path / "embedders.yaml"  # a COSTELLO of the packaged MiniLM and spaCy's vectors
    embedders.write_text(
        yaml.safe_dump(
            {
                "embedders": [
                    {"name": "minilm_mean", "model": "builtin:minilm", "pooling": "mean", "max_length": 64},
                    {"name": "spacy_md", "kind": "spacy", "model": "builtin:md"},
                ]
            }
        )
    )
    stamp = f"{os.getpid()}-{int(time.time())}"
    with local_s3() as s3, two_node_cluster(bin_dir) as cluster:
        runtime_env = {"excludes": UPLOAD_EXCLUDES, "env_vars": s3.env}
        jobs = {}
        for name, args, work in (
            (
                "s2lct",
                ["--corpus", "builtin:rotten_tomatoes", "--sample", "400", "--max-seeds", "4"],
                "MapBatches",  # the parser actors, as Ray Data names them
            ),
            (
                "costello",
                ["--corpus", "builtin:rotten_tomatoes", "--embedders", str(embedders), "--seeds", "40"]
                + ["--classifiers", "5"],
                "MapBatches",  # the embedders, as Ray Data names them
            ),
        ):
            out = f"s3://{s3.bucket}/{name}"
            start = time.perf_counter()
            job = submit(
                cluster.dashboard,
                cluster.env,
                runtime_env,
                f"checkray-{name}-{stamp}",
                *("checkray", name, *args, "--out", out),
            )
            placed = placements(cluster.dashboard, cluster.token, job["job_id"], work)
            print(
                f"{name}: {time.perf_counter() - start:.0f} s; "
                + check_placement(*placed, work, cluster.worker_id, cluster.head_id)
            )
            jobs[name] = job
        fs = s3.filesystem()
        for name, suite in (("s2lct", "suite.parquet"), ("costello", "triples.parquet")):
            assert jobs[name]["driver_node_id"] == cluster.head_id
            with fs.open_input_stream(f"{s3.bucket}/{name}/manifest.json") as src:
                manifest = json.loads(src.read())
            assert manifest["job"] == name and suite in manifest["published"]
            table = pq.read_table(f"{s3.bucket}/{name}/{suite}", filesystem=fs)
            assert table.num_rows > 0
            print(f"{name}: {table.num_rows} rows in {suite}")
