"""``checkray run``: which methods serve a corpus (and why the rest not), the merge of the
methods' suites, one-line errors before Ray starts, and one run over a user's registry of
four model kinds (a Hugging Face classifier directory, a scikit-learn pipeline file, a
model behind an OpenAI-compatible endpoint, a Python callable) with the zoo as baseline."""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from checkray.engine.errors import InputError
from checkray.engine.schema import make_cases
from checkray.engine.suite_merge import merge_suites
from tests.fakes.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = str(ROOT / "configs" / "suites" / "sentiment_templates.jsonl")


def _mft(suite: str, method: str, rows: list[tuple[str, str]]) -> pa.Table:
    return make_cases(
        {"suite": suite, "method": method, "capability": "Vocabulary", "text": t, "expected_label": label}
        for t, label in rows
    )


def test_merge_drops_cross_method_duplicates_and_keeps_conflicts_and_originals():
    templates = _mft("checklist", "template", [("A good film.", "positive"), ("A bad film.", "negative")])
    generated = _mft(
        "mft-x",
        "mft",
        [
            ("a GOOD film", "positive"),  # the template's case again (case and punctuation aside): dropped
            ("A bad film!", "positive"),  # the template's text with another label: a conflict, kept
            ("An awful plot.", "negative"),
        ],
    )
    original = {"suite": "inv", "method": "testaug", "capability": "Robustness", "text": "A good film."}
    original["expected_label"] = "positive"
    inv = make_cases([{**original, "case_id": "o1"}])
    inv = pa.concat_tables(
        [inv, make_cases([{**original, "case_id": "p1", "text": "A good flim.", "test_type": "INV", "perturbs": "o1"}])]
    )
    merged, counts = merge_suites([templates, generated, inv])
    texts = merged.column("text").to_pylist()
    assert texts == ["A good film.", "A bad film.", "A bad film!", "An awful plot.", "A good film.", "A good flim."]
    assert [(c.method, c.given, c.kept, c.duplicates, c.conflicts) for c in counts] == [
        ("template", 2, 2, 0, 0),
        ("mft", 3, 2, 1, 1),
        ("testaug", 2, 2, 0, 0),  # the INV original stays with its perturbation
    ]
    assert merged.column("method").to_pylist() == ["template"] * 2 + ["mft"] * 2 + ["testaug"] * 2
    first = templates.column("case_id")[0].as_py()
    clash = make_cases([{"case_id": first, "suite": "s", "method": "mft", "capability": "c", "text": "Other."}])
    with pytest.raises(InputError, match=f"case_id {first} appears in two suites"):
        merge_suites([templates, clash])


def _cfg(tmp_path: Path, **overrides):
    from checkray.jobs.config import load_config

    return load_config(None, {"templates.spec": TEMPLATES, "testaug.spec": TEMPLATES, **overrides})


def test_plan_says_why_a_method_cannot_serve_the_corpus(tmp_path):
    from checkray.jobs.run.plan import plan_methods

    sentiment = {c.method: c for c in plan_methods(_cfg(tmp_path), {"negative", "positive"})}
    assert all(c.runs for c in sentiment.values()), [c.line() for c in sentiment.values()]

    topics = {c.method: c for c in plan_methods(_cfg(tmp_path), {"sports", "politics"})}
    assert not topics["s2lct"].runs and "labels are politics, sports" in topics["s2lct"].why
    assert topics["mft"].runs and topics["templates"].runs

    pairs = {c.method: c for c in plan_methods(_cfg(tmp_path, **{"run.task": "pair"}), {"duplicate"})}
    assert [m for m, c in pairs.items() if c.runs] == ["templates"]
    assert "testaug.task is sentiment" in pairs["testaug"].why and "single texts" in pairs["mft"].why

    unlabelled = {c.method: c for c in plan_methods(_cfg(tmp_path, **{"run.methods": ["mft", "costello"]}), set())}
    assert not unlabelled["mft"].runs and "labelled corpus" in unlabelled["mft"].why
    assert unlabelled["templates"].why.startswith("not asked for")
    assert unlabelled["costello"].runs


def test_bad_registry_or_names_stop_before_ray(tmp_path, capsys):
    registry = tmp_path / "models.yaml"
    registry.write_text(
        yaml.safe_dump({"models": [{"name": "m", "family": "callable", "path": "x:y", "labels": ["a", "b"]}]})
    )
    for args, message in [
        (["--models", str(tmp_path / "missing.yaml")], "missing.yaml"),
        (["--models", str(registry)], "model 'm' answers a, b but the corpus's labels are negative, positive"),
        (["--methods", "templates,nope"], "nope"),
    ]:
        code = run_cli("run", "--corpus", "builtin:rotten_tomatoes", *args, "--out", str(tmp_path / "run"))
        err = capsys.readouterr().err
        assert code == 2 and message in err, err
        assert not (tmp_path / "run").exists()


def test_encoders_inside_models_join_costello_once():
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.engine.costello.config import EmbedderSpec
    from checkray.jobs.costello.inputs import encoders_of_models

    listed = [EmbedderSpec(name="minilm_mean", model="builtin:minilm", pooling="mean")]
    models = [
        ModelSpec(name="bert", family="hf", path="/models/bert"),
        ModelSpec(name="head", family="st_head", path="h.joblib", options={"encoder": "builtin:minilm"}),
        ModelSpec(name="head2", family="st_head", path="h2.joblib", options={"encoder": "builtin:mpnet"}),
        ModelSpec(name="head3", family="st_head", path="h3.joblib", options={"encoder": "builtin:mpnet"}),
        ModelSpec(name="lexicon", family="vader"),
    ]
    found = encoders_of_models(models, listed)
    assert [(e.name, e.model, e.pooling) for e in found] == [
        ("bert", "/models/bert", "mean"),
        ("head2", "builtin:mpnet", "model"),  # minilm is listed already; mpnet once
    ]


def test_merged_suite_validity_counts_each_row_by_its_method():
    from checkray.engine.suite_validity import generator_of, load_estimates
    from checkray.jobs.run.job import validity_in_words

    assert generator_of("suite", {"method": "template"}) == "templates"
    assert generator_of("suite", {"method": "s2lct", "meta": json.dumps({"kind": "expansion"})}) == "s2lct_expansion"
    assert generator_of("suite", {"method": "checklist"}) is None
    # question pairs are not the sentiment sentences people judged: their own population
    assert generator_of("suite", {"method": "template", "text_pair": "Is he a nurse?"}) == "templates_pair"
    assert generator_of("testaug", {"text_pair": "Is he a nurse?"}) == "testaug_pair"
    estimates = load_estimates()
    assert "templates" in estimates and "templates_pair" not in estimates
    rows = [{"cases": 30, "all_three": 1.0}, {"cases": 10, "all_three": 0.6}, {"cases": 60, "all_three": None}]
    assert (
        validity_in_words(rows)
        == "about 90% valid on all three counts, over the 40 of 100 cases whose generator people judged"
    )


def _user_models(tmp_path: Path, url: str) -> Path:
    """A registry of four kinds, as a user would write it."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from tests.fakes.tiny_hf import build_tiny_bert

    words = ["a good film", "a great movie", "a bad film", "an awful movie", "not good", "not bad"]
    bert = build_tiny_bert(tmp_path / "bert", words, id2label={0: "negative", 1: "positive"})
    pipe = make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(words, [1, 1, 0, 0, 0, 1])
    joblib.dump(pipe, tmp_path / "pipe.joblib")
    models = [
        {"name": "my_bert", "family": "hf", "path": str(bert), "options": {"max_length": 32}},
        {"name": "my_pipeline", "family": "sklearn", "path": str(tmp_path / "pipe.joblib")},
        {
            "name": "my_endpoint",
            "family": "llm_zero_shot",
            "options": {"llm": {"backend": "http", "base_url": url, "model": "m"}},
        },
        {"name": "my_function", "family": "callable", "path": "tests.fakes.models:keyword_sentiment"},
    ]
    registry = tmp_path / "models.yaml"
    registry.write_text(yaml.safe_dump({"models": models}))
    return registry


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_run_benchmarks_four_kinds_of_user_models_against_the_zoo(ray_session, tmp_path, capsys):
    from tests.fakes.llm_server import SentimentChatServer

    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "corpus": {"sample": 400},
                "templates": {"spec": TEMPLATES, "suite": "checklist-sentiment", "nsamples": 3},
                "zoo": {"models": [{"name": "tfidf_lr", "kind": "tfidf", "head": "logreg"}]},
                "runtime": {"num_cpus": 2},
            }
        )
    )
    out = tmp_path / "run"
    with SentimentChatServer() as server:
        registry = _user_models(tmp_path, server.url)
        args = ["--models", str(registry), "--methods", "templates", "--baselines", "zoo"]
        code = run_cli("--trust-code", "run", *args, "--config", str(config), "--out", str(out))
        output = capsys.readouterr()
        assert code == 0, output.err[-3000:]
        assert server.requests > 0  # the endpoint model was asked
    assert "run · mft: skipped (not asked for (run.methods))" in output.err

    suite = pq.read_table(out / "suite" / "suite.parquet")
    assert set(suite.column("method").to_pylist()) == {"template"} and suite.num_rows > 20
    results = pq.read_table(out / "benchmark" / "results.parquet")
    assert set(results.column("model").to_pylist()) == {
        "my_bert",
        "my_pipeline",
        "my_endpoint",
        "my_function",
        "tfidf_lr",
    }
    assert results.column("pass").null_count < results.num_rows

    report = (out / "report.html").read_text()
    assert report.index("Models under test") < report.index("Merged suite")
    for name in ("my_bert", "my_pipeline", "my_endpoint", "my_function"):
        assert f"Where {name} fails" in report or name in report
    assert "tfidf_lr" in report and "paired p (McNemar)" in report
    assert "not asked for" in report  # the methods table says why the others did not run
    assert (out / "index.html").is_file()

    # From Python: the run directory reads back as a RunReport that renders itself.
    import checkray

    res = checkray.open_run(out)
    assert type(res).__name__ == "RunReport" and res.job == "run"
    assert set(res.leaderboard["model"]) == {"my_bert", "my_pipeline", "my_endpoint", "my_function", "tfidf_lr"}
    assert len(res.suite) == suite.num_rows and set(res.failures("my_function")["model"]) == {"my_function"}
    shown = res._repr_html_()
    assert "<b>checkray run</b>" in shown and "report.html" in shown and "failing cases, a few per model" in shown


def test_packaged_specs_named_relatively_are_found_from_any_directory(tmp_path, monkeypatch):
    """configs/demo.yaml names configs/suites/...: a user copying it runs from elsewhere."""
    from checkray.jobs.config import load_config

    monkeypatch.chdir(tmp_path)
    cfg = load_config(
        None, {"templates.spec": "configs/suites/sentiment_templates.jsonl", "testaug.spec": "mine.jsonl"}
    )
    assert Path(cfg.section("templates").spec) == Path(TEMPLATES)
    assert cfg.section("testaug").spec == "mine.jsonl"  # found nowhere: as given, for the one-line error
    (tmp_path / "configs" / "suites").mkdir(parents=True)
    (tmp_path / "configs" / "suites" / "sentiment_templates.jsonl").write_text("")
    cfg = load_config(None, {"templates.spec": "configs/suites/sentiment_templates.jsonl"})
    assert cfg.section("templates").spec == "configs/suites/sentiment_templates.jsonl"  # the working directory's first


def test_a_rerun_that_keeps_no_case_moves_the_earlier_suite_aside(tmp_path):
    """The earlier run's suite, report and manifest would read as this run's in the run
    index; they move under stages/superseded/ (kept, not deleted) and the error stands."""
    import json

    import pyarrow as pa

    from checkray.engine.errors import EmptySuiteError
    from checkray.engine.stages import Stage
    from checkray.jobs.base import Job, run_job
    from checkray.jobs.config import CheckrayConfig

    class Generating(Job):
        name, title, uses_ray, published = "mft", "checkray · mft", False, ("suite.parquet",)
        keep = True

        def stages(self):
            def generate(ctx):
                if not self.keep:
                    raise EmptySuiteError("the mft job kept no test case: every generation was dropped")
                return {"data": pa.table({"text": ["A fine film."]})}

            yield Stage("generate", generate, config=[self.keep])

        def publish(self, runner):
            runner.run.write_table("suite.parquet", runner.output("generate"))
            return []

    out = str(tmp_path / "run")
    run_job(Generating(CheckrayConfig()), out)
    assert (tmp_path / "run" / "suite.parquet").exists() and (tmp_path / "run" / "manifest.json").exists()
    empty = Generating(CheckrayConfig())
    empty.keep = False
    with pytest.raises(EmptySuiteError):
        run_job(empty, out)
    assert not (tmp_path / "run" / "suite.parquet").exists() and not (tmp_path / "run" / "manifest.json").exists()
    (moved,) = (tmp_path / "run" / "stages" / "superseded").iterdir()
    assert sorted(p.name for p in moved.iterdir()) == ["manifest.json", "report.html", "suite.parquet"]
    assert json.loads((moved / "manifest.json").read_text())["published"] == ["suite.parquet", "report.html"]
    assert not (tmp_path / "run" / "report.html").exists()


def test_a_method_that_kept_no_case_does_not_stop_the_run(tmp_path, capsys):
    """Every generation of one method dropped (each with its reason): the run says so in
    the console and the report and goes on to the next method; its suites are unchanged."""
    from checkray.engine.errors import EmptySuiteError
    from checkray.engine.report import Section
    from checkray.engine.stages import RunDir, Stage
    from checkray.jobs.base import Job
    from checkray.jobs.config import CheckrayConfig
    from checkray.jobs.run.job import RunState, Step, run_step

    class NothingKept(Job):
        name, title, uses_ray, published = "mft", "checkray · mft", False, ()

        def stages(self):
            def generate(ctx):
                raise EmptySuiteError("the mft job kept no test case: every generation was dropped")

            yield Stage("generate", generate)

        def publish(self, runner):
            return [Section("never", [], "")]

    run = RunDir(str(tmp_path / "run"))
    state = RunState(CheckrayConfig(), run)
    sections = run_step(Step("mft", lambda s: NothingKept(s.cfg)), state)
    assert [s.title for s in sections] == ["mft: no test case kept"]
    assert "kept no test case" in sections[0].summary and state.suites == []
    assert "the run goes on without it" in capsys.readouterr().err

    class Other(NothingKept):  # any other error still stops the run
        def stages(self):
            yield Stage("generate", lambda ctx: (_ for _ in ()).throw(InputError("bad corpus")))

    with pytest.raises(InputError, match="bad corpus"):
        run_step(Step("mft", lambda s: Other(s.cfg)), state)
