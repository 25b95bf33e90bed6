"""The mft job's pipeline on a real topics run, with a rule-based LLM stand-in."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from checkray.engine.errors import InputError
from checkray.engine.schema import validate_cases
from checkray.jobs.config import load_config
from checkray.jobs.mft.job import run_mft
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
    }
    base.update(over)
    return load_config(None, base)


@pytest.mark.timeout(600)  # the first user of topics_run_2000 pays for the fixture
def test_mft_job_gates_and_suite(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    chat = RuleBasedChat(malformed_every=7)
    run, _ = run_mft(_cfg(), str(topics_dir), str(tmp_path / "mft"), chat=chat, embed=_embed)
    suite = validate_cases(pq.read_table(run.path("suite.parquet")))
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
    gates = pq.read_table(run.path("stages/generate/gates.parquet")).to_pylist()
    assert {g["gate"] for g in gates} >= {
        "few-shot examples",
        "generated MFTs",
        "de-duplication",
        "paraphrases",
        "label check",
    }
    label = [g for g in gates if g["gate"] == "label check"]
    assert sum(g["dropped"] for g in label) > 0  # VADER disagrees or finds neutral text
    parsing = {p["step"]: p for p in pq.read_table(run.path("stages/generate/parsing.parquet")).to_pylist()}
    assert sum(p["unparsed"] for p in parsing.values()) > 0  # malformed answers were counted, not fatal
    html = (tmp_path / "mft" / "report.html").read_text()
    assert "Kept and dropped at every gate" in html and "Example cases per MFT topic" in html


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
    with pytest.raises(InputError, match="not a finished topics run"):
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
