"""CheckList's released suites, as their files are: read safely, and judged as CheckList judges.

The stand-ins (``tests/fakes/checklist_release.py``) reproduce the opcode shapes of
``release_suites/sentiment_suite.tar.gz`` (dill 0.3.1, protocol 3): ``_get_attr('builtins',
'len')``, ``_load_type('CodeType')`` code records, ``iter_with_optional`` and ``Expect`` by
reference, ``Expect.slice_pairwise`` closures, numpy arrays via ``_get_attr(_import_module(
'numpy.core._multiarray_umath'), '_reconstruct')``. The test names and expectations are the
sentiment suite's (read from the real file with ``pickletools``), so the shipped
``configs/checklist/sentiment.yaml`` is checked too. Verdicts: checkray's per-test test-case
failure rate must equal the fail rate of CheckList 2020's ``Expect`` semantics (the
stand-in's ``Expect``, run on the same predictions), for a 3-class model and for a binary
model under the neutral band.
"""

from __future__ import annotations

import hashlib
import io
import pickletools
import re
import tarfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from checkray.engine.benchmark.checklist.convert import convert
from checkray.engine.benchmark.checklist.mapping import load_mapping
from checkray.engine.benchmark.checklist.plan import LabelNames
from checkray.engine.benchmark.checklist.reader import read_checklist
from checkray.engine.benchmark.checklist.unpickle import load_pickle
from checkray.engine.benchmark.expectations import ExpectationSettings, case_groups, evaluate_cases
from checkray.engine.errors import InputError
from tests.fakes.checklist_release import checklist_passed, checklist_stats, dump_release, release_checklist

ROOT = Path(__file__).resolve().parents[2]
SENTIMENT_MAP = ROOT / "configs" / "checklist" / "sentiment.yaml"
LABELS = ["negative", "neutral", "positive"]


def sentiment_suite(cl):
    """The released sentiment suite's test kinds, small: every expectation shape it uses."""
    E = cl.Expect

    def positive_change(orig_conf, conf):  # the notebook's helper, pickled by value
        softmax = type(orig_conf) in [np.array, np.ndarray]
        if not softmax or orig_conf.shape[0] != 3:
            raise Exception("Need prediction function to be softmax with 3 labels")
        return orig_conf[0] - conf[0] + conf[2] - orig_conf[2]

    def diff_up(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
        tolerance = 0.1
        change = positive_change(orig_conf, conf)
        return True if change + tolerance >= 0 else change + tolerance

    def diff_down(orig_pred, pred, orig_conf, conf, labels=None, meta=None):
        tolerance = 0.1
        change = positive_change(orig_conf, conf)
        return True if change - tolerance <= 0 else -(change - tolerance)

    def non_neutral(pred, *args, **kwargs):
        return pred != 1

    rng = np.random.default_rng(7)
    words = ["good", "bad", "fine", "awful", "great", "odd", "nice", "dull", "okay", "grim"]
    sentences = [f"The {w} movie was {v}." for w in words for v in words][:60]
    s = cl.TestSuite()
    single = cl.MFT(words[:4], labels=2)
    single.result_indexes = np.arange(4)  # the released tests keep their last run's indexes (int64 arrays)
    s.add(single, "single positive words", "Vocabulary")
    laden = [int(x) for x in rng.integers(0, 3, 30)]
    s.add(cl.MFT(sentences[:30], labels=laden), "Sentiment-laden words in context", "Vocabulary")
    s.add(
        cl.MFT(sentences[:20], expect=E.single(lambda x, pred, *args: pred != 0)),
        "simple negations: not negative",
        "Negation",
    )
    s.add(
        cl.MFT(
            sentences[20:50],
            labels=[int(x) for x in rng.integers(0, 2, 30)],
            expect=E.single(lambda x, pred, _, label, _2: pred != 0 if label == 1 else pred == label),
        ),
        "Q & A: no",
        "SRL",
    )
    pairs = [[a, a + "!", a.lower()] for a in sentences[:25]]
    s.add(cl.INV(pairs), "punctuation", "Robustness")
    two = [[a, b] for a, b in zip(sentences[:30], sentences[30:60])]
    monotonic_up = E.monotonic(increasing=True, tolerance=0.1)
    monotonic_down = E.monotonic(increasing=False, tolerance=0.1)
    s.add(cl.DIR(two, E.slice_pairwise(monotonic_up, non_neutral)), "intensifiers", "Vocabulary")
    s.add(cl.DIR(two, E.slice_pairwise(monotonic_down, non_neutral)), "reducers", "Vocabulary")
    phrases = [[a, a + " I loved it.", a + " Great."] for a in sentences[:20]]
    s.add(cl.DIR(phrases, E.pairwise(diff_up)), "add positive phrases", "Vocabulary")
    s.add(cl.DIR(phrases, E.pairwise(diff_down)), "add negative phrases", "Vocabulary")
    return s


def qqp_suite(cl):
    """QQP's shapes: question pairs as tuples, labels 0/1, INV and DIR over pairs, and the
    notebook's ``Expect.slice_orig(Expect.eq(0), lambda orig, *args: orig == 1)``."""
    E = cl.Expect
    s = cl.TestSuite()
    qs = [("How do I cook rice?", "How can I cook rice?"), ("Is it cold?", "Is it hot?")]
    qs += [
        (f"Is {n} a good {job}?", f"Is {n} an excellent {job}?")
        for n in ("Ann", "Bo", "Cy")
        for job in ("cook", "pilot")
    ]
    s.add(cl.MFT(qs, labels=[1, 0] + [0] * 6), "synonyms", "Vocabulary")
    s.add(cl.INV([[q, (q[0], q[1] + "?"), (q[0] + "!", q[1])] for q in qs]), "Typos", "Robustness")
    s.add(
        cl.DIR(
            [[q, ("How do I cook pasta?", q[1])] for q in qs], E.monotonic(label=1, increasing=False, tolerance=0.1)
        ),
        "change one noun",
        "Vocabulary",
    )
    changed = [[q, (q[0].replace("Ann", "Eve"), q[1]), (q[0], q[1] + " now")] for q in qs]
    s.add(
        cl.DIR(changed, E.slice_orig(E.eq(0), lambda orig, *args: orig == 1)),
        "Change first name in one of the questions",
        "NER",
    )
    return s


def squad_suite(cl):
    """SQuAD's shapes: (context, question) pairs, answer strings as labels, a custom
    expectation, munch.Munch records in meta, INV over perturbed contexts."""
    E = cl.Expect

    def expect_squad(x, pred, conf, label=None, meta=None):
        return pred == label

    people = ["Ann", "Bo", "Cy"]
    data = [(f"{a} is taller than {b}.", f"Who is taller, {a} or {b}?") for a in people for b in people if a != b]
    answers = [c.split(" is")[0] for c, _ in data]
    meta = [cl.Munch(first=a) for a in answers]
    s = cl.TestSuite()
    s.add(
        cl.MFT(data, labels=answers, meta=meta, expect=E.single(expect_squad)),
        "A is COMP than B. Who is more COMP?",
        "Taxonomy",
    )
    s.add(cl.INV([[d, (d[0].replace(".", "!"), d[1])] for d in data]), "Question typo", "Robustness")
    return s


def test_squad_pairs_and_answers_import(tmp_path):
    path, data = release_archive(tmp_path, squad_suite, "squad_suite")
    assert b"munch\nMunch" in data
    table, report = convert(read_checklist(str(path)), LabelNames.parse(None))
    assert [t.status for t in report.tests] == ["written", "written"]
    mft = report.tests[0]
    assert mft.expectation == "default: Expect.eq() (the test's labels)" and "expect_squad" in (mft.note or "")
    rows = [r for r in table.to_pylist() if r["test_type"] == "MFT"]
    assert rows[0]["text"] == "Ann is taller than Bo." and rows[0]["text_pair"] == "Who is taller, Ann or Bo?"
    assert rows[0]["expected_label"] == "Ann" and '"first": "Ann"' in rows[0]["meta"]


def release_archive(tmp_path: Path, build, member: str) -> tuple[Path, bytes]:
    with release_checklist() as cl:
        data = dump_release(build(cl), cl.dill)
    path = tmp_path / f"{member}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(f"{member}.pkl")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path, data


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory):
    return release_archive(tmp_path_factory.mktemp("release"), sentiment_suite, "sentiment_suite")


def test_stand_in_has_the_released_opcode_shapes(sentiment):
    _, data = sentiment
    assert data[:2] == b"\x80\x03"  # protocol 3
    text = io.StringIO()
    pickletools.dis(data, text)
    dis = text.getvalue()
    globals_ = Counter(re.findall(r"GLOBAL\s+'([^']+)'", dis))
    # exactly the globals of the released sentiment_suite.pkl
    assert set(globals_) == {
        "checklist.test_suite TestSuite",
        "collections OrderedDict",
        "collections defaultdict",
        "checklist.test_types MFT",
        "checklist.test_types INV",
        "checklist.test_types DIR",
        "checklist.expect iter_with_optional",
        "checklist.expect Expect",
        "dill._dill _create_function",
        "dill._dill _load_type",
        "dill._dill _create_cell",
        "dill._dill _get_attr",
        "dill._dill _import_module",
        "numpy ndarray",
        "numpy dtype",
    }
    assert "'CodeType'" in dis and "_create_code" not in dis
    # _get_attr('builtins', 'abs'): the object is a string (BINPUT memo lines in between)
    assert re.search(r"BINUNICODE 'builtins'\n(?:[^\n]*BINPUT[^\n]*\n)?[^\n]*BINUNICODE 'abs'", dis)
    assert "'numpy.core._multiarray_umath'" in dis and "'_reconstruct'" in dis


def test_released_format_imports_with_every_expectation_decided(sentiment):
    path, _ = sentiment
    suites = read_checklist(str(path))
    assert [s.name for s in suites] == ["sentiment_suite"]
    assert [t.kind for t in suites[0].tests] == ["MFT"] * 4 + ["INV"] + ["DIR"] * 4
    table, report = convert(suites, LabelNames.parse("0=negative,1=neutral,2=positive"), load_mapping(SENTIMENT_MAP))
    how = {t.name: t.expectation for t in report.tests}
    assert all(t.status == "written" for t in report.tests), [(t.name, t.expectation) for t in report.tests]
    assert how["single positive words"] == "recognised: Expect.eq()"
    assert how["punctuation"] == "recognised: Expect.inv(tolerance=0.1)"
    assert how["intensifiers"].startswith("mapping 'intensifiers' over recognised: Expect.slice_pairwise[")
    assert "Expect.monotonic(label=None, increasing, tolerance=0.1)" in how["intensifiers"]
    assert how["add positive phrases"] == "mapping 'add positive phrases'"
    assert how["simple negations: not negative"] == "mapping 'simple negations: not negative'"
    assert report.counts["MFT"].tests == 4 and report.counts["INV"].tests == 1 and report.counts["DIR"].tests == 4
    rows = table.to_pylist()
    qa_no = [r for r in rows if r["topic"] == "Q & A: no"]
    assert {tuple(r["expected_labels"] or ()) for r in qa_no} == {(), ("neutral", "positive")}
    assert {r["expected_label"] for r in qa_no} == {None, "negative"}
    intens = [r for r in rows if r["topic"] == "intensifiers" and r["perturbs"]]
    assert intens and all(r["original_labels"] == ["negative", "positive"] for r in intens)
    up = [r for r in rows if r["topic"] == "add positive phrases" and r["perturbs"]]
    assert {(r["relation"], r["expected_label"], r["versus_label"], r["tolerance"]) for r in up} == {
        ("up", "positive", "negative", 0.1)
    }


def test_without_the_mapping_custom_code_is_listed_not_guessed(sentiment):
    path, _ = sentiment
    _, report = convert(read_checklist(str(path)), LabelNames.parse("0=negative,1=neutral,2=positive"))
    status = {t.name: (t.status, t.expectation) for t in report.tests}
    assert status["intensifiers"][0] == "unmapped" and "original_labels" in status["intensifiers"][1]
    assert status["add positive phrases"][0] == "unmapped"
    # custom MFT lambdas fall back to the test's labels only where it has some
    assert status["Q & A: no"][0] == "written" and status["Q & A: no"][1].startswith("default:")
    assert status["simple negations: not negative"][0] == "unmapped"


QQP_MAP = ROOT / "configs" / "checklist" / "qqp.yaml"


def test_qqp_pairs_land_in_text_and_text_pair(tmp_path):
    path, _ = release_archive(tmp_path, qqp_suite, "qqp_suite")
    table, report = convert(
        read_checklist(str(path)), LabelNames.parse("0=not_duplicate,1=duplicate"), load_mapping(QQP_MAP)
    )
    assert all(t.status == "written" for t in report.tests), [(t.name, t.expectation) for t in report.tests]
    how = {t.name: t.expectation for t in report.tests}
    assert how["Change first name in one of the questions"].startswith(
        "mapping 'Change * in one of the questions' (glob) over recognised: Expect.slice_pairwise["
    )
    assert "Expect.eq(not_duplicate)" in how["Change first name in one of the questions"]
    assert report.unused_mapping == ["Testing implications"]  # the released file's, skipped there
    rows = table.to_pylist()
    assert rows[0]["text"] == "How do I cook rice?" and rows[0]["text_pair"] == "How can I cook rice?"
    assert [r["expected_label"] for r in rows if r["topic"] == "synonyms"] == ["duplicate"] + ["not_duplicate"] * 7
    change = [r for r in rows if r["topic"] == "change one noun" and r["perturbs"]]
    assert change[0]["relation"] == "down" and change[0]["expected_label"] == "duplicate"
    name = [r for r in rows if r["topic"] == "Change first name in one of the questions" and r["perturbs"]]
    assert {(r["relation"], r["expected_label"], tuple(r["original_labels"])) for r in name} == {
        ("becomes", "not_duplicate", ("duplicate",))
    }
    # without the mapping the slice is listed, not guessed
    _, bare = convert(read_checklist(str(path)), LabelNames.parse("0=not_duplicate,1=duplicate"))
    assert {t.name for t in bare.by_status("unmapped")} == {"Change first name in one of the questions"}


def test_get_attr_reaches_builtins_only_through_the_builtins_string():
    """dill 0.3.1's _get_attr('builtins', name): an inert builtin resolves, eval does not,
    and a string other than the builtins module's name is refused."""
    head = b"\x80\x03cdill._dill\n_get_attr\nq\x00"
    ok = head + b"X\x08\x00\x00\x00builtinsX\x03\x00\x00\x00len\x86R."
    assert "builtins.len" in repr(load_pickle(ok, "ok.pkl"))
    for name, obj in ((b"eval", b"builtins"), (b"system", b"posix\x00\x00\x00")):
        obj = obj.rstrip(b"\x00")
        bad = head + b"X" + len(obj).to_bytes(4, "little") + obj + b"X" + len(name).to_bytes(4, "little") + name
        with pytest.raises(InputError, match="refuses"):
            load_pickle(bad + b"\x86R.", "bad.pkl")


# -- verdicts: checkray's test-case failure rates vs CheckList's --------------------------


def _probabilities(texts: list[str], k: int) -> np.ndarray:
    """A deterministic, text-dependent stand-in model: k-class probabilities."""
    out = np.empty((len(texts), k))
    for i, t in enumerate(texts):
        seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).dirichlet(np.ones(k) * 0.7)
    return out


def _checkray_rates(table, probs, model_labels) -> dict[str, tuple[int, int]]:
    """(test cases judged, failed) per test, as the benchmark summary counts them."""
    ev = evaluate_cases(table, probs, model_labels, ExpectationSettings())
    assert not [e for e in ev.error if e], [e for e in ev.error if e][:3]
    judged, failed = defaultdict(set), defaultdict(set)
    for topic, group, passed in zip(table.column("topic").to_pylist(), case_groups(table), ev.passed.tolist()):
        if passed is not None:
            judged[topic].add(group)
        if passed is False:
            failed[topic].add(group)
    return {t: (len(judged[t]), len(failed[t])) for t in judged}


def _checklist_rates(suite_obj, table, probs, predicted, confs_of) -> dict[str, tuple[int, int]]:
    """CheckList's own verdicts, with preds/confs read back by (test, test case, example)."""
    index = {(r["topic"], r["testcase_index"], r["example_index"]): k for k, r in enumerate(_meta_rows(table))}
    out = {}
    for name, test in suite_obj.tests.items():
        preds, confs = [], []
        for i, case in enumerate(test.data):
            if isinstance(case, list):
                ks = [index[(name, i, j)] for j in range(len(case))]
                preds.append(np.array([predicted[k] for k in ks]))
                confs.append(np.array([confs_of(probs[k]) for k in ks]))
            else:
                k = index[(name, i, 0)]
                preds.append(predicted[k])
                confs.append(confs_of(probs[k]))
        stats = checklist_stats(checklist_passed(test, preds, confs))
        out[name] = (stats["testcases"] - stats["filtered"], stats["fails"])
    return out


def _meta_rows(table):
    import json

    return [{"topic": r["topic"], **json.loads(r["meta"])} for r in table.select(["topic", "meta"]).to_pylist()]


def test_qqp_failure_rates_equal_checklists_own(tmp_path):
    with release_checklist() as cl:
        suite_obj = qqp_suite(cl)
        path = tmp_path / "qqp_suite.pkl"
        path.write_bytes(dump_release(suite_obj, cl.dill))
        table, _ = convert(
            read_checklist(str(path)), LabelNames.parse("0=not_duplicate,1=duplicate"), load_mapping(QQP_MAP)
        )
        keys = [f"{a}\x1f{b}" for a, b in zip(table.column("text").to_pylist(), table.column("text_pair").to_pylist())]
        probs = _probabilities(keys, 2)
        ours = _checkray_rates(table, probs, ["not_duplicate", "duplicate"])
        theirs = _checklist_rates(suite_obj, table, probs, probs.argmax(axis=1), lambda row: row)
    judged = {name for name, (n, _) in theirs.items() if n}
    assert judged == set(suite_obj.tests)
    assert theirs == {name: ours[name] for name in theirs}
    assert theirs["Change first name in one of the questions"][0] < len(changed_cases(suite_obj))


def changed_cases(suite_obj):
    return suite_obj.tests["Change first name in one of the questions"].data


@pytest.mark.parametrize("binary", [False, True])
def test_failure_rates_equal_checklists_own(tmp_path, binary):
    with release_checklist() as cl:
        suite_obj = sentiment_suite(cl)
        data = dump_release(suite_obj, cl.dill)
        path = tmp_path / "sentiment_suite.pkl"
        path.write_bytes(data)
        table, _ = convert(
            read_checklist(str(path)), LabelNames.parse("0=negative,1=neutral,2=positive"), load_mapping(SENTIMENT_MAP)
        )
        texts = table.column("text").to_pylist()
        index = {label: i for i, label in enumerate(LABELS)}
        if binary:  # P(negative), P(positive); neutral by the band, neutral score 1 - 2|p - 1/2|
            probs = _probabilities(texts, 2)
            p = probs[:, 1]
            predicted = np.where((p >= 1 / 3) & (p <= 2 / 3), 1, np.where(p > 0.5, 2, 0))

            def confs_of(row):
                return np.array([row[0], 1 - 2 * abs(row[1] - 0.5), row[1]])

            model_labels = ["negative", "positive"]
        else:
            probs = _probabilities(texts, 3)
            predicted = probs.argmax(axis=1)

            def confs_of(row):
                return row

            model_labels = LABELS
        ours = _checkray_rates(table, probs, model_labels)
        theirs = _checklist_rates(suite_obj, table, probs, predicted, confs_of)
    assert index and set(theirs) == set(suite_obj.tests)
    judged = {name: n for name, (n, _) in theirs.items() if n}
    assert {name: theirs[name] for name in judged} == {name: ours.get(name, (0, 0)) for name in judged}
    # the suite exercises failures and filtered test cases (slices, "cannot fail")
    assert sum(f for _, f in theirs.values()) > 0
    assert any(n < len(suite_obj.tests[name].data) for name, (n, _) in theirs.items())


@pytest.mark.parametrize(
    "text, message",
    [
        ("tests:\n  x: {type: MFT, versus: negative}\n", "tests.x: 'versus' does not apply to a MFT test"),
        ("tests:\n  x: {type: MFT, original_labels: [a]}\n", "tests.x: 'original_labels' does not apply to a MFT test"),
        ("tests:\n  x: {type: INV, label_sets: {a: [b]}}\n", "tests.x: 'label_sets' does not apply to a INV test"),
        ("tests:\n  x: {label: a, label_sets: {a: [b]}}\n", "tests.x: give 'label_sets' or 'label'/'labels', not both"),
        ("tests:\n  x: {label_sets: {a: []}}\n", "tests.x: each 'label_sets' entry names at least one label"),
        ("tests:\n  x: {original_labels: []}\n", "tests.x.original_labels: List should have at least 1 item"),
        ("tests:\n  x: {type: DIR, answer_renamed: true}\n", "tests.x: 'answer_renamed' does not apply to a DIR test"),
        ("tests:\n  x: {reason: why}\n", "tests.x: 'reason' explains a 'skip: true'"),
    ],
)
def test_new_mapping_keys_are_checked(tmp_path, text, message):
    path = tmp_path / "map.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_mapping(path)
    assert str(err.value).startswith(f"{path}: {message}"), str(err.value)


def test_every_slice_shape_is_recognised_and_described(tmp_path):
    from checkray.engine.benchmark.checklist.expect import recognise

    with release_checklist() as cl:
        E = cl.Expect
        s = cl.TestSuite()
        inner = E.inv(0.1)
        s.add(cl.INV([["a", "b"]], expect=E.wrap_slice(inner, E.testcase(lambda *a: True))), "testcase", "x")
        s.add(cl.INV([["a", "b"]], expect=E.wrap_slice(inner, E.single(lambda *a: True))), "single", "x")
        s.add(cl.INV([["a", "b"]], expect=E.slice_orig(inner, lambda orig, *a: orig == 1)), "orig", "x")
        s.add(cl.INV([["a", "b"]], expect=E.wrap_slice(lambda *a: None, E.testcase(lambda *a: True))), "bad", "x")
        data = dump_release(s, cl.dill)
    tests = {t.name: t for t in read_checklist_bytes(tmp_path, data)}
    assert recognise(tests["testcase"].expect).slice.startswith("Expect.slice_testcase[function '<lambda>'")
    assert recognise(tests["single"].expect).slice.startswith("Expect.slice_single[")
    assert recognise(tests["orig"].expect).slice.startswith("Expect.slice_pairwise[")
    assert recognise(tests["orig"].expect).kind == "inv"
    assert "not recognised" in recognise(tests["bad"].expect).reason


def read_checklist_bytes(tmp_path, data):
    path = tmp_path / "suite.pkl"
    path.write_bytes(data)
    return read_checklist(str(path))[0].tests
