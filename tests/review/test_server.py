"""The review server as users start it: ``checkray review RUN`` in its own process prints a
loopback URL with a token; a decision sent to it is on disk when the answer comes, so
killing the server (SIGKILL) loses nothing. Two servers on the same run, two reviewers
deciding at once, lose no decision. A directory checkray did not write is refused in one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from checkray.engine.review import ReviewStore, current
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
        base, h, state = _state(url)
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


def _state(url: str) -> tuple[str, dict, dict]:
    base, token = url.split("/?token=")
    h = {"X-Review-Token": token}
    for _ in range(100):  # uvicorn may take a moment after the socket is bound
        try:
            return base, h, httpx.get(f"{base}/api/state", headers=h, timeout=10).json()
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{base}: the server never answered")


def _decide_all(url: str, n: int, errors: list) -> None:
    try:
        base, h, state = _state(url)
        for unit in state["units"][:n]:
            r = httpx.post(
                f"{base}/api/decide", json={"case_id": unit["case_id"], "decision": "accept"}, headers=h, timeout=30
            )
            assert r.status_code == 200, r.text
    except Exception as exc:  # noqa: BLE001 - reported by the test's thread join below
        errors.append(exc)


@pytest.mark.slow  # two servers, each a process of its own
@pytest.mark.timeout(300)
def test_two_review_servers_on_one_run_lose_no_decision(tmp_path):
    """Two reviewers, each with a server of their own on the same run, deciding at once:
    every decision of both is on disk (the append is locked; neither rewrites the other's rows)."""
    import threading

    run = make_run(tmp_path / "demo")
    servers = [_start(run, "--sample", "15", "--reviewer", who) for who in ("ann", "ben")]
    errors: list = []
    try:
        threads = [threading.Thread(target=_decide_all, args=(url, 15, errors)) for _, url in servers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
    finally:
        for proc, _ in servers:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert not errors, errors
    rows = ReviewStore(run).rows()
    assert len(rows) == 30 and {r["reviewer"] for r in rows} == {"ann", "ben"}
    assert len({(r["case_id"], r["reviewer"]) for r in rows}) == 30
