"""Report sections of the mft job: gate counts, parse counts, example cases per topic,
and Tables 7/8 when models were evaluated (all read from stage outputs)."""

from __future__ import annotations

import json

import pyarrow as pa

from checkray.engine.case_checks import rejection_summary
from checkray.engine.report import Section, table_html
from checkray.engine.stages import StageRunner

EXAMPLES_PER_TOPIC = 6
TABLE7_TITLE = "MFT evaluation: Table 7 layout (accuracy; ± std over versions)"
TABLE8_TITLE = "MFT evaluation: Table 8 layout (accuracy per MFT topic)"


def stage_times(runner: StageRunner) -> list[dict]:
    """Each stage's wall time as committed (a stage reused from an earlier run shows the
    time it took then)."""
    rows = []
    for name, rec in runner.done.items():
        seconds = rec.computed_seconds if rec.computed_seconds is not None else rec.seconds
        rows.append({"stage": name, "seconds": round(float(seconds), 1), "reused": rec.skipped})
    return rows


def suite_counts(suite: pa.Table) -> list[dict]:
    suites = suite.column("suite").to_pylist()
    return [{"suite": s, "cases": suites.count(s)} for s in sorted(set(suites))]


def example_cases(suite: pa.Table, per_topic: int = EXAMPLES_PER_TOPIC) -> list[dict]:
    """The first ``per_topic`` cases of every MFT topic, each original shown once."""
    examples = []
    seen: dict[str, int] = {}
    for row in suite.to_pylist():
        meta = json.loads(row["meta"])
        if row["suite"].endswith("-extended") and meta["paraphrase_of"] is None:
            continue  # originals appear once, under -original
        if seen.get(row["topic"], 0) < per_topic:
            seen[row["topic"]] = seen.get(row["topic"], 0) + 1
            examples.append(
                {
                    "MFT topic": row["topic"],
                    "label": row["expected_label"],
                    "text": row["text"],
                    "summary": meta["summary"],
                    "paraphrase of": meta["paraphrase_of"] or "",
                    "source topic": row["capability"],
                }
            )
    return examples


def mft_sections(
    runner: StageRunner, suite: pa.Table, *, table7: list[dict] | None = None, table8: list[dict] | None = None
) -> list[Section]:
    """The suite's section (counts, gates, stage times, parsing, examples), then Tables 7
    and 8 when the evaluate stage ran."""
    gates = runner.output("generate", "gates").to_pylist()
    parsing = runner.output("generate", "parsing").to_pylist()
    counts = suite_counts(suite)
    rejected = runner.output("generate", "rejected")
    kept = runner.output("generate").num_rows
    blocks = [
        "<h3>Suites</h3>" + table_html(counts),
        "<h3>Automatic checks: candidates kept and rejected per check (rejected.parquet)</h3>"
        + table_html(rejection_summary(rejected, kept))
        + "<h3>Rejected candidates (first 20)</h3>"
        + table_html(rejected.select(["suite", "check", "reason", "text"]).to_pylist()[:20]),
        "<h3>Kept and dropped at every gate</h3>"
        + "<p>seconds: wall time of the step in the run that computed its stage (LLM answers read back "
        + "from checkpoints cost nothing).</p>"
        + table_html(gates),
        "<h3>Wall time per stage</h3>" + table_html(stage_times(runner)),
        "<h3>LLM output parsing</h3>" + table_html([{**p, "examples": " | ".join(p["examples"])} for p in parsing]),
        "<h3>Example cases per MFT topic</h3>" + table_html(example_cases(suite)),
    ]
    sections = [
        Section(
            "MFTs by clustering and prompting (Li et al.)",
            blocks,
            f"{suite.num_rows} test cases in {len(counts)} suites.",
        )
    ]
    if table7 is not None:
        sections.append(Section(TABLE7_TITLE, [table_html(table7)]))
    if table8 is not None:
        sections.append(Section(TABLE8_TITLE, [table_html(table8)]))
    return sections
