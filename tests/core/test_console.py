"""What a user sees: checkray's own lines on the console, everything else in the run's
log file; --dry-run plans without running; exit codes 0 / 1 (internal, pointing at the
log) / 2 (user error)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fakes.cli import run_cli

# Every line checkray itself prints to stderr has one of these shapes.
OWN_LINE = re.compile(
    r"^\s*(\w[\w-]* · [^:]+: .+"  # stage lines: "topics · embed: done in 3.1s", "  mft · test v1 · paraphrases: kept 4"
    r"|[\w ]+: \S+\.html"  # the pages written: "demo report: runs/demo/report.html"
    r"|(warning|error): .+"  # warnings and errors
    r"|[^:]+: \d+/\d+ \w+, .+"  # progress without a terminal: "generation: 40/100 prompts, ~2 min left"
    r"|checkray \w+ --dry-run: .+)$"
)


def is_own_line(line: str) -> bool:
    return bool(OWN_LINE.match(line))


def test_own_line_pattern_tells_foreign_lines_apart():
    assert is_own_line("topics · embed: done in 48.8s")
    assert is_own_line("error: reviews.csv: corpus file not found")
    assert is_own_line("  mft · test v1 · label check: kept 3, dropped 0 (agree 3, hard 0) in 58s")
    assert is_own_line("s2lct · warning · LC1: needs label 'neutral' (rule neutral_short)")
    assert is_own_line("index of every report: runs/demo/index.html")
    assert not is_own_line("unreadable 0) in 58s")  # the tail of a line wrapped at 80 columns
    assert not is_own_line("2026-11-25 10:51:36,317\tINFO streaming_executor.py:215 -- Starting execution")
    assert not is_own_line("[2026-11-25 10:51:36,377 E 8201 8201] core_worker.cc:2465: Actor with class name")
    assert not is_own_line("Loading weights: 100%|██████████| 103/103")


def test_dry_run_prints_the_plan_and_creates_nothing(tmp_path, capfd):
    out = tmp_path / "run"
    assert (
        run_cli("topics", "--corpus", "builtin:rotten_tomatoes", "--clusters", "4", "--out", str(out), "--dry-run") == 0
    )
    err = capfd.readouterr().err
    assert f"checkray topics --dry-run: would write {out}" in err
    assert "n_clusters: 4" in err and "n_neighbors: 15" in err  # the section, defaults resolved
    assert "resources: a local Ray with" in err
    assert not out.exists()


def test_internal_error_exits_1_and_points_at_the_log(tmp_path, capfd, monkeypatch):
    import os

    import checkray.jobs.topics.job as topics_job

    def boom(job, out=None):
        raise RuntimeError("something checkray did not expect")

    monkeypatch.setattr(topics_job, "run_job", boom)
    monkeypatch.delenv("CHECKRAY_DRY_RUN", raising=False)
    code = run_cli("topics", "--corpus", "builtin:rotten_tomatoes", "--out", str(tmp_path / "r"))
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    match = re.fullmatch(
        r"error: internal error: RuntimeError: something checkray did not expect \(traceback in (.+)\)", err[0]
    )
    assert match, err
    log = Path(match.group(1))
    assert "Traceback" in log.read_text() and "boom" in log.read_text()
    os.unlink(log)


def test_user_error_exits_2_in_one_line(tmp_path, capfd):
    code = run_cli("topics", "--corpus", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "r"))
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: {tmp_path / 'missing.csv'}: corpus file not found"]


def test_a_user_error_inside_a_ray_task_is_its_own_line(tmp_path, capfd, monkeypatch):
    import checkray.jobs.topics.job as topics_job
    from checkray.engine.errors import InputError

    inner = InputError("model.gguf: model path does not exist")

    class RayTaskErrorOfInputError(InputError):  # as Ray builds it: the cause's class, the remote traceback
        def __init__(self):
            super().__init__("ray::task()\n  File ..., line 3\nInputError: model.gguf: model path does not exist")
            self.cause = inner

    def fail(job, out=None):
        raise RayTaskErrorOfInputError()

    monkeypatch.setattr(topics_job, "run_job", fail)
    code = run_cli("topics", "--corpus", "builtin:rotten_tomatoes", "--out", str(tmp_path / "r"))
    assert code == 2 and capfd.readouterr().err.strip().splitlines() == [f"error: {inner}"]


def test_long_lines_are_not_wrapped_without_a_terminal(capfd):
    """Rich wraps at 80 columns when stderr is a file or pipe: a stage line split in two
    would leave a fragment ("177s") that is nobody's line in a CI log."""
    from checkray.jobs.console import console

    line = "mft · train v1 · generated MFTs: kept 4, dropped 0 (from 5 representatives) in 177s " + "x" * 120
    console.print(line, markup=False)
    assert capfd.readouterr().err.splitlines() == [line.rstrip()]


def test_step_progress_starts_at_the_first_report_and_says_the_time_left(capfd):
    """A fine-tune learns its step count only once it runs: nothing before the first
    report, then a line per tenth with the time left, and "done" at the end."""
    from checkray.jobs.console import step_progress

    with step_progress("validity fine-tune") as report:
        assert capfd.readouterr().err == ""
        for done in range(1, 41):
            report(done, 40)
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 10 and all(is_own_line(line) for line in lines)
    assert lines[0].startswith("validity fine-tune: 4/40 steps, ~") and lines[0].endswith(" left")
    assert lines[-1].startswith("validity fine-tune: 40/40 steps, done in ")
    with step_progress("unused") as report:
        pass
    assert capfd.readouterr().err == ""  # a backend that never reports (embedding_lr) prints nothing


def test_worker_lines_ray_holds_back_go_to_the_log_not_the_console(tmp_path, capfd, monkeypatch):
    # Ray prints held-back repeats of worker lines in ray.shutdown(), at exit, after the
    # console has its stderr back; the CLI drains them into the log when it stops.
    import os

    import ray._private.ray_logging as ray_logging
    import ray._private.worker  # noqa: F401  (print_worker_logs)

    import checkray.jobs.topics.job as topics_job

    class Held:
        def __init__(self):
            self.batches = [
                {
                    "ip": "127.0.0.1",
                    "pid": 4242,
                    "actor_name": "SharedEncoder",
                    "is_err": True,
                    "lines": ["Loading weights: 100% [repeated 2x across cluster]"],
                }
            ]

        def flush(self):
            out, self.batches = self.batches, []
            return out

    held = Held()
    monkeypatch.setattr(ray_logging, "stderr_deduplicator", held)

    def boom(job, out=None):
        raise RuntimeError("stop here")  # an internal error keeps the log file for the check

    monkeypatch.setattr(topics_job, "run_job", boom)
    monkeypatch.delenv("CHECKRAY_DRY_RUN", raising=False)
    code = run_cli("topics", "--corpus", "builtin:rotten_tomatoes", "--out", str(tmp_path / "r"))
    err = capfd.readouterr().err
    assert code == 1 and "Loading weights" not in err and held.batches == []
    log = Path(re.search(r"traceback in (.+)\)", err).group(1))
    assert "SharedEncoder pid=4242" in log.read_text() and "Loading weights" in log.read_text()
    os.unlink(log)
