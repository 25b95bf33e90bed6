"""The real console entry point, called in-process (the Ray session fixture is already up)."""

from __future__ import annotations


def run_cli(*args: str) -> int:
    """``checkray ARGS`` through ``checkray.jobs.cli.main``; returns the exit code."""
    from checkray.jobs.cli import main

    try:
        main(list(args))
        return 0
    except SystemExit as exc:
        return int(exc.code or 0)
