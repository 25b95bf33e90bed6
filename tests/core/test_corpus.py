"""Every bad corpus gets a one-line error naming the file and the problem."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.config import CorpusConfig
from engine.corpus import read_corpus
from engine.errors import InputError


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
