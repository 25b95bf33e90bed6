"""QQP-format CheckList suite end to end against paraphrase models trained on MRPC.

    .venv/bin/python bench/checklist_qqp.py [--mrpc ../shared/data/mrpc] [--out runs/bench_checklist_qqp]
        [--released qqp_suite.tar.gz]

With ``--released``, CheckList's released QQP suite itself is imported, run and checked:
each test's expectation is rebuilt here from CheckList's QQP notebook (``released_expectations``),
not from the importer's output, and the tests checkray skips are listed with CheckList's
own verdict on them. The file is not in ``../shared``; it ships in the source distribution
of ``checklist-plus`` 0.2.0 on PyPI (``release_suites/qqp_suite.tar.gz``; its
``sentiment_suite.tar.gz`` is byte for byte the one in ``../shared/data/checklist``).

Without it, this writes a suite in the released format (``tests/fakes/checklist_release.py``: dill 0.3.1 shapes, CheckList
2020's ``Expect``) from MRPC validation pairs, with the QQP notebook's kinds of tests:
MFTs on real pairs (labels 0/1), INV typos in one question and INV symmetry (q2, q1),
DIR "change a name in one of the questions" (``Expect.slice_orig(Expect.eq(0), lambda
orig, *args: orig == 1)``) and DIR "add a different ending" (``Expect.monotonic(label=1,
increasing=False, tolerance=0.1)``). It imports it with ``configs/checklist/qqp.yaml``
(``--labels 0=not_duplicate,1=duplicate``), runs three pair models trained on MRPC train
(``callable`` family, pairs as ``text``/``text_pair``), prints each test's failure rate
per model and checks them against CheckList's own semantics recomputed from
``results.parquet``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "runs" / "bench_checklist_qqp" / "models"
_LOADED: dict = {}
LABELS = ["not_duplicate", "duplicate"]


def _read(path: Path) -> tuple[list[tuple[str, str]], list[int]]:
    raw = json.loads(path.read_text())
    pairs, labels = [], []
    for text, label in raw.values():
        a, b = text.split(" [SEP] ", 1)
        pairs.append((a, b))
        labels.append(int(label))
    return pairs, labels


def _overlap(pairs: list[tuple[str, str]]) -> np.ndarray:
    """Word-overlap features of each pair (symmetric)."""
    rows = []
    for a, b in pairs:
        x, y = set(a.lower().split()), set(b.lower().split())
        inter, union = len(x & y), len(x | y) or 1
        rows.append([inter / union, inter / (min(len(x), len(y)) or 1), abs(len(x) - len(y)) / union])
    return np.array(rows)


def train(mrpc: Path) -> dict[str, float]:
    """Three pair models on MRPC train; accuracy on MRPC validation."""
    import joblib
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics.pairwise import paired_cosine_distances

    MODELS.mkdir(parents=True, exist_ok=True)
    pairs, labels = _read(mrpc / "train.json")
    held, held_labels = _read(mrpc / "validation.json")
    word = TfidfVectorizer().fit([t for p in pairs for t in p])
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2).fit([t for p in pairs for t in p])

    def cos(vec, ps):
        a, b = zip(*ps)
        return 1 - paired_cosine_distances(vec.transform(a), vec.transform(b))

    feats = {
        "overlap_lr": lambda ps: _overlap(ps),
        "tfidf_cos_lr": lambda ps: np.column_stack([cos(word, ps), cos(char, ps)]),
        "all_lr": lambda ps: np.column_stack([_overlap(ps), cos(word, ps), cos(char, ps)]),
    }
    accuracy = {}
    for name, f in feats.items():
        clf = LogisticRegression(max_iter=1000).fit(f(pairs), labels)
        joblib.dump({"clf": clf, "word": word, "char": char, "name": name}, MODELS / f"{name}.joblib")
        accuracy[name] = float(np.mean(clf.predict(f(held)) == np.array(held_labels)))
    return accuracy


def __getattr__(name: str):
    """``checklist_qqp:model_<name>``: a pair model for the callable family."""
    if not name.startswith("model_"):
        raise AttributeError(name)

    def predict(texts, pairs=None):
        import joblib
        from sklearn.metrics.pairwise import paired_cosine_distances

        key = name[len("model_") :]
        if key not in _LOADED:
            _LOADED[key] = joblib.load(MODELS / f"{key}.joblib")
        m = _LOADED[key]
        ps = list(zip(texts, pairs))

        def cos(vec):
            return 1 - paired_cosine_distances(vec.transform(list(texts)), vec.transform(list(pairs)))

        if key == "overlap_lr":
            x = _overlap(ps)
        elif key == "tfidf_cos_lr":
            x = np.column_stack([cos(m["word"]), cos(m["char"])])
        else:
            x = np.column_stack([_overlap(ps), cos(m["word"]), cos(m["char"])])
        return m["clf"].predict_proba(x)

    return predict


NAMES = ["John", "Mary", "David", "Susan", "Robert", "Linda", "Michael", "Karen"]


def expect_triplet(xs, preds, confs, labels, meta=None):
    """'Testing implications' as released (the notebook's code, its second branch included:
    (0, 1) fails whatever the third answer)."""
    if (preds[0] + preds[1]) == 2:
        return np.array([True, True, True]) if preds[2] == 1 else np.array([-3, -2, -1])
    if (preds[0] + preds[1] == 1) and preds[1] != 0:
        return np.array([-3, -2, -1])
    return None


def released_expectations(E) -> dict:
    """What each DIR of the released suite expects, from the QQP notebook; tests not named
    here: MFT ``Expect.eq()`` (their labels), INV ``Expect.inv(0.1)``."""
    changed = E.slice_orig(E.eq(0), lambda orig, *args: orig == 1)
    return {
        "(q, paraphrase(q))": E.eq(1),
        "Change first name in one of the questions": changed,
        "Change first and last name in one of the questions": changed,
        "Change location in one of the questions": changed,
        "Change numbers in one of the questions": changed,
        "Keep entitites, fill in with gibberish": E.eq(0),
        "Testing implications": E.testcase(expect_triplet),
    }


class _Released:
    """A released test as CheckList runs it: data, labels, meta, agg_fn, expectation."""

    def __init__(self, record, expect):
        self.data, self.labels, self.meta, self.expect, self.run_idxs = (
            record.data,
            record.labels,
            record.meta,
            expect,
            None,
        )
        default = "all" if record.kind == "MFT" else "all_except_first"
        self.agg_fn = record.agg_fn if isinstance(record.agg_fn, str) else default


def _predict_directly(model: str, data: list) -> tuple[list, list]:
    """The model's labels and probabilities on a test's pairs, shaped as ``data``."""
    predict = __getattr__(f"model_{model}")
    preds, confs = [], []
    for case in data:
        examples = case if isinstance(case, list) else [case]
        p = predict([a for a, _ in examples], [b for _, b in examples])
        preds.append(p.argmax(axis=1) if isinstance(case, list) else int(p[0].argmax()))
        confs.append(p if isinstance(case, list) else p[0])
    return preds, confs


def released_tests(cl, path: Path) -> tuple[str, list[tuple[str, str, _Released]]]:
    """(suite name, [(name, type, test)]) of the released file, each test with the
    expectation the QQP notebook gives it (``released_expectations``)."""
    from checkray.engine.benchmark.checklist.reader import read_checklist

    named = released_expectations(cl.Expect)
    (suite,) = read_checklist(str(path))
    tests = []
    for record in suite.tests:
        default = cl.Expect.eq() if record.kind == "MFT" else cl.Expect.inv(0.1)
        tests.append((record.name, record.kind, _Released(record, named.get(record.name, default))))
    return suite.name, tests


def verify(suite_name: str, tests: list, results, specs) -> int:
    """CheckList's fail rate per test (its own semantics on the predictions in
    ``results.parquet``) against checkray's; returns how many differ. A test checkray did
    not import is printed with CheckList's verdict on the model's answers here."""
    import pyarrow.compute as pc

    from checkray.engine.benchmark.summary import summarize
    from checkray.engine.schema import case_id
    from tests.fakes.checklist_release import checklist_passed, checklist_stats

    summary, mismatches = summarize(results).to_pylist(), 0
    for spec in specs:
        rows = results.filter(pc.equal(results.column("model"), spec.name))
        row_of = {cid: k for k, cid in enumerate(rows.column("case_id").to_pylist())}
        predicted, probs = rows.column("predicted").to_pylist(), rows.column("probabilities").to_pylist()
        ours = {x["topic"]: x for x in summary if x["model"] == spec.name}
        print(f"\n{spec.name} (MRPC validation accuracy {spec.accuracy:.3f}): CheckList fail rate vs checkray")
        for name, kind, test in tests:
            mine = ours.get(name)
            if mine is None:  # not imported: the model answers here, for CheckList alone
                preds, confs = _predict_directly(spec.name, test.data)
            else:
                preds, confs = [], []
                for i, case in enumerate(test.data):
                    examples = case if isinstance(case, list) else [case]
                    ks = [row_of[case_id(suite_name, name, i, j)] for j in range(len(examples))]
                    p = [LABELS.index(predicted[k]) for k in ks]
                    c = [np.array(probs[k], dtype=float) for k in ks]
                    preds.append(np.array(p) if isinstance(case, list) else p[0])
                    confs.append(np.array(c) if isinstance(case, list) else c[0])
            stats = checklist_stats(checklist_passed(test, preds, confs))
            judged = stats["testcases"] - stats["filtered"]
            rate = "-" if stats["fail_rate"] is None else f"{100 * stats['fail_rate']:.1f}%"
            line = f"{kind} {name[:70]:70s} {rate:>6s} ({stats['fails']}/{judged})"
            if mine is None:
                print(f"  skip {line}  checkray: not imported (import.json says why)")
                continue
            same = (mine["testcases"], mine["testcase_failures"]) == (judged, stats["fails"])
            mismatches += not same
            print(f"  {'ok ' if same else 'DIFF'} {line}  checkray {mine['testcase_failures']}/{mine['testcases']}")
    return mismatches


def build_suite(cl, mrpc: Path, n: int = 400):
    """A QQP-format suite from MRPC validation pairs (the notebook's kinds of tests)."""
    E = cl.Expect
    pairs, labels = _read(mrpc / "validation.json")
    pairs, labels = pairs[:n], labels[:n]
    rng = np.random.default_rng(0)

    def typo(s: str) -> str:
        i = int(rng.integers(0, max(len(s) - 2, 1)))
        return s[:i] + s[i + 1] + s[i] + s[i + 2 :] if len(s) > 3 else s

    s = cl.TestSuite()
    s.add(cl.MFT(list(pairs), labels=list(labels)), "MRPC pairs (real)", "Vocabulary")
    s.add(
        cl.MFT([(a, a) for a, _ in pairs[:200]], labels=1),
        "Same question twice is duplicate",
        "Vocabulary",
    )
    s.add(cl.INV([[p, (typo(p[0]), p[1]), (p[0], typo(p[1]))] for p in pairs]), "Typos", "Robustness")
    s.add(cl.INV([[p, (p[1], p[0])] for p in pairs]), "Symmetry: f(a, b) = f(b, a)", "Logic")
    changed = []
    for a, b in pairs:
        names = [w for w in a.split() if w in b.split() and w[:1].isupper() and w.isalpha() and len(w) > 3]
        if names:
            new = NAMES[len(changed) % len(NAMES)]
            changed.append([(a, b), (a.replace(names[0], new), b), (a, b.replace(names[0], new))])
    s.add(
        cl.DIR(changed, E.slice_orig(E.eq(0), lambda orig, *args: orig == 1)),
        "Change first name in one of the questions",
        "NER",
    )
    endings = [[p, (p[0], p[1] + " What about the weather in Paris?")] for p in pairs[:200]]
    s.add(
        cl.DIR(endings, E.monotonic(label=1, increasing=False, tolerance=0.1)),
        "Add an unrelated question to one",
        "Vocabulary",
    )
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrpc", default=str(ROOT.parent / "shared" / "data" / "mrpc"))
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench_checklist_qqp"))
    parser.add_argument("--released", type=Path, default=None, help="CheckList's qqp_suite.tar.gz")
    args = parser.parse_args()
    if args.released is not None and not args.released.is_file():
        parser.error(f"--released {args.released}: file not found")
    if not (Path(args.mrpc) / "train.json").is_file():
        parser.error(f"--mrpc {args.mrpc}: no train.json (MRPC, as ../shared/data/mrpc holds it)")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    import pyarrow.parquet as pq
    from checklist_release import in_process

    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.engine.trust import allow_code
    from checkray.jobs.cli import main as cli
    from tests.fakes.checklist_release import dump_release, release_checklist

    allow_code()  # the models are this bench's own callables
    out = Path(args.out)
    for sub in ("suite", "imported", "run"):
        shutil.rmtree(out / sub, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    t = time.perf_counter()
    accuracy = train(Path(args.mrpc))
    print(f"models trained on MRPC train in {time.perf_counter() - t:.1f}s; validation accuracy {accuracy}")
    (out / "suite").mkdir(parents=True)
    source = args.released
    if source is None:
        with release_checklist() as cl:
            suite_obj = build_suite(cl, Path(args.mrpc))
            source = out / "suite" / "qqp_suite.pkl"
            source.write_bytes(dump_release(suite_obj, cl.dill))
    t = time.perf_counter()
    try:
        cli(
            [
                "import",
                "checklist",
                str(source),
                "--labels",
                "0=not_duplicate,1=duplicate",
                "--mapping",
                str(ROOT / "configs" / "checklist" / "qqp.yaml"),
                "--out",
                str(out / "imported"),
            ]
        )
    except SystemExit as exc:
        if exc.code:
            raise
    imported = pq.read_table(out / "imported" / "suite.parquet")
    print(f"== import: {imported.num_rows} rows in {time.perf_counter() - t:.1f}s")
    specs = [
        ModelSpec(name=name, family="callable", path=f"checklist_qqp:model_{name}", labels=LABELS, accuracy=acc)
        for name, acc in accuracy.items()
    ]
    t = time.perf_counter()
    failed = in_process(specs, imported, out / "run")
    print(f"== run: {len(specs)} models x {imported.num_rows} cases in {time.perf_counter() - t:.1f}s; failed {failed}")
    results = pq.read_table(out / "run" / "results.parquet")
    with release_checklist() as cl:
        if args.released is not None:
            suite_name, tests = released_tests(cl, args.released)
        else:
            suite_obj = build_suite(cl, Path(args.mrpc))
            suite_name = "qqp_suite"
            tests = [(name, type(test).__name__, test) for name, test in suite_obj.tests.items()]
        mismatches = verify(suite_name, tests, results, specs)
    print(f"\n== verdicts: {mismatches} test(s) differ from CheckList's")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
