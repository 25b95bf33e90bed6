"""The compare report escapes every text (capabilities, cases, model names, gate rules)."""

from __future__ import annotations

import pandas as pd
import pytest

from checkray.engine.compare.compare import compare_paired, flips
from checkray.engine.compare.gate import Check
from checkray.jobs.compare.config import CompareConfig
from checkray.jobs.compare.report import compare_sections
from tests.core.test_report_escaping import P, _page, assert_escaped


@pytest.fixture(autouse=True)
def _no_plotlyjs(monkeypatch):
    from checkray.engine import report

    monkeypatch.setattr(report, "plotly_js", lambda: "/* plotly.js */")


def compare_page() -> str:
    """The compare report of two sides whose every text is the payload (also opened in a
    browser by tests/core/test_report_site.py)."""
    n = 6
    paired = pd.DataFrame(
        {
            "suite": [P] * n,
            "capability": [P, P, "Negation", "Negation", P, "Negation"],
            "topic": [P] * n,
            "test_type": ["MFT"] * n,
            "case_id": [f"c{i}" for i in range(n)],
            "testcase": [f"c{i}" for i in range(n)],
            "text": [P] * n,
            "expected": [P] * n,
            "base_pass": [True, False, True, False, True, True],
            "cand_pass": [False, True, False, True, True, False],
            "base_pred": [P] * n,
            "cand_pred": [P] * n,
        }
    )
    table = compare_paired(paired, samples=50)
    side = {
        "model": P,
        "run": P,
        "identity": {"family": P, "path": P, "digest": P, "revision": P},
        "checkray": P,
        "environment": {"packages": {"torch": P}},
    }
    info = {
        "baseline": side,
        "candidate": side,
        "suites": {P: {"cases": 6, "digest": P}},
        "paired": n,
        "unpaired_baseline": 0,
        "unpaired_candidate": 0,
        "package_differences": {P: [P, P]},
        "settings_differences": {},
    }
    checks = [Check(P, P, P, False, 6, 0.5, 0.9, reasons=[P], examples=[{"text": P}])]
    return _page(compare_sections(table, flips(paired), info, CompareConfig(), checks))


def test_compare_report_escapes_everything():
    page = compare_page()
    assert_escaped(page)
    assert "Flipped cases" in page and "Gate" in page
