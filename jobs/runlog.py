"""Where output goes: checkray's own lines to the terminal, everything else to a log file.

Ray (its C++ core, Ray Data's execution plans and INFO lines, worker output forwarded to
the driver), transformers' progress bars, library warnings: they all write to the
process's stderr. Unless ``--verbose``, the CLI points file descriptor 2 at a log file
when it starts (a temporary file at first), and checkray's console writes to a duplicate
of the real stderr, so the user sees the stage lines, progress, warnings that concern
them and the paths written. When a job opens its run directory, the log moves to
``DIR/logs/checkray.log`` (appended to by reruns; on an object store it is uploaded when
the command ends). An internal error prints one line pointing at that file, which holds
the traceback.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from checkray.jobs.console import console

if TYPE_CHECKING:
    from checkray.engine.rundir import RunDir

DRY_RUN_ENV = "CHECKRAY_DRY_RUN"  # set by --dry-run


class DryRun(Exception):
    """Raised by ``run_job`` after printing the plan of a ``--dry-run``: exit 0."""


LOG_DIR = "logs"
LOG_FILE = "checkray.log"
OWN_LOGGERS = ("checkray",)  # every module logs as getLogger(__name__): checkray.engine..., checkray.jobs...


class _ConsoleHandler(logging.Handler):
    """checkray's own warnings, on the console as ``warning: ...`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        level = record.levelname.lower()
        console.print(f"[yellow]{level}: {record.getMessage()}[/yellow]", soft_wrap=True, markup=True)


class RunLog:
    """The redirect of fd 2 for one CLI command (``start`` ... ``stop``)."""

    def __init__(self) -> None:
        self.active = False
        self.path: str | None = None  # where the log is now
        self._own_temp: str | None = None  # the temp file this command created (by handle, not by name)
        self._saved_fd: int | None = None
        self._saved_console_file = None
        self._upload: tuple[RunDir, str] | None = None  # (run, rel) for a run on an object store
        self._handlers: list[tuple[logging.Logger, logging.Handler]] = []
        self.command: str | None = None

    def start(self, command: str | None = None) -> None:
        """Redirect; ``command`` names what runs in the log's header (default: the argv)."""
        if self.active:
            return
        self.command = command
        sys.stderr.flush()
        fd, self.path = tempfile.mkstemp(prefix="checkray-", suffix=".log")
        self._own_temp = self.path
        self._saved_fd = os.dup(2)
        os.dup2(fd, 2)
        os.close(fd)
        self._saved_console_file = getattr(console, "_file", None)  # None: follow sys.stderr
        self._saved_stderr = sys.stderr
        # The console writes where stderr went before: the real fd 2 (a duplicate of it),
        # or the object that stood for stderr when that was no file (a notebook, pytest).
        if _fileno(sys.stderr) == 2:
            console.file = io.TextIOWrapper(os.fdopen(os.dup(self._saved_fd), "wb", buffering=0), write_through=True)
            self._own_console_file = True
        else:
            console.file, self._own_console_file = sys.stderr, False
        # ... and sys.stderr (whatever it was) now writes to fd 2, the log file
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0, closefd=False), write_through=True)
        root = logging.getLogger()
        self._saved_level = root.level
        file_handler = logging.StreamHandler(sys.stderr)  # fd 2: the log file
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(file_handler)
        root.setLevel(min(root.level or logging.WARNING, logging.INFO))
        self._handlers.append((root, file_handler))
        shown = _ConsoleHandler(level=logging.WARNING)
        for name in OWN_LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(shown)
            self._handlers.append((logger, shown))
        self.active = True

    def attach(self, run: RunDir) -> None:
        """Move the log into ``run`` (the first run a command opens: the demo's top
        directory, not its steps')."""
        if not self.active or self._upload is not None or self.path != self._own_temp:
            return
        run.reserve(LOG_DIR)
        command = self.command or f"checkray {' '.join(sys.argv[1:])}"
        header = f"=== {command} at {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n"
        if run.is_local:
            final = Path(run.path(LOG_DIR, LOG_FILE))
            sys.stderr.flush()
            final.parent.mkdir(parents=True, exist_ok=True)
            sys.stderr.flush()
            with open(final, "ab") as out:
                out.write(header.encode())
                out.write(_read_or_note(self.path))
            fd = os.open(final, os.O_WRONLY | os.O_APPEND)
            os.dup2(fd, 2)
            os.close(fd)
            _remove_own(self.path)
            self.path, self._own_temp = str(final), None
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            self._upload = (run, f"{LOG_DIR}/checkray-{stamp}-{os.getpid()}.log")
            sys.stderr.write(header)

    def stop(self, keep_temp: bool = False) -> None:
        """Restore stderr; a log that never reached a run directory is deleted unless
        ``keep_temp`` (the command failed and its error line names the file)."""
        if not self.active:
            return
        _drain_ray_held_lines()
        sys.stderr.flush()
        for logger, handler in self._handlers:
            logger.removeHandler(handler)
        self._handlers.clear()
        logging.getLogger().setLevel(self._saved_level)
        if self._upload is not None:
            run, rel = self._upload
            try:
                run.write_bytes(rel, _read_or_note(self.path))
                _remove_own(self.path)
                self.path, self._own_temp = run.path(rel), None
            except OSError as exc:  # the log stays in the temp file named in the error line
                _warn(f"could not upload the log to {run.uri}: {exc}")
        sys.stderr.close()
        sys.stderr = self._saved_stderr
        os.dup2(self._saved_fd, 2)
        os.close(self._saved_fd)
        if self.path and self.path == self._own_temp and not keep_temp:
            _remove_own(self.path)
            self._own_temp = None
        if self._own_console_file:
            console.file.close()
        console.file = self._saved_console_file
        self.active = False
        self._upload = None


def _drain_ray_held_lines() -> None:
    """Print the worker lines Ray holds back as repeats into the log, now.

    Ray's driver prints its workers' output to ``sys.stderr`` as it arrives but holds
    repeated lines back and prints them in ``ray.shutdown()``, which runs at exit, after
    ``stop`` has given the console its stderr back: the mft run of 2026-11-25 ended with
    one ``(SharedEncoder pid=...) Loading weights ... [repeated 2x across cluster]`` line
    on the console. Ray is not shut down here (tests run commands in one process against a
    shared Ray, and the exit hook clearing an autoscaler request needs it). The
    deduplicators are Ray internals: if they moved, nothing is drained.
    """
    ray_logging = sys.modules.get("ray._private.ray_logging")
    ray_worker = sys.modules.get("ray._private.worker")
    if ray_logging is None or ray_worker is None:
        return
    try:
        for held in (ray_logging.stdout_deduplicator, ray_logging.stderr_deduplicator):
            for batch in held.flush():
                ray_worker.print_worker_logs(batch, sys.stderr)
    except Exception:  # noqa: BLE001 - a Ray internal changed: never fail the command for it
        return


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


# Bookkeeping never fails a command: its result is already written (a log another process
# removed, a temp directory that vanished, a read-only disk cost a warning at most).


def _warn(message: str) -> None:
    console.print(f"[yellow]warning: {message}[/yellow]", soft_wrap=True, markup=True)


def _read_or_note(path: str) -> bytes:
    """The temp log's lines, or a note saying they were lost (another process removed it)."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        _warn(f"the command's temporary log {path} is gone ({exc.strerror}); its earlier lines are lost")
        return f"[checkray: the earlier lines of this log were lost: {path} was removed]\n".encode()


def _remove_own(path: str) -> None:
    """Remove a file this command created; already gone is fine, anything else a warning."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        _warn(f"could not remove the temporary log {path}: {exc.strerror}")


RUN_LOG = RunLog()
