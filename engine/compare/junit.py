"""A gate's verdicts for CI: JUnit XML (one test case per checked rule) and a Markdown
summary for a CI job's page (GitHub's ``$GITHUB_STEP_SUMMARY``, a GitLab MR note).

The XML is what Jenkins, GitLab (``artifacts:reports:junit``) and GitHub test-report
actions read: ``<testsuites>`` with one ``<testsuite>`` per model, one ``<testcase>`` per
rule (``classname`` the model, ``name`` the rule), a ``<failure>`` with the measured value
in its message and failing examples in its text, and the figures in ``<system-out>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from checkray.engine.compare.gate import Check


def _example_line(e: Mapping) -> str:
    where = " / ".join(str(e[k]) for k in ("capability", "topic", "test_type") if e.get(k))
    return f"  [{where}] {e.get('text')!r}: expected {e.get('expected')}, predicted {e.get('predicted')}"


def junit_xml(checks: Sequence[Check], suite_name: str = "checkray.gate", properties: Mapping | None = None) -> str:
    """JUnit XML of the checks (UTF-8 text with an XML declaration)."""
    failures = sum(not c.passed for c in checks)
    root = ET.Element("testsuites", name=suite_name, tests=str(len(checks)), failures=str(failures), errors="0")
    by_model: dict[str, list[Check]] = {}
    for c in checks:
        by_model.setdefault(c.model, []).append(c)
    for model, mine in by_model.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{suite_name}.{model}",
            tests=str(len(mine)),
            failures=str(sum(not c.passed for c in mine)),
            errors="0",
            skipped="0",
            time="0",
        )
        if properties:
            props = ET.SubElement(suite, "properties")
            for key, value in properties.items():
                ET.SubElement(props, "property", name=str(key), value=str(value))
        for c in mine:
            case = ET.SubElement(suite, "testcase", classname=f"{suite_name}.{model}", name=c.name, time="0")
            if not c.passed:
                fail = ET.SubElement(case, "failure", message="; ".join(c.reasons) or c.measured(), type="GateFailure")
                lines = [c.measured()]
                if c.examples:
                    lines.append("failing examples:")
                    lines += [_example_line(e) for e in c.examples]
                fail.text = "\n".join(lines)
            out = ET.SubElement(case, "system-out")
            out.text = c.measured()
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _md(text: object) -> str:
    """A Markdown table cell: pipes, newlines and HTML-significant characters neutralised."""
    s = "" if text is None else str(text)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def summary_markdown(checks: Sequence[Check], title: str, context: Sequence[str] = ()) -> str:
    """A Markdown page: verdict, a table of every check, failing examples of failed ones."""
    failed = [c for c in checks if not c.passed]
    verdict = (
        f"**FAILED**: {len(failed)} of {len(checks)} checks" if failed else f"**PASSED**: all {len(checks)} checks"
    )
    lines = [f"## {_md(title)}", "", verdict, ""]
    lines += [f"- {_md(line)}" for line in context]
    if context:
        lines.append("")
    lines += ["| status | model | rule | pass rate | n | threshold | vs baseline |", "|---|---|---|---|---|---|---|"]
    for c in checks:
        limits = []
        if c.min_pass_rate is not None:
            limits.append(f">= {c.min_pass_rate:g}")
        if c.max_drop is not None:
            limits.append(f"drop <= {c.max_drop:g}" + (f" (p < {c.alpha:g})" if c.alpha else ""))
        rate = "n/a" if c.pass_rate is None else f"{c.pass_rate:.3f}"
        base = ""
        if c.drop is not None:
            base = f"{c.baseline_pass_rate:.3f} → {c.candidate_paired_rate:.3f} (p={c.p_value:.3g})"
        status = "✅" if c.passed else "❌"
        lines.append(
            f"| {status} | {_md(c.model)} | {_md(c.name)} | {rate} | {c.n} | {_md(', '.join(limits))} | {_md(base)} |"
        )
    for c in failed:
        lines += ["", f"### ❌ {_md(c.model)}: {_md(c.name)}", "", _md("; ".join(c.reasons))]
        if c.examples:
            lines += ["", "| capability | test | type | text | expected | predicted |", "|---|---|---|---|---|---|"]
            for e in c.examples:
                cells = [e.get(k) for k in ("capability", "topic", "test_type", "text", "expected", "predicted")]
                lines.append("| " + " | ".join(_md(v) for v in cells) + " |")
    return "\n".join(lines) + "\n"
