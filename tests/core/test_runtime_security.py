"""A local Ray started by checkray listens on loopback only and requires its token."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def _ray_pids() -> set[int]:
    import ray

    node = ray._private.worker._global_node
    roots = [info.process.pid for infos in node.all_processes.values() for info in infos if info.process]
    pids = set(roots)
    for pid in roots:
        try:
            pids |= {p.pid for p in psutil.Process(pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pass
    return pids


@pytest.mark.timeout(120)
def test_local_ray_listens_on_loopback_only(ray_session):
    import ray

    ray.get(ray.remote(lambda: 1).remote())  # a worker process is up too
    listening = []
    for pid in _ray_pids():
        try:
            listening += [
                (psutil.Process(pid).name(), c.laddr.ip)
                for c in psutil.Process(pid).net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN
            ]
        except psutil.NoSuchProcess:
            continue
    assert any(name.startswith("gcs_server") for name, _ in listening), listening
    assert {ip for _, ip in listening} <= LOOPBACK, listening
    assert ray.nodes()[0]["NodeManagerAddress"] == "127.0.0.1"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_local_ray_refuses_a_caller_without_the_token(ray_session, tmp_path):
    import ray

    assert os.environ.get("RAY_AUTH_MODE") == "token"
    gcs = ray._private.worker._global_node.gcs_address
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HOME": str(tmp_path)}
    env.pop("RAY_AUTH_TOKEN", None)
    code = f"import ray; ray.init(address={gcs!r}); print('JOINED')"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=150)
    assert proc.returncode != 0 and "JOINED" not in proc.stdout
    assert "InvalidAuthToken" in proc.stderr or "Unauthenticated" in proc.stderr


def test_job_is_over_reads_the_job_table():
    from checkray.engine.runtime import job_is_over

    jobs = [{"JobID": "01000000", "IsDead": False}, {"JobID": "02000000", "IsDead": True}]
    assert not job_is_over(jobs, "01000000")
    assert job_is_over(jobs, "02000000")
    assert job_is_over(jobs, "03000000")  # gone from the table


_GUARDED_DRIVER = """
import functools, pathlib, sys, time, ray
from checkray.engine.runtime import start_request_guard
ray.init(address=sys.argv[1])
release = functools.partial(pathlib.Path(sys.argv[2]).write_text, "released")
start_request_guard(ray.get_runtime_context().get_job_id(), interval_s=0.5, release=release)
print("GUARDED", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_gpu_request_is_released_after_the_driver_is_sigkilled(ray_session, tmp_path):
    """scale_up_gpus' guard: a driver killed with SIGKILL (no atexit) still has its
    autoscaler request cleared once Ray sees its job dead (here: a marker file)."""
    import signal
    import time
    from pathlib import Path

    import ray

    root = Path(__file__).resolve().parents[2]
    marker = tmp_path / "released"
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    gcs = ray._private.worker._global_node.gcs_address
    driver = subprocess.Popen(
        [sys.executable, "-c", _GUARDED_DRIVER, gcs, str(marker)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert driver.stdout.readline().strip() == "GUARDED"
        time.sleep(2.0)
        assert not marker.exists()  # the driver is alive: the request stays
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert marker.read_text() == "released"
    finally:
        driver.kill()
