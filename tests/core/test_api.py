"""The notebook API (``import checkray``): jobs as functions over pandas objects, the same
runs as the CLI's, and one import name (no top-level ``engine``/``jobs`` modules)."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError


def test_import_checkray_is_light_and_claims_no_top_level_names():
    code = (
        "import sys, checkray\n"
        "assert checkray.__version__\n"
        "assert callable(checkray.benchmark) and callable(checkray.topics)\n"
        "heavy = {'ray', 'torch', 'transformers'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "tops = {m.split('.')[0] for m in sys.modules} & {'engine', 'actors', 'jobs'}\n"
        "assert not tops, tops\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_no_module_imports_the_old_top_level_names():
    """Every first-party import goes through ``checkray.``: a module imported as ``engine.x``
    as well would exist twice (two classes, two registries)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"^\s*(from|import) (engine|actors|jobs)\b", re.M)
    offenders = [
        str(p.relative_to(root))
        for d in ("engine", "actors", "jobs", "tests", "bench")
        for p in (root / d).rglob("*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def _suite() -> pd.DataFrame:
    rows = [
        ("a good movie", "positive", "Vocabulary"),
        ("an awful plot", "negative", "Vocabulary"),
        ("the movie was not good", "negative", "Negation"),
        ("the plot is not bad", "positive", "Negation"),
        ("I did not love it", "negative", "Negation"),
    ]
    return pd.DataFrame(
        [
            {"suite": "basics", "method": "hand", "capability": c, "text": t, "expected_label": y, "test_type": "MFT"}
            for t, y, c in rows
        ]
    )


MODELS = [
    ModelSpec(name="keyword", family="callable", path="tests.fakes.models:keyword_sentiment"),
    ModelSpec(name="naive", family="callable", path="tests.fakes.models:naive_sentiment"),
]


@pytest.mark.trusts_code
@pytest.mark.usefixtures("ray_session")
def test_benchmark_from_dataframes(tmp_path):
    import checkray

    res = checkray.benchmark(MODELS, [_suite()], out=tmp_path / "bench")
    assert isinstance(res, checkray.Results) and res.job == "benchmark"
    assert set(res.summary["model"]) == {"keyword", "naive"}
    assert len(res.results) == 2 * 5
    # The naive model ignores negation: it fails the three negated cases, the keyword model none.
    naive = res.failures("naive", "Negation")
    assert sorted(naive["text"]) == ["I did not love it", "the movie was not good", "the plot is not bad"]
    assert res.failures("keyword").empty
    board = res.leaderboard.set_index("model")["failure_rate"]
    assert board["keyword"] == 0.0 and board["naive"] == pytest.approx(3 / 5)
    assert "<html" in res.to_html().lower() and res.report.endswith("leaderboard.html")
    with pytest.raises(KeyError, match="no model 'nobody'"):
        res.failures("nobody")
    # The run is an ordinary run directory: the CLI's reader and open_run see the same tables.
    again = checkray.open_run(res.path)
    assert isinstance(again, checkray.Results)
    pd.testing.assert_frame_equal(again.summary, res.summary)


@pytest.mark.usefixtures("ray_session")
def test_topics_from_a_dataframe_and_the_cli_in_process(tmp_path, rt_corpus):
    import checkray

    df = rt_corpus.slice(0, 300).to_pandas()[["text", "label"]]
    t = checkray.topics(df, clusters=3, settings={"topics.representatives.top_k": 2}, out=tmp_path / "t")
    assert set(t.tables) == {"clusters", "assignments", "representatives", "corpus"}
    assert len(t.table("assignments")) == 300 and t.table("clusters")["cluster"].nunique() == 3
    # The same DataFrame again: the same corpus file (named by content), every stage reused.
    again = checkray.topics(df, clusters=3, settings={"topics.representatives.top_k": 2}, out=tmp_path / "t")
    pd.testing.assert_frame_equal(again.table("assignments"), t.table("assignments"))
    assert checkray.cli("topics", "--corpus", "no/such/file.csv", "--out", str(tmp_path / "x")) == 2


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_zoo_models_feed_the_benchmark_from_any_working_directory(tmp_path, rt_corpus, monkeypatch):
    """A zoo's registry keeps model paths relative to its directory: the specs handed on
    must resolve there, not against the notebook's working directory."""
    import checkray

    df = rt_corpus.to_pandas()[["text", "label"]].sample(400, random_state=0)
    models = checkray.zoo(df, only=["tfidf_lr"], out=tmp_path / "zoo")
    assert models.names == ["tfidf_lr"] and isinstance(checkray.open_run(models.path), checkray.Models)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = checkray.benchmark(models, _suite(), out=tmp_path / "bench")
    assert res.summary["n"].sum() == 5 and res.results["error"].isna().all()


def test_bad_inputs_are_one_line_errors(tmp_path):
    import checkray

    with pytest.raises(InputError, match="non-empty list of ModelSpec"):
        checkray.benchmark([], [_suite()], out=tmp_path / "b")
    with pytest.raises(InputError, match="suite file not found"):
        checkray.benchmark(MODELS, ["nowhere.parquet"], out=tmp_path / "b")
    with pytest.raises(InputError, match="not a finished checkray run"):
        checkray.open_run(tmp_path)
