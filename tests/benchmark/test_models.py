"""Model-under-test adapters (hf, st_head, sklearn, vader, textblob) on tiny models built
here, their bad inputs, fine-tuning, and the packaged split-zip assembly."""

from __future__ import annotations

import zipfile
from pathlib import Path

import joblib
import numpy as np
import pytest

from checkray.actors.models import families, load_model
from checkray.actors.models.common import lexicon_probabilities
from checkray.engine.benchmark.registry import ModelSpec, ModelUnderTest
from checkray.engine.errors import InputError
from tests.fakes.tiny_hf import build_tiny_bert

POS = [
    "a wonderful , moving film",
    "great acting and a smart script",
    "funny , warm and beautifully made",
    "an excellent , delightful movie",
    "the best comedy of the year",
    "a charming and clever story",
    "brilliant performances all around",
    "i loved every minute of it",
    "a joyous , good time",
    "superb direction and lovely music",
]
NEG = [
    "a dull , boring mess",
    "terrible acting and a stupid script",
    "flat , lifeless and badly made",
    "an awful , tedious movie",
    "the worst comedy of the year",
    "a clumsy and pointless story",
    "dreadful performances all around",
    "i hated every minute of it",
    "a miserable , bad time",
    "lazy direction and annoying music",
]
TEXTS = POS + NEG
GOLD = ["positive"] * len(POS) + ["negative"] * len(NEG)


def spec(name="m", **kw) -> ModelSpec:
    return ModelSpec(name=name, **kw)


@pytest.fixture(scope="module")
def tfidf_file(tmp_path_factory) -> Path:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    path = tmp_path_factory.mktemp("sk") / "tfidf.joblib"
    joblib.dump(make_pipeline(TfidfVectorizer(), LogisticRegression(C=10)).fit(TEXTS * 2, GOLD * 2), path)
    return path


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("hf") / "bert", TEXTS, id2label={0: "negative", 1: "positive"})


@pytest.fixture(scope="module")
def loud_bert(tmp_path_factory) -> Path:
    """Large random weights, so different inputs give visibly different outputs."""
    return build_tiny_bert(
        tmp_path_factory.mktemp("hf") / "loud", TEXTS, id2label={0: "negative", 1: "positive"}, initializer_range=0.5
    )


def test_every_required_family_is_registered():
    assert {"hf", "st_head", "sklearn", "vader", "textblob", "callable"} <= set(families())


@pytest.mark.trusts_code
def test_sklearn_pipeline_maps_string_classes_by_name(tfidf_file):
    model = load_model(spec(family="sklearn", path=str(tfidf_file)))
    assert isinstance(model, ModelUnderTest)
    probs = model.predict_proba(TEXTS)
    assert probs.shape == (len(TEXTS), 2) and np.allclose(probs.sum(axis=1), 1)
    assert np.mean(np.array(model.labels)[probs.argmax(1)] == np.array(GOLD)) == 1.0
    swapped = load_model(spec(family="sklearn", path=str(tfidf_file), labels=["positive", "negative"]))
    assert np.allclose(swapped.predict_proba(TEXTS), probs[:, ::-1])
    assert model.predict_proba([]).shape == (0, 2)


@pytest.mark.trusts_code
def test_sklearn_integer_classes_map_by_position(tmp_path):
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.pipeline import make_pipeline

    path = tmp_path / "nb.joblib"
    joblib.dump(
        make_pipeline(CountVectorizer(), MultinomialNB()).fit(TEXTS, [int(g == "positive") for g in GOLD]), path
    )
    model = load_model(spec(family="sklearn", path=str(path)))
    assert model.predict_proba(["a wonderful , delightful film"])[0].argmax() == 1  # labels[1] == positive


@pytest.mark.trusts_code
def test_single_text_models_refuse_pairs_unless_told_to_join(tfidf_file):
    model = load_model(spec(family="sklearn", path=str(tfidf_file)))
    with pytest.raises(InputError, match="cannot take pairs"):
        model.predict_proba(["a"], ["b"])
    joined = load_model(spec(family="sklearn", path=str(tfidf_file), options={"pair_separator": " | "}))
    got = joined.predict_proba(["a great film", "dull"], ["boring", None])
    assert np.allclose(got, model.predict_proba(["a great film | boring", "dull"]))
    with pytest.raises(InputError, match="cannot take pairs"):
        load_model(spec(family="vader")).predict_proba(["good"], ["bad"])


@pytest.mark.trusts_code
def test_st_head_matches_its_head_on_packaged_minilm(tmp_path, minilm_path):
    from sentence_transformers import SentenceTransformer
    from sklearn.linear_model import LogisticRegression

    encoder = SentenceTransformer(minilm_path, device="cpu")
    X = encoder.encode(TEXTS, normalize_embeddings=True)
    head = LogisticRegression(C=10).fit(X, GOLD)
    path = tmp_path / "head.joblib"
    joblib.dump(head, path)
    model = load_model(spec(family="st_head", path=str(path), options={"encoder": "builtin:minilm"}))
    probs = model.predict_proba(TEXTS)
    assert np.allclose(probs, head.predict_proba(X), atol=1e-4)
    assert np.mean(np.array(model.labels)[probs.argmax(1)] == np.array(GOLD)) == 1.0

    small = LogisticRegression().fit(X[:, :10], GOLD)
    joblib.dump(small, tmp_path / "small.joblib")
    with pytest.raises(InputError, match="10-d embeddings"):
        load_model(spec(family="st_head", path=str(tmp_path / "small.joblib")))
    with pytest.raises(InputError, match="encoder"):
        load_model(spec(family="st_head", path=str(path), options={"encoder": str(tmp_path / "nope")}))


def test_hf_classifier_from_a_local_dir(loud_bert):
    model = load_model(spec(family="hf", path=str(loud_bert), options={"max_length": 32}))
    probs = model.predict_proba(TEXTS[:3])
    assert probs.shape == (3, 2) and np.allclose(probs.sum(axis=1), 1)
    pair_probs = model.predict_proba(TEXTS[:3], [TEXTS[5], None, TEXTS[7]])
    assert np.allclose(pair_probs[1], probs[1], atol=1e-6)  # no second text: encoded alone
    assert not np.allclose(pair_probs[0], probs[0], atol=1e-3)  # a second text changes the input
    # id2label names the classes, so a reordered label map reorders the columns.
    swapped = load_model(spec(family="hf", path=str(loud_bert), labels=["positive", "negative"]))
    assert np.allclose(swapped.predict_proba(TEXTS[:3]), probs[:, ::-1], atol=1e-6)


@pytest.mark.parametrize("family,options", [("sklearn", {}), ("st_head", {}), ("hf", {})])
def test_missing_model_file_names_model_and_path(tmp_path, family, options):
    missing = tmp_path / "gone" / "model.bin"
    with pytest.raises(InputError) as err:
        load_model(spec(name="my-model", family=family, path=str(missing), options=options))
    assert "my-model" in str(err.value) and str(missing) in str(err.value)


def test_unknown_family():
    with pytest.raises(InputError, match="unknown family 'nope'"):
        load_model(spec(family="nope"))


@pytest.mark.trusts_code
def test_label_map_size_must_match_the_model(tfidf_file, tiny_bert):
    three = ["negative", "neutral", "positive"]
    with pytest.raises(InputError, match="3 labels .* 2 classes"):
        load_model(spec(family="sklearn", path=str(tfidf_file), labels=three))
    with pytest.raises(InputError, match="3 labels .* has 2"):
        load_model(spec(family="hf", path=str(tiny_bert), labels=three))
    with pytest.raises(InputError, match="not among the model's classes"):
        load_model(spec(family="sklearn", path=str(tfidf_file), labels=["neg", "pos"]))


@pytest.mark.trusts_code
def test_joblib_file_without_a_classifier(tmp_path):
    joblib.dump({"not": "a model"}, tmp_path / "x.joblib")
    with pytest.raises(InputError, match="not a fitted classifier"):
        load_model(spec(family="sklearn", path=str(tmp_path / "x.joblib")))
    (tmp_path / "junk.joblib").write_bytes(b"garbage")
    with pytest.raises(InputError, match="cannot load .*junk.joblib"):
        load_model(spec(family="sklearn", path=str(tmp_path / "junk.joblib")))


@pytest.mark.parametrize("family", ["vader", "textblob"])
def test_lexicon_models(family):
    model = load_model(spec(family=family))
    probs = model.predict_proba(["A wonderful, moving film.", "A dull, terrible mess."])
    assert probs[0].argmax() == 1 and probs[1].argmax() == 0
    three = load_model(spec(family=family, labels=["negative", "neutral", "positive"]))
    p3 = three.predict_proba(["The film opens in Paris.", "A wonderful film."])
    assert np.allclose(p3.sum(axis=1), 1)
    assert three.labels[p3[0].argmax()] == "neutral" and three.labels[p3[1].argmax()] == "positive"
    with pytest.raises(InputError, match="labels must be negative, positive"):
        load_model(spec(family=family, labels=["neg", "pos"]))


def test_lexicon_probability_mapping():
    two = lexicon_probabilities(spec(family="vader"), np.array([-1.0, 0.0, 0.5]), 0.05)
    assert np.allclose(two, [[1, 0], [0.5, 0.5], [0.25, 0.75]])
    three = lexicon_probabilities(
        spec(family="vader", labels=["positive", "neutral", "negative"]), np.array([0.0, 0.05, -0.2]), 0.05
    )
    assert np.allclose(three, [[0, 1, 0], [0.5, 0.5, 0], [0, 0, 1]])


def test_fine_tune_learns_and_saves_an_hf_dir(tmp_path, tiny_bert):
    from checkray.actors.models.hf_model import HFSequenceClassifier
    from checkray.actors.zoo.trainers import fine_tune
    from checkray.engine.training import FineTuneConfig

    cfg = FineTuneConfig(
        train_size=None, epochs=20, max_length=16, batch_size=8, learning_rate=5e-3, warmup_ratio=0.0, weight_decay=0.0
    )
    model, tokenizer, details = fine_tune(str(tiny_bert), TEXTS, GOLD, ["negative", "positive"], cfg, seed=0, threads=1)
    assert details["steps"] == 20 * 3 and details["loss_last"] < details["loss_first"] / 4
    model.save_pretrained(tmp_path / "ft")
    tokenizer.save_pretrained(tmp_path / "ft")
    loaded = load_model(spec(family="hf", path=str(tmp_path / "ft")))
    probs = loaded.predict_proba(TEXTS)
    assert np.allclose(probs, HFSequenceClassifier(loaded.spec, model, tokenizer).predict_proba(TEXTS), atol=1e-5)
    assert np.mean(np.array(loaded.labels)[probs.argmax(1)] == np.array(GOLD)) >= 0.9


def test_fine_tune_groups_batches_by_length_unless_told_not_to(tiny_bert):
    from checkray.actors.zoo.trainers import fine_tune
    from checkray.engine.training import FineTuneConfig

    texts = [" ".join(["good"] * n) if n % 2 else " ".join(["bad"] * n) for n in range(1, 33)]
    gold = ["positive" if n % 2 else "negative" for n in range(1, 33)]
    runs = {}
    for grouped in (True, False):
        cfg = FineTuneConfig(train_size=None, epochs=1, max_length=40, batch_size=4, group_by_length=grouped)
        _, _, runs[grouped] = fine_tune(str(tiny_bert), texts, gold, ["negative", "positive"], cfg, seed=0, threads=1)
    assert runs[True]["group_by_length"] and not runs[False]["group_by_length"]
    assert runs[True]["steps"] == runs[False]["steps"] == 8
    assert runs[True]["padded_tokens"] < 0.7 * runs[False]["padded_tokens"]


def test_fine_tune_calls_back_after_each_whole_epoch_without_changing_the_result(tiny_bert):
    from checkray.actors.zoo.trainers import fine_tune
    from checkray.engine.training import FineTuneConfig

    cfg = FineTuneConfig(train_size=None, epochs=2.5, max_length=16, batch_size=8, learning_rate=5e-3, warmup_ratio=0.0)
    seen = []
    model, tokenizer, _ = fine_tune(
        str(tiny_bert),
        TEXTS,
        GOLD,
        ["negative", "positive"],
        cfg,
        seed=0,
        threads=1,
        on_epoch=lambda epoch, m: seen.append((epoch, m.training)),
    )
    assert seen == [(1, False), (2, False)]  # the half epoch is no whole one; eval mode for the call
    plain, _, _ = fine_tune(str(tiny_bert), TEXTS, GOLD, ["negative", "positive"], cfg, seed=0, threads=1)
    for name, value in plain.state_dict().items():
        assert (model.state_dict()[name] == value).all(), name


def _split_zip(tmp_path: Path, pieces: int) -> list[Path]:
    zpath = tmp_path / "m.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("enc/config.json", '{"dim": 3}')
        zf.writestr("enc/weights.bin", bytes(range(256)) * 40)
        zf.writestr("other/readme.txt", "not part of the model")
    data = zpath.read_bytes()
    cuts = np.linspace(0, len(data), pieces + 1).astype(int)
    parts = []
    for i in range(pieces):
        part = tmp_path / f"m.zip.{i + 1:03d}"
        part.write_bytes(data[cuts[i] : cuts[i + 1]])
        parts.append(part)
    return parts


def test_split_zip_assembles_once(tmp_path):
    from checkray.actors.assets import assemble

    parts = _split_zip(tmp_path, 3)
    out = assemble(parts, tmp_path / "cache" / "enc", unzip="enc")
    assert (out / "config.json").read_text() == '{"dim": 3}' and len((out / "weights.bin").read_bytes()) == 10240
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["enc"]  # no debris, no other folder
    for part in parts:
        part.unlink()
    assert assemble(parts, tmp_path / "cache" / "enc", unzip="enc") == out  # reused without the pieces
    with pytest.raises(InputError, match="valid zip"):
        assemble(_split_zip(tmp_path, 3)[1:], tmp_path / "cache2" / "enc", unzip="enc")


def test_missing_mpnet_part_is_an_input_error():
    from checkray.actors.assets import distribution_file

    with pytest.raises(InputError, match="needs the package 'no-such-dist'"):
        distribution_file("no-such-dist", ".zip.001", "pip install no-such-dist")
