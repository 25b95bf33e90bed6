"""``checkray testaug`` end to end with a rule-based stand-in LLM: generation, the validity
filter by the LLM labeler, expansion, Tables 3/4/5, failure rates, output files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import joblib
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import ConfigError, InputError
from checkray.engine.llm import make_generation
from checkray.engine.schema import validate_cases
from checkray.engine.testaug.config import ValidityConfig
from checkray.jobs.config import load_config
from checkray.jobs.testaug.job import run_testaug
from tests.fakes.llm import RuleBasedAugChat

SPEC = [
    {
        "template": "No one {pos_verb} {the} {noun}.",
        "label": 0,
        "capability": "Negation",
        "description": "A negative sentence with a negated positive verb.",
        "pool": {
            "pos_verb": ["enjoys", "likes", "loves", "admires"],
            "the": ["that", "the"],
            "noun": ["flight", "seat", "crew", "food"],
        },
    },
    {
        "template": "The {noun} was {pos_adj}.",
        "label": 1,
        "capability": "Vocabulary",
        "description": "A positive sentence with a positive adjective.",
        "pool": {"noun": ["flight", "seat", "crew", "food"], "pos_adj": ["great", "good", "excellent", "fun"]},
    },
]


def _zoo_model(tmp_path) -> ModelSpec:
    """A TF-IDF + LR model inside a zoo-like directory (split next to the model file)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    pos = ["a great movie", "good fun", "I loved it", "excellent acting", "the crew was great", "what a fun flight"]
    neg = ["a terrible movie", "boring", "I hated it", "awful acting", "the seat was bad", "what a dull flight"]
    texts, labels = pos + neg, ["positive"] * 6 + ["negative"] * 6
    zoo = tmp_path / "zoo"
    (zoo / "stages" / "split").mkdir(parents=True)
    (zoo / "stages" / "model-tiny_lr").mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "id": [str(i) for i in range(12)],
                "text": texts,
                "label": labels,
                "held_out": [i % 6 == 5 for i in range(12)],
            }
        ),
        zoo / "stages/split/data.parquet",
    )
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("clf", LogisticRegression())]).fit(texts, labels)
    joblib.dump(pipe, zoo / "stages/model-tiny_lr/model.joblib")
    return ModelSpec(
        name="tiny_lr", family="sklearn", path=str(zoo / "stages/model-tiny_lr/model.joblib"), accuracy=0.5
    )


@pytest.mark.trusts_code
@pytest.mark.timeout(300)
def test_testaug_end_to_end(ray_session, tmp_path):
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(r) + "\n" for r in SPEC), encoding="utf-8")
    cfg = load_config(
        None,
        {
            "testaug.spec": str(spec),
            "testaug.prompts_per_description": 3,
            "testaug.first_sample": 6,
            "testaug.baseline_nsamples": 20,
            "testaug.patch.seeds": [11, 14],
            "testaug.expansion_per_template": 3,
        },
    )
    specs = [
        _zoo_model(tmp_path),
        ModelSpec(name="keywords", family="callable", path="tests.fakes.models:keyword_sentiment"),
    ]
    chat = RuleBasedAugChat()
    result = run_testaug(cfg, str(tmp_path / "out"), specs, chat=chat)
    run = result.run
    suite = validate_cases(result.table("suite.parquet"))
    rows = suite.to_pylist()
    assert {r["suite"] for r in rows} == {"testaug-gpt", "testaug-expansion"}
    assert all(r["method"] == "testaug" for r in rows)
    gpt = [r for r in rows if r["suite"] == "testaug-gpt"]
    assert {(r["capability"], r["expected_label"]) for r in gpt} == {
        ("Negation", "negative"),
        ("Vocabulary", "positive"),
    }
    assert all(json.loads(r["meta"])["description"] == r["topic"] for r in rows)
    assert not any("really" in r["text"] for r in gpt)  # the labeler's invalid cases were filtered
    decisions = pq.read_table(run.path("stages/validity/decisions.parquet")).to_pylist()
    assert all(d["annotated_by"] == "llm" and d["filter"] and d["valid_share"] < 0.9 for d in decisions)
    parsing = pq.read_table(run.path("stages/parse/parsing.parquet")).to_pylist()
    assert sum(p["unparsed"] for p in parsing) > 0 and sum(p["answers"] for p in parsing) == 6
    expansion = [r for r in rows if r["suite"] == "testaug-expansion"]
    assert expansion and all("pilot" in r["text"] or "Honestly" in r["text"] for r in expansion)
    table4 = pq.read_table(run.path("stages/diversity/table4.parquet")).to_pylist()[0]
    assert table4["new templates"] > 0 and table4["seed templates"] == 2
    table5 = {r["suite"]: r for r in pq.read_table(run.path("stages/diversity/table5.parquet")).to_pylist()}
    assert set(table5) == {"T_TestAug", "T_GPT", "T_CheckList"}
    assert 0 < table5["T_TestAug"]["self_bleu4"] < 1
    summary = pq.read_table(run.path("benchmark/summary.parquet")).to_pylist()
    assert {r["model"] for r in summary} == {"tiny_lr", "keywords"}
    assert pq.read_table(run.path("stages/benchmark/data.parquet")).to_pylist() == summary  # the report's table
    assert {r["topic"] for r in summary} == {d["description"] for d in SPEC}
    patch = pq.read_table(run.path("stages/patch/data.parquet")).to_pylist()
    assert {r["column"] for r in patch} == {
        "Unpatched",
        "T_CheckList",
        "T_TestAug",
        "T_TestAug\\T_GPT",
        "T_TestAug\\T_Expansion",
    }
    assert {r["seed"] for r in patch} == {11, 14} and {r["model"] for r in patch} == {"tiny_lr"}
    skipped = pq.read_table(run.path("stages/patch/skipped.parquet")).to_pylist()
    assert [s["model"] for s in skipped] == ["keywords"]
    html = (tmp_path / "out" / "report.html").read_text()
    for needle in (
        "Table 3 shape",
        "Table 4 shape",
        "Table 5 shape",
        "LLM labeler (rule-based-testaug-llm)",
        "failure rates per description",
    ):
        assert needle in html
    sheet = [json.loads(x) for x in result.text("annotate.jsonl").splitlines()]
    assert len(sheet) == 12 and all(s["validity"] is None and s["llm_validity"] in (0, 1) for s in sheet)
    assert list(sheet[0]) == ["description", "capability", "label", "text", "text_pair", "validity", "llm_validity"]
    decided = result.table("validity_decisions.parquet").to_pylist()
    assert [d["key"] for d in decided] == ["d01", "d02"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [q["file"] for q in manifest["quality"]] == [
        "validity_estimate.parquet",
        "rejected.parquet",
        "validity_decisions.parquet",
    ]
    rejected = result.table("rejected.parquet").to_pylist()
    assert {r["check"] for r in rejected} >= {"duplicate", "validity"} and all(r["reason"] for r in rejected)
    assert all(r["checks"] and "polarity" in r["checks"] for r in rows)
    calls = chat.calls
    again = run_testaug(cfg, str(tmp_path / "out"), specs, chat=chat)  # rerun: every stage cached, no LLM call
    assert chat.calls == calls and all(rec.skipped for rec in again.stages.values())
    assert again.table("suite.parquet").equals(result.table("suite.parquet"))


def test_missing_spec_is_one_line(tmp_path):
    with pytest.raises(InputError, match="no spec"):
        run_testaug(load_config(None, {}), str(tmp_path), chat=RuleBasedAugChat())
    with pytest.raises(InputError, match="spec file not found"):
        run_testaug(
            load_config(None, {"testaug.spec": str(tmp_path / "x.jsonl")}), str(tmp_path), chat=RuleBasedAugChat()
        )


def test_cli_without_spec_is_one_line(tmp_path, capsys):
    from checkray.jobs.cli import main

    def run(*args):
        with pytest.raises(SystemExit) as exc:
            main(["testaug", *args])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
        return err

    assert "no spec" in run("--out", str(tmp_path / "o"))
    assert "spec file not found" in run("--spec", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "o"))
    assert "no output directory" in run("--spec", str(tmp_path / "absent.jsonl"))


def _small_run(tmp_path, **extra) -> dict:
    """Config overrides of a small run on SPEC (written to tmp_path/spec.jsonl)."""
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(r) + "\n" for r in SPEC), encoding="utf-8")
    return {
        "testaug.spec": str(spec),
        "testaug.prompts_per_description": 2,
        "testaug.first_sample": 4,
        "testaug.baseline_nsamples": 5,
        "testaug.diversity_per_description": 10,
        **extra,
    }


@pytest.mark.timeout(300)
@pytest.mark.slow  # trains a validity classifier on MiniLM embeddings
def test_people_annotations_and_classifier_filter(tmp_path):
    """People's labels decide phase 1 where they cover the first sample; the classifier
    filters the rest of a description under threshold; no LLM labeler call."""
    from checkray.actors.testaug.validity import train_validity

    over = _small_run(tmp_path, **{"testaug.llm_labeler": False})
    first = run_testaug(load_config(None, over), str(tmp_path / "a"), chat=RuleBasedAugChat()).run
    parsed = [r for r in pq.read_table(first.path("stages/parse/data.parquet")).to_pylist() if r["key"] == "d01"]
    people = [{"text": r["text"], "validity": int("pilot" not in r["text"])} for r in parsed[:4]]
    assert 0 < sum(p["validity"] for p in people) < 4  # under 90 % valid: d01 must be filtered
    (tmp_path / "people.jsonl").write_text("".join(json.dumps(p) + "\n" for p in people), encoding="utf-8")
    clf_rows = [{"text": r["text"], "validity": int("really" not in r["text"])} for r in parsed]
    train_validity(clf_rows, ValidityConfig(backend="embedding_lr", seed=0)).save(str(tmp_path / "clf"))
    chat = RuleBasedAugChat()
    run = run_testaug(
        load_config(
            None,
            {**over, "testaug.annotations": str(tmp_path / "people.jsonl"), "testaug.validity": str(tmp_path / "clf")},
        ),
        str(tmp_path / "b"),
        chat=chat,
    ).run
    decisions = {d["key"]: d for d in pq.read_table(run.path("stages/validity/decisions.parquet")).to_pylist()}
    assert decisions["d01"]["annotated_by"] == "people" and decisions["d01"]["filter"]
    assert decisions["d01"]["valid_share"] == sum(p["validity"] for p in people) / 4
    assert decisions["d02"]["annotated_by"] == "classifier"
    assert decisions["d01"]["classifier_accuracy"] is not None
    rows = pq.read_table(run.path("stages/validity/data.parquet")).to_pylist()
    by = {r["text"]: r for r in rows if r["key"] == "d01"}
    assert all(by[p["text"]]["decided_by"] == "people" and by[p["text"]]["kept"] == bool(p["validity"]) for p in people)
    assert {r["decided_by"] for r in rows if r["key"] == "d01"} == {"people", "classifier"}
    assert all(r["valid_llm"] is None for r in rows)
    assert chat.calls == 4  # generation only (2 rounds x 2 descriptions): no labeler call


@pytest.mark.timeout(300)
@pytest.mark.slow  # trains a validity classifier on MiniLM embeddings
def test_a_classifier_judges_only_the_descriptions_it_was_trained_for(tmp_path):
    """Validity is relative to a description: a classifier trained on annotations of d01's
    description filters d01 and leaves d02 to the LLM labeler; on a spec of none of its
    descriptions it judges nothing and says so."""
    from checkray.actors.testaug.validity import train_validity

    over = _small_run(tmp_path)
    first = run_testaug(load_config(None, over), str(tmp_path / "a"), chat=RuleBasedAugChat()).run
    parsed = [r for r in pq.read_table(first.path("stages/parse/data.parquet")).to_pylist() if r["key"] == "d01"]
    rows = [
        {"text": r["text"], "validity": int("really" not in r["text"]), "description": SPEC[0]["description"]}
        for r in parsed
    ]
    assert 0 < sum(r["validity"] for r in rows) < len(rows)
    train_validity(rows, ValidityConfig(backend="embedding_lr", seed=0)).save(str(tmp_path / "clf"))
    meta = json.loads((tmp_path / "clf" / "metadata.json").read_text())
    assert meta["descriptions"] == [SPEC[0]["description"]]

    run = run_testaug(
        load_config(None, {**over, "testaug.validity": str(tmp_path / "clf"), "testaug.threshold": 1.0}),
        str(tmp_path / "b"),
        chat=RuleBasedAugChat(),
    ).run
    decisions = {d["key"]: d for d in pq.read_table(run.path("stages/validity/decisions.parquet")).to_pylist()}
    assert decisions["d01"]["classifier"] and not decisions["d02"]["classifier"]
    cases = pq.read_table(run.path("stages/validity/data.parquet")).to_pylist()
    d01 = [c for c in cases if c["key"] == "d01"]
    d02 = [c for c in cases if c["key"] == "d02"]
    assert all(c["valid_p"] is not None and c["valid_clf"] in (0, 1) for c in d01)
    assert all(c["valid_p"] is None and c["valid_clf"] is None for c in d02)
    if decisions["d01"]["filter"]:
        assert {c["decided_by"] for c in d01 if not c["first_sample"]} <= {"classifier"}
    assert "classifier" not in {c["decided_by"] for c in d02}
    assert decisions["d02"]["filter"] and {c["decided_by"] for c in d02} == {"llm labeler"}

    other = [{**r, "description": "A neutral sentence about the weather."} for r in rows]
    train_validity(other, ValidityConfig(backend="embedding_lr", seed=0)).save(str(tmp_path / "clf_other"))
    run = run_testaug(
        load_config(None, {**over, "testaug.validity": str(tmp_path / "clf_other"), "testaug.llm_labeler": False}),
        str(tmp_path / "c"),
        chat=RuleBasedAugChat(),
    ).run
    cases = pq.read_table(run.path("stages/validity/data.parquet")).to_pylist()
    assert all(c["valid_p"] is None for c in cases) and "classifier" not in {c["decided_by"] for c in cases}


@pytest.mark.trusts_code
def test_patched_failure_rates_score_a_binary_model_on_cases_it_can_learn(tmp_path):
    """By default a model's common test set holds the cases whose label it can produce: a
    binary model is not scored on neutral cases (``patch.test_cases: all`` scores them)."""
    from checkray.actors.testaug.patch import patched_failure_rates
    from checkray.engine.benchmark.expectations import ExpectationSettings
    from checkray.engine.schema import make_cases
    from checkray.engine.testaug.config import PatchConfig
    from checkray.jobs.zoo.job import embed_stage_name

    spec = _zoo_model(tmp_path)
    polar = [("a great flight", "positive"), ("a terrible seat", "negative"), ("good fun", "positive")] * 4
    neutral = [(f"the flight leaves at {h}", "neutral") for h in range(12)]
    rows = [
        {
            "suite": "s",
            "method": "testaug",
            "capability": "c",
            "topic": "t",
            "text": f"{t} {i}",
            "expected_label": label,
            "test_type": "MFT",
        }
        for i, (t, label) in enumerate(polar + neutral)
    ]
    suites = {"T_A": make_cases(rows[::2]), "T_B": make_cases(rows[1::2])}
    settings = ExpectationSettings()
    by_mode = {}
    for mode in ("trainable", "all"):
        patch = PatchConfig(seeds=[11], test_fraction=0.5, test_cases=mode)
        out, skipped = patched_failure_rates(suites, [spec], patch, settings, embeddings_stage=embed_stage_name)
        assert not skipped and {r["column"] for r in out} == {"Unpatched", "T_A", "T_B"}
        by_mode[mode] = out
    n_all = by_mode["all"][0]["test_cases"]
    n_trainable = by_mode["trainable"][0]["test_cases"]
    assert n_all == 12  # half of the 24 merged cases
    assert 0 < n_trainable < n_all  # the neutral ones are left out
    assert all(r["train_cases"] <= 6 for r in by_mode["trainable"])  # polar cases only, never neutral


@pytest.mark.timeout(300)
def test_the_labeler_sees_seed_cases_as_examples_when_asked(tmp_path):
    inner, asked = RuleBasedAugChat(), []

    def chat(messages_list, params):
        asked.extend(m[-1]["content"] for m in messages_list)
        return inner(messages_list, params)

    chat.name = "rule-based"
    over = _small_run(
        tmp_path, **{"testaug.prompts_per_description": 1, "testaug.first_sample": 3, "testaug.labeler_examples": 2}
    )
    run_testaug(load_config(None, over), str(tmp_path / "out"), chat=chat)
    labeler = [a for a in asked if a.startswith("Test description:")]
    assert labeler and all("for comparison:\n- " in a for a in labeler)
    negation = [a for a in labeler if "negated positive verb" in a]
    assert negation and all(a.count("\n- No one ") == 2 for a in negation)  # two of d01's seed cases


class _StrictLabeler(RuleBasedAugChat):
    """The rule-based generator with a strict judge: only the 'pilot' rewrites are valid."""

    def _one(self, messages):
        user = messages[-1]["content"]
        if user.startswith("Test description:"):
            self.calls += 1
            case = re.search(r"Test case: (.*)", user).group(1)
            return make_generation("Valid." if "pilot" in case else "Invalid", "stop")
        return super()._one(messages)


@pytest.mark.timeout(300)
def test_descriptions_short_of_min_kept_are_topped_up_and_resume_without_asking_again(tmp_path):
    """A strict judge keeps about a third of the cases: ``testaug.min_kept`` asks each short
    description more prompts (round by round, within its budget) until it has enough kept
    cases; the new cases flow into expansion and the suite; a rerun asks the LLM nothing."""
    over = _small_run(tmp_path, **{"testaug.prompts_per_description": 1, "testaug.first_sample": 3})
    plain = run_testaug(load_config(None, over), str(tmp_path / "plain"), chat=_StrictLabeler()).run
    before = {d["key"]: d for d in pq.read_table(plain.path("stages/topup/decisions.parquet")).to_pylist()}
    assert all(d["filter"] and d["topup_prompts"] == 0 and d["kept"] < 8 for d in before.values())

    over = {**over, "testaug.min_kept": 8, "testaug.max_prompts_per_description": 6}
    chat = _StrictLabeler()
    run = run_testaug(load_config(None, over), str(tmp_path / "topped"), chat=chat).run
    decisions = {d["key"]: d for d in pq.read_table(run.path("stages/topup/decisions.parquet")).to_pylist()}
    for key, d in decisions.items():
        assert d["topup_prompts"] > 0 and d["kept"] > before[key]["kept"]
        assert d["kept"] >= 8 or d["topup_prompts"] == 5  # the target, or the budget spent
    cases = pq.read_table(run.path("stages/topup/data.parquet")).to_pylist()
    new = [c for c in cases if c["prompt"] >= 1]
    assert new and all(not c["first_sample"] and c["decided_by"] == "llm labeler" for c in new)
    assert all(("pilot" in c["text"]) == c["kept"] for c in new)
    assert len({(c["key"], c["text"]) for c in cases}) == len(cases)  # no case twice
    suite = pq.read_table(run.path("suite.parquet")).to_pylist()
    assert {c["text"] for c in new if c["kept"]} <= {r["text"] for r in suite}
    assert "top-up prompts" in Path(run.path("report.html")).read_text(encoding="utf-8")

    again = _StrictLabeler()
    run_testaug(
        load_config(None, {**over, "testaug.diversity_per_description": 9}), str(tmp_path / "topped"), chat=again
    )
    assert again.calls == 0  # every prompt and verdict came from the checkpoints


def test_a_top_up_budget_below_the_first_round_is_refused():
    with pytest.raises(ConfigError, match="max_prompts_per_description .2. is below prompts_per_description .4."):
        load_config(None, {"testaug.prompts_per_description": 4, "testaug.max_prompts_per_description": 2})
