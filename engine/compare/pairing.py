"""Pairing two models' verdicts case by case (pure: Arrow in, pandas out).

Two benchmark results are comparable only on the same cases: every suite name both sides
ran must hold the same case ids with the same content digests
(``checkray.engine.benchmark.provenance``). A suite edited, extended or renamed between the runs
is refused with one line. Cases one side did not judge (a model sampled with
``max_cases``, a model error, a label-map mismatch) are not paired; the comparison
counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from checkray.engine.errors import InputError

KEYS = ["suite", "capability", "topic", "test_type"]
NEEDED = [
    "model",
    "suite",
    "case_id",
    "case_digest",
    "testcase",
    "capability",
    "topic",
    "test_type",
    "text",
    "expected_label",
    "expected_labels",
    "predicted",
    "pass",
]


@dataclass
class Pairing:
    """Cases judged by both models (one row each) and what could not be paired."""

    paired: pd.DataFrame  # KEYS, case_id, testcase, text, expected, base_pass, cand_pass, base_pred, cand_pred
    unpaired_baseline: int  # judged by the baseline only
    unpaired_candidate: int  # judged by the candidate only
    suites: dict[str, dict]  # suite -> {cases, digest} as both runs recorded it


def _expected(row_label, row_labels) -> str | None:
    if row_labels is not None and len(row_labels):
        return "|".join(row_labels)
    return row_label


def _frame(results: pa.Table, side: str) -> pd.DataFrame:
    missing = [c for c in NEEDED if c not in results.column_names]
    if "case_digest" in missing:
        raise InputError(
            f"the {side}'s results have no case content digests (made by an older checkray); rerun its benchmark"
        )
    if missing:
        raise InputError(f"the {side}'s results lack column(s) {missing}: not benchmark results")
    df = results.select(NEEDED).to_pandas()
    for key in KEYS:
        df[key] = df[key].astype(object).where(df[key].notna(), None)
    return df


def _suite_line(suite: str, only_base: list[str], only_cand: list[str], changed: list[str]) -> str:
    parts = []
    if changed:
        parts.append(f"{len(changed)} case(s) with different content (e.g. '{sorted(changed)[0]}')")
    if only_base:
        parts.append(f"{len(only_base)} case(s) only in the baseline (e.g. '{sorted(only_base)[0]}')")
    if only_cand:
        parts.append(f"{len(only_cand)} case(s) only in the candidate (e.g. '{sorted(only_cand)[0]}')")
    return (
        f"suite '{suite}' changed between the runs: {', '.join(parts)}; "
        "compare runs of the same suite files (case ids and content digests must match)"
    )


def check_same_suites(
    base: pd.DataFrame,
    cand: pd.DataFrame,
    base_suites: Mapping[str, Mapping] | None = None,
    cand_suites: Mapping[str, Mapping] | None = None,
) -> dict[str, dict]:
    """Raise a one-line ``InputError`` unless both sides ran the same suites, case for case.

    ``*_suites`` are the suite digests each run recorded (``provenance.json``): when both
    record the same digest for a suite, cases missing from one side's results were not
    sampled or not judged, not removed; without them the case id sets must be equal."""
    names_b, names_c = set(base["suite"]), set(cand["suite"])
    if names_b != names_c:
        only_b, only_c = sorted(names_b - names_c), sorted(names_c - names_b)
        what = []
        if only_b:
            what.append(f"only the baseline ran suite(s) {', '.join(only_b)}")
        if only_c:
            what.append(f"only the candidate ran suite(s) {', '.join(only_c)}")
        raise InputError(f"the runs did not test the same suites: {'; '.join(what)}")
    suites = {}
    for suite in sorted(names_b):
        db = dict(zip(base.loc[base["suite"] == suite, "case_id"], base.loc[base["suite"] == suite, "case_digest"]))
        dc = dict(zip(cand.loc[cand["suite"] == suite, "case_id"], cand.loc[cand["suite"] == suite, "case_digest"]))
        changed = [cid for cid in db.keys() & dc.keys() if db[cid] != dc[cid]]
        only_b, only_c = sorted(db.keys() - dc.keys()), sorted(dc.keys() - db.keys())
        recorded_b = (base_suites or {}).get(suite)
        recorded_c = (cand_suites or {}).get(suite)
        same_record = bool(recorded_b and recorded_c and recorded_b.get("digest") == recorded_c.get("digest"))
        if recorded_b and recorded_c and not same_record:
            raise InputError(
                f"suite '{suite}' changed between the runs: recorded digests {recorded_b.get('digest')} "
                f"(baseline, {recorded_b.get('cases')} cases) and {recorded_c.get('digest')} "
                f"(candidate, {recorded_c.get('cases')} cases) differ; compare runs of the same suite files"
            )
        if changed or ((only_b or only_c) and not same_record):
            raise InputError(_suite_line(suite, only_b, only_c, changed))
        suites[suite] = dict(recorded_b or {"cases": len(db)})
    return suites


def pair_results(
    base: pa.Table,
    cand: pa.Table,
    base_suites: Mapping[str, Mapping] | None = None,
    cand_suites: Mapping[str, Mapping] | None = None,
) -> Pairing:
    """Pair one baseline model's and one candidate model's results case by case."""
    b, c = _frame(base, "baseline"), _frame(cand, "candidate")
    if b.empty or c.empty:
        raise InputError(f"the {'baseline' if b.empty else 'candidate'} has no results to compare")
    suites = check_same_suites(b, c, base_suites, cand_suites)
    b_judged = b[b["pass"].notna()]
    c_judged = c[c["pass"].notna()]
    on = ["suite", "case_id"]
    merged = b_judged.merge(
        c_judged[on + ["pass", "predicted"]], on=on, how="inner", suffixes=("_base", "_cand"), validate="one_to_one"
    )
    paired = pd.DataFrame(
        {
            **{k: merged[k] for k in KEYS},
            "case_id": merged["case_id"],
            "testcase": merged["testcase"].where(merged["testcase"].notna(), merged["case_id"]),
            "text": merged["text"],
            "expected": [_expected(a, s) for a, s in zip(merged["expected_label"], merged["expected_labels"])],
            "base_pass": merged["pass_base"].astype(bool),
            "cand_pass": merged["pass_cand"].astype(bool),
            "base_pred": merged["predicted_base"],
            "cand_pred": merged["predicted_cand"],
        }
    ).reset_index(drop=True)
    return Pairing(paired, len(b_judged) - len(paired), len(c_judged) - len(paired), suites)
