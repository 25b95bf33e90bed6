"""Small synthetic suites shared by the benchmark tests."""

from __future__ import annotations

from checkray.engine.schema import make_cases


def typo_suite(n: int, name: str, tolerance: float | None = None):
    """``n`` MFT cases and their INV typo twins; typo_suite(m) holds typo_suite(n)'s cases for m > n."""
    words = ["good", "bad", "great", "awful", "fun", "boring"]
    rows = []
    for i in range(n):
        word = words[i % len(words)]
        label = "positive" if word in {"good", "great", "fun"} else "negative"
        rows.append({"case_id": f"c{i}", "text": f"a {word} film number {i}", "expected_label": label})
        twin = {"case_id": f"t{i}", "text": f"a {word} flim number {i}", "test_type": "INV", "perturbs": f"c{i}"}
        rows.append(twin if tolerance is None else {**twin, "tolerance": tolerance})
    base = {"suite": name, "method": "hand", "capability": "Vocabulary"}
    return make_cases([{**base, **r} for r in rows])
