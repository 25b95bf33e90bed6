"""Console entry point: ``checkray <job> ...``, built from the job table.

Commands come from ``checkray.jobs.registry.JOBS`` and are imported only when run (``checkray
--help`` imports no job). User errors print one line and exit 2; so do click's usage
errors (unknown option, missing option, bad value, unknown command), whichever copy of
click typer brings (typer 0.29 vendors one as ``typer._click``).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import traceback

import typer
import typer.core
import typer.main

from checkray.engine.errors import CheckrayError
from checkray.jobs.console import console
from checkray.jobs.registry import JOBS
from checkray.jobs.registry import command as command_record
from checkray.jobs.runlog import DRY_RUN_ENV, RUN_LOG, DryRun


def _click_modules() -> list:
    """The click package(s) whose errors may reach us: typer's vendored copy (typer >= 0.29)
    and the real one (older typer, or a command that uses click directly)."""
    mods = []
    for name in ("typer._click", "click"):
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            pass
    return mods


class JobCommands(typer.core.TyperGroup):
    """A group whose subcommands are the job table's entries, imported on first use."""

    def list_commands(self, ctx) -> list[str]:
        return list(JOBS)

    _listing = False  # True while the help page lists the commands

    def get_command(self, ctx, name: str):
        if name not in JOBS:
            return None
        if self._listing:  # the help page needs a name and a line, not the job's import
            return typer.core.TyperCommand(name, help=command_record(name).help, short_help=command_record(name).help)
        target = JOBS.get(name)
        if isinstance(target, typer.Typer):
            command = typer.main.get_group(target)
        else:
            single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            single.command(name, help=command_record(name).help)(target)
            command = typer.main.get_command(single)
        command.name = name
        return command

    def format_help(self, ctx, formatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx, args):
        # click's "No such command" with a "did you mean" from the job table.
        name = args[0] if args else None
        if name is not None and name not in JOBS and not name.startswith("-"):
            from difflib import get_close_matches

            hint = get_close_matches(name, list(JOBS), n=1)
            more = f" Did you mean '{hint[0]}'?" if hint else ""
            ctx.fail(f"No such command '{name}'.{more}")
        return super().resolve_command(ctx, args)


# Flags of every command, taken out of the arguments before click parses them, so they
# may stand anywhere (`checkray topics ... --dry-run`); the root help lists them.
GLOBAL_FLAGS = {
    "--dry-run": "Print the resolved config and planned resources; run nothing.",
    "--verbose": "Show Ray's, transformers' and library output on the console (else DIR/logs/checkray.log).",
}


def _show_version(value: bool) -> None:
    if value:
        from checkray.engine import __version__

        typer.echo(f"checkray {__version__}")
        raise typer.Exit(0)


def make_app() -> typer.Typer:
    """The typer application (``typer.testing.CliRunner`` takes it); its group is
    ``JobCommands``, so the subcommands come from the job table."""
    app = typer.Typer(
        cls=JobCommands,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        help="Generate behavioral test suites for NLP models and run them against many models at once.",
    )

    @app.callback()
    def root(
        version: bool = typer.Option(
            False, "--version", is_eager=True, callback=_show_version, help="Show the version and exit."
        ),
        dry_run: bool = typer.Option(False, "--dry-run", help=GLOBAL_FLAGS["--dry-run"]),
        verbose: bool = typer.Option(False, "--verbose", help=GLOBAL_FLAGS["--verbose"]),
        trust_code: bool = typer.Option(
            False,
            "--trust-code",
            help="Allow inputs that run code: pickles checkray did not write, callable models, "
            "trust_remote_code (see SECURITY.md).",
        ),
        encoder: str = typer.Option(
            None,
            "--encoder",
            help="Runtime of the transformer encoders: auto (PyTorch on GPU; on CPU PyTorch bf16 where "
            "the CPU multiplies bf16 natively, else ONNX Runtime), torch, torch-bf16, onnx or onnx-int8 "
            "(docs/performance.md). Overrides runtime.encoder.",
        ),
    ) -> None:
        """checkray: behavioral test suites for NLP models, on Ray."""
        if trust_code:
            from checkray.engine.trust import allow_code

            allow_code()
        if encoder:
            from checkray.engine.inference import set_encoder

            set_encoder(encoder)

    return app


app = make_app()


def build_cli() -> JobCommands:
    return typer.main.get_command(app)


def usage_line(exc) -> str:
    """click's usage error (with its "did you mean" hint) as one line, pointing at the help."""
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"error: {exc.format_message()}{where}"


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts its workers 15 nice levels below the driver: on a busy machine every actor
    # (the encoders, the models under test) then yields to any other process, and a job runs
    # several times slower than the same work in one process. The workers of a local Ray
    # run at the command's own priority instead (`nice checkray ...` lowers all of it).
    os.environ.setdefault("RAY_worker_niceness", "0")
    from checkray.engine.runtime import secure_process_env

    secure_process_env()  # before anything imports Ray, which reads it then
    # SIGTERM (`ray job stop`, a CI timeout) becomes a normal exit: `finally` blocks and
    # atexit hooks run (the run lock is released, an autoscaler GPU request is cleared).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if not sys.stderr.isatty():
        # Without a terminal Ray Data logs each progress bar as INFO lines every few
        # seconds, burying the job's own stage lines (a CI log or `make demo > log`).
        os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    given = list(sys.argv[1:] if argv is None else argv)
    args = [a for a in given if a not in GLOBAL_FLAGS]
    verbose = "--verbose" in given or os.environ.get("CHECKRAY_VERBOSE") == "1"
    if "--dry-run" in given:
        os.environ[DRY_RUN_ENV] = "1"
    if verbose:
        logging.basicConfig(level=os.environ.get("CHECKRAY_LOG", "INFO"), format="%(levelname)s %(name)s: %(message)s")
    else:
        RUN_LOG.start()  # everything but checkray's own lines goes to the log file
    failed = True
    try:
        _run(args, verbose)
        failed = False
    except SystemExit as exc:
        failed = exc.code not in (0, None)
        raise
    finally:
        RUN_LOG.stop(keep_temp=failed)  # a failed command's log stays where its error line says
        os.environ.pop(DRY_RUN_ENV, None)  # one command's flag (main may be called again in-process)


def _error(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _run(argv: list[str], verbose: bool) -> None:
    clicks = _click_modules()
    usage_errors = tuple(m.exceptions.ClickException for m in clicks)
    import typer.exceptions

    homes = [m.exceptions for m in clicks] + [typer.exceptions]
    aborts = tuple({h.Abort for h in homes if hasattr(h, "Abort")})
    exits = tuple({h.Exit for h in homes if hasattr(h, "Exit")})
    try:
        # Without standalone mode click returns a command's exit code (typer.Exit(1))
        # instead of exiting: pass it on.
        code = build_cli().main(args=argv, prog_name="checkray", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except DryRun:
        sys.exit(0)
    except CheckrayError as exc:
        from checkray.engine.errors import user_error

        # Ray's wrapper of a task's error subclasses the error's class but reads as the
        # remote traceback: the line is the error inside it.
        _error(f"error: {user_error(exc) or exc}")
        sys.exit(2)
    except usage_errors as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `checkray` alone: the help page
            exc.show(file=console.file)
        else:
            _error(usage_line(exc))
        sys.exit(exc.exit_code)
    except aborts:
        sys.exit(130)
    except exits as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        from checkray.engine.errors import user_error

        cause = user_error(exc)
        if cause is not None:
            _error(f"error: {cause}")
            sys.exit(2)
        traceback.print_exc()  # to the log file (to the console with --verbose)
        where = "above" if verbose else f"in {RUN_LOG.path}"
        _error(f"error: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} (traceback {where})")
        sys.exit(1)


if __name__ == "__main__":
    main()
