"""Report sections of the mft job: gate counts, parse counts, example cases per topic,
and Tables 7/8 when models were evaluated."""

from __future__ import annotations

import json

import pyarrow as pa

from checkray.engine.report import Section, table_html
from checkray.engine.stages import StageRunner


def stage_times(runner: StageRunner) -> list[dict]:
    """Each stage's wall time as committed (a stage reused from an earlier run shows the
    time it took then)."""
    rows = []
    for name, rec in runner.done.items():
        seconds = rec.seconds
        if rec.skipped and runner.run.exists("stages", name, "_SUCCESS.json"):
            seconds = json.loads(runner.run.read_text(f"stages/{name}/_SUCCESS.json")).get("seconds", seconds)
        rows.append({"stage": name, "seconds": round(float(seconds), 1), "reused": rec.skipped})
    return rows


def mft_sections(runner: StageRunner, suite: pa.Table, evaluation: dict | None) -> list[Section]:
    gates = runner.output("generate", "gates").to_pylist()
    parsing = runner.output("generate", "parsing").to_pylist()
    suites = suite.column("suite").to_pylist()
    counts = [{"suite": s, "cases": suites.count(s)} for s in sorted(set(suites))]
    blocks = [
        "<h3>Suites</h3>" + table_html(counts),
        "<h3>Kept and dropped at every gate</h3>"
        + "<p>seconds: wall time of the step in the run that computed its stage (LLM answers read back "
        + "from checkpoints cost nothing).</p>"
        + table_html(gates),
        "<h3>Wall time per stage</h3>" + table_html(stage_times(runner)),
        "<h3>LLM output parsing</h3>" + table_html([{**p, "examples": " | ".join(p["examples"])} for p in parsing]),
    ]
    examples = []
    seen: dict[str, int] = {}
    for row in suite.to_pylist():
        meta = json.loads(row["meta"])
        if row["suite"].endswith("-extended") and meta["paraphrase_of"] is None:
            continue  # originals appear once, under -original
        if seen.get(row["topic"], 0) < 6:
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
    blocks.append("<h3>Example cases per MFT topic</h3>" + table_html(examples))
    sections = [
        Section(
            "MFTs by clustering and prompting (Li et al.)",
            blocks,
            f"{suite.num_rows} test cases in {len(counts)} suites.",
        )
    ]
    if evaluation:
        sections.append(
            Section(
                "MFT evaluation: Table 7 layout (accuracy; ± std over versions)", [table_html(evaluation["table7"])]
            )
        )
        sections.append(
            Section("MFT evaluation: Table 8 layout (accuracy per MFT topic)", [table_html(evaluation["table8"])])
        )
    return sections
