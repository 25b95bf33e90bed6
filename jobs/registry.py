"""The job table: every CLI command and every config section, imported on first use.

This is the one place that says which jobs exist. ``jobs/cli.py`` builds the command
line from ``JOBS`` (``checkray --help`` imports no job), and ``jobs/config.py`` validates
a config file's sections from ``SECTIONS`` (a section's class is imported only when the
file has that section). A name given twice is an error at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkray.engine.config import JobSection
from checkray.engine.lazy import LazyRegistry

# The papers' method packages. A layer's packages of these names import each other not at
# all (what they share lives at the top of the layer); tests/layering.py checks it.
METHODS = ("topics", "mft", "s2lct", "costello", "testaug")


def _check_section(name: str, cls: Any) -> None:
    if not (isinstance(cls, type) and issubclass(cls, JobSection)) or cls.key != name:
        raise TypeError(f"config section '{name}' must be a JobSection whose key is '{name}', got {cls!r}")


SECTIONS: LazyRegistry[type[JobSection]] = LazyRegistry("config section", check=_check_section)
for _name, _ref in [
    ("topics", "checkray.engine.topics.config:TopicsConfig"),
    ("templates", "checkray.engine.templates.config:TemplatesConfig"),
    ("zoo", "checkray.engine.training:ZooConfig"),  # actors build zoo models from it
    ("benchmark", "checkray.jobs.benchmark.config:BenchmarkConfig"),
    ("compare", "checkray.jobs.compare.config:CompareConfig"),
    ("llm", "checkray.engine.llm:LLMConfig"),  # shared by mft, testaug and llm_zero_shot models
    ("mft", "checkray.engine.mft.config:MFTConfig"),
    ("s2lct", "checkray.engine.s2lct.config:S2lctConfig"),
    ("costello", "checkray.engine.costello.config:CostelloConfig"),
    ("repair", "checkray.engine.costello.config:RepairConfig"),
    ("testaug", "checkray.engine.testaug.config:TestAugConfig"),
    ("validity", "checkray.engine.testaug.config:ValidityConfig"),
    ("cache", "checkray.engine.cache:CacheConfig"),
    (
        "run",
        "checkray.jobs.run.config:RunConfig",
    ),  # checkray run: models, methods, baselines  # the content cache of embeddings and predictions
]:
    SECTIONS.add(_name, _ref)


@dataclass(frozen=True)
class Command:
    """A CLI command: ``ref`` is a typer command function or a ``typer.Typer`` group."""

    name: str
    ref: str
    help: str  # shown by ``checkray --help`` without importing the job
    # Also a notebook function ``checkray.<name>`` (jobs/api.py): a command that writes a
    # run directory. Not a command group (cache, import, validity: ``checkray.cli``), one
    # that serves a page until stopped (review) or one that writes into another's run.
    api: bool = True


JOBS: LazyRegistry[Any] = LazyRegistry("command")
for _cmd in [
    Command(
        "run",
        "checkray.jobs.run.job:run_command",
        "Your corpus and models: every method that applies, one merged suite, one benchmark and report.",
    ),
    Command("demo", "checkray.jobs.demo:demo_command", "checkray run on the bundled corpus and a zoo it trains."),
    Command(
        "topics",
        "checkray.jobs.topics.job:topics_command",
        "Cluster a corpus into topics and pick representative documents.",
    ),
    Command(
        "templates",
        "checkray.jobs.templates.job:templates_command",
        "Expand CheckList-style templates into an MFT suite.",
    ),
    Command("zoo", "checkray.jobs.zoo.job:zoo_command", "Build and cache a zoo of sentiment models (DIR/zoo.yaml)."),
    Command(
        "benchmark", "checkray.jobs.benchmark.job:benchmark_command", "Run test suites against many models at once."
    ),
    Command(
        "compare",
        "checkray.jobs.compare.job:compare_command",
        "Compare two models on the same suites (flips, McNemar's exact test); gate CI on pass rates.",
    ),
    Command(
        "export-failures",
        "checkray.jobs.compare.failures:export_failures_command",
        "Write a benchmark run's failing cases (and template neighbours) as training data (JSONL/Parquet).",
    ),
    Command(
        "mft",
        "checkray.jobs.mft.job:mft_command",
        "Generate Minimum Functionality Tests from a topics run (Li et al.).",
    ),
    Command(
        "s2lct", "checkray.jobs.s2lct.job:s2lct_command", "S²LCT: rule-based seeds expanded by a reference grammar."
    ),
    Command(
        "costello", "checkray.jobs.costello.job:costello_command", "Contrastive testing of embedding models (COSTELLO)."
    ),
    Command(
        "repair",
        "checkray.jobs.costello.repair:repair_command",
        "Fine-tune a model on its COSTELLO violations; retest.",
    ),
    Command("testaug", "checkray.jobs.testaug.job:testaug_command", "Generate capability tests with an LLM (TestAug)."),
    Command(
        "validity", "checkray.jobs.testaug.validity:app", "Train or apply TestAug's validity classifier.", api=False
    ),
    Command(
        "import", "checkray.jobs.importer.job:app", "Import test suites made by other tools (CheckList).", api=False
    ),
    Command(
        "report-index",
        "checkray.jobs.index:index_command",
        "Write DIR/index.html: every report of a run directory, its config, versions, stage times and gates.",
        api=False,
    ),
    Command(
        "cache",
        "checkray.jobs.cache:app",
        "Show or bound the cache of embeddings and predictions (info, prune).",
        api=False,
    ),
    Command(
        "review",
        "checkray.jobs.review.job:review_command",
        "Review generated cases in the browser; apply, export or import reviews.",
        api=False,
    ),
]:
    JOBS.register(_cmd)


def command(name: str) -> Command:
    """The record of CLI command ``name`` (its help text, without importing the job)."""
    return JOBS.record(name)
