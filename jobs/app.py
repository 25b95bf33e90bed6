"""The Typer application every job module registers its command on."""

import typer

app = typer.Typer(
    name="checkray",
    help="Generate behavioral test suites for NLP models and run them against many models at once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
