"""User-facing errors: one line, naming the problem. The CLI prints them without a traceback."""


class CheckrayError(Exception):
    """Base of every error the CLI reports as a one-line message (exit code 2)."""

    def __str__(self) -> str:  # keep the promise of one line even for multi-line causes
        return " ".join(super().__str__().split())


class InputError(CheckrayError):
    """Bad user input: corpus, suite, column, file, model path."""


class ConfigError(CheckrayError):
    """A configuration file or flag that does not validate."""


class ResourceError(CheckrayError):
    """The cluster cannot provide what the plan needs."""
