"""``checkray import checklist PATH --out DIR``: a CheckList suite as a checkray suite.

    checkray import checklist sentiment_suite.tar.gz --labels 0=negative,1=neutral,2=positive --out runs/cl
        -> runs/cl/suite.parquet (TEST_CASE_SCHEMA) + runs/cl/import.json (what became of each test)

The pickle is read by a restricted unpickler that runs no pickled code (see
``engine/benchmark/checklist/unpickle.py`` and ``docs/checklist.md``). Then
``checkray benchmark --suite runs/cl/suite.parquet`` runs it against models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from checkray.engine.benchmark.checklist.convert import ImportReport, convert, report_json, why_empty
from checkray.engine.benchmark.checklist.mapping import load_mapping
from checkray.engine.benchmark.checklist.plan import LabelNames
from checkray.engine.benchmark.checklist.reader import read_checklist
from checkray.engine.benchmark.inputs import check_suite
from checkray.engine.errors import InputError
from checkray.engine.schema import TASKS
from checkray.engine.stages import RunDir
from checkray.jobs.console import console

app = typer.Typer(help="Import test suites made by other tools (CheckList).", no_args_is_help=True)


def summary_lines(report: ImportReport) -> list[str]:
    """Counts per test type, then one line per test that was defaulted, unmapped or skipped."""
    lines = []
    for test_type in ("MFT", "INV", "DIR"):
        c = report.counts.get(test_type)
        if c is not None:
            lines.append(f"{test_type}: {c.tests} tests, {c.testcases} test cases, {c.rows} rows")
    for t in report.defaulted():
        lines.append(f"defaulted '{t.name}' ({t.type}): {t.expectation} - {t.note}")
    for status in ("unmapped", "skipped"):
        for t in report.by_status(status):
            lines.append(f"{status} '{t.name}' ({t.type or '?'}): {t.expectation}")
    dropped = sum(t.dropped_testcases for t in report.by_status("written"))
    if dropped:
        lines.append(f"dropped {dropped} test case(s) with no perturbation or no example")
    for key in report.unused_mapping:
        lines.append(f"mapping entry '{key}' matched no test")
    return lines


@app.command("checklist")
def checklist_command(
    path: Path = typer.Argument(..., help="CheckList suite: a .pkl, or a release .tar.gz holding .pkl files."),
    out: str = typer.Option(..., "--out", "-o", help="Directory for suite.parquet and import.json."),
    labels: Optional[str] = typer.Option(
        None, "--labels", help="Name the suite's labels: 0=negative,1=neutral,2=positive (needed for numbers)."
    ),
    mapping: Optional[Path] = typer.Option(
        None, "--mapping", "-m", help="YAML: expectations of tests whose expect is not recognised."
    ),
    suite: Optional[str] = typer.Option(None, "--suite", help="Suite name (default: the file's stem)."),
    task: Optional[str] = typer.Option(
        None, "--task", help="qa: the suite asks questions ((context, question) pairs, answers as labels), as SQuAD's."
    ),
):
    """Import a CheckList suite (pickle or release archive) as DIR/suite.parquet, running no pickled code."""
    if task is not None and task not in TASKS:
        raise InputError(f"--task {task}: unknown task (have: {', '.join(TASKS)}; leave it out to classify)")
    names = LabelNames.parse(labels)
    spec = load_mapping(mapping) if mapping is not None else None
    suites = read_checklist(str(path), suite)
    table, report = convert(suites, names, spec, task)
    if table.num_rows:
        table = check_suite(table, str(path))
    run = RunDir(out)
    run.claim("import")
    report_path = run.write_text("import.json", report_json(report))
    if not table.num_rows:
        raise InputError(f"{why_empty(report)} (see {report_path})")
    written = run.write_table("suite.parquet", table)
    console.print(f"checklist: {len(report.tests)} tests in {', '.join(report.suites)}", markup=False)
    for line in summary_lines(report):
        console.print(line, markup=False)
    typer.echo(f"wrote {written} ({table.num_rows} test cases) and {report_path}")
