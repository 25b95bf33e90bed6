"""Console entry point: ``checkray <job> ...``. User errors print one line and exit 2."""

from __future__ import annotations

import logging
import os
import sys

from engine.errors import CheckrayError
from jobs.app import app

# Importing a job module registers its command (and its config section).
import jobs.topics  # noqa: E402,F401
import jobs.demo  # noqa: E402,F401
import jobs.benchmark  # noqa: E402,F401
import jobs.templates  # noqa: E402,F401
import jobs.zoo  # noqa: E402,F401
import jobs.mft  # noqa: E402,F401
import jobs.s2lct  # noqa: E402,F401
import jobs.costello  # noqa: E402,F401
import jobs.repair  # noqa: E402,F401
import jobs.validity  # noqa: E402,F401
import jobs.testaug  # noqa: E402,F401


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not sys.stderr.isatty():
        # Without a terminal Ray Data logs each progress bar as INFO lines every few
        # seconds, burying the job's own stage lines (a CI log or `make demo > log`).
        os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    logging.basicConfig(level=os.environ.get("CHECKRAY_LOG", "WARNING"), format="%(levelname)s %(name)s: %(message)s")
    try:
        app(standalone_mode=False)
    except CheckrayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # click usage errors are already printed by typer/click
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        raise


if __name__ == "__main__":
    main()
