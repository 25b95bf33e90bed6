"""Gate rows carry the wall time of their step (Li et al. at size: time per step in the
report); one split x version runs its gates in order with a rule-based LLM (no Ray)."""

from contextlib import nullcontext

import numpy as np
import pytest

from checkray.engine.errors import InputError
from checkray.engine.mft.config import MFTConfig
from checkray.engine.mft.generation import (
    CASE_ROW_SCHEMA,
    GATE_SCHEMA,
    VersionTarget,
    collect_versions,
    generate_version,
    version_tables,
)
from checkray.engine.mft.suite import GateLog
from tests.fakes.llm import RuleBasedChat


def test_gate_rows_have_seconds_and_fit_the_stage_schema():
    import pyarrow as pa

    printed = []
    log = GateLog(on_add=printed.append)
    log.add("label check", "test", 1, 10, 2, "agree 10, hard 2", seconds=12.345)
    log.add("de-duplication", "test", 1, 12, 0)
    assert log.rows[0]["seconds"] == 12.3 and log.rows[1]["seconds"] is None
    table = pa.Table.from_pylist(log.rows, schema=GATE_SCHEMA)
    assert table.column("seconds").to_pylist() == [12.3, None]
    assert printed == log.rows


class _StepChat(RuleBasedChat):
    """The rule-based LLM with StageChat's progress blocks (no checkpoints: no stage here)."""

    def step(self, label, total):
        return nullcontext()


def _embed(texts):
    out = np.zeros((len(texts), 26))
    for i, t in enumerate(texts):
        for ch in t.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


DOCS = [
    {"id": "p1", "text": "A wonderful, moving film with great acting.", "label": "positive", "topic": "0_film"},
    {"id": "p2", "text": "I loved the sharp script and the warm cast.", "label": "positive", "topic": "0_film"},
    {"id": "n1", "text": "A dull, tedious mess with awful dialogue.", "label": "negative", "topic": "1_mess"},
    {"id": "n2", "text": "The plot is boring and the jokes are terrible.", "label": "negative", "topic": "1_mess"},
]


def test_one_version_passes_every_gate_in_order_and_its_tables_fit_the_schemas():
    m = MFTConfig(paraphrases=1, label_words={"positive": "positive", "negative": "negative"})
    log = GateLog()
    cases = generate_version(DOCS, DOCS, m, _StepChat(), _embed, VersionTarget("test", 2, 7), log)
    assert [g["gate"] for g in log.rows] == [
        "few-shot examples",
        "generated MFTs",
        "automatic checks",
        "de-duplication",
        "paraphrases",
        "automatic checks (paraphrases)",
        "label check",
    ]
    assert all(g["split"] == "test" and g["version"] == 2 and g["seconds"] is not None for g in log.rows)
    assert cases and all(c["seed"] == 7 and c["expected"] == c["label"] for c in cases)
    assert any(c["paraphrase_of"] for c in cases) and any(c["paraphrase_of"] is None for c in cases)
    tables = version_tables(cases, log)
    assert tables["data"].schema == CASE_ROW_SCHEMA and tables["data"].num_rows == len(cases)
    assert tables["gates"].num_rows == 7
    assert set(tables["parsing"].column("step").to_pylist()) >= {"MFT generation", "label check"}

    unchecked = generate_version(
        DOCS,
        DOCS,
        m.model_copy(update={"label_check": False}),
        _StepChat(),
        _embed,
        VersionTarget("test", 2, 7),
        GateLog(),
    )
    assert len(unchecked) >= len(cases)  # without the LLM's label check nothing is dropped there


def test_collect_sums_parse_counts_and_refuses_an_empty_suite():
    log = GateLog()
    log.stats("label check").add("gibberish", 0)
    log.stats("label check").add("Label: positive", 1)
    part = version_tables([], log)
    merged = collect_versions([version_tables([{"text": "t", "label": "positive"}], log), part])
    (row,) = merged["parsing"].to_pylist()
    assert (row["outputs"], row["items"], row["unparsed"]) == (4, 2, 2) and row["examples"] == ["gibberish"] * 2
    with pytest.raises(InputError, match="kept no test case"):
        collect_versions([part, part])
