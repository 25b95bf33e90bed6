"""Aggregating per-case benchmark results (pure: Arrow tables in, Arrow tables out).

``summarize`` gives one row per model x suite x capability x topic x test type (a
CheckList *test*): ``n`` evaluated cases, ``failures``, ``failure_rate`` (pooled over
every version), ``errors`` (cases that could not be evaluated) and the first ``error``
message; and CheckList's own measure, by test case (an MFT example, or an INV/DIR
original with its perturbations): ``testcases`` evaluated, ``testcase_failures`` (a
test case fails when any of its judged rows fails) and ``testcase_failure_rate``. When a suite has several
versions (``version`` column: a ``version`` key in the case's meta JSON, else
``provenance.seed``) it adds the mean and the sample standard deviation (ddof=1) of the
per-version failure rates, as "mean ± std over seeds" is usually reported.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

KEYS = ["model", "suite", "capability", "topic", "test_type"]
_NULL = "\x00null"  # pandas groups and merges poorly on null keys: stand-in, restored at the end

SUMMARY_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("suite", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("test_type", pa.string()),
        pa.field("n", pa.int64()),
        pa.field("failures", pa.int64()),
        pa.field("failure_rate", pa.float64()),
        pa.field("errors", pa.int64()),
        pa.field("testcases", pa.int64()),
        pa.field("testcase_failures", pa.int64()),
        pa.field("testcase_failure_rate", pa.float64()),
        pa.field("n_versions", pa.int64()),
        pa.field("failure_rate_mean", pa.float64()),
        pa.field("failure_rate_std", pa.float64()),
        pa.field("error", pa.string()),
    ]
)


def _frame(results: pa.Table) -> pd.DataFrame:
    cols = ["model", "suite", "capability", "topic", "test_type", "version", "testcase", "pass", "error"]
    df = results.select([c for c in cols if c in results.column_names]).to_pandas()
    if "testcase" not in df:
        df["testcase"] = results.column("case_id").to_pandas()
    for key in KEYS + ["version"]:
        df[key] = df[key].astype(object).where(df[key].notna(), _NULL)
    df["evaluated"] = df["pass"].notna()
    df["failed"] = df["pass"].eq(False)
    df["errored"] = df["error"].notna()
    return df


def _first_error(errors: pd.Series) -> str | None:
    found = errors.dropna()
    return found.iloc[0] if len(found) else None


def summarize(results: pa.Table) -> pa.Table:
    """Failure rates per model x suite x capability x topic, with version mean/std."""
    if results.num_rows == 0:
        return SUMMARY_SCHEMA.empty_table()
    df = _frame(results)
    grouped = df.groupby(KEYS, sort=True)
    out = grouped.agg(
        n=("evaluated", "sum"), failures=("failed", "sum"), errors=("errored", "sum"), error=("error", _first_error)
    ).reset_index()
    out["failure_rate"] = np.where(out["n"] > 0, out["failures"] / out["n"].where(out["n"] > 0, 1), np.nan)

    by_case = df.groupby(KEYS + ["testcase"], sort=False).agg(evaluated=("evaluated", "any"), failed=("failed", "any"))
    per_test = by_case.groupby(KEYS).agg(testcases=("evaluated", "sum"), testcase_failures=("failed", "sum"))
    out = out.merge(per_test.reset_index(), on=KEYS, how="left")
    out["testcase_failure_rate"] = np.where(
        out["testcases"] > 0, out["testcase_failures"] / out["testcases"].where(out["testcases"] > 0, 1), np.nan
    )

    versioned = df[df["version"].ne(_NULL) & df["evaluated"]]
    per_version = (
        versioned.groupby(KEYS + ["version"]).agg(n=("evaluated", "sum"), failures=("failed", "sum")).reset_index()
    )
    per_version["rate"] = per_version["failures"] / per_version["n"]
    spread = (
        per_version.groupby(KEYS)["rate"]
        .agg(n_versions="count", failure_rate_mean="mean", failure_rate_std=lambda r: r.std(ddof=1))
        .reset_index()
    )
    out = out.merge(spread, on=KEYS, how="left")
    out["n_versions"] = out["n_versions"].fillna(0).astype(np.int64)
    single = out["n_versions"] < 2  # one version has no spread: leave mean/std empty
    out.loc[single, ["failure_rate_mean", "failure_rate_std"]] = np.nan
    out[KEYS] = out[KEYS].replace({_NULL: None})
    out = out.astype(object).where(out.notna(), None)
    return pa.Table.from_pandas(out[SUMMARY_SCHEMA.names], schema=SUMMARY_SCHEMA, preserve_index=False)


def _rate(failures: pd.Series, n: pd.Series) -> pd.Series:
    return (failures / n.where(n > 0)).astype(float)


def model_leaderboard(summary: pa.Table, accuracy: Mapping[str, float | None] | None = None) -> pa.Table:
    """One row per model, from ``summarize``'s table (so it scales: no per-case rows),
    sorted by overall failure rate; models that produced nothing come last."""
    df = summary.to_pandas()
    df["failed_suite"] = (df["n"] == 0) & df["error"].notna()
    out = (
        df.groupby("model", sort=False)
        .agg(
            n=("n", "sum"),
            failures=("failures", "sum"),
            testcases=("testcases", "sum"),
            testcase_failures=("testcase_failures", "sum"),
            errors=("errors", "sum"),
            suites=("suite", "nunique"),
            error=("error", _first_error),
        )
        .reset_index()
    )
    failed_suites = df[df["failed_suite"]].groupby("model")["suite"].nunique()
    out["failed_suites"] = out["model"].map(failed_suites).fillna(0).astype(np.int64)
    out["failure_rate"] = _rate(out["failures"], out["n"])
    out["testcase_failure_rate"] = _rate(out["testcase_failures"], out["testcases"])
    out["accuracy"] = out["model"].map(dict(accuracy or {})).astype(float)
    out = out.sort_values(["failure_rate", "model"], na_position="last", kind="stable")
    out["rank"] = np.arange(1, len(out) + 1)
    cols = [
        "rank",
        "model",
        "failure_rate",
        "testcase_failure_rate",
        "accuracy",
        "n",
        "failures",
        "errors",
        "suites",
        "failed_suites",
        "error",
    ]
    out = out[cols].astype(object)
    return pa.Table.from_pandas(out.where(out.notna(), None), preserve_index=False)


def capability_matrix(summary: pa.Table) -> pd.DataFrame:
    """Model x capability failure rates (pooled over suites and topics); NaN: nothing evaluated."""
    df = summary.select(["model", "capability", "n", "failures"]).to_pandas()
    agg = df.groupby(["model", "capability"], sort=True).agg(n=("n", "sum"), failures=("failures", "sum"))
    agg["rate"] = _rate(agg["failures"], agg["n"])
    return agg["rate"].unstack("capability")


def per_test_table(summary: pa.Table, models: list[str]) -> pd.DataFrame:
    """CheckList's summary: one row per test (suite, capability, test name, type) with its
    test-case count and every model's test-case failure rate side by side."""
    keys = ["suite", "capability", "topic", "test_type"]
    df = summary.to_pandas()
    for key in keys:
        df[key] = df[key].astype(object).where(df[key].notna(), "")
    wide = df.pivot_table(index=keys, columns="model", values="testcase_failure_rate", aggfunc="first", dropna=False)
    counts = df.groupby(keys)["testcases"].max()
    wide = wide.reindex(columns=[m for m in models if m in wide.columns])
    wide.insert(0, "testcases", counts.reindex(wide.index))
    return wide.reset_index()
