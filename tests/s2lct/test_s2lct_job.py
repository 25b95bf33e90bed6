"""The s2lct job end to end on 40 sentences (Ray Data parser and expansion actors, a
callable keyword model under test) and its one-line errors."""

from __future__ import annotations

import csv
import json
import sys

import pyarrow.parquet as pq
import pytest

from tests.fakes.cli import run_cli

HANDMADE = [
    ("This is a wonderful film.", "positive"),
    ("The acting is great.", "positive"),
    ("A beautiful and moving story.", "positive"),
    ("The cast is excellent and the script is smart.", "positive"),
    ("I loved the music in this movie.", "positive"),
    ("These are the best scenes of the year.", "positive"),
    ("A charming film.", "positive"),
    ("The director did a fine job with the actors.", "positive"),
    ("The film is about a family in a small town.", "positive"),
    ("That is a movie about the old city.", "positive"),
    ("This is a bad film.", "negative"),
    ("The plot is dull and boring.", "negative"),
    ("A terrible waste of time.", "negative"),
    ("That is an awful script.", "negative"),
    ("The story is weak and the actors are bad.", "negative"),
    ("I hated the ending.", "negative"),
    ("These are ugly sets.", "negative"),
    ("A boring film.", "negative"),
    ("The second half is in the small room.", "negative"),
    ("The movie has two parts.", "negative"),
]


@pytest.fixture(scope="module")
def corpus_csv(tmp_path_factory, rt_corpus):
    path = tmp_path_factory.mktemp("s2lct") / "corpus.csv"
    rows = HANDMADE + list(zip(rt_corpus.column("text").to_pylist()[:20], rt_corpus.column("label").to_pylist()[:20]))
    with path.open("w", newline="", encoding="utf-8") as fh:  # labels 0/1 as in SST: --labels names them
        writer = csv.writer(fh)
        writer.writerow(["text", "label"])
        writer.writerows((text, {"negative": 0, "positive": 1}[label]) for text, label in rows)
    return path


def write_config(path, **s2lct):
    section = {
        "max_seeds": 4,
        "k": 2,
        "reference": [],
        "grammar_min_count": 1,
        "pool_size": 1,
        "filler": {"vocabulary_min_count": 1, "keep": 1, "ngram_check": False},
        "explain": {"failures": 2},
        # The machinery on 40 sentences: the paper's wrappers (the fluent ones and their
        # checks are tested in test_fluent.py; 40 sentences hold few clear seeds).
        "wrappers": "paper",
        # The neutral proxy's machinery (off by default: a binary corpus labels every
        # sentence polar, so LC1/LC5 would get no seeds from these 40 sentences).
        "neutral_proxy": True,
        "ngram_reference": [],
        "polarity_corpora": [],
        **s2lct,
    }
    path.write_text(json.dumps({"runtime": {"object_store_mb": 256}, "s2lct": section}), encoding="utf-8")
    return path


@pytest.mark.trusts_code
@pytest.mark.timeout(300)
def test_cli_end_to_end_with_models(ray_session, corpus_csv, tmp_path, capsys):
    from checkray.engine.schema import validate_cases

    registry = tmp_path / "models.yaml"
    registry.write_text(
        json.dumps(
            {"models": [{"name": "keyword", "family": "callable", "path": "tests.fakes.models:keyword_sentiment"}]}
        ),
        encoding="utf-8",
    )
    out = tmp_path / "run"
    code = run_cli(
        "s2lct",
        "--corpus",
        str(corpus_csv),
        "--out",
        str(out),
        "--models",
        str(registry),
        "--labels",
        "0=negative,1=positive",
        "--config",
        str(write_config(tmp_path / "cfg.json")),
    )
    output = capsys.readouterr()
    assert code == 0, output
    assert output.out.strip() == f"wrote {out}/suite.parquet, grammar.parquet, rejected.parquet, report.html"
    # The corpus is binary: one warning line for each capability that searches for "neutral".
    warned = [line for line in output.err.splitlines() if "s2lct · warning ·" in line]
    assert [w.split("· warning · ")[1].split(":")[0] for w in warned] == ["LC1", "LC5", "LC7"], warned
    assert all("neutral proxy stands in" in w for w in warned)
    suite = validate_cases(pq.read_table(out / "suite.parquet"))
    rows = suite.to_pylist()
    meta = {r["case_id"]: json.loads(r["meta"]) for r in rows}
    seeds = [r for r in rows if meta[r["case_id"]]["kind"] == "seed"]
    expansions = [r for r in rows if meta[r["case_id"]]["kind"] == "expansion"]
    assert {r["method"] for r in rows} == {"s2lct"} and {r["test_type"] for r in rows} == {"MFT"}
    caps = {r["capability"].split(":")[0] for r in seeds}
    assert {"LC1", "LC2", "LC3", "LC4", "LC9", "LC10", "LC11"} <= caps
    assert {r["provenance"]["generator"] for r in seeds} == {"spacy-dep2const"}
    # The corpus is binary: LC1's neutral seeds come from the lexicon proxy, LC2's from labels.
    sources = {(r["capability"][:4], meta[r["case_id"]]["label_source"]) for r in seeds}
    assert ("LC1:", "lexicon-proxy") in sources and ("LC2:", "corpus") in sources
    assert ("LC1:", "corpus") not in sources
    lc4 = [r for r in seeds if r["capability"].startswith("LC4")]
    assert lc4 and all(r["expected_label"] == "positive" and (" not " in r["text"] or "n't" in r["text"]) for r in lc4)
    # Expansions: one more word than their seed, same label and capability, linked by id.
    assert expansions
    by_id = {r["case_id"]: r for r in rows}
    for e in expansions:
        m = meta[e["case_id"]]
        seed = by_id[m["seed_case_id"]]
        assert e["expected_label"] == seed["expected_label"] and e["capability"] == seed["capability"]
        assert len(e["text"].split()) == len(seed["text"].split()) + 1 or m["words"][0] in e["text"]
        assert e["provenance"]["generator"].startswith("spacy-dep2const+bigram-lm+vectors")
        assert e["provenance"]["template_id"] == m["reference_production"]
    rejected = pq.read_table(out / "rejected.parquet")
    assert {"check", "reason", "text"} <= set(rejected.column_names)
    assert all(r["checks"] is not None for r in rows)
    grammar = pq.read_table(out / "grammar.parquet")
    assert grammar.num_rows > 20 and grammar.column_names == ["lhs", "rhs", "count"]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Table 3" in report and "reference grammar" in report and "no torch" in report
    assert "labels the corpus does not have" in report and "label consistency" in report
    # Label consistency: sampled cases of every capability with seeds, judged by the keyword model.
    checked = pq.read_table(out / "consistency.parquet").to_pylist()
    assert {r["capability_id"] for r in checked} == {r["capability"].split(":")[0] for r in seeds}
    assert {r["judge"] for r in checked} == {"keyword"} and {r["kind"] for r in checked} == {"seed", "expansion"}
    assert all(r["agree_judge"] in (True, False) for r in checked)
    lc2 = [r for r in checked if r["capability_id"] == "LC2" and r["kind"] == "seed"]
    assert lc2 and all(json.loads(r["parts"])[0]["text"] == r["text"] for r in lc2)
    table3 = pq.read_table(out / "table3.parquet").to_pylist()
    assert {r["model"] for r in table3} == {"keyword"}
    lc2 = next(r for r in table3 if r["capability"].startswith("LC2"))
    assert lc2["seeds"] >= 2 and lc2["seed_fail_pct"] is not None
    assert (out / "benchmark" / "results.parquet").exists()
    assert not list(out.glob("*.tmp-*"))
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["job"] == "s2lct" and manifest["published"] == [
        "suite.parquet",
        "grammar.parquet",
        "rejected.parquet",
        "table3.parquet",  # no torch model among the models: no coverage.parquet
        "consistency.parquet",
        "consistency_summary.parquet",
        "validity_estimate.parquet",
        "report.html",
    ]
    assert [q["file"] for q in manifest["quality"]] == ["validity_estimate.parquet", "consistency_summary.parquet"]
    # The evaluation ran as stages: a rerun reuses every one of them.
    assert {"suite", "benchmark", "table3", "explain", "consistency"} <= set(manifest["stages"])


def test_bad_capability_file_is_one_line_error(tmp_path, monkeypatch, capsys, corpus_csv):
    from checkray.jobs.cli import main

    bad = tmp_path / "mine.yaml"
    bad.write_text("id: LC99\nname: mine\nsearch:\n  - {name: a, label: positive, max_token: 5}\n", encoding="utf-8")
    monkeypatch.setattr(
        sys,
        "argv",
        ["checkray", "s2lct", "--corpus", str(corpus_csv), "--out", str(tmp_path / "o"), "--capabilities", str(bad)],
    )
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}: search.0.max_token: unknown field"
    assert not (tmp_path / "o" / "suite.parquet").exists()


def test_numeric_labels_without_a_map_are_one_line_error(tmp_path, monkeypatch, capsys, corpus_csv):
    from checkray.jobs.cli import main

    out = tmp_path / "o"
    monkeypatch.setattr(sys, "argv", ["checkray", "s2lct", "--corpus", str(corpus_csv), "--out", str(out)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "error: s2lct: the corpus labels (0, 1) match none of the labels the capabilities' search rules need "
        "(negative, neutral, positive); map them to names, e.g. corpus.labels / --labels 0=negative,1=positive"
    )
    assert not (out / "suite.parquet").exists()


def test_unknown_config_field_is_one_line_error(tmp_path):
    from checkray.engine.errors import ConfigError
    from checkray.jobs.config import load_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text("s2lct:\n  filler:\n    candidate: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"s2lct\.filler\.candidate: unknown field"):
        load_config(cfg)
