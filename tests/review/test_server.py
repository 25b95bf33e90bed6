"""The review server as users start it: ``checkray review RUN`` in its own process prints a
loopback URL with a token; a decision sent to it is on disk when the answer comes, so
killing the server (SIGKILL) loses nothing. Two processes appending to the same run's
reviews at once lose no row. A directory checkray did not write is refused in one line."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from checkray.engine.review import ReviewStore, current, decision_row, units_of_run
from tests.review.runs import make_run

ROOT = Path(__file__).resolve().parents[2]


def _start(run: Path, *args: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "checkray.jobs.cli", "review", str(run), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        found = re.search(r"open (http://127\.0\.0\.1:\d+/\?token=\S+)", line)
        if found:
            return proc, found.group(1)
    proc.kill()
    raise AssertionError("no URL printed: " + "".join(lines))


@pytest.mark.slow  # starts the CLI in a process of its own
@pytest.mark.timeout(300)
def test_killed_server_loses_no_decision(tmp_path):
    run = make_run(tmp_path / "demo")
    proc, url = _start(run, "--sample", "5", "--reviewer", "dora")
    try:
        base, token = url.split("/?token=")
        h = {"X-Review-Token": token}
        for _ in range(100):  # uvicorn may take a moment after the socket is bound
            try:
                state = httpx.get(f"{base}/api/state", headers=h, timeout=10).json()
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert state["reviewer"] == "dora" and len(state["units"]) == 5
        first = state["units"][0]["case_id"]
        r = httpx.post(f"{base}/api/decide", json={"case_id": first, "decision": "accept"}, headers=h, timeout=10)
        assert r.status_code == 200
        assert httpx.get(f"{base}/api/state", timeout=10).status_code == 403  # no token
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert current(ReviewStore(run).rows())[(first, "dora")]["decision"] == "accept"


def test_cli_refuses_a_directory_checkray_did_not_write(tmp_path):
    plain = tmp_path / "mine"
    plain.mkdir()
    (plain / "notes.txt").write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "checkray.jobs.cli", "review", str(plain)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    out = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 2 and out[-1].startswith("error: ") and "not a directory checkray wrote" in out[-1]


def _append_many(run: str, reviewer: str, n: int) -> None:
    store = ReviewStore(run)
    units = units_of_run(run)
    for unit in units[:n]:
        store.append([decision_row(unit, reviewer, {"decision": "accept"})])


@pytest.mark.slow  # two spawned processes
def test_two_writers_at_once_lose_no_row(tmp_path):
    run = make_run(tmp_path / "demo")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(run), who, 15)) for who in ("ann", "ben")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rows = ReviewStore(run).rows()
    assert len(rows) == 30 and {r["reviewer"] for r in rows} == {"ann", "ben"}
