"""COSTELLO end to end through the CLI on 40 real sentences with MiniLM only, then one
repair epoch and its re-test; and the one-line error for an embedder path that does not
exist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from checkray.engine.costello.mutations import normalize, read_inversions
from tests.fakes.cli import run_cli

HERE = Path(__file__).resolve().parent
INVERSIONS = HERE.parents[1] / "configs" / "costello" / "inversions.jsonl"


def _corpus(rt_corpus, path: Path, n: int = 40) -> Path:
    """The bundled sentences that the shipped inversion table covers (so CR3 has
    triples), topped up with sentences spread over the corpus, with their labels."""
    table = read_inversions(INVERSIONS)
    texts, labels = rt_corpus.column("text").to_pylist(), rt_corpus.column("label").to_pylist()
    hits = [i for i, t in enumerate(texts) if normalize(t) in table][:25]
    # every 400th sentence: the bundled corpus is sorted by label, so this takes both labels
    rest = [i for i in range(0, len(texts), 400) if i not in set(hits)][: n - len(hits)]
    import pyarrow as pa

    rows = sorted(hits + rest)
    pcsv.write_csv(pa.table({"text": [texts[i] for i in rows], "label": [labels[i] for i in rows]}), path)
    return path


def run_small_costello(rt_corpus, tmp_path: Path, extra_config: str = "") -> tuple[int, Path]:
    """``checkray costello`` on 28 of the 40 sentences with MiniLM only (``extra_config``:
    more lines of the ``costello:`` section); the exit code and the run directory."""
    corpus = _corpus(rt_corpus, tmp_path / "seeds.csv")
    embedders = tmp_path / "emb.yaml"
    embedders.write_text("embedders:\n  - {name: minilm, model: builtin:minilm, pooling: mean, max_length: 48}\n")
    config = tmp_path / "c.yaml"
    config.write_text(
        "costello:\n  seeds: 28\n  classifiers: 5\n  classifier_train: 12\n  classifier_max_iter: 50\n"
        "  dictionary_size: 60\n  batch_size: 32\n" + extra_config
    )
    out = tmp_path / "run"
    code = run_cli(
        "costello", "--corpus", str(corpus), "--embedders", str(embedders), "--config", str(config), "--out", str(out)
    )
    return code, out


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_costello_and_repair_cli_end_to_end(ray_session, rt_corpus, tmp_path, capsys):
    from checkray.engine.schema import validate_cases

    code, out = run_small_costello(rt_corpus, tmp_path)
    output = capsys.readouterr()
    assert code == 0, output
    assert output.out.startswith("costello: CR1 ") and output.out.rstrip().endswith(
        f"triples -> {out}/triples.parquet, violations.parquet, report.html"
    )

    cases = validate_cases(pq.read_table(out / "triples.parquet"))
    assert set(cases.column("method").to_pylist()) == {"costello"}
    caps = cases.column("capability").to_pylist()
    assert caps.count("CR1") >= 3 and caps.count("CR3") >= 3 and cases.num_rows % 3 == 0
    n_triples = cases.num_rows // 3

    v = pq.read_table(out / "violations.parquet").to_pandas()
    assert {"model", "triple", "d_pos", "d_neg", "threshold", "theta", "verdict", "gt_a", "gt_b"} <= set(v.columns)
    assert len(v) == n_triples * 3 * 4 and set(v["model"]) == {"minilm"}
    np.testing.assert_array_equal(v["verdict"], (v["d_pos"] - v["d_neg"]) > v["theta"])
    zero = v[(v["distance"] == "l2") & (v["threshold"] == "zero")]
    assert (zero["theta"] == 0).all() and zero["gt_a"].notna().all()
    assert (v[v["threshold"] == "mu-2sigma"]["theta"] >= 0).all()
    html = (out / "report.html").read_text()
    assert "Table 2 layout" in html and "CR1" in html and "minilm" in html

    # test -> repair -> retest
    rep = tmp_path / "repair"
    code = run_cli(
        "repair",
        "--violations",
        str(out),
        "--model",
        "minilm",
        "--out",
        str(rep),
        "--epochs",
        "1",
        "--lr",
        "0.001",
        "--threshold",
        "zero",
    )
    output = capsys.readouterr()
    assert code == 0, output
    assert output.out.startswith("repair: minilm: ") and f"-> {rep}/fixing.parquet" in output.out
    assert (rep / "model" / "modules.json").is_file()
    fixing = pq.read_table(rep / "fixing.parquet").to_pylist()
    assert [r["metric"] for r in fixing] == ["N_V", "GT_A", "GT_B", "downstream accuracy"]
    before, after = fixing[0]["ALL before→after"].split("→")
    assert int(before) == int(zero["verdict"].sum())
    assert len(pq.read_table(rep / "violations.parquet")) == n_triples * 12
    history = pq.read_table(rep / "history.parquet").to_pylist()
    assert history[0]["epoch"] == 1 and history[0]["loss_after"] != history[0]["loss_before"]
    meta = json.loads((out / "costello.json").read_text())
    assert meta["embedders"][0]["name"] == "minilm"
    # The repair read only what costello published (its manifest lists them).
    published = json.loads((out / "manifest.json").read_text())["published"]
    assert {
        "triples.parquet",
        "violations.parquet",
        "train.parquet",
        "dictionaries.parquet",
        "classifiers.parquet",
        "costello.json",
    } <= set(published)
    assert json.loads((rep / "manifest.json").read_text())["job"] == "repair"


def test_missing_embedder_path_is_one_line(tmp_path):
    embedders = tmp_path / "emb.yaml"
    missing = tmp_path / "no" / "such-model"
    embedders.write_text(f"embedders:\n  - {{name: ghost, model: {missing}}}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "checkray.jobs.cli",
            "costello",
            "--corpus",
            "builtin:rotten_tomatoes",
            "--embedders",
            str(embedders),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE.parents[1],
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: embedder 'ghost': {missing}: model path does not exist"]
    assert not (tmp_path / "o").exists()


def test_zoo_reference_without_a_zoo_is_an_error(tmp_path, capsys):
    embedders = tmp_path / "emb.yaml"
    embedders.write_text("embedders:\n  - {name: ft, model: 'zoo:minilm_ft', pooling: mean}\n")
    assert run_cli("costello", "--embedders", str(embedders), "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "zoo:minilm_ft" in err and "\n" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_released_triples_scored_without_mutation(ray_session, tmp_path, capsys):
    """``--triples FILE``: a released-triples JSON (written here) is the suite; the threshold
    dictionary is the tiny model's WHOLE vocabulary, and the verdicts follow from it."""
    import pyarrow as pa

    from tests.fakes.tiny_hf import build_tiny_bert

    good = ["a good film", "a great movie", "fine acting", "a lovely story", "good fun", "great music"]
    bad = ["a bad film", "an awful movie", "poor acting", "a dull story", "bad fun", "awful music"]
    texts = [t for pair in zip(good, bad) for t in pair] * 2
    labels = ["positive", "negative"] * (len(texts) // 2)
    corpus = tmp_path / "c.csv"
    pcsv.write_csv(pa.table({"text": texts, "label": labels}), corpus)
    released = tmp_path / "paper_triples.json"
    released.write_text(
        json.dumps(
            {
                "SenWordFuzz": [
                    ["a good film", "a great film", "a bad film"],
                    ["fine acting", "good acting", "poor acting"],
                ],
                "swapGender_sentiSynonymSubstitution": [["he is good", "she is good", "he is great"]],
                "synon_contr": [["a lovely story", "a fine story", "a dull story"]],
            }
        )
    )
    model = build_tiny_bert(tmp_path / "bert", texts + ["he is she great fine"])
    embedders = tmp_path / "emb.yaml"
    embedders.write_text(f"embedders:\n  - {{name: tiny, model: {model}, pooling: mean}}\n")
    config = tmp_path / "c.yaml"
    config.write_text("costello:\n  classifiers: 5\n  classifier_train: 24\n  classifier_max_iter: 30\n")
    out = tmp_path / "run"
    code = run_cli(
        "costello",
        "--corpus",
        str(corpus),
        "--embedders",
        str(embedders),
        "--config",
        str(config),
        "--triples",
        str(released),
        "--out",
        str(out),
    )
    output = capsys.readouterr()
    assert code == 0, output
    assert output.out.startswith("costello: CR1 2, CR2 1, CR3 1, CR4 0 triples")
    assert not (out / "stages" / "mutate" / "data.parquet").exists() or (
        pq.read_table(out / "stages" / "mutate" / "data.parquet").num_rows == 0
    )
    cases = pq.read_table(out / "triples.parquet")
    assert set(cases.column("suite").to_pylist()) == {"paper_triples"} and cases.num_rows == 12
    v = pq.read_table(out / "violations.parquet").to_pandas()
    assert len(v) == 4 * 12 and set(v["suite"]) == {"paper_triples"}
    np.testing.assert_array_equal(v["verdict"], (v["d_pos"] - v["d_neg"]) > v["theta"])
    thr = pq.read_table(out / "thresholds.parquet").to_pandas()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    vocab = set(tok.get_vocab()) - set(tok.all_special_tokens)
    assert (thr["words"] == len(vocab)).all()  # the whole vocabulary, no sample
    words = pq.read_table(out / "dictionaries.parquet").column("word").to_pylist()
    assert set(words) == vocab
