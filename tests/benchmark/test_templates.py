"""CheckList-style template expansion (engine/templates/expand.py, engine/lang/lexicons.py) and the
``checkray templates`` job. Pure Python, no Ray: the whole file runs in a few seconds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from checkray.engine.errors import InputError
from checkray.engine.lang import lexicons
from checkray.engine.lang.lexicons import indefinite_article, with_article
from checkray.engine.schema import TEST_CASE_SCHEMA
from checkray.engine.templates.expand import (
    GENERATOR,
    METHOD,
    Slot,
    expand,
    parse_template,
    product_indices,
    read_spec,
    render,
)

SMALL_SPEC = Path(__file__).resolve().parents[1] / "data" / "templates_small.jsonl"


def write_spec(tmp_path: Path, *records, name: str = "spec.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def record(template, pool=None, label=1, capability="Vocabulary", **extra):
    return {"template": template, "pool": pool or {}, "label": label, "capability": capability, **extra}


def texts_of(expansion) -> list[str]:
    return expansion.cases.column("text").to_pylist()


# ------------------------------------------------------------------------- articles


@pytest.mark.parametrize(
    "phrase, article",
    [
        ("apple", "an"),
        ("banana", "a"),
        ("excellent flight", "an"),
        ("hour", "an"),
        ("honest answer", "an"),
        ("heir", "an"),
        ("hotel", "a"),
        ("university", "a"),
        ("unique", "a"),
        ("European", "a"),
        ("one-way ticket", "a"),
        ("useful", "a"),
        ("uninformed", "an"),
        ("umbrella", "an"),
        ("onerous", "an"),
        ("urban", "an"),
        ("FBI agent", "an"),
        ("MBA", "an"),
        ("UN report", "a"),
        ("X-ray", "an"),
        ("U-turn", "a"),
        ("NASA", "a"),
        ("8", "an"),
        ("11-year-old", "an"),
        ("18,000", "an"),
        ("100", "a"),
        ("1", "a"),
    ],
)
def test_indefinite_article_follows_sound(phrase, article):
    assert indefinite_article(phrase) == article


def test_article_slot_and_capital_article(tmp_path):
    spec = write_spec(tmp_path, record("{A:x} and {a:x}.", {"x": ["hour", "cat"]}))
    assert sorted(texts_of(expand(read_spec(spec), "s", nsamples=0))) == ["A cat and a cat.", "An hour and an hour."]
    assert with_article("owl", capital=True) == "An owl"


# ------------------------------------------------------------------ slots and parsing


def test_parse_template_slots_and_literal_braces():
    parts = parse_template("{{x}} {a:noun} {pair[1]} {who.name} {name2}")
    assert parts[0] == "{" and parts[1] == "x" and parts[2] == "}"
    slots = [p for p in parts if isinstance(p, Slot)]
    assert slots == [Slot("noun", "a"), Slot("pair", None, (1,)), Slot("who", None, ("name",)), Slot("name2")]


@pytest.mark.parametrize("template, message", [("a {x", "unbalanced"), ("{x y}", "bad slot"), ("b }", "unbalanced")])
def test_malformed_template_is_a_one_line_error(tmp_path, template, message):
    spec = write_spec(tmp_path, record(template, {"x": ["v"]}))
    with pytest.raises(InputError, match=message) as err:
        read_spec(spec)
    assert ":1:" in str(err.value) and "\n" not in str(err.value)


def test_same_slot_twice_gets_same_filler_numbered_slots_differ(tmp_path):
    spec = write_spec(
        tmp_path,
        record("{n} met {n}.", {"n": ["Ann", "Bob", "Cem"]}),
        record("{n1} met {n2}.", {"n": ["Ann", "Bob", "Cem"]}, label=0),
    )
    cases = expand(read_spec(spec), "s", nsamples=0).cases.to_pylist()
    same = [c for c in cases if c["expected_label"] == "positive"]
    numbered = [c for c in cases if c["expected_label"] == "negative"]
    assert len(same) == 3 and all(c["text"].split(" met ")[0] == c["text"].split(" met ")[1][:-1] for c in same)
    # 3 x 3 combinations minus the 3 where both names are equal, as CheckList's {x1}/{x2}
    assert len(numbered) == 6 and all(c["text"].split(" met ")[0] != c["text"].split(" met ")[1][:-1] for c in numbered)


def test_indexed_pool_values_and_bad_index(tmp_path):
    spec = write_spec(
        tmp_path, record("Did they {v[0]} it? It was {v[1]}.", {"v": [["buy", "bought"], ["sell", "sold"]]})
    )
    assert sorted(texts_of(expand(read_spec(spec), "s", nsamples=0))) == [
        "Did they buy it? It was bought.",
        "Did they sell it? It was sold.",
    ]
    bad = write_spec(tmp_path, record("{v[2]}", {"v": [["buy", "bought"]]}), name="bad.jsonl")
    with pytest.raises(InputError, match=r"\{v\[2\]\} does not fit"):
        read_spec(bad)
    unindexed = write_spec(tmp_path, record("{v}", {"v": [["buy", "bought"]]}), name="unindexed.jsonl")
    with pytest.raises(InputError, match="fills a list value"):
        read_spec(unindexed)


# ------------------------------------------------------------------------- sampling


def five_by_five_by_five(tmp_path) -> Path:
    pool = {"a": list("ABCDE"), "b": list("FGHIJ"), "c": list("KLMNO")}
    return write_spec(tmp_path, record("{a}{b}{c}", pool))


def test_nsamples_count_and_seeded_determinism(tmp_path):
    templates = read_spec(five_by_five_by_five(tmp_path))
    first = texts_of(expand(templates, "s", nsamples=10, seed=7))
    assert len(first) == len(set(first)) == 10
    assert texts_of(expand(read_spec(five_by_five_by_five(tmp_path)), "s", nsamples=10, seed=7)) == first
    assert texts_of(expand(templates, "s", nsamples=10, seed=8)) != first
    everything = texts_of(expand(templates, "s", nsamples=1000, seed=7))
    assert len(everything) == len(set(everything)) == 125  # without replacement: all, once each


def test_huge_product_is_sampled_without_materializing(tmp_path):
    pool = {f"s{i}": [f"w{i}_{j}" for j in range(100)] for i in range(10)}
    spec = write_spec(tmp_path, record(" ".join(f"{{s{i}}}" for i in range(10)), pool))
    (template,) = read_spec(spec)
    assert template.combinations == 100**10
    cases = expand([template], "s", nsamples=50, seed=1)
    assert cases.cases.num_rows == 50 and not cases.short
    with pytest.raises(InputError, match="exceed max_combinations"):
        expand([template], "s", nsamples=None)


def test_product_indices_are_distinct_and_cover_small_products():
    import random

    assert sorted(product_indices(30, 5, random.Random(0))) == list(range(30))  # lazy shuffle
    big = list(zip(range(200), product_indices(10**30, 200, random.Random(0))))
    assert len({i for _, i in big}) == 200 and all(0 <= i < 10**30 for _, i in big)


def test_duplicate_cases_are_removed(tmp_path):
    repeated = record("The {x} is here.", {"x": ["seat", "seat", "crew"]})
    spec = write_spec(tmp_path, repeated, repeated, record("The {y} is here.", {"y": ["crew", "meal"]}))
    result = expand(read_spec(spec), "s", nsamples=0)
    assert sorted(texts_of(result)) == ["The crew is here.", "The meal is here.", "The seat is here."]
    assert result.duplicates == 3  # the repeated record (2) and "crew" from the third one


def test_different_fillings_with_the_same_text_count_once(tmp_path):
    # ("ab", "c") and ("a", "bc") both render "abc": one case, and the template comes up short
    spec = write_spec(tmp_path, record("{x}{y}", {"x": ["ab", "a"], "y": ["c", "bc"]}))
    result = expand(read_spec(spec), "s", nsamples=4)
    assert sorted(texts_of(result)) == ["abbc", "abc", "ac"]
    assert result.short == [f"{spec}:1"]


# ------------------------------------------------------- the shared (TestAug) format


def test_small_spec_in_shared_format(tmp_path):
    templates = read_spec(SMALL_SPEC)
    assert len(templates) == 6
    result = expand(templates, "small", nsamples=5, seed=0)
    table = result.cases
    assert table.schema == TEST_CASE_SCHEMA
    rows = table.to_pylist()
    assert {r["method"] for r in rows} == {METHOD} and {r["test_type"] for r in rows} == {"MFT"}
    assert {r["provenance"]["generator"] for r in rows} == {GENERATOR}
    assert result.per_capability == {"Vocabulary": 12, "Negation": 5, "Temporal": 5, "SRL": 5}
    by_cap = {r["capability"]: r for r in rows}
    assert by_cap["Negation"]["expected_label"] == "neutral"  # label 2 -> neutral
    assert by_cap["SRL"]["expected_label"] == "negative"
    meta = json.loads(by_cap["Negation"]["meta"])
    assert meta["description"].startswith("A negated negative")
    assert meta["original_description"] == "Simple negations: not negative"
    assert set(meta["fillings"]) == {"air_noun", "be", "neg_adj"}
    assert meta["spec"] == "templates_small.jsonl:2"
    # every case is its template filled with its recorded fillings
    for r in rows:
        m = json.loads(r["meta"])
        tmpl = m["template"] if isinstance(m["template"], str) else m["template"][0]
        assert render(parse_template(tmpl), m["fillings"]) == r["text"]
    # stable ids: template ids and case ids do not depend on the run
    again = expand(read_spec(SMALL_SPEC), "small", nsamples=5, seed=0).cases
    assert again.column("case_id").to_pylist() == table.column("case_id").to_pylist()
    tids = [t.template_id for t in templates]
    assert len(set(tids)) == 6 and tids == [t.template_id for t in read_spec(SMALL_SPEC)]


def test_label_map_is_configurable_and_checked(tmp_path):
    spec = write_spec(tmp_path, record("fine", label=1), record("bad", label=0), record("meh", label="mixed"))
    labels = expand(read_spec(spec, {"0": "neg", "1": "pos"}), "s").cases.column("expected_label").to_pylist()
    assert labels == ["pos", "neg", "mixed"]  # string labels pass through
    with pytest.raises(InputError, match=r"spec.jsonl:2: label 0 is not in the label map"):
        read_spec(spec, {"1": "pos"})


def test_pair_templates_share_fillings(tmp_path):
    templates = [t for t in read_spec(SMALL_SPEC) if len(t.texts) == 2]
    rows = expand(templates, "pairs", nsamples=0).cases.to_pylist()
    assert len(rows) == 2 * 3 * 3 + 2
    for r in rows:
        assert r["text_pair"] is not None
        if r["expected_label"] == "duplicate":  # QQP default map for pairs: 1 -> duplicate
            name = r["text"].split()[1]
            assert r["text_pair"].startswith(f"Is {name} ") and r["text_pair"].endswith(r["text"].split()[-1])
        else:
            assert r["text"].replace("become less", "become more") == r["text_pair"]
    assert "Is Omar an honest actor?" in {r["text_pair"] for r in rows}


def test_yaml_spec(tmp_path):
    path = tmp_path / "caps.yaml"
    path.write_text(
        "templates:\n  - template: 'I {v} it.'\n    label: 0\n    capability: Vocabulary\n"
        "    pool: {v: [hate, dislike]}\n",
        encoding="utf-8",
    )
    result = expand(read_spec(path), "caps", nsamples=0)
    assert sorted(texts_of(result)) == ["I dislike it.", "I hate it."]
    assert set(result.cases.column("expected_label").to_pylist()) == {"negative"}


# -------------------------------------------------------------------- built-in lexicons


def test_builtin_lexicon_pools(tmp_path):
    spec = write_spec(
        tmp_path,
        record(
            "{first_name} flew to {city} with {w}.", {"first_name": "@first_name", "city": "@city", "w": "@names.women"}
        ),
    )
    rows = expand(read_spec(spec), "s", nsamples=20, seed=3).cases.to_pylist()
    first, cities, women = (set(lexicons.resolve_lexicon(n)) for n in ("@first_name", "@city", "@names.women"))
    assert len(women) > 5000 and "Ashley" in women
    for r in rows:
        fill = json.loads(r["meta"])["fillings"]
        assert fill["first_name"] in first and fill["city"] in cities and fill["w"] in women
    unknown = write_spec(tmp_path, record("{x}", {"x": "@no_such_list"}), name="unknown.jsonl")
    with pytest.raises(InputError, match="unknown built-in lexicon '@no_such_list'"):
        read_spec(unknown)


def test_builtin_object_lexicon_attribute(tmp_path):
    spec = write_spec(tmp_path, record("{p.name} said {p.pronoun} would come.", {"p": "@first_pronoun"}))
    for text in texts_of(expand(read_spec(spec), "s", nsamples=10)):
        assert text.split()[2] in ("he", "she")


def test_missing_checklist_package_is_a_clear_error(tmp_path, monkeypatch):
    def no_package(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(lexicons.resources, "files", no_package)
    lexicons.builtin_lexicons.cache_clear()
    try:
        spec = write_spec(tmp_path, record("{x}", {"x": "@city"}))
        with pytest.raises(InputError, match="checklist-pattern"):
            read_spec(spec)
    finally:
        monkeypatch.undo()
        lexicons.builtin_lexicons.cache_clear()


# --------------------------------------------------------------------------- bad input


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="spec file not found"):
        read_spec(tmp_path / "nope.jsonl")


def test_bad_json_line_names_the_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(record("ok")) + '\n\n{"template": "x",\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken.jsonl:3: bad JSON line"):
        read_spec(path)


def test_slot_missing_from_pool_is_named(tmp_path):
    spec = write_spec(tmp_path, record("The {noun} is {adj}.", {"noun": ["seat"]}))
    with pytest.raises(InputError, match=r"spec.jsonl:1: slot 'adj' is not in the pool \(pool has: noun\)"):
        read_spec(spec)


def test_empty_pool(tmp_path):
    spec = write_spec(tmp_path, record("The {noun}.", {"noun": []}))
    with pytest.raises(InputError, match="pool 'noun' is empty"):
        read_spec(spec)
    no_pool = write_spec(tmp_path, record("The {noun}."), name="nopool.jsonl")
    with pytest.raises(InputError, match="slot 'noun' is not in the pool \\(pool has: nothing\\)"):
        read_spec(no_pool)


def test_empty_spec(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match="spec has no templates"):
        read_spec(path)


def test_record_with_unknown_or_missing_field(tmp_path):
    spec = write_spec(tmp_path, record("x", labl=1))
    with pytest.raises(InputError, match="spec.jsonl:1: labl: unknown field"):
        read_spec(spec)
    missing = write_spec(tmp_path, {"template": "x", "label": 1}, name="missing.jsonl")
    with pytest.raises(InputError, match="capability: Field required"):
        read_spec(missing)


# ---------------------------------------------------------------------------- the CLI


def test_cli_end_to_end(tmp_path):
    from typer.testing import CliRunner

    from checkray.jobs.cli import app  # imports every job module, as the console entry point does

    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "templates",
            "--spec",
            str(SMALL_SPEC),
            "--out",
            str(out),
            "--nsamples",
            "3",
            "--seed",
            "5",
            "--suite",
            "mini",
        ],
    )
    assert result.exit_code == 0, result.output
    line = result.stdout.strip()
    assert "\n" not in line
    assert line.startswith("templates: 17 cases from 6 templates (Negation 3, SRL 3, Temporal 3, Vocabulary 8)")
    table = pq.read_table(out / "suite.parquet")
    assert table.num_rows == 17 and set(table.column("suite").to_pylist()) == {"mini"}
    assert {r["seed"] for r in table.column("provenance").to_pylist()} == {5}
    assert not list(out.glob("*.tmp-*"))  # atomic write left no temp file
    # config file section, with the YAML int keys of a label map
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"templates:\n  spec: {SMALL_SPEC}\n  nsamples: 2\n  label_map: {{0: bad, 1: good, 2: meh}}\n"
        f"out: {tmp_path / 'run2'}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["templates", "--config", str(cfg)])
    assert result.exit_code == 0, result.output
    labels = set(pq.read_table(tmp_path / "run2" / "suite.parquet").column("expected_label").to_pylist())
    assert labels == {"bad", "good", "meh"}
    suites = set(pq.read_table(tmp_path / "run2" / "suite.parquet").column("suite").to_pylist())
    assert suites == {"templates_small"}  # default suite name: the spec file stem


def test_run_templates_publishes_the_expand_stage_and_reruns_it_when_the_spec_changes(tmp_path):
    from checkray.jobs.config import load_config
    from checkray.jobs.templates.job import run_templates, summary_line

    spec = write_spec(tmp_path, record("I {v} it.", {"v": ["like", "love"]}), record("I {v} it.", {"v": ["like"]}))
    cfg = load_config(None, {"templates.spec": str(spec), "templates.nsamples": 5})
    out = str(tmp_path / "run")
    first = run_templates(cfg, out)
    assert first.table("suite.parquet").num_rows == 2 and not first.stages["expand"].skipped
    assert summary_line(first, 5).startswith("templates: 2 cases from 2 templates (Vocabulary 2); 1 duplicates dropped")
    assert run_templates(cfg, out).stages["expand"].skipped  # same spec and settings: nothing to redo
    write_spec(tmp_path, record("I {v} it.", {"v": ["like", "love", "hate"]}))
    again = run_templates(cfg, out)
    assert not again.stages["expand"].skipped and again.table("suite.parquet").num_rows == 3


def test_cli_bad_input_prints_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    from checkray.jobs.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(record("ok")) + "\nnot json\n", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["checkray", "templates", "--spec", str(bad), "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "bad.jsonl:2: bad JSON line" in err and "\n" not in err
    assert not (tmp_path / "o" / "suite.parquet").exists()
