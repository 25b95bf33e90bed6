"""Run directories are owned and locked: nothing outside stages/ of a marked run is ever
deleted or overwritten, a foreign or non-empty directory is refused, and a second run in
the same directory stops with a one-line error naming the holder."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import time

import pyarrow as pa
import pytest

from checkray.engine.errors import InputError
from checkray.engine.rundir import LOCK, MARKER, RunDir
from checkray.engine.stages import Stage, StageRunner


def test_new_directory_is_claimed_with_a_marker(tmp_path):
    run = RunDir(str(tmp_path / "run"))
    run.claim("topics")
    marker = json.loads((tmp_path / "run" / MARKER).read_text())
    assert marker["job"] == "topics" and marker["owned"] == [] and marker["checkray"]
    run.write_text("report.html", "<p>hi</p>")
    assert json.loads((tmp_path / "run" / MARKER).read_text())["owned"] == ["report.html"]
    RunDir(str(tmp_path / "run")).claim("topics")  # the same job again: fine


def test_empty_existing_directory_is_claimed(tmp_path):
    RunDir(str(tmp_path)).claim("zoo")
    assert (tmp_path / MARKER).is_file()


def test_non_empty_directory_without_marker_is_refused_and_untouched(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    with pytest.raises(InputError, match="not empty and not a checkray run directory"):
        RunDir(str(tmp_path)).claim("benchmark")
    assert sorted(os.listdir(tmp_path)) == ["thesis.tex"]


def test_another_jobs_run_is_refused(tmp_path):
    RunDir(str(tmp_path)).claim("zoo")
    with pytest.raises(InputError, match="holds a 'zoo' run"):
        RunDir(str(tmp_path)).claim("benchmark")


def test_user_file_in_a_run_is_never_overwritten(tmp_path):
    run = RunDir(str(tmp_path))
    run.claim("topics")
    (tmp_path / "report.html").write_text("my notes")  # put there by a person, not the run
    with pytest.raises(InputError, match="'report.html' exists and was not written by this 'topics' run"):
        RunDir(str(tmp_path)).claim("topics") or _write(tmp_path, "report.html")
    assert (tmp_path / "report.html").read_text() == "my notes"


def _write(root, name):
    run = RunDir(str(root))
    run.claim("topics")
    run.write_text(name, "generated")


def test_files_the_run_wrote_are_rewritten_on_rerun(tmp_path):
    _write(tmp_path, "report.html")
    _write(tmp_path, "report.html")
    assert (tmp_path / "report.html").read_text() == "generated"


def test_deleting_outside_stages_is_impossible(tmp_path):
    run = RunDir(str(tmp_path))
    run.claim("zoo")
    (tmp_path / "models").mkdir()
    for rel in ("models", "", "stages/../models"):
        if ".." in rel:
            continue
        with pytest.raises(ValueError, match="deletes only under stages/"):
            run.delete_dir(rel)
    assert (tmp_path / "models").is_dir()


def test_stage_runner_deletes_only_its_stage(tmp_path):
    run = RunDir(str(tmp_path))
    run.claim("demo")
    (tmp_path / "keep.txt").write_text("x")
    runner = StageRunner(run, on_stage=lambda *a: None)
    runner.run_stage(Stage("a", lambda ctx: {"data": pa.table({"x": [1]})}))
    assert (tmp_path / "keep.txt").read_text() == "x"


def test_second_lock_names_the_holder(tmp_path):
    run = RunDir(str(tmp_path))
    run.claim("topics")
    with run.lock("topics"):
        with pytest.raises(InputError) as err:
            RunDir(str(tmp_path)).lock("topics").acquire()
    msg = str(err.value)
    assert "in use by another checkray run" in msg and f"pid {os.getpid()}" in msg and socket.gethostname() in msg
    assert "\n" not in msg
    assert not (tmp_path / LOCK).exists()  # released
    with RunDir(str(tmp_path)).lock("topics"):  # and free again
        pass


def test_lock_of_a_dead_process_is_replaced(tmp_path):
    dead = mp.get_context("spawn").Process(target=time.sleep, args=(0,))
    dead.start()
    dead.join()
    holder = {"token": "x", "job": "topics", "host": socket.gethostname(), "pid": dead.pid}
    (tmp_path / LOCK).write_text(json.dumps({**holder, "since": "then", "expires": time.time() + 600}))
    with RunDir(str(tmp_path)).lock("topics") as lock:
        assert json.loads((tmp_path / LOCK).read_text())["token"] == lock.token


def test_expired_lease_of_another_host_is_replaced_live_one_is_not(tmp_path):
    other = {"token": "x", "job": "zoo", "host": "elsewhere", "pid": 1, "since": "then"}
    (tmp_path / LOCK).write_text(json.dumps({**other, "expires": time.time() + 600}))
    with pytest.raises(InputError, match="pid 1 on elsewhere"):
        RunDir(str(tmp_path)).lock("zoo").acquire()
    (tmp_path / LOCK).write_text(json.dumps({**other, "expires": time.time() - 1}))
    with RunDir(str(tmp_path)).lock("zoo"):
        pass


def _race(root: str, start: float, queue, done) -> None:
    time.sleep(max(0.0, start - time.time()))
    try:
        lock = RunDir(root).lock("topics").acquire()
        queue.put("won")
        done.wait(60)  # hold it until every contender has tried (a late starter must lose too)
        lock.release()
    except InputError as exc:
        queue.put(str(exc))


@pytest.mark.timeout(60)
def test_racing_processes_one_wins(tmp_path):
    ctx = mp.get_context("spawn")
    queue, done = ctx.Queue(), ctx.Event()
    start = time.time() + 2.0
    procs = [ctx.Process(target=_race, args=(str(tmp_path), start, queue, done)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=50) for _ in procs]
    done.set()
    for p in procs:
        p.join()
    assert results.count("won") == 1, results
    assert all("in use by another checkray run" in r for r in results if r != "won")


def test_heartbeat_renews_the_lease(tmp_path):
    lock = RunDir(str(tmp_path)).lock("topics", lease_s=0.3).acquire()
    try:
        first = json.loads((tmp_path / LOCK).read_text())["expires"]
        time.sleep(0.5)
        assert json.loads((tmp_path / LOCK).read_text())["expires"] > first
        with pytest.raises(InputError):  # renewed, so never stale while held
            RunDir(str(tmp_path)).lock("topics", lease_s=0.3).acquire()
    finally:
        lock.release()
