"""Report sections of the testaug job: generation and validity per description, Table 4
(effort saved), Table 5 (diversity), failure rates per description, Table 3 (patched
failure rate)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.case_checks import rejection_summary
from checkray.engine.report import Section, table_html
from checkray.engine.stages import StageRunner
from checkray.engine.testaug.config import TestAugConfig
from checkray.engine.testaug.prompt import Description
from checkray.engine.testaug.tables import testaug_table3


def _short(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def validity_summary(decisions: list[dict], llm_name: str) -> str:
    by = {d["annotated_by"] for d in decisions}
    parts = []
    if "llm" in by:
        parts.append(
            f"No people's annotations cover these descriptions: the LLM labeler ({llm_name}) annotated "
            "the phase-1 samples, and filtered the descriptions under threshold when no classifier was given. "
            "Its verdicts are a stand-in for people's and are only as good as the model."
        )
    if "people" in by:
        parts.append("People's annotations decided phase 1 where they covered the first sample.")
    if "classifier" in by:
        parts.append("The validity classifier's predictions stood in for annotations of the first sample.")
    trained = [d for d in decisions if d.get("classifier")]
    if trained and len(trained) < len(decisions):
        parts.append(
            f"The validity classifier was trained for {len(trained)} of the {len(decisions)} descriptions and "
            "judged only those (column classifier); the others were filtered by the LLM labeler, if enabled."
        )
    if "none" in by:
        parts.append("Some descriptions had no annotation at all and were kept unfiltered.")
    return " ".join(parts)


def description_rows(descs: Sequence[Description], parsing: dict[str, dict], decisions: list[dict]) -> list[dict]:
    """One row per description: what generation and parsing gave, what the filter decided."""
    rows = []
    for d, dec in zip(descs, decisions):
        p = parsing.get(d.key, {})
        rows.append(
            {
                "key": d.key,
                "capability": d.capability,
                "description": _short(d.description),
                "label": d.label,
                "answers": p.get("answers"),
                "truncated": p.get("truncated"),
                "parsed": p.get("parsed"),
                "unparsed": p.get("unparsed"),
                "duplicates": p.get("duplicates"),
                "rejected by checks": p.get("rejected"),
                "first sample": dec["first_sample"],
                "annotated by": dec["annotated_by"],
                "valid share": dec["valid_share"],
                "threshold": dec["threshold"],
                "filter": "yes" if dec["filter"] else "no",
                "top-up prompts": dec.get("topup_prompts", 0),
                "top-up cases": dec.get("topup_cases", 0),
                "kept": dec["kept"],
                "dropped": dec["dropped"],
                "classifier": "yes" if dec.get("classifier") else "no",
                "classifier acc. (people)": dec["classifier_accuracy"],
                "classifier vs LLM": dec["classifier_vs_llm"],
            }
        )
    return rows


def generation_section(runner: StageRunner, descs: Sequence[Description], llm_name: str) -> Section:
    """§4.1–4.2: per description, the LLM labeler's answers, unparsed output, the first cases."""
    parsing = {r["key"]: r for r in runner.output("parse", "parsing").to_pylist()}
    decisions = runner.output("topup", "decisions").to_pylist()
    labeler = runner.output("topup", "labeler").to_pylist()
    examples = [{"key": p["key"], "unparsed examples": p["examples"]} for p in parsing.values() if p["examples"]]
    shown = [
        {
            "key": r["key"],
            "kept": r["kept"],
            "by": r["decided_by"],
            "text": r["text"],
            "text_pair": r["text_pair"] or "",
        }
        for r in runner.output("topup").to_pylist()[:40]
    ]
    suite = runner.output("suites", "suite")
    rejected = runner.output("suites", "rejected")
    blocks = [
        "<h3>Automatic checks: candidates kept and rejected per check (rejected.parquet)</h3>"
        + table_html(rejection_summary(rejected, suite.num_rows))
        + "<h3>Rejected candidates (first 20)</h3>"
        + table_html(
            [
                {k: r[k] for k in ("suite", "check", "reason", "text")}
                for r in rejected.select(["suite", "check", "reason", "text"]).to_pylist()[:20]
            ]
        ),
        "<h3>Per description</h3>" + table_html(description_rows(descs, parsing, decisions)),
        f"<p>LLM labeler answers: {html.escape(json.dumps(labeler[0] if labeler else {}, ensure_ascii=False))}</p>",
        "<h3>Unparsed LLM output (examples)</h3>" + table_html(examples),
        "<h3>Generated cases and validity decisions (first 40)</h3>" + table_html(shown),
    ]
    gen = sum(d["generated"] for d in decisions)
    kept = sum(d["kept"] for d in decisions)
    return Section(
        "TestAug: generation and validity filter (§4.1–4.2)",
        blocks,
        f"{len(descs)} descriptions, {gen} generated cases after de-duplication, {kept} kept. "
        + validity_summary(decisions, llm_name),
    )


def expansion_section(runner: StageRunner) -> Section:
    """Table 4 (effort saved) and the new templates of §4.3."""
    table4 = runner.output("diversity", "table4").to_pylist()
    templates = runner.output("expand", "templates").to_pylist()
    tpl_rows = [
        {
            "key": r["key"],
            "new template": " / ".join(json.loads(r["template"])),
            "from": r["source"],
            "cases": r["cases"],
        }
        for r in templates[:30]
    ]
    return Section(
        "TestAug: effort saved (Table 4 shape) and template expansion (§4.3)",
        [table_html(table4), "<h3>New templates (first 30)</h3>" + table_html(tpl_rows)],
        f"{len(templates)} generated cases became templates.",
    )


def diversity_section(runner: StageRunner, t: TestAugConfig) -> Section:
    """Table 5: Self-BLEU-4 and unique dependency paths per suite."""
    return Section(
        "TestAug: linguistic diversity (Table 5 shape)",
        [table_html(runner.output("diversity", "table5").to_pylist())],
        f"Self-BLEU-4 (lower: more diverse) and unique dependency paths (higher: more diverse) on up "
        f"to {t.diversity_per_description} unique sentences per description of each suite.",
    )


def patch_section(runner: StageRunner, t: TestAugConfig, specs: Sequence[ModelSpec]) -> Section:
    """Table 3: the patched failure rate per model and suite, and the models not patched."""
    patch = runner.output("patch").to_pylist()
    skipped = runner.output("patch", "skipped").to_pylist()
    blocks = [table_html(testaug_table3(patch, specs))] if patch else ["<p>No trainable model.</p>"]
    if skipped:
        blocks.append("<h3>Not patched</h3>" + table_html(skipped))
    tested = (
        ", scored on the cases whose label the model can produce"
        if t.patch.test_cases == "trainable"
        else ", every case scored (neutral ones by the band rule)"
    )
    return Section(
        "TestAug: patched failure rate (Table 3 shape, %, mean ± std over seeds)",
        blocks,
        f"Common test set: {t.patch.test_fraction:.0%} of the merged suites per seed {t.patch.seeds}{tested}"
        "; each model refitted on its zoo training data plus a suite's remainder. "
        "Lower: the suite found more of the model's bugs.",
    )


def testaug_sections(
    runner: StageRunner,
    t: TestAugConfig,
    descs: Sequence[Description],
    specs: Sequence[ModelSpec] | None,
    llm_name: str = "llm",
) -> list[Section]:
    """The report: generation and validity, Table 4, Table 5, failure rates (with models)
    and Table 3 (with trainable models), from the stages' outputs."""
    sections = [generation_section(runner, descs, llm_name), expansion_section(runner), diversity_section(runner, t)]
    if "benchmark" in runner.done:
        summary = runner.output("benchmark")
        if summary.num_rows:
            sections.append(failure_section(summary))
    if specs and t.patch.enabled and "patch" in runner.done:
        sections.append(patch_section(runner, t, specs))
    return sections


def failure_section(summary: pa.Table) -> Section:
    """Failure rate per description (rows) and model (columns), per suite."""
    data = [r for r in summary.to_pylist() if r["n"]]
    models = sorted({r["model"] for r in data})
    table: dict[tuple, dict] = {}
    for r in data:
        row = table.setdefault(
            (r["suite"], r["capability"], r["topic"]),
            {"suite": r["suite"], "capability": r["capability"], "description": _short(r["topic"] or ""), "n": r["n"]},
        )
        row[r["model"]] = r["failure_rate"]
    caps: dict[tuple, dict] = {}
    for r in data:
        c = caps.setdefault((r["suite"], r["capability"]), {"suite": r["suite"], "capability": r["capability"]})
        n, f = c.get(("n", r["model"]), 0) + r["n"], c.get(("f", r["model"]), 0) + r["failures"]
        c[("n", r["model"])], c[("f", r["model"])] = n, f
    cap_rows = [
        {
            "suite": c["suite"],
            "capability": c["capability"],
            **{m: c[("f", m)] / c[("n", m)] for m in models if c.get(("n", m))},
        }
        for c in caps.values()
    ]
    return Section(
        "TestAug: failure rates per description and capability",
        [
            "<h3>Per capability</h3>" + table_html(cap_rows, ["suite", "capability", *models]),
            "<h3>Per description</h3>"
            + table_html(list(table.values()), ["suite", "capability", "description", "n", *models]),
        ],
        f"{len(models)} models; failure rate = share of failed MFT cases (benchmark runner).",
    )
