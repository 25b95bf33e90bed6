"""Question answering as a task, end to end: a SQuAD-shaped CheckList release imported with
``--task qa``, run by ``checkray benchmark`` against answering models (families qa_*), the
answers judged as CheckList judges its SQuAD suite; and the three QA model families."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from checkray.actors.models.qa_models import LLMAnswerer, clean_answer, load_qa_hf
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.llm import Generation
from checkray.jobs.cli import app
from tests.benchmark.test_checklist_release import release_archive

PEOPLE = ["Ann", "Bo", "Cy"]


def squad_like_suite(cl):
    """Two MFTs (answers as labels, a custom expectation, Munch meta), an INV over question
    typos and a DIR test, as the released SQuAD suite holds them (it has no DIR: this one
    must be skipped, not judged)."""
    E = cl.Expect

    def expect_squad(x, pred, conf, label=None, meta=None):
        return pred == label

    pairs = [(a, b) for a in PEOPLE for b in PEOPLE if a != b]
    ctx = [f"{a} is taller than {b}." for a, b in pairs]
    s = cl.TestSuite()
    s.add(
        cl.MFT(
            [(c, "Who is taller?") for c in ctx],
            labels=[a for a, _ in pairs],
            meta=[cl.Munch(first=a) for a, _ in pairs],
            expect=E.single(expect_squad),
        ),
        "A is COMP than B. Who is more COMP?",
        "Taxonomy",
    )
    s.add(
        cl.MFT([(c, "Who is shorter?") for c in ctx], labels=[b for _, b in pairs], expect=E.single(expect_squad)),
        "A is COMP than B. Who is less COMP?",
        "Taxonomy",
    )
    s.add(cl.INV([[(c, "Who is shorter?"), (c, "Who is shortr?")] for c in ctx]), "Question typo", "Robustness")
    s.add(cl.DIR([[(c, "Who is taller?"), (c, "Who is tall?")] for c in ctx], E.monotonic()), "Odd DIR", "Robustness")

    def expect_same(orig_pred, pred, orig_conf, conf, labels=None, meta=None):  # the notebook's
        return pred == orig_pred if not meta else pred == orig_pred.replace(meta[0], meta[1])

    renamed = [[(c, "Who is taller?"), (c.replace(a, "Di"), "Who is taller?")] for c, (a, _) in zip(ctx, pairs)]
    s.add(
        cl.INV(renamed, meta=[[None, (a, "Di")] for a, _ in pairs], expect=E.pairwise(expect_same)),
        "Change name everywhere",
        "NER",
    )
    return s


@pytest.fixture(scope="module")
def squad_import(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("squad")
    path, _ = release_archive(tmp, squad_like_suite, "squad_suite")
    mapping = str(Path(__file__).resolve().parents[2] / "configs" / "checklist" / "squad.yaml")
    args = ["import", "checklist", str(path), "--task", "qa", "--mapping", mapping, "--out", str(tmp / "imp")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return tmp / "imp"


def test_squad_release_imports_as_qa_cases(squad_import):
    report = json.loads((squad_import / "import.json").read_text())
    assert report["task"] == "qa"
    status = {t["name"]: (t["status"], t["expectation"]) for t in report["tests"]}
    assert status["Question typo"][0] == "written"
    assert status["Odd DIR"][0] == "skipped" and "not defined for answers" in status["Odd DIR"][1]
    rows = pq.read_table(squad_import / "suite.parquet").to_pylist()
    assert {r["task"] for r in rows} == {"qa"} and all(r["text_pair"] for r in rows)
    first = rows[0]
    assert (first["text"], first["text_pair"], first["expected_label"]) == (
        "Ann is taller than Bo.",
        "Who is taller?",
        "Ann",
    )
    inv = [r for r in rows if r["test_type"] == "INV"]
    assert len(inv) == 24 and all(r["tolerance"] is None for r in inv)
    # the shipped mapping: a renamed person must be renamed in the answer (expect_same)
    assert status["Change name everywhere"] == ("written", "mapping 'Change name everywhere'")
    renamed = [r for r in inv if r["topic"] == "Change name everywhere" and r["perturbs"]]
    assert {r["relation"] for r in renamed} == {"renamed"}
    assert json.loads(renamed[0]["meta"])["checklist_meta"] == ["Ann", "Di"]


def expected_fail_rates() -> dict[tuple[str, str], float]:
    """Worked out by hand from the two fake models (tests/fakes/models.py)."""
    return {
        ("first_name", "A is COMP than B. Who is more COMP?"): 0.0,
        ("first_name", "A is COMP than B. Who is less COMP?"): 1.0,  # it never reads the question
        ("first_name", "Question typo"): 0.0,  # ... so a typo cannot change its answer
        ("reader", "A is COMP than B. Who is more COMP?"): 0.0,
        ("reader", "A is COMP than B. Who is less COMP?"): 0.0,
        ("reader", "Question typo"): 1.0,  # "shortr" is not "shorter": its answer changes
        ("first_name", "Change name everywhere"): 0.0,  # Ann -> Di in the context, so in the answer
        ("reader", "Change name everywhere"): 0.0,
    }


@pytest.mark.trusts_code
def test_benchmark_runs_answering_models_on_the_qa_suite(ray_session, squad_import, tmp_path):
    zoo = tmp_path / "qa.yaml"
    models = [
        {"name": "first_name", "family": "qa_callable", "path": "tests.fakes.models:qa_first_name"},
        {"name": "reader", "family": "qa_callable", "path": "tests.fakes.models:qa_reads_question"},
        {"name": "broken", "family": "qa_callable", "path": "tests.fakes.models:qa_not_a_list"},
        {"name": "keyword", "family": "callable", "path": "tests.fakes.models:keyword_sentiment"},
    ]
    zoo.write_text(yaml.safe_dump({"models": models}))
    out = tmp_path / "bench"
    res = CliRunner().invoke(
        app, ["benchmark", "--models", str(zoo), "--suites", str(squad_import / "suite.parquet"), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    results = pq.read_table(out / "results.parquet").to_pylist()
    summary = pq.read_table(out / "summary.parquet").to_pylist()
    rates = {
        (r["model"], r["topic"]): r["testcase_failure_rate"] for r in summary if r["model"] in ("first_name", "reader")
    }
    assert rates == pytest.approx(expected_fail_rates())
    answered = {(r["model"], r["text"], r["text_pair"]): r["predicted"] for r in results}
    assert answered[("reader", "Bo is taller than Cy.", "Who is shorter?")] == "Cy"
    assert answered[("first_name", "Bo is taller than Cy.", "Who is shorter?")] == "Bo"
    keyword = [r for r in results if r["model"] == "keyword"]
    assert keyword and all(r["pass"] is None and "needs a model that answers" in r["error"] for r in keyword)
    models_table = {r["model"]: r for r in pq.read_table(out / "models.parquet").to_pylist()}
    assert "answer() returned str" in models_table["broken"]["error"]
    assert models_table["keyword"]["rows"] == 0  # never run on the questions
    examples = pq.read_table(out / "examples.parquet").to_pylist()
    assert any(e["text"] == "Ann is taller than Bo. || Who is shortr?" for e in examples if e["model"] == "reader")


def test_qa_llm_answers_from_the_context_and_counts_empty_answers():
    class Replies:
        def __init__(self):
            self.prompts = []

        def chat(self, turns, params):
            self.prompts += [t[0]["content"] for t in turns]
            return [
                Generation("Answer: “Ann”.\nBecause she is taller.", "stop"),
                Generation("", "empty"),
            ]

    gen = Replies()
    model = LLMAnswerer(ModelSpec(name="llm", family="qa_llm"), gen)
    assert model.answer(["Ann is taller than Bo.", "x"], ["Who is taller?", "y"]) == ["Ann", None]
    assert "Passage: Ann is taller than Bo.\nQuestion: Who is taller?" in gen.prompts[0]
    assert model.unparsed == 1 and model.labels == []
    assert clean_answer("  \n'Bo'  ") == "Bo" and clean_answer("The answer is: New York.") == "New York"


def test_qa_hf_answers_with_a_span_of_the_context(tmp_path, minilm_path):
    """A tiny extractive QA network (random weights, the packaged MiniLM tokenizer) through
    transformers' question-answering pipeline: every answer is a span of its context."""
    from transformers import AutoTokenizer, BertConfig, BertForQuestionAnswering

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertForQuestionAnswering(config).save_pretrained(tmp_path / "qa")
    tokenizer.save_pretrained(tmp_path / "qa")
    model = load_qa_hf(ModelSpec(name="tiny", family="qa_hf", path=str(tmp_path / "qa")))
    contexts = ["Ann is taller than Bo.", "The film was shot in Paris in 1999."]
    answers = model.answer(contexts, ["Who is taller?", "Where was the film shot?"])
    assert len(answers) == 2 and all(a and a.lower() in c.lower() for a, c in zip(answers, contexts))
    with pytest.raises(InputError, match="expected a directory"):
        load_qa_hf(ModelSpec(name="bad", family="qa_hf", path=str(tmp_path / "qa" / "config.json")))


def test_best_span_takes_the_highest_allowed_span_start_before_end():
    import torch

    from checkray.actors.models.qa_models import best_span

    start = torch.tensor([9.0, 0.0, 5.0, 0.0, 0.0])
    end = torch.tensor([0.0, 8.0, 0.0, 4.0, 0.0])
    allowed = torch.tensor([False, True, True, True, True])  # token 0 is the question
    assert best_span(start, end, allowed, max_tokens=30) == (2, 3)  # (2, 1) would end before it starts
    assert best_span(start, end, allowed, max_tokens=1) == (1, 1)  # 0 + 8 beats 5 + 0
    assert best_span(start, end, torch.zeros(5, dtype=torch.bool), 30) is None
