"""The zoo recipe, the split, and a tiny zoo built through the CLI (cached on rerun,
recorded accuracies reproduced by loading the registry), plus ``resolve_models``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest
import yaml

from checkray.actors.models import load_model
from checkray.engine.benchmark.registry import read_registry
from checkray.engine.errors import ConfigError, InputError
from checkray.engine.training import accuracy, epoch_batches, padded_tokens, stratified_split
from checkray.jobs.config import load_config
from tests.fakes.cli import run_cli
from tests.fakes.tiny_hf import build_tiny_bert

TINY_MODELS = [
    {"name": "tfidf_lr", "kind": "tfidf", "head": "logreg", "params": {"C": 4.0}, "tiny": True},
    {"name": "tfidf_nb", "kind": "tfidf", "head": "naive_bayes", "tiny": True},
    {"name": "minilm_lr", "kind": "embedding", "head": "logreg", "tiny": True},
    {"name": "vader", "kind": "vader", "tiny": True},
    {"name": "textblob", "kind": "textblob", "tiny": True},
    {"name": "big_mlp", "kind": "embedding", "head": "mlp"},  # not tiny: skipped
]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, rt_corpus) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "rt.csv"
    rows = rt_corpus.take(np.r_[0:80, rt_corpus.num_rows - 80 : rt_corpus.num_rows]).select(["text", "label"])
    pacsv.write_csv(rows, path)
    return path


def write_recipe(path: Path, corpus: Path, models: list[dict], **zoo) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "corpus": {"path": str(corpus)},
                "zoo": {
                    "tiny": True,
                    "tiny_sample": 120,
                    "cache_dir": str(path.parent / "cache"),
                    "models": models,
                    **zoo,
                },
            }
        ),
        encoding="utf-8",
    )
    return path


def success_times(zoo_dir: Path) -> dict[str, float]:
    return {p.parent.name: p.stat().st_mtime_ns for p in (zoo_dir / "stages").glob("*/_SUCCESS.json")}


def test_default_recipe_has_every_family_and_tiny_mode_drops_fine_tuning():
    import checkray.jobs.zoo.job  # noqa: F401  registers the section

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "zoo.yaml")
    zoo = cfg.section("zoo")
    kinds = {(m.kind, m.head) for m in zoo.models}
    assert len(zoo.models) >= 10
    assert {
        ("tfidf", "logreg"),
        ("tfidf", "lightgbm"),
        ("tfidf", "naive_bayes"),
        ("embedding", "logreg"),
        ("embedding", "mlp"),
        ("finetune", None),
        ("vader", None),
        ("textblob", None),
    } <= kinds
    assert any(m.encoder == "builtin:mpnet" for m in zoo.models)
    tiny = zoo.model_copy(update={"tiny": True}).selected()
    assert tiny and all(m.tiny and m.kind != "finetune" for m in tiny)


@pytest.mark.parametrize(
    "models,message",
    [
        ([{"name": "a", "kind": "vader"}, {"name": "a", "kind": "textblob"}], "duplicate model names: a"),
        ([{"name": "x", "kind": "embedding", "head": "naive_bayes"}], "non-negative features"),
        ([{"name": "x", "kind": "tfidf", "head": "logreg", "params": {"Cee": 1}}], "Cee"),
        ([{"name": "x", "kind": "tfidf"}], "needs a head"),
        ([{"name": "../x", "kind": "vader"}], "names a directory"),
        ([{"name": "x", "kind": "forest"}], "zoo.models.0.kind"),
    ],
)
def test_bad_recipes_are_config_errors(tmp_path, models, message):
    import checkray.jobs.zoo.job  # noqa: F401

    path = tmp_path / "zoo.yaml"
    path.write_text(yaml.safe_dump({"zoo": {"models": models}}))
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_stratified_split_is_seeded_and_keeps_label_shares():
    labels = np.array(["negative"] * 300 + ["positive"] * 100)
    mask = stratified_split(labels, 0.25, seed=3)
    assert mask.sum() == 100 and (labels[mask] == "positive").sum() == 25
    assert np.array_equal(mask, stratified_split(labels, 0.25, seed=3))
    assert not np.array_equal(mask, stratified_split(labels, 0.25, seed=4))
    with pytest.raises(ConfigError, match="at least 2"):
        stratified_split(np.array(["a"] * 10), 0.2, 0)
    assert accuracy(np.array([[0.9, 0.1], [0.2, 0.8]]), ["a", "b"], ["a", "a"]) == 0.5


def test_length_grouped_batches_cover_each_row_once_and_pad_less():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 64, size=1200)
    random = epoch_batches(lengths, 38, np.random.default_rng(1), group_by_length=False)
    grouped = epoch_batches(lengths, 38, np.random.default_rng(1))
    # the random split is the permutation the loop always drew: an old run reproduces
    assert np.array_equal(np.concatenate(random), np.random.default_rng(1).permutation(1200))
    assert sorted(len(b) for b in grouped) == sorted(len(b) for b in random)
    assert np.array_equal(np.sort(np.concatenate(grouped)), np.arange(1200))
    # similar lengths share a batch: far less padding than random batches
    assert padded_tokens(lengths, grouped) < 0.6 * padded_tokens(lengths, random)
    assert padded_tokens(lengths, grouped) >= lengths.sum()
    # seeded; the batches' order is shuffled, not longest first
    again = epoch_batches(lengths, 38, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(grouped, again))
    firsts = [int(lengths[b].max()) for b in grouped]
    assert firsts != sorted(firsts, reverse=True)
    # runs of LENGTH_GROUP_BATCHES batches: a long epoch is sorted within runs, not whole
    many = epoch_batches(rng.integers(5, 64, size=32 * 120), 120, np.random.default_rng(2))
    assert len(many) == 120 and all(len(b) == 32 for b in many)


@pytest.mark.ray
@pytest.mark.timeout(420)
def test_tiny_zoo_through_the_cli_caches_and_reproduces_accuracy(ray_session, tmp_path, small_corpus):
    recipe = write_recipe(tmp_path / "recipe.yaml", small_corpus, TINY_MODELS)
    out = tmp_path / "zoo"
    assert run_cli("zoo", "--config", str(recipe), "--out", str(out)) == 0

    specs = read_registry(out / "zoo.yaml")
    assert [s.name for s in specs] == ["tfidf_lr", "tfidf_nb", "minilm_lr", "vader", "textblob"]
    assert "minilm_lr" in (out / "report.html").read_text()
    raw = yaml.safe_load((out / "zoo.yaml").read_text())
    assert all(m["path"] is None or not Path(m["path"]).is_absolute() for m in raw["models"])  # relative paths
    assert {s.family for s in specs} == {"sklearn", "st_head", "vader", "textblob"}
    from checkray.engine.stages import RunDir

    table = RunDir(str(out)).read_table("stages/split/data.parquet")
    assert table.num_rows == 120  # tiny_sample of the 160 rows
    held = table.filter(table.column("held_out"))
    texts, gold = held.column("text").to_pylist(), held.column("label").to_pylist()
    for spec in specs:
        assert spec.meta["n_held_out"] == len(texts) == 24 and spec.meta["tiny"] is True
        model = load_model(spec)  # the registry loads as written
        assert accuracy(model.predict_proba(texts), model.labels, gold) == pytest.approx(spec.accuracy, abs=1e-3)

    before = success_times(out)
    assert run_cli("zoo", "--config", str(recipe), "--out", str(out)) == 0
    assert success_times(out) == before  # everything cached

    changed = [dict(m, params={"C": 0.5}) if m["name"] == "tfidf_lr" else m for m in TINY_MODELS]
    write_recipe(recipe, small_corpus, changed)
    assert run_cli("zoo", "--config", str(recipe), "--out", str(out)) == 0
    after = success_times(out)
    assert {k for k in after if after[k] != before[k]} == {"model-tfidf_lr"}

    # A recipe given to resolve_models builds (here: reuses) the zoo in its cache_dir.
    from checkray.jobs.zoo.job import resolve_models

    write_recipe(recipe, small_corpus, changed[:1] + changed[3:4], cache_dir=str(out))
    resolved = resolve_models(recipe)
    assert [s.name for s in resolved] == ["tfidf_lr", "vader"]
    assert success_times(out) == after
    assert [s.name for s in resolve_models(out / "zoo.yaml")] == ["tfidf_lr", "vader"]


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_fine_tune_model_through_the_job(ray_session, tmp_path, small_corpus, rt_corpus):
    base = build_tiny_bert(
        tmp_path / "base", rt_corpus.column("text").to_pylist()[:80] + rt_corpus.column("text").to_pylist()[-80:]
    )
    models = [
        {
            "name": "ft",
            "kind": "finetune",
            "encoder": str(base),
            "finetune": {"train_size": 64, "epochs": 1, "max_length": 32, "batch_size": 16},
        }
    ]
    recipe = write_recipe(tmp_path / "recipe.yaml", small_corpus, models, tiny=False)
    from checkray.jobs.zoo.job import run_zoo

    specs = run_zoo(load_config(recipe), str(tmp_path / "zoo"))
    (spec,) = specs
    assert spec.family == "hf" and spec.meta["steps"] == 4 and spec.meta["n_train"] == 128
    assert (tmp_path / "zoo" / spec.path / "config.json").is_file()
    loaded = read_registry(tmp_path / "zoo" / "zoo.yaml")[0]
    assert load_model(loaded).predict_proba(["fine"]).shape == (1, 2)


def test_bad_zoo_inputs_exit_2_with_one_line(tmp_path, small_corpus, capsys):
    recipe = write_recipe(tmp_path / "recipe.yaml", small_corpus, TINY_MODELS)
    assert run_cli("zoo", "--config", str(recipe), "--out", str(tmp_path / "z"), "--only", "nope") == 2
    assert "unknown zoo model(s): nope" in capsys.readouterr().err
    assert run_cli("zoo", "--config", str(recipe), "--out", str(tmp_path / "z"), "--only", "big_mlp") == 2
    assert "no zoo models selected" in capsys.readouterr().err
    assert run_cli("zoo", "--config", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "z")) == 2
    # The session's Ray may print its own log lines (worker output "(pid=...)", core
    # "[2026-... E ...]") to stderr at any moment; the job's own output is what is checked.
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith(("(", "\x1b", "[20"))]
    assert len(err) == 1 and err[0].startswith("error: ")


def test_resolve_models_rejects_other_yaml(tmp_path):
    from checkray.jobs.zoo.job import resolve_models

    (tmp_path / "x.yaml").write_text("topics: {}\n")
    with pytest.raises(InputError, match="neither a model registry"):
        resolve_models(tmp_path / "x.yaml")
    with pytest.raises(InputError, match="not found"):
        resolve_models(tmp_path / "none.yaml")
