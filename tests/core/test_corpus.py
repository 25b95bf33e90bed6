"""Every bad corpus gets a one-line error naming the file and the problem."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from checkray.engine.config import CorpusConfig
from checkray.engine.corpus import read_corpus
from checkray.engine.errors import InputError


def _cfg(path, **kw):
    return CorpusConfig(path=str(path), **kw)


def _fails(cfg, match):
    with pytest.raises(InputError, match=match) as err:
        read_corpus(cfg)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_reads_csv_jsonl_parquet(tmp_path):
    rows = [{"sentence": "a fine film", "y": 1, "src": "x"}, {"sentence": "dull", "y": 0, "src": "y"}]
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "c.csv").write_text("sentence,y,src\na fine film,1,x\ndull,0,y\n")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    for name in ("c.jsonl", "c.csv", "c.parquet"):
        t = read_corpus(_cfg(tmp_path / name, text_column="sentence", label_column="y"))
        assert t.column("text").to_pylist() == ["a fine film", "dull"]
        assert t.column("label").to_pylist() == ["1", "0"]
        assert json.loads(t.column("meta")[0].as_py()) == {"src": "x"}
        assert t.column("id").to_pylist() == ["0", "1"]


def test_builtin_corpus_is_real_and_labelled():
    t = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))
    assert t.num_rows == 8530 and set(t.column("label").to_pylist()) == {"negative", "positive"}
    s = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes", sample=100))
    assert s.num_rows == 100 and len(set(s.column("label").to_pylist())) == 2


def test_missing_file(tmp_path):
    _fails(_cfg(tmp_path / "none.csv"), "corpus file not found")


def test_empty_file(tmp_path):
    (tmp_path / "e.csv").write_text("")
    _fails(_cfg(tmp_path / "e.csv"), "corpus file is empty")


def test_header_only_has_no_rows(tmp_path):
    (tmp_path / "h.csv").write_text("text,label\n")
    _fails(_cfg(tmp_path / "h.csv"), "no rows")


def test_unreadable_file(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": broken\n')
    _fails(_cfg(tmp_path / "bad.jsonl"), "unreadable corpus file")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really parquet")
    _fails(_cfg(tmp_path / "bad.parquet"), "unreadable corpus file")


def test_unsupported_format(tmp_path):
    (tmp_path / "c.xlsx").write_bytes(b"xx")
    _fails(_cfg(tmp_path / "c.xlsx"), "unsupported corpus format")


def test_missing_text_and_label_columns(tmp_path):
    (tmp_path / "c.csv").write_text("body,label\nhello,1\n")
    msg = _fails(_cfg(tmp_path / "c.csv"), "missing text column 'text'")
    assert "body" in msg
    (tmp_path / "d.csv").write_text("text,stars\nhello,1\n")
    _fails(_cfg(tmp_path / "d.csv"), "missing label column 'label'")


def test_null_and_non_string_texts(tmp_path):
    (tmp_path / "n.jsonl").write_text('{"text": "ok", "label": 1}\n{"text": null, "label": 0}\n')
    _fails(_cfg(tmp_path / "n.jsonl"), r"null value\(s\) \(first at row 1\)")
    (tmp_path / "i.jsonl").write_text('{"text": 5, "label": 1}\n{"text": 7, "label": 0}\n')
    _fails(_cfg(tmp_path / "i.jsonl"), "not strings")


def test_non_utf8_bytes(tmp_path):
    (tmp_path / "latin.csv").write_bytes("text,label\ncaf\xe9 ok,1\n".encode("latin-1"))
    _fails(_cfg(tmp_path / "latin.csv"), "not UTF-8")


def test_row_over_the_size_limit(tmp_path):
    (tmp_path / "big.csv").write_text("text,label\nshort,1\n" + "x" * 500 + ",0\n")
    _fails(_cfg(tmp_path / "big.csv", max_row_bytes=100), "row 1 has 500 bytes")


def test_all_blank_texts(tmp_path):
    (tmp_path / "b.jsonl").write_text('{"text": " ", "label": 1}\n{"text": "", "label": 0}\n')
    _fails(_cfg(tmp_path / "b.jsonl"), "every text")


def test_unknown_builtin():
    _fails(CorpusConfig(path="builtin:sst9"), "unknown bundled corpus")


# Label map: corpus.labels / --labels names raw labels when the corpus is read.


def test_label_map_names_labels(tmp_path):
    (tmp_path / "c.csv").write_text("text,label\ngood,1\nbad,0\nfine,1\n")
    t = read_corpus(_cfg(tmp_path / "c.csv", labels={0: "negative", 1: "positive"}))
    assert t.column("label").to_pylist() == ["positive", "negative", "positive"]
    # the --labels string form validates to the same map
    assert _cfg(tmp_path / "c.csv", labels="0=negative,1=positive").labels == {"0": "negative", "1": "positive"}


def test_label_map_missing_label_shows_the_flag(tmp_path):
    (tmp_path / "sst.json").write_text(json.dumps({"0": ["good", 1], "1": ["bad", 0], "2": ["meh", 2]}))
    msg = _fails(_cfg(tmp_path / "sst.json", labels="0=negative,1=positive"), "not in corpus.labels")
    assert msg.endswith("label '2' is not in corpus.labels (have 0, 1); pass --labels 0=negative,1=positive,2=...")


def test_label_map_keeps_names_and_builtin_names(tmp_path):
    (tmp_path / "c.csv").write_text("text,label\ngood,positive\nbad,0\n")
    t = read_corpus(_cfg(tmp_path / "c.csv", labels="0=negative,1=positive"))
    assert t.column("label").to_pylist() == ["positive", "negative"]
    t = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes", limit=50, labels="0=neg,1=pos"))
    assert set(t.column("label").to_pylist()) <= {"neg", "pos"}


def test_label_map_integral_float_labels(tmp_path):
    # pandas writes an int label column with a gap as float64: 1.0 is label 1, NaN is missing
    pq.write_table(pa.table({"text": ["a", "b", "c"], "label": [1.0, float("nan"), 0.0]}), tmp_path / "f.parquet")
    t = read_corpus(_cfg(tmp_path / "f.parquet", labels={0: "negative", 1: "positive"}))
    assert t.column("label").to_pylist() == ["positive", None, "negative"]


@pytest.mark.parametrize(
    "spec, match",
    [("0=negative,positive", "is not KEY=NAME"), ("0=a,0=b", "given twice"), ("=a", "is not KEY=NAME")],
)
def test_label_flag_is_parsed_once_for_every_command(spec, match):
    from checkray.engine.benchmark.checklist.plan import LabelNames
    from checkray.engine.labels import parse_label_map
    from checkray.jobs.options import corpus_overrides

    with pytest.raises(InputError, match=match):
        corpus_overrides("c.csv", None, None, spec)
    with pytest.raises(InputError, match=match):
        LabelNames.parse(spec)
    assert parse_label_map(" 0 = negative , 1=positive ") == {"0": "negative", "1": "positive"}


def test_label_map_in_config_file(tmp_path):
    from checkray.engine.errors import ConfigError
    from checkray.jobs.config import load_config

    (tmp_path / "c.yaml").write_text("corpus:\n  path: x.csv\n  labels: {0: negative, 1: positive}\n")
    assert load_config(tmp_path / "c.yaml").corpus.labels == {"0": "negative", "1": "positive"}
    (tmp_path / "b.yaml").write_text("corpus:\n  labels: {0: negative, 1: ''}\n")
    with pytest.raises(ConfigError, match="corpus.labels"):
        load_config(tmp_path / "b.yaml")
    cfg = load_config(tmp_path / "c.yaml", {"corpus.labels": {"1": "pos"}})  # the flag wins over the file
    assert cfg.corpus.labels == {"1": "pos"}


# JSON corpora: JSON Lines, an array of objects, or an object of [text, label] lists keyed by id.


def test_json_keyed_lists(tmp_path):
    doc = {"10": ["a fine film", 1], "11": ["dull [SEP] very dull", 0]}
    (tmp_path / "k.json").write_text(json.dumps(doc))
    t = read_corpus(_cfg(tmp_path / "k.json", labels="0=negative,1=positive"))
    assert t.column("id").to_pylist() == ["10", "11"]
    assert t.column("text").to_pylist() == ["a fine film", "dull [SEP] very dull"]
    assert t.column("label").to_pylist() == ["positive", "negative"]
    (tmp_path / "u.json").write_text(json.dumps({"a": ["one"], "b": ["two"]}))
    t = read_corpus(_cfg(tmp_path / "u.json", label_column=None))
    assert t.column("id").to_pylist() == ["a", "b"] and t.column("label").null_count == 2


def test_json_array_and_lines(tmp_path):
    rows = [{"text": "a", "label": 1}, {"text": "b", "label": 0, "extra": "x"}]
    (tmp_path / "a.json").write_text(json.dumps(rows))
    (tmp_path / "l.json").write_text("\n".join(json.dumps(r) for r in rows))
    for name in ("a.json", "l.json"):
        t = read_corpus(_cfg(tmp_path / name))
        assert t.column("text").to_pylist() == ["a", "b"] and t.column("label").to_pylist() == ["1", "0"]
        assert json.loads(t.column("meta")[1].as_py()) == {"extra": "x"}


@pytest.mark.parametrize(
    "doc, match",
    [
        ({"0": ["a", 1, "extra"]}, r"entry '0' is not \[text, label\]"),
        ({"0": [5, 1]}, r"entry '0' is not \[text, label\]"),
        ({"0": ["a", [1]]}, "has a list as its label"),
        ({"0": ["a", 1], "meta": "x"}, "mixes lists and other values"),
        ([{"text": "a"}, "b"], "item 1 of the JSON array is a str"),
        ("just a string", "not a str"),
        ([], "no rows"),
    ],
)
def test_json_other_shapes_are_one_line_errors(tmp_path, doc, match):
    (tmp_path / "x.json").write_text(json.dumps(doc))
    _fails(_cfg(tmp_path / "x.json"), match)


def test_numeric_labels_without_a_map_warn_with_the_flag(tmp_path, caplog):
    (tmp_path / "c.csv").write_text("text,label\ngood,1\nbad,0\n")
    with caplog.at_level("WARNING", logger="checkray.engine.corpus"):
        t = read_corpus(_cfg(tmp_path / "c.csv"))
    assert t.column("label").to_pylist() == ["1", "0"]
    assert "--labels 0=...,1=..." in caplog.text


@pytest.mark.parametrize("command", ["topics", "zoo", "s2lct", "costello", "mft"])
def test_every_corpus_command_takes_labels(command):
    from typer.testing import CliRunner

    from checkray.jobs.cli import app

    result = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "--labels" in result.output


# Hostile or unusual files: each a one-line error, or read as a user expects.


def _parquet_with_bad_utf8(path, column="text"):
    """A Parquet string column holding bytes that are not UTF-8 (Arrow does not check on write)."""
    good = b"fine" + b"caf\xe9"
    offsets = pa.py_buffer(np.array([0, 4, 8], dtype=np.int32).tobytes())
    bad = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(good)])
    other = pa.array(["fine", "ok"])
    cols = {"text": other, "label": pa.array(["1", "0"])}
    cols[column] = bad
    pq.write_table(pa.table(cols), path)


@pytest.mark.parametrize("column", ["text", "label"])
def test_parquet_strings_that_are_not_utf8(tmp_path, column):
    _parquet_with_bad_utf8(tmp_path / "b.parquet", column)
    msg = _fails(_cfg(tmp_path / "b.parquet"), f"column '{column}' has bytes that are not UTF-8")
    assert "row 1" in msg


def test_parquet_binary_text_column(tmp_path):
    pq.write_table(pa.table({"text": pa.array([b"caf\xc3\xa9", b"ok"]), "label": ["1", "0"]}), tmp_path / "b.parquet")
    assert read_corpus(_cfg(tmp_path / "b.parquet")).column("text").to_pylist() == ["café", "ok"]
    pq.write_table(pa.table({"text": pa.array([b"ok", b"caf\xe9"]), "label": ["1", "0"]}), tmp_path / "c.parquet")
    _fails(_cfg(tmp_path / "c.parquet"), r"text column 'text' has bytes that are not UTF-8 \(row 1\)")


def test_duplicate_csv_headers(tmp_path):
    (tmp_path / "d.csv").write_text("text,label,text\na,1,b\nc,0,d\n")
    _fails(_cfg(tmp_path / "d.csv"), "duplicate column name.*'text'")


@pytest.mark.parametrize(
    "labels, kind",
    [([{"a": 1}, {"a": 0}], "struct"), ([[1], [0]], "list"), ([{"k": 1}, {"k": 2}], "struct")],
)
def test_struct_and_list_label_columns(tmp_path, labels, kind):
    pq.write_table(pa.table({"text": ["a", "b"], "y": labels}), tmp_path / "s.parquet")
    msg = _fails(_cfg(tmp_path / "s.parquet", label_column="y"), f"label column 'y' holds {kind}")
    assert "not a class label" in msg


def test_empty_and_nan_labels_are_missing(tmp_path, caplog):
    from checkray.engine.corpus import missing_labels

    (tmp_path / "e.csv").write_text("text,label\na,pos\nb,\nc, \nd,neg\ne,nan\n")
    with caplog.at_level("WARNING", logger="checkray.engine.corpus"):
        t = read_corpus(_cfg(tmp_path / "e.csv"))
    assert t.column("label").to_pylist() == ["pos", None, None, "neg", None]
    assert missing_labels(t) == 3 and "3 of 5 row(s) have no label" in caplog.text
    rows = [{"text": "a", "label": 1.0}, {"text": "b", "label": float("nan")}, {"text": "c", "label": None}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "n.parquet")
    t = read_corpus(_cfg(tmp_path / "n.parquet"))
    assert t.column("label").to_pylist() == ["1", None, None] and missing_labels(t) == 2
    (tmp_path / "j.jsonl").write_text('{"text": "a", "label": null}\n{"text": "b", "label": "x"}\n')
    assert read_corpus(_cfg(tmp_path / "j.jsonl")).column("label").to_pylist() == [None, "x"]


def test_every_label_missing_is_an_error(tmp_path):
    (tmp_path / "e.csv").write_text("text,label\na,\nb,NaN\n")
    _fails(_cfg(tmp_path / "e.csv"), "label column 'label' has no labels")


def test_categorical_and_view_string_text(tmp_path):
    text = pa.array(["good film", "bad film", "good film"])
    for name, col in (
        ("dict", text.dictionary_encode()),
        ("large", text.cast(pa.large_string())),
        ("view", text.cast(pa.string_view())),
    ):
        table = pa.table({"text": col, "label": pa.array(["1", "0", "1"]).dictionary_encode()})
        pq.write_table(table, tmp_path / f"{name}.parquet")
        t = read_corpus(_cfg(tmp_path / f"{name}.parquet"))
        assert t.column("text").to_pylist() == ["good film", "bad film", "good film"], name
        assert t.column("label").to_pylist() == ["1", "0", "1"], name


def test_an_id_column_is_the_id_by_default(tmp_path):
    (tmp_path / "i.csv").write_text("id,text,label\nr7,a,1\nr9,b,0\n")
    t = read_corpus(_cfg(tmp_path / "i.csv"))
    assert t.column("id").to_pylist() == ["r7", "r9"] and t.column("meta").null_count == 2
    (tmp_path / "d.csv").write_text("id,text,label\nr7,a,1\nr7,b,0\n")
    msg = _fails(_cfg(tmp_path / "d.csv"), "id column 'id' has null or duplicate values")
    assert "by default" in msg
    (tmp_path / "o.csv").write_text("id,key,text,label\nr7,k1,a,1\nr7,k2,b,0\n")
    t = read_corpus(_cfg(tmp_path / "o.csv", id_column="key"))  # a configured id column wins
    assert t.column("id").to_pylist() == ["k1", "k2"] and json.loads(t.column("meta")[0].as_py()) == {"id": "r7"}


def test_a_changed_file_is_read_again(tmp_path):
    import os

    path = tmp_path / "c.csv"
    path.write_text("text,label\na,1\n")
    assert read_corpus(_cfg(path)).column("text").to_pylist() == ["a"]
    assert read_corpus(_cfg(path)) is read_corpus(_cfg(path))  # the job's check() and its stage share one read
    path.write_text("text,label\nb,1\n")
    os.utime(path, ns=(1, 1))  # same size: the mtime tells
    assert read_corpus(_cfg(path)).column("text").to_pylist() == ["b"]
    assert read_corpus(_cfg(path, limit=1)).column("text").to_pylist() == ["b"]


def test_a_job_checks_its_corpus_before_ray(tmp_path):
    from checkray.jobs.config import load_config
    from checkray.jobs.topics.job import TopicsJob

    (tmp_path / "sst.json").write_text(json.dumps({"0": ["good", 1], "1": ["bad", 0]}))
    cfg = load_config(None, {"corpus.path": str(tmp_path / "sst.json"), "corpus.labels": {"0": "negative"}})
    with pytest.raises(InputError, match=r"label '1' is not in corpus.labels \(have 0\)"):
        TopicsJob(cfg).check()
