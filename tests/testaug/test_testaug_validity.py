"""Validity classifier CLI (embedding + logistic regression on MiniLM) on a tiny hand-made
annotation file, the fine-tune backend on a tiny BERT, and bad-input errors."""

from __future__ import annotations

import json

import pytest

from checkray.actors.testaug.validity import ValidityClassifier, score_validity, train_validity
from checkray.engine.errors import InputError
from checkray.engine.testaug.config import ValidityConfig
from checkray.engine.testaug.validity import read_annotations, repeated_annotations
from checkray.engine.training import FineTuneConfig

VALID = [
    "No one enjoys that flight.",
    "Nobody likes the food on this plane.",
    "I don't love the cabin crew.",
    "No one admires this airline.",
    "I never liked the pilot.",
    "Nobody appreciates that seat.",
    "We don't enjoy the service at all.",
    "No one would recommend that company.",
]
INVALID = [
    "The flight was amazing and I loved it.",
    "What a wonderful crew!",
    "Banana purple seven the of.",
    "I love this airline so much.",
    "The seat is great.",
    "Best service ever, thank you!",
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def annotations(tmp_path):
    rows = [
        {"text": t, "validity": 1, "description": "A negative sentence with a negated positive word."} for t in VALID
    ] + [{"text": t, "validity": 0} for t in INVALID]
    return _write(tmp_path / "ann.jsonl", rows)


def _cli(capsys, *args) -> tuple[int, str, str]:
    """The real entry point in-process: (exit code, stdout, stderr)."""
    from tests.fakes.cli import run_cli

    code = run_cli(*args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.timeout(180)
def test_validity_train_and_score_cli(tmp_path, annotations, capsys):
    out = tmp_path / "clf"
    args = ("validity", "train", "--annotations", str(annotations), "--out", str(out), "--backend", "embedding_lr")
    code, stdout, stderr = _cli(capsys, *args)
    assert code == 0, stderr
    assert stdout.rstrip().endswith(f"wrote {out}/metadata.json")
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["backend"] == "embedding_lr" and meta["n_train"] == 14 and meta["n_valid"] == 8
    held = _write(
        tmp_path / "held.jsonl",
        [
            {"text": "No one enjoys the crew.", "validity": 1},
            {"text": "Nobody likes this plane.", "validity": 1},
            {"text": "I love that airline!", "validity": 0},
            {"text": "The food is wonderful.", "validity": 0},
        ],
    )
    code, stdout, stderr = _cli(capsys, "validity", "score", "--model", str(out), "--annotations", str(held))
    assert code == 0, stderr
    line = json.loads(stdout.strip().splitlines()[-1])
    assert line["n"] == 4 and line["accuracy"] >= 0.75  # negated vs plain praise is easy for MiniLM
    assert f"accuracy {line['accuracy']:.4f} on 4 cases" in stdout
    low, high = line["accuracy_ci95"]
    assert f"95 % interval {low:.3f}-{high:.3f}" in stdout and low < 0.75  # 4 cases say little


def test_repeated_annotations_count_cases_labelled_both_ways():
    rows = [
        {"text": "I don't love the crew.", "validity": 1},
        {"text": "I  don't love the CREW.", "validity": 0},  # the same case: case and spaces folded
        {"text": "I don't love the crew.", "validity": 1},
        {"text": "No one likes it.", "validity": 1},
        {"text": "No one likes it.", "validity": 1},  # repeated, agreeing
        {"text": "No one likes it.", "text_pair": "Nobody does.", "validity": 0},  # a pair is another case
        {"text": "What a plane!", "validity": 0},
        {"text": "What a plane!", "validity": 1, "description": "Praise."},  # judged against another description
    ]
    repeated = repeated_annotations(rows)
    assert (repeated.texts, repeated.rows) == (2, 5)
    assert repeated.conflicting == ("I don't love the crew.",)
    assert repeated.describe() == "2 texts annotated more than once (5 rows), 1 of them both valid and invalid"


@pytest.mark.timeout(180)
def test_validity_train_names_cases_annotated_both_ways_and_keeps_them(tmp_path, capsys):
    rows = [{"text": t, "validity": 1} for t in VALID] + [{"text": t, "validity": 0} for t in INVALID]
    rows.append({"text": VALID[0], "validity": 0})  # a second annotator disagrees
    ann = _write(tmp_path / "ann.jsonl", rows)
    out = tmp_path / "clf"
    args = ("validity", "train", "--annotations", str(ann), "--out", str(out), "--backend", "embedding_lr")
    code, stdout, stderr = _cli(capsys, *args)
    assert code == 0, stderr
    assert "note: 1 text annotated more than once (2 rows), 1 of them both valid and invalid" in stderr
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["n_train"] == 15  # kept as annotated
    assert meta["repeated_annotations"] == {"texts": 1, "rows": 2, "conflicting": 1}


def test_annotations_without_validity_column_is_one_line(tmp_path, capsys):
    bad = _write(tmp_path / "bad.jsonl", [{"text": "No one enjoys that flight.", "label": 0}])
    with pytest.raises(InputError, match=r"bad.jsonl:1: missing 'validity' column \(have: label, text\)"):
        read_annotations(bad)
    code, _, stderr = _cli(capsys, "validity", "train", "--annotations", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and stderr.startswith("error: ") and "missing 'validity' column" in stderr
    assert stderr.count("\n") == 1
    with pytest.raises(InputError, match="not found"):
        read_annotations(tmp_path / "absent.jsonl")
    with pytest.raises(InputError, match="not a validity classifier directory"):
        ValidityClassifier.load(str(tmp_path))


def test_annotations_as_csv_or_parquet_read_as_their_json_lines(tmp_path, annotations):
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected = read_annotations(annotations)
    table = pa.Table.from_pylist(
        [
            {
                "text": r["text"],
                "validity": "valid" if r["validity"] else "invalid",
                "description": r["description"] or "",  # a spreadsheet's empty cell names nothing
                "text_pair": "",
            }
            for r in expected
        ]
    )
    csv_path = tmp_path / "ann.csv"
    csv_path.write_text(table.to_pandas().to_csv(index=False), encoding="utf-8")
    pq.write_table(table.set_column(1, "validity", pa.array([r["validity"] for r in expected])), tmp_path / "a.parquet")
    assert read_annotations(csv_path) == expected
    assert read_annotations(tmp_path / "a.parquet") == expected
    (tmp_path / "bad.tsv").write_text("text\tlabel\nNo one enjoys that flight.\t0\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.tsv: row 1: missing 'validity' column \(have: label, text\)"):
        read_annotations(tmp_path / "bad.tsv")
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match=r"empty.csv: annotation file is empty"):
        read_annotations(tmp_path / "empty.csv")


def test_each_backend_defaults_to_the_encoder_it_scores_best_with():
    from checkray.engine.errors import ConfigError
    from checkray.jobs.config import load_config

    default = load_config(None, {}).section(ValidityConfig)
    assert (default.backend, default.encoder) == ("finetune", "builtin:mpnet")
    assert (default.finetune.epochs, default.finetune.learning_rate) == (4, 3e-5)
    quick = load_config(None, {"validity.backend": "embedding_lr", "validity.encoder": None}).section(ValidityConfig)
    assert (quick.backend, quick.encoder) == ("embedding_lr", "builtin:minilm")
    chosen = load_config(None, {"validity.backend": "embedding_lr", "validity.encoder": "/m"}).section(ValidityConfig)
    assert chosen.encoder == "/m"
    with pytest.raises(ConfigError, match="one of: embedding_lr, finetune"):
        load_config(None, {"validity.backend": "svm"})


@pytest.mark.timeout(120)
def test_validity_train_cli_shows_the_fine_tunes_progress(tmp_path, annotations, capsys):
    from tests.fakes.tiny_hf import build_tiny_bert

    base = build_tiny_bert(tmp_path / "tiny", VALID + INVALID)
    out = tmp_path / "clf"
    # no --backend: the fine-tune is the default
    args = ("validity", "train", "--annotations", str(annotations), "--out", str(out))
    code, stdout, stderr = _cli(capsys, *args, "--encoder", str(base))
    assert code == 0, stderr
    # the default fine-tune: 4 epochs of 16 oversampled cases in batches of 16
    assert "validity fine-tune: 1/4 steps, ~" in stderr and "validity fine-tune: 4/4 steps, done in " in stderr
    assert json.loads((out / "metadata.json").read_text())["finetune"]["steps"] == 4


@pytest.mark.timeout(120)
def test_finetune_backend_saves_and_reloads(tmp_path, annotations):
    from tests.fakes.tiny_hf import build_tiny_bert

    rows = read_annotations(annotations)
    base = build_tiny_bert(tmp_path / "tiny", VALID + INVALID)
    ft = FineTuneConfig(train_size=None, epochs=20, max_length=16, batch_size=8, learning_rate=5e-3, warmup_ratio=0.0)
    clf = train_validity(rows, ValidityConfig(backend="finetune", encoder=str(base), seed=0, finetune=ft))
    before = clf.predict_proba([r["text"] for r in rows])
    clf.save(str(tmp_path / "ft"))
    again = ValidityClassifier.load(str(tmp_path / "ft"))
    assert again.backend == "finetune"
    assert abs(again.predict_proba([r["text"] for r in rows]) - before).max() < 1e-5
    scores = score_validity(again, rows)
    assert scores["accuracy"] >= 0.85  # a tiny model can fit 14 sentences
    low, high = scores["accuracy_ci95"]
    assert low < scores["accuracy"] <= high and high - low > 0.1  # 14 cases: a wide interval


def test_a_save_cut_off_over_an_older_classifier_is_refused_not_mixed(tmp_path, annotations, monkeypatch):
    from checkray.engine.rundir import RunDir

    rows = read_annotations(annotations)
    out = str(tmp_path / "clf")
    train_validity(rows, ValidityConfig(backend="embedding_lr", seed=0)).save(out)
    newer = train_validity(rows[:-1], ValidityConfig(backend="embedding_lr", seed=1))

    write = RunDir.write_bytes

    def cut_off(self, rel, data):
        if rel != "metadata.json":
            raise KeyboardInterrupt  # the process stops while the weights are written
        return write(self, rel, data)

    with monkeypatch.context() as patch:
        patch.setattr(RunDir, "write_bytes", cut_off)
        with pytest.raises(KeyboardInterrupt):
            newer.save(out)
    with pytest.raises(InputError, match="the classifier's save did not finish; train it again"):
        ValidityClassifier.load(out)
    newer.save(out)
    assert ValidityClassifier.load(out).meta["n_train"] == len(rows) - 1


NEGATED = "A negative sentence with a negated positive word."
PRAISE = "A positive sentence that praises something."


@pytest.mark.timeout(180)
def test_one_classifier_for_several_descriptions_reads_each_cases_description(tmp_path):
    """The same sentences, valid for one description and invalid for the other: text alone
    cannot tell (at most half right); led by the description, a fine-tune learns both."""
    from tests.fakes.tiny_hf import build_tiny_bert

    rows = [{"text": t, "validity": 1, "description": NEGATED} for t in VALID]
    rows += [{"text": t, "validity": 0, "description": NEGATED} for t in INVALID]
    rows += [{"text": t, "validity": 0, "description": PRAISE} for t in VALID]
    rows += [{"text": t, "validity": 1, "description": PRAISE} for t in INVALID]
    base = build_tiny_bert(tmp_path / "tiny", VALID + INVALID + [NEGATED, PRAISE])
    ft = FineTuneConfig(train_size=None, epochs=30, max_length=32, batch_size=8, learning_rate=5e-3, warmup_ratio=0.0)
    config = ValidityConfig(backend="finetune", encoder=str(base), seed=0, finetune=ft)
    clf = train_validity(rows, config.model_copy(update={"class_weight": "none"}))
    assert clf.reads_description and clf.descriptions == [NEGATED, PRAISE]
    clf.save(str(tmp_path / "clf"))
    again = ValidityClassifier.load(str(tmp_path / "clf"))
    assert again.reads_description
    assert score_validity(again, rows)["accuracy"] >= 0.8

    unnamed = [*rows, {"text": "No one enjoys it.", "validity": 1, "description": None}]
    with pytest.raises(InputError, match="judges 2 descriptions but 1 rows name none"):
        train_validity(unnamed, config)
    with pytest.raises(InputError, match="judges 2 descriptions but 1 rows name none"):
        score_validity(again, unnamed)


def _case(key: str, text: str):
    from checkray.engine.testaug.judges import GeneratedCase

    return GeneratedCase(key, 0, text, None, "[]")


def test_the_job_leads_cases_with_their_description_for_such_a_classifier():
    from checkray.engine.testaug.judges import CaseJudges
    from checkray.engine.testaug.prompt import Description

    seen = []

    class Reader(ValidityClassifier):
        def predict_proba(self, texts):
            seen.extend(texts)
            return [0.9] * len(texts)

    for reads in (True, False):
        meta = {"descriptions": [NEGATED, PRAISE], "reads_description": reads}
        descs = [Description(k, "cap", d, "negative", False, []) for k, d in (("d01", NEGATED), ("d02", PRAISE))]
        judges = CaseJudges(descs, classifier=Reader("finetune", meta=meta))
        seen.clear()
        case = _case("d02", "What a crew!")
        judges.annotate([case])
        assert seen == ([f"{PRAISE} [SEP] What a crew!"] if reads else ["What a crew!"])
        assert (case.valid_p, case.valid_clf) == (0.9, 1)


def test_the_job_matches_peoples_verdicts_by_description_and_text(tmp_path):
    from checkray.engine.testaug.judges import CaseJudges, people_verdicts
    from checkray.engine.testaug.prompt import Description

    ann = _write(
        tmp_path / "people.jsonl",
        [
            {"text": "What a crew!", "validity": 0, "description": NEGATED},
            {"text": "What a crew!", "validity": 1, "description": PRAISE},
            {"text": "I never liked it.", "validity": 1},  # no description: holds for any
            {"text": "Nobody cares.", "validity": 0, "description": "Some description not in this spec."},
        ],
    )
    descs = [Description(k, "cap", d, "negative", False, []) for k, d in (("d01", NEGATED), ("d02", PRAISE))]
    judges = CaseJudges(descs, people=people_verdicts(read_annotations(ann), descs))
    cases = [
        _case(key, text)
        for key, text in (
            ("d01", "What a crew!"),
            ("d02", "what a  CREW"),
            ("d02", "I never liked it."),
            ("d01", "Nobody cares."),
            ("d01", "Unseen."),
        )
    ]
    judges.annotate(cases)
    assert [c.valid_people for c in cases] == [0, 1, 1, 0, None]


def test_a_classifier_of_one_description_reads_the_text_alone():
    from checkray.engine.testaug.validity import classifier_input

    assert classifier_input("I don't love it.") == "I don't love it."
    assert classifier_input("a", "b") == "a [SEP] b"
    assert classifier_input("a", "b", " A  pair\ndescription ") == "A pair description [SEP] a [SEP] b"
    assert not ValidityClassifier("embedding_lr", meta={"descriptions": [NEGATED]}).reads_description


def test_a_classifier_covers_the_descriptions_of_its_annotations():
    scoped = ValidityClassifier("embedding_lr", meta={"descriptions": ["A negative sentence with  negation."]})
    assert scoped.covers("a negative sentence with negation.")  # spacing and case do not matter
    assert not scoped.covers("A positive sentence with positive words.")
    assert ValidityClassifier("embedding_lr").covers("anything")  # annotations that named no description


@pytest.mark.timeout(180)
def test_a_finetune_ensemble_averages_its_members_and_reloads(tmp_path, annotations):
    from tests.fakes.tiny_hf import build_tiny_bert

    rows = read_annotations(annotations)
    texts = [r["text"] for r in rows]
    base = build_tiny_bert(tmp_path / "tiny", VALID + INVALID)
    ft = FineTuneConfig(train_size=None, epochs=3, max_length=16, batch_size=8, learning_rate=5e-3, warmup_ratio=0.0)
    steps = []
    config = ValidityConfig(backend="finetune", encoder=str(base), seed=0, finetune=ft)
    clf = train_validity(rows, config.model_copy(update={"ensemble": 2}), on_step=lambda *s: steps.append(s))
    assert len(clf.model.members) == 2 and clf.meta["finetune"]["ensemble"] == 2
    # progress over both members: 16 oversampled cases, batches of 8, 3 epochs = 6 steps each
    assert steps == [(done, 12) for done in range(1, 13)]
    single = [train_validity(rows, config.model_copy(update={"seed": s})).predict_proba(texts) for s in (0, 1)]
    assert abs(single[0] - single[1]).max() > 1e-4, "members of other seeds differ"
    assert abs(clf.predict_proba(texts) - (single[0] + single[1]) / 2).max() < 1e-5
    clf.save(str(tmp_path / "ens"))
    assert (tmp_path / "ens" / "model").is_dir() and (tmp_path / "ens" / "model-1").is_dir()
    again = ValidityClassifier.load(str(tmp_path / "ens"))
    assert again.ensemble == 2 and abs(again.predict_proba(texts) - clf.predict_proba(texts)).max() < 1e-5
    with pytest.raises(InputError, match="at least 1"):
        ValidityClassifier("finetune", ensemble=0)


def test_the_llm_labeler_shows_the_descriptions_valid_examples_when_given():
    from checkray.engine.llm import GenerationParams, make_generation
    from checkray.engine.testaug.prompt import ParseCount
    from checkray.engine.testaug.validity import llm_label

    seen = []

    def chat(messages_list, params):
        seen.extend(m[-1]["content"] for m in messages_list)
        return [make_generation(a, "stop") for a in ("Valid", "Invalid.", "hmm")]

    cases = [
        {
            "description": "A negated positive.",
            "text": "No one likes it.",
            "examples": ["I don't love it.", "Nobody enjoys it."],
        },
        {"description": "A negated positive.", "text": "Great!", "examples": []},
        {"description": "Pairs.", "text": "Is it?", "text_pair": "Is it so?"},
    ]
    count = ParseCount()
    assert llm_label(cases, chat, GenerationParams(max_tokens=3), count) == [True, False, None]
    assert "- I don't love it.\n- Nobody enjoys it." in seen[0] and "Test case: No one likes it." in seen[0]
    assert "for comparison" not in seen[1] and "Test case: Great!" in seen[1]  # no examples: the plain prompt
    assert "Test case: Is it? / Is it so?" in seen[2]
    assert count.outputs == 3 and count.items == 2 and count.unparsed == 1
