"""Usage errors through the real console script: one line, click's hint, exit code 2,
whichever copy of click typer uses; listing the commands imports no job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKRAY = Path(sys.executable).with_name("checkray")


def run(*args: str) -> subprocess.CompletedProcess:
    if not CHECKRAY.exists():
        pytest.skip("checkray console script not installed in this environment")
    return subprocess.run([str(CHECKRAY), *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ("topics", "--corpsu", "reviews.csv", "--out", "runs/t"),
            "error: No such option: --corpsu (Possible options: --corpus, --out) (see 'checkray topics --help')",
        ),
        (("mft", "--out", "runs/m"), "error: Missing option '--topics'. (see 'checkray mft --help')"),
        (("topics", "--clusters", "many", "--out", "runs/t"), "error: Invalid value for '--clusters' / '-k':"),
        (
            ("topcs", "--out", "runs/t"),
            "error: No such command 'topcs'. Did you mean 'topics'? (see 'checkray --help')",
        ),
        (("validity", "trian"), "error: No such command 'trian'. Did you mean 'train'?"),
    ],
    ids=["unknown-option", "missing-option", "bad-value", "unknown-command", "unknown-subcommand"],
)
def test_usage_error_is_one_line_and_exit_2(args, expected):
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(expected), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_version_and_help_list_every_job_without_importing_them():
    from checkray.jobs.registry import JOBS

    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("checkray ")
    code = (
        "import sys; from checkray.jobs.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "jobs = [m for m in sys.modules if m.startswith('checkray.jobs.') and m.endswith('.job')]\n"
        "assert not jobs and 'ray' not in sys.modules, jobs"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in JOBS:
        assert name in proc.stdout
