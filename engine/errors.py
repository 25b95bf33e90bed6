"""User-facing errors: one line, naming the problem. The CLI prints them without a traceback."""


class CheckrayError(Exception):
    """Base of every error the CLI reports as a one-line message (exit code 2)."""

    def __str__(self) -> str:  # keep the promise of one line even for multi-line causes
        return " ".join(super().__str__().split())


class InputError(CheckrayError):
    """Bad user input: corpus, suite, column, file, model path."""


class EmptySuiteError(InputError):
    """A method ran and kept no test case (every generation dropped, each with its reason
    in the method's rejected cases). Alone it is the job's error; in a run of several
    methods the others go on without it (``jobs/run/job.py``)."""


class ConfigError(CheckrayError):
    """A configuration file or flag that does not validate."""


class ResourceError(CheckrayError):
    """The cluster cannot provide what the plan needs."""


def user_error(exc: BaseException | None) -> CheckrayError | None:
    """The ``CheckrayError`` inside ``exc``, unwrapped from Ray's task/actor error
    wrappers (``.cause``) and Python's ``__cause__`` chain, or None if there is none:
    an error an actor raises for the user stays one line in the driver."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        cause = getattr(exc, "cause", None)
        # Ray's wrapper of a task's error subclasses the error's own class, but its text
        # is the remote traceback: the error itself is its ``.cause``.
        if isinstance(exc, CheckrayError) and not isinstance(cause, BaseException):
            return exc
        exc = cause or exc.__cause__
    return None
