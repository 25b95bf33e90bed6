"""``checkray import checklist``: CheckList pickles read without running pickled code.

The CheckList package is not needed: fake ``checklist.*`` modules with CheckList's class
and attribute names, and an ``Expect`` whose static methods build closures with
CheckList's function names and free variables, are registered in ``sys.modules`` only
while real dill pickles them, then removed before loading, so a loader that imported
them (or ran the pickled code) would fail.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
from contextlib import contextmanager

import numpy as np
import pyarrow.compute as pc
import pytest

from checkray.engine.benchmark.checklist.convert import convert
from checkray.engine.benchmark.checklist.expect import Recognised, Unrecognised, recognise
from checkray.engine.benchmark.checklist.mapping import load_mapping
from checkray.engine.benchmark.checklist.plan import LabelNames
from checkray.engine.benchmark.checklist.reader import read_checklist, suite_tests
from checkray.engine.benchmark.checklist.unpickle import Opaque, load_pickle
from checkray.engine.benchmark.expectations import ExpectationSettings, evaluate_cases
from checkray.engine.benchmark.inputs import read_suite
from checkray.engine.errors import InputError
from tests.fakes.checklist_format import fake_checklist
from tests.fakes.cli import run_cli

dill = pytest.importorskip("dill")


def sentiment_suite(cl):
    """A suite with every shape the importer knows, like CheckList's sentiment suite."""
    s = cl.TestSuite()
    E = cl.Expect
    s.add(cl.MFT(["I love it.", "A great movie."], labels=np.int64(2), name="single label", capability="Vocabulary"))
    s.add(
        cl.MFT(
            [["It is bad.", "It is awful."], ["It is good."]],
            labels=[0, np.int64(2)],
            name="per testcase labels",
            capability="Vocabulary",
            description="labels per test case",
        )
    )
    s.add(cl.MFT([["Fine.", "Bad."]], labels=[[1, 0]], name="per example labels", capability="Vocabulary"))
    s.add(cl.MFT(["It is a film."], expect=E.eq(1), name="eq fixed", capability="Vocabulary"))
    s.add(
        cl.INV(
            [["I like this movie.", "I like this film.", "I like this flick."], ["Alone."]],
            name="INV default",
            capability="Robustness",
        )
    )
    s.add(cl.INV([["A nice day.", "A nice day!"]], expect=E.inv(0.2), name="INV 0.2", capability="Robustness"))
    s.add(
        cl.DIR(
            [["The food was ok.", "The food was ok. I loved it."], ["Meh.", "Meh. Great though."]],
            expect=E.monotonic(label=2, increasing=True, tolerance=0.1),
            name="add positive",
            capability="Vocabulary",
        )
    )
    s.add(
        cl.DIR(
            [["A movie.", "A movie, I guess."]],
            expect=E.monotonic(label=None, increasing=False, tolerance=0.05),
            name="hedge",
            capability="Vocabulary",
        )
    )
    s.add(
        cl.DIR(
            [["Good.", "Not good."]],
            expect=E.pairwise(lambda o, p, oc, c, lab, m: p != o),
            name="custom dir",
            capability="Negation",
        )
    )
    s.add(
        cl.MFT(
            ["Not bad."],
            labels=2,
            expect=E.single(lambda x, p, c, lab, m: p != 0),
            name="custom mft",
            capability="Negation",
        )
    )
    s.tests["single label"].results = cl.Munch(preds=[2, 2], confs=np.array([[0.1, 0.1, 0.8], [0.2, 0.2, 0.6]]))
    return s


def qqp_suite(cl):
    s = cl.TestSuite()
    s.add(
        cl.MFT(
            [("How do I cook rice?", "How can I cook rice?"), ("Is it cold?", "Is it hot?")],
            labels=[1, 0],
            name="synonyms",
            capability="Vocabulary",
        )
    )
    s.add(
        cl.INV(
            [[("Who is Ann?", "Who is Ann?"), ("Who is Bea?", "Who is Bea?")]],
            name="change names",
            capability="NER",
        )
    )
    return s


def dump(build, by_reference: bool = True, recurse: bool = True) -> bytes:
    with fake_checklist(by_reference) as cl:
        return dill.dumps(build(cl), recurse=recurse)


@contextmanager
def watch_imports():
    """Record every import made while loading (pickle's default find_class imports)."""
    seen: list[str] = []
    real = builtins.__import__

    def spy(name, *args, **kwargs):
        seen.append(name)
        return real(name, *args, **kwargs)

    builtins.__import__ = spy
    try:
        yield seen
    finally:
        builtins.__import__ = real


SENTIMENT = "0=negative,1=neutral,2=positive"


@pytest.fixture(scope="module")
def sentiment_pkl(tmp_path_factory):
    path = tmp_path_factory.mktemp("cl") / "sentiment_suite.pkl"
    path.write_bytes(dump(sentiment_suite))
    return path


def import_suite(path, labels=SENTIMENT, mapping=None, suite=None):
    names = LabelNames.parse(labels)
    return convert(read_checklist(str(path), suite), names, load_mapping(mapping) if mapping else None)


def rows_of(table, test):
    return [r for r in table.to_pylist() if r["topic"] == test]


# -- loading: nothing imported, nothing run -----------------------------------------


@pytest.mark.parametrize("by_reference, recurse", [(True, True), (False, True), (True, False)])
def test_dill_suite_loads_without_importing_checklist(by_reference, recurse):
    data = dump(sentiment_suite, by_reference, recurse)
    assert "checklist.test_types" not in sys.modules
    with watch_imports() as seen:
        obj = load_pickle(data, "suite.pkl")
    assert not [m for m in seen if m.split(".")[0] in ("checklist", "munch", "dill")]
    assert "checklist.expect" not in sys.modules and isinstance(obj, Opaque)
    tests = obj.fields()["tests"]
    assert list(tests)[:2] == ["single label", "per testcase labels"]
    assert tests["single label"].fields()["results"]["preds"] == [2, 2]  # munch.Munch as a dict
    records = {t.name: t for t in suite_tests(obj, "s", "suite.pkl")}
    assert records["INV 0.2"].kind == "INV" and records["hedge"].kind == "DIR" and records["eq fixed"].kind == "MFT"
    assert recognise(records["add positive"].expect) == Recognised("monotonic", 2, True, 0.1)


def test_expectations_recognised_from_records_only():
    def build(cl):
        E = cl.Expect
        return [E.eq(), E.eq(np.int64(1)), E.inv(0.2), E.monotonic(2, True, 0.1), E.monotonic(None, False, 0.05)]

    eq, eq1, inv, up, down = load_pickle(dump(build), "x")
    assert recognise(eq) == Recognised("eq")
    assert recognise(eq1) == Recognised("eq", label=1)
    assert recognise(inv) == Recognised("inv", tolerance=0.2)
    assert recognise(up) == Recognised("monotonic", label=2, increasing=True, tolerance=0.1)
    assert recognise(down) == Recognised("monotonic", label=None, increasing=False, tolerance=0.05)
    assert recognise(up).describe("positive") == "Expect.monotonic(label=positive, increasing, tolerance=0.1)"

    custom = load_pickle(dump(lambda cl: cl.Expect.single(lambda x, p, c, lab, m: p != 0)), "x")
    assert isinstance(recognise(custom), Unrecognised) and "<lambda>" in recognise(custom).reason
    assert isinstance(recognise(load_pickle(dump(lambda cl: lambda self: 1), "x")), Unrecognised)


# -- conversion ---------------------------------------------------------------------


def test_sentiment_suite_rows(sentiment_pkl):
    table, report = import_suite(sentiment_pkl)
    assert set(table.column("suite").to_pylist()) == {"sentiment_suite"}
    assert len(set(table.column("case_id").to_pylist())) == table.num_rows
    by_name = {t.name: t for t in report.tests}

    single = rows_of(table, "single label")
    assert [r["expected_label"] for r in single] == ["positive", "positive"]
    meta = json.loads(single[1]["meta"])
    assert meta["checklist_test"] == "single label" and meta["testcase_index"] == 1 and meta["example_index"] == 0
    assert single[0]["method"] == "checklist" and single[0]["capability"] == "Vocabulary"

    per_tc = rows_of(table, "per testcase labels")
    assert [(r["text"], r["expected_label"]) for r in per_tc] == [
        ("It is bad.", "negative"),
        ("It is awful.", "negative"),
        ("It is good.", "positive"),
    ]
    assert per_tc[0]["testcase"] == per_tc[1]["testcase"] != per_tc[2]["testcase"]
    assert json.loads(per_tc[0]["meta"])["description"] == "labels per test case"
    assert [r["expected_label"] for r in rows_of(table, "per example labels")] == ["neutral", "negative"]
    assert rows_of(table, "eq fixed")[0]["expected_label"] == "neutral"
    assert by_name["eq fixed"].expectation == "recognised: Expect.eq(neutral)"

    inv = rows_of(table, "INV default")
    assert [r["perturbs"] for r in inv] == [None, inv[0]["case_id"], inv[0]["case_id"]]
    assert [r["tolerance"] for r in inv] == [None, 0.1, 0.1] and inv[1]["relation"] == "same"
    assert all(r["test_type"] == "INV" and r["expected_label"] is None for r in inv)
    assert by_name["INV default"].dropped_testcases == 1  # "Alone." has no perturbation
    assert by_name["INV default"].expectation == "recognised: Expect.inv(tolerance=0.1)"
    assert [r["tolerance"] for r in rows_of(table, "INV 0.2")] == [None, 0.2]

    up = rows_of(table, "add positive")
    assert [(r["relation"], r["expected_label"], r["tolerance"]) for r in up[1::2]] == [("up", "positive", 0.1)] * 2
    hedge = rows_of(table, "hedge")
    assert (hedge[1]["relation"], hedge[1]["expected_label"], hedge[1]["tolerance"]) == ("down", None, 0.05)

    assert by_name["custom dir"].status == "unmapped" and "<lambda>" in by_name["custom dir"].expectation
    assert not rows_of(table, "custom dir")
    assert (
        by_name["custom mft"].expectation.startswith("default: Expect.eq()")
        and "<lambda>" in by_name["custom mft"].note
    )
    assert [t.name for t in report.defaulted()] == ["custom mft"]
    assert report.counts["DIR"].tests == 2 and report.counts["INV"].rows == 5


def test_qqp_pairs_and_archive(tmp_path):
    data = dump(qqp_suite)
    archive = tmp_path / "qqp_suite.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, payload in [("release/qqp_suite.pkl", data), ("release/README", b"hello")]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    table, report = import_suite(archive, labels="0=not_duplicate,1=duplicate")
    assert report.suites == ["qqp_suite"] and report.sources == [f"{archive}:release/qqp_suite.pkl"]
    syn = rows_of(table, "synonyms")
    assert [(r["text"], r["text_pair"], r["expected_label"]) for r in syn] == [
        ("How do I cook rice?", "How can I cook rice?", "duplicate"),
        ("Is it cold?", "Is it hot?", "not_duplicate"),
    ]
    names = rows_of(table, "change names")
    assert names[1]["text_pair"] == "Who is Bea?" and names[1]["perturbs"] == names[0]["case_id"]


def test_archive_members_are_checked(tmp_path):
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz") as tar:
        info = tarfile.TarInfo("README")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(InputError, match="holds no .pkl file"):
        read_checklist(str(empty))
    linked = tmp_path / "link.tar"
    with tarfile.open(linked, "w") as tar:
        info = tarfile.TarInfo("suite.pkl")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(InputError, match="not a regular file"):
        read_checklist(str(linked))


def test_single_test_and_plain_pickle(tmp_path):
    def one_test(cl):
        return cl.DIR([["x", "x!"]], expect=cl.Expect.monotonic(0, False, 0.1), name="lonely DIR", capability="C")

    path = tmp_path / "one.pkl"
    path.write_bytes(dump(one_test))
    table, report = import_suite(path)
    assert [t.name for t in report.tests] == ["lonely DIR"] and table.num_rows == 2
    assert rows_of(table, "lonely DIR")[1]["expected_label"] == "negative"

    with fake_checklist() as cl:  # plain pickle: no closures, so the expectation defaults
        suite = cl.TestSuite()
        suite.add(cl.MFT(["a", "b"], labels=["positive", "negative"], name="strings", capability="C"))
        suite.tests["strings"].expect = None
        suite.info = {k: dict(v) for k, v in suite.info.items()}
        blobs = [pickle.dumps(suite, protocol=p) for p in (0, 2, 4)]
    for proto, blob in zip((0, 2, 4), blobs):
        path = tmp_path / f"plain{proto}.pkl"
        path.write_bytes(blob)
        table, report = import_suite(path, labels=None)  # string labels need no --labels
        assert table.column("expected_label").to_pylist() == ["positive", "negative"], proto
        assert report.tests[0].expectation == "default: Expect.eq() (the test's labels)"


def test_labels_errors(sentiment_pkl):
    with pytest.raises(InputError) as err:
        import_suite(sentiment_pkl, labels=None)
    assert "pass --labels" in str(err.value) and "--labels 0=NAME0,1=NAME1,2=NAME2" in str(err.value)
    with pytest.raises(InputError, match=r"label 1 is not in --labels \(0, 2\)"):
        import_suite(sentiment_pkl, labels="0=negative,2=positive")
    with pytest.raises(InputError, match="is not KEY=NAME"):
        LabelNames.parse("0=negative,positive")


def test_mapping_exact_glob_labels_and_skip(sentiment_pkl, tmp_path):
    mapping = tmp_path / "map.yaml"
    mapping.write_text(
        "tests:\n"
        "  custom dir: {direction: up, label: positive, tolerance: 0.2}\n"
        "  'custom *': {labels: [neutral, positive]}\n"
        "  'INV*': {skip: true}\n"
        "  'hedge': {tolerance: 0.3}\n"
        "  'no such test': {skip: true}\n"
    )
    table, report = import_suite(sentiment_pkl, mapping=mapping)
    by_name = {t.name: t for t in report.tests}
    custom_dir = rows_of(table, "custom dir")
    assert (custom_dir[1]["relation"], custom_dir[1]["expected_label"], custom_dir[1]["tolerance"]) == (
        "up",
        "positive",
        0.2,
    )
    assert by_name["custom dir"].expectation == "mapping 'custom dir'"  # exact beats the glob
    assert rows_of(table, "custom mft")[0]["expected_labels"] == ["neutral", "positive"]
    assert by_name["custom mft"].expectation == "mapping 'custom *' (glob)"
    assert by_name["INV default"].status == "skipped" and not rows_of(table, "INV 0.2")
    hedge = rows_of(table, "hedge")[1]  # field by field: direction from the recognised expect
    assert (hedge["relation"], hedge["tolerance"]) == ("down", 0.3)
    assert report.unused_mapping == ["no such test"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("tests:\n  x: {direction: sideways}\n", "tests.x.direction: Input should be 'up', 'down' or 'becomes'"),
        ("tests:\n  x: {colour: red}\n", "tests.x.colour: Extra inputs are not permitted"),
        ("tests:\n  x: {type: INV, labels: [a]}\n", "tests.x: 'labels' does not apply to a INV test"),
        ("tests: [\n", "not valid YAML"),
    ],
)
def test_mapping_errors_are_one_line(tmp_path, text, message):
    path = tmp_path / "map.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_mapping(path)
    assert str(err.value).startswith(f"{path}: {message}") and "\n" not in str(err.value)


# -- refusing code ------------------------------------------------------------------


class _Evil:
    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda m: (os.system, (f"touch {m}",)), f"'{os.system.__module__}.system'"),
        (lambda m: (subprocess.Popen, (["touch", str(m)],)), "'subprocess.Popen'"),
        (lambda m: (eval, (f"open({str(m)!r}, 'w')",)), "'builtins.eval'"),
        (lambda m: (getattr, (object, "__subclasses__")), "getattr(<type>, '__subclasses__')"),
    ],
    ids=["os.system", "subprocess.Popen", "eval", "getattr"],
)
def test_code_in_a_pickle_is_refused(tmp_path, make, name):
    marker = tmp_path / "PWNED"
    path = _write(tmp_path / "evil.pkl", pickle.dumps({"tests": [_Evil(*make(marker))]}))
    with pytest.raises(InputError) as err:
        read_checklist(str(path))
    assert name in str(err.value) and "\n" not in str(err.value)
    assert "checkray refuses" in str(err.value)
    assert not marker.exists()


def test_dill_builders_never_run(tmp_path):
    marker = tmp_path / "PWNED"
    blob = pickle.dumps(_Evil(dill._dill._eval_repr, (f"__import__('os').system('touch {marker}')",)))
    with pytest.raises(InputError, match="not a CheckList TestSuite"):
        read_checklist(str(_write(tmp_path / "x.pkl", blob)))
    assert not marker.exists()


def _write(path, data):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("cut", ["half", "garbage", "targz"])
def test_truncated_or_garbage_is_one_line(sentiment_pkl, tmp_path, cut):
    data = sentiment_pkl.read_bytes()
    if cut == "half":
        path = _write(tmp_path / "half.pkl", data[: len(data) // 2])
    elif cut == "garbage":
        path = _write(tmp_path / "garbage.pkl", b"this is not a pickle at all")
    else:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo("s.pkl")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        path = _write(tmp_path / "s.tar.gz", buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(InputError) as err:
        read_checklist(str(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


# -- the command and the verdicts ---------------------------------------------------


def test_cli_writes_a_suite_the_benchmark_accepts(sentiment_pkl, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_cli("import", "checklist", str(sentiment_pkl), "--labels", SENTIMENT, "--out", str(out)) == 0
    printed = capsys.readouterr()
    assert "unmapped 'custom dir' (DIR)" in printed.err and "defaulted 'custom mft' (MFT)" in printed.err
    assert f"wrote {out}/suite.parquet" in printed.out
    table = read_suite(str(out / "suite.parquet"))
    report = json.loads((out / "import.json").read_text())
    assert report["rows"] == table.num_rows and report["counts"]["MFT"]["tests"] == 5

    assert run_cli("import", "checklist", str(sentiment_pkl), "--out", str(tmp_path / "bad")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the suite's labels are numbers [0, 1, 2]")


def test_imported_verdicts_match_checklist(sentiment_pkl):
    """Verdicts of evaluate_cases on an imported suite against CheckList's rules, by hand."""
    table, _ = import_suite(sentiment_pkl)
    labels = ["negative", "neutral", "positive"]
    probs = np.full((table.num_rows, 3), 1 / 3)
    texts = table.column("text").to_pylist()
    topics = table.column("topic").to_pylist()

    def at(topic, text, p):
        probs[[i for i, (t, x) in enumerate(zip(topics, texts)) if t == topic and x == text][0]] = p

    at("single label", "I love it.", [0.1, 0.1, 0.8])  # eq: pred positive == positive -> True
    at("single label", "A great movie.", [0.1, 0.6, 0.3])  # pred neutral != positive -> fail
    at("INV default", "I like this movie.", [0.0, 0.48, 0.52])  # original: positive
    at("INV default", "I like this film.", [0.0, 0.53, 0.47])  # changed, |0.47-0.52| = 0.05 <= 0.1 -> True
    at("INV default", "I like this flick.", [0.0, 0.6, 0.4])  # changed, |0.40-0.52| = 0.12 > 0.1 -> fail
    at("add positive", "The food was ok.", [0.2, 0.3, 0.5])  # monotonic(label=2, up, 0.1): P(pos) 0.5
    at("add positive", "The food was ok. I loved it.", [0.25, 0.3, 0.45])  # -0.05 + 0.1 >= 0 -> True
    at("add positive", "Meh.", [0.9, 0.05, 0.05])  # orig P(pos) 0.05 <= 0.1: can't fail -> None
    at("add positive", "Meh. Great though.", [0.95, 0.04, 0.01])
    at("hedge", "A movie.", [0.7, 0.2, 0.1])  # monotonic(None, down, 0.05): label = orig pred negative
    at("hedge", "A movie, I guess.", [0.8, 0.1, 0.1])  # +0.1 - 0.05 > 0 -> fail

    ev = evaluate_cases(table, probs, labels, ExpectationSettings())

    def verdict(topic, text):
        return ev.passed[[i for i, (t, x) in enumerate(zip(topics, texts)) if t == topic and x == text][0]]

    assert verdict("single label", "I love it.") is True
    assert verdict("single label", "A great movie.") is False
    assert verdict("INV default", "I like this movie.") is None  # the original has no verdict
    assert verdict("INV default", "I like this film.") is True
    assert verdict("INV default", "I like this flick.") is False
    assert verdict("add positive", "The food was ok. I loved it.") is True
    assert verdict("add positive", "Meh. Great though.") is None
    assert verdict("hedge", "A movie, I guess.") is False
    assert pc.sum(pc.is_null(table.column("testcase"))).as_py() == 0
