"""The ``templates`` job: a CheckList-style capability spec (JSONL/YAML) -> an MFT suite.

``checkray templates --spec FILE --out DIR`` writes ``DIR/suite.parquet`` (the common
test-case schema) atomically and prints one summary line with the counts per capability.
Expansion is pure and takes well under a second for hundreds of templates, so the job
writes its one output directly instead of checkpointing stages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from pydantic import Field, field_validator

from engine.config import CheckrayConfig, Section, load_config, register_section
from engine.errors import InputError
from engine.stages import RunDir
from engine.templates import Expansion, expand, read_spec
from jobs.app import app

SUITE_FILE = "suite.parquet"


class TemplatesConfig(Section):
    spec: str | None = None  # capability spec file (.jsonl, .yaml)
    suite: str | None = None  # suite name; None: the spec file's stem
    nsamples: int = Field(default=100, ge=0)  # cases per template; 0: every combination
    seed: int | None = None  # None: the top-level seed
    # Integer label -> name. None: {0: negative, 1: positive, 2: neutral} for single
    # texts and {0: not_duplicate, 1: duplicate} (QQP) for pair templates.
    label_map: dict[str, str] | None = None
    max_combinations: int = Field(default=100_000, ge=1)  # cap on nsamples: 0

    @field_validator("label_map", mode="before")
    @classmethod
    def _int_keys(cls, value: Any) -> Any:  # YAML reads `0: negative` with an int key
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        return value


register_section("templates", TemplatesConfig)


def parse_label_map(text: str) -> dict[str, str]:
    """``"0=negative,1=positive"`` -> ``{"0": "negative", "1": "positive"}``."""
    mapping = {}
    for item in text.split(","):
        key, sep, name = item.partition("=")
        if not sep or not key.strip() or not name.strip():
            raise InputError(f"--label-map: expected INT=NAME[,INT=NAME...], got {item.strip()!r}")
        mapping[key.strip()] = name.strip()
    return mapping


def run_templates(cfg: CheckrayConfig, out: str) -> tuple[RunDir, Expansion]:
    tcfg: TemplatesConfig = cfg.section("templates")
    if not tcfg.spec:
        raise InputError("no spec: pass --spec FILE or set templates.spec in the config")
    templates = read_spec(tcfg.spec, tcfg.label_map)
    expansion = expand(
        templates,
        suite=tcfg.suite or Path(tcfg.spec).stem,
        nsamples=tcfg.nsamples or None,
        seed=cfg.seed if tcfg.seed is None else tcfg.seed,
        max_combinations=tcfg.max_combinations,
    )
    run = RunDir(out)
    run.write_table(SUITE_FILE, expansion.cases)
    return run, expansion


def summary_line(run: RunDir, expansion: Expansion, nsamples: int) -> str:
    counts = ", ".join(f"{cap} {n}" for cap, n in sorted(expansion.per_capability.items()))
    line = (f"templates: {expansion.cases.num_rows} cases from {expansion.templates} templates "
            f"({counts}); {expansion.duplicates} duplicates dropped")
    if expansion.short:
        n = len(expansion.short)
        line += f"; {n} template{'s' if n > 1 else ''} gave fewer than {nsamples} (small or self-duplicating product)"
    return f"{line} -> {run.path(SUITE_FILE)}"


@app.command("templates")
def templates_command(
    spec: str | None = typer.Option(None, "--spec", "-s", help="Capability spec: JSONL or YAML templates."),
    out: str | None = typer.Option(None, "--out", "-o", help="Output directory (local path or s3://...)."),
    nsamples: int | None = typer.Option(None, "--nsamples", "-n", help="Cases per template (0: all combinations)."),
    seed: int | None = typer.Option(None, "--seed", help="Sampling seed."),
    suite: str | None = typer.Option(None, "--suite", help="Suite name (default: spec file stem)."),
    label_map: str | None = typer.Option(None, "--label-map", help="Integer labels to names: 0=negative,1=positive."),
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML config with a 'templates' section."),
):
    """Expand CheckList-style templates into an MFT test suite (suite.parquet)."""
    cfg = load_config(config, {
        "templates.spec": spec, "templates.nsamples": nsamples, "templates.seed": seed,
        "templates.suite": suite, "templates.label_map": parse_label_map(label_map) if label_map else None,
        "out": out,
    })
    if not cfg.out:
        raise InputError("no output directory: pass --out DIR or set 'out' in the config")
    run, expansion = run_templates(cfg, cfg.out)
    typer.echo(summary_line(run, expansion, cfg.section("templates").nsamples))
