"""The mft job's pipeline on a real topics run, with a rule-based LLM stand-in."""

import json

import numpy as np
import pytest

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.schema import validate_cases
from checkray.jobs.base import run_job
from checkray.jobs.config import load_config
from checkray.jobs.mft.job import MFTJob, run_mft
from tests.fakes.llm import RuleBasedChat

pytestmark = pytest.mark.ray


def _embed(texts):
    # cheap deterministic bag-of-letters vectors: the job logic, not MiniLM, is under test
    out = np.zeros((len(texts), 26))
    for i, t in enumerate(texts):
        for ch in t.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _cfg(**over):
    base = {
        "mft.versions": 2,
        "mft.representatives_per_cluster": 3,
        "mft.paraphrases": 2,
        "mft.paraphrase_limit": 4,
        "mft.mft_topics": 3,
        # the rule-based stand-in writes no real reviews: the classifier check has its own test
        "mft.classifier_check": {"encoder": None},
    }
    base.update(over)
    return load_config(None, base)


@pytest.mark.timeout(600)  # the first user of topics_run_2000 pays for the fixture
def test_mft_job_gates_and_suite(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    chat = RuleBasedChat(malformed_every=7)
    result = run_mft(_cfg(), str(topics_dir), str(tmp_path / "mft"), chat=chat, embed=_embed)
    suite = validate_cases(result.table("suite.parquet"))
    names = set(suite.column("suite").to_pylist())
    assert names == {"mft-train-original", "mft-train-extended", "mft-test-original", "mft-test-extended"}
    rows = suite.to_pylist()
    metas = [json.loads(r["meta"]) for r in rows]
    assert {m["version"] for m in metas} == {1, 2}
    assert all(r["method"] == "mft" and r["test_type"] == "MFT" for r in rows)
    assert all(r["expected_label"] in ("positive", "negative") for r in rows)
    assert any(m["paraphrase_of"] for m in metas) and all(
        r["suite"].endswith("extended") for r, m in zip(rows, metas) if m["paraphrase_of"]
    )
    assert len({r["topic"] for r in rows}) == 3  # second-level MFT topics
    gates = result.table("gates.parquet").to_pylist()
    assert {g["gate"] for g in gates} >= {
        "few-shot examples",
        "generated MFTs",
        "de-duplication",
        "paraphrases",
        "label check",
    }
    label = [g for g in gates if g["gate"] == "label check"]
    assert sum(g["dropped"] for g in label) > 0  # VADER disagrees or finds neutral text
    parsing = {p["step"]: p for p in result.run.read_table("stages/generate/parsing.parquet").to_pylist()}
    assert sum(p["unparsed"] for p in parsing.values()) > 0  # malformed answers were counted, not fatal
    html = result.text("report.html")
    assert "Kept and dropped at every gate" in html and "Example cases per MFT topic" in html
    assert "Table 7" not in html and "evaluate" not in result.stages  # no models: no evaluation


@pytest.mark.timeout(600)
def test_classifier_check_rejects_with_reasons_and_counts_its_gate(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    # MiniLM rather than the default mpnet: the same path at a tenth of the encoding time
    check = {"encoder": "builtin:minilm", "min_confidence": 0.6, "train_size": 1500}
    cfg = _cfg(**{"mft.versions": 1, "mft.splits": ["test"], "mft.classifier_check": check})
    result = run_mft(cfg, str(topics_dir), str(tmp_path / "mft"), chat=RuleBasedChat(), embed=_embed)
    assert "classifier_check" in result.stages
    before = result.run.read_table("stages/generate/data.parquet").num_rows
    rejected = [r for r in result.table("rejected.parquet").to_pylist() if r["check"] == "classifier label"]
    assert rejected and all("< 0.6" in r["reason"] for r in rejected)
    originals = [r for r in result.table("suite.parquet").to_pylist() if r["suite"] == "mft-test-original"]
    kept = result.run.read_table("stages/classifier_check/data.parquet").to_pylist()
    assert len(kept) + len(rejected) == before and 0 < len(originals) <= len(kept)
    assert all(r["checks"][-2:] == ["classifier label", "lexicon agrees"] for r in kept)
    gate = [g for g in result.table("gates.parquet").to_pylist() if g["gate"] == "classifier check"]
    assert [(g["kept"], g["dropped"]) for g in gate] == [(len(kept), len(rejected))]


@pytest.mark.trusts_code
@pytest.mark.timeout(600)
def test_models_are_evaluated_in_a_stage_and_a_rerun_reuses_it(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    cfg = _cfg(**{"mft.versions": 1, "mft.splits": ["test"]})
    kw = ModelSpec(name="kw", family="callable", path="tests.fakes.models:keyword_sentiment", accuracy=0.75)
    out = str(tmp_path / "mft")
    job = MFTJob(cfg, [kw], topics_dir=str(topics_dir), chat=RuleBasedChat(), embed=_embed)
    first = run_job(job, out)
    assert not first.stages["evaluate"].skipped
    assert first.run.exists("benchmark", "results.parquet")  # the benchmark's run, where it always was
    table7 = first.run.read_table("stages/evaluate/table7.parquet").to_pylist()
    assert [r["model"] for r in table7] == ["kw"] and table7[0]["Test"] == "75.0%"
    assert table7[0]["Test MFT (Original)"].endswith("%") and table7[0]["Train MFT (Original)"] == "—"
    table8 = first.run.read_table("stages/evaluate/table8.parquet").to_pylist()
    suite = first.table("suite.parquet", columns=["suite", "topic"]).to_pylist()
    original_topics = {r["topic"] for r in suite if r["suite"].endswith("-original")}
    assert [r["model"] for r in table8] == ["kw"] and set(table8[0]) == {"model", *original_topics}
    html = first.text("report.html")
    assert "Table 7 layout" in html and "Table 8 layout" in html and "75.0%" in html

    again = run_job(MFTJob(cfg, [kw], topics_dir=str(topics_dir), chat=RuleBasedChat(), embed=_embed), out)
    assert all(rec.skipped for rec in again.stages.values())  # nothing recomputed, the evaluation included
    assert again.text("report.html").count("75.0%") == html.count("75.0%")
    retrained = kw.model_copy(update={"accuracy": 0.5})
    third = run_job(MFTJob(cfg, [retrained], topics_dir=str(topics_dir), chat=RuleBasedChat(), embed=_embed), out)
    assert not third.stages["evaluate"].skipped and third.stages["suite"].skipped
    assert third.run.read_table("stages/evaluate/table7.parquet").column("Test").to_pylist() == ["50.0%"]


@pytest.mark.timeout(120)
def test_llm_that_labels_everything_hard_gives_a_clear_error(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    with pytest.raises(InputError, match="kept no test case"):
        run_mft(
            _cfg(**{"mft.versions": 1, "mft.splits": ["test"]}),
            str(topics_dir),
            str(tmp_path / "m"),
            chat=RuleBasedChat(always_hard=True),
            embed=_embed,
        )


def test_not_a_topics_run(tmp_path):
    with pytest.raises(InputError, match="not a finished 'topics' run"):
        run_mft(_cfg(), str(tmp_path), str(tmp_path / "m"), chat=RuleBasedChat(), embed=_embed)


@pytest.mark.timeout(120)
def test_label_without_label_word_is_named(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    with pytest.raises(InputError, match="label_words"):
        run_mft(
            _cfg(**{"mft.label_words": {"positive": "positive"}}),
            str(topics_dir),
            str(tmp_path / "m"),
            chat=RuleBasedChat(),
            embed=_embed,
        )
