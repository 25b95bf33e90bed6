"""Run directories on an object store (a local moto S3 server): owned, leased, and a second
run into the same ``s3://`` directory stops with the one-line lock error. No Ray here: the
runs reach the store from this process (tests/core/test_two_node_cluster.py does it from a
cluster's nodes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from checkray.engine.errors import InputError
from checkray.engine.rundir import CLAIMS, LOCK, MARKER, RunDir, RunLock
from tests.fakes.cli import run_cli
from tests.fakes.s3_server import local_s3

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def s3():
    with local_s3() as store:
        yield store


@pytest.fixture()
def s3_env(s3, monkeypatch):
    for key, value in s3.env.items():
        monkeypatch.setenv(key, value)
    return s3


def _uri(s3, name: str) -> str:
    return f"s3://{s3.bucket}/{name}"


def test_claim_write_and_read_back_on_s3(s3_env):
    run = RunDir(_uri(s3_env, "claimed"))
    assert not run.is_local
    run.claim("topics")
    run.write_table("clusters.parquet", pa.table({"cluster": [0, 1]}))
    assert run.read_table("clusters.parquet").num_rows == 2
    marker = json.loads(run.read_text(MARKER))
    assert marker["job"] == "topics" and "clusters.parquet" in marker["owned"]
    with pytest.raises(InputError, match="holds a 'topics' run"):
        RunDir(run.uri).claim("benchmark")
    # A non-empty prefix that is not a run is refused, and left as it was.
    fs = s3_env.filesystem()
    with fs.open_output_stream(f"{s3_env.bucket}/data/keep.txt") as sink:
        sink.write(b"user data")
    with pytest.raises(InputError, match="not empty and not a checkray run directory"):
        RunDir(_uri(s3_env, "data")).claim("topics")
    with fs.open_input_stream(f"{s3_env.bucket}/data/keep.txt") as src:
        assert src.read() == b"user data"


def test_second_run_into_one_s3_dir_gets_the_one_line_lock_error(s3_env):
    uri = _uri(s3_env, "locked")
    run = RunDir(uri)
    run.claim("topics")
    with run.lock("topics") as held:
        holder = json.loads(run.read_text(LOCK))
        assert holder["token"] == held.token and holder["pid"] == os.getpid()
        with pytest.raises(InputError) as err:
            RunDir(uri).lock("topics").acquire()
        msg = str(err.value)
        assert "\n" not in msg
        assert msg.startswith(f"{uri}: in use by another checkray run ('topics' run, pid {os.getpid()} on ")
    assert not run.exists(LOCK)  # released
    with RunDir(uri).lock("topics"):  # and free for the next run
        pass


def test_two_racing_runs_on_s3_one_wins(s3_env):
    uri = _uri(s3_env, "race")
    RunDir(uri).claim("topics")
    results: list[str] = []
    barrier = threading.Barrier(2)
    locks = []

    def contend() -> None:
        barrier.wait()
        try:
            locks.append(RunDir(uri).lock("topics").acquire())
            results.append("won")
        except InputError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=contend) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for lock in locks:
        lock.release()
    assert results.count("won") == 1, results
    assert all("in use by another checkray run" in r for r in results if r != "won")


@pytest.mark.timeout(180)
def test_cli_run_into_a_locked_s3_dir_exits_2_with_one_line(s3_env):
    """The user's view: `checkray topics --out s3://...` while another run holds the
    directory prints one line and exits 2, before Ray starts."""
    uri = _uri(s3_env, "cli-locked")
    run = RunDir(uri)
    run.claim("topics")
    with run.lock("topics"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "checkray.jobs.cli",
                "topics",
                "--corpus",
                "builtin:rotten_tomatoes",
                "--limit",
                "20",
            ]
            + ["--out", uri],
            capture_output=True,
            text=True,
            timeout=150,
            cwd=ROOT,
            env={**os.environ, "RAY_ADDRESS": ""},
        )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {uri}: in use by another checkray run ('topics' run, pid ")


def test_zoo_refuses_an_object_store_out_in_one_line(s3_env, capsys):
    uri = _uri(s3_env, "zoo")
    assert run_cli("zoo", "--tiny", "--out", uri) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {uri}: the zoo writes model files from its tasks; use a local or shared-filesystem --out"]
    assert not RunDir(uri).exists()  # refused before anything was written


def test_a_run_that_writes_its_lease_late_does_not_share_the_lock(s3_env):
    """Object stores have no exclusive create: a run that read "no lock" and then stalled
    (a loaded machine, a GC pause) past the settle delay before writing its lease must
    still lose to the run that took the lock meanwhile, not hold it too."""
    uri = _uri(s3_env, "late")
    RunDir(uri).claim("topics")
    paused, resume = threading.Event(), threading.Event()

    class Stalled(RunLock):
        first = True

        def _read(self):
            holder = super()._read()
            if self.first:  # stall right after the first look, before writing anything
                self.first = False
                paused.set()
                resume.wait(30)
            return holder

    outcome: list[object] = []

    def late() -> None:
        try:
            outcome.append(Stalled(RunDir(uri), "topics").acquire())
        except InputError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=late)
    thread.start()
    assert paused.wait(30)
    early = RunDir(uri).lock("topics").acquire()
    try:
        resume.set()
        thread.join(60)
        assert len(outcome) == 1
        if isinstance(outcome[0], RunLock):
            outcome[0].release()
        assert isinstance(outcome[0], InputError), "both runs hold the lock"
        assert "in use by another checkray run ('topics' run" in str(outcome[0])
        assert json.loads(RunDir(uri).read_text(LOCK))["token"] == early.token
    finally:
        early.release()


def test_the_lease_is_renewed_and_the_claims_cleared_on_release(s3_env):
    uri = _uri(s3_env, "renewed")
    run = RunDir(uri)
    run.claim("topics")
    lock = run.lock("topics", lease_s=1.5).acquire()
    try:
        first = json.loads(run.read_text(LOCK))["expires"]
        claim = json.loads(run.read_text(f"{CLAIMS}/{lock.token}.json"))
        assert claim["held"] is True and claim["token"] == lock.token
        time.sleep(1.2)
        assert json.loads(run.read_text(LOCK))["expires"] > first
        with pytest.raises(InputError, match="in use by another checkray run"):
            RunDir(uri).lock("topics", lease_s=1.5).acquire()  # renewed, so never stale while held
    finally:
        lock.release()
    assert not run.exists(LOCK) and not run.exists(f"{CLAIMS}/{lock.token}.json")


def test_repair_refuses_an_object_store_out_in_one_line(s3_env, tmp_path, capsys):
    uri = _uri(s3_env, "repair")
    assert run_cli("repair", "--violations", str(tmp_path / "costello"), "--model", "m", "--out", uri) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {uri}: repair saves the fine-tuned model from a Ray actor; use a local or shared-filesystem --out"
    ]
    assert not RunDir(uri).exists()
