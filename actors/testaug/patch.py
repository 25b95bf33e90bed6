"""Patched failure rate (TestAug §5.2.1, Table 3): the refits, which hold models.

For each seed's common test set (``engine/testaug/patch.py``) every trainable zoo model is
refitted once per suite, on its original training data plus the suite's remainder, and
scored on the test set; the "Unpatched" run scores the model as it is.

Trainable (``has_trait(spec, "trainable")``): TF-IDF pipelines (``sklearn``, refitted from
a clone of the saved pipeline) and heads on a shared encoder's embeddings (``st_head``, a
clone of the head refitted on the embeddings); both retrain in seconds. The original
training data is the zoo's split (``<zoo>/stages/split``, and the embeddings the zoo
computed once), found next to the model file. Every refit is a Ray task when Ray is up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.expectations import ExpectationSettings, evaluate_cases
from checkray.engine.benchmark.families import has_trait
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.testaug.config import PatchConfig
from checkray.engine.testaug.patch import UNPATCHED, cases_with_labels, common_test_split, merged_cases


def zoo_dir_of(spec: ModelSpec) -> Path | None:
    """The zoo run directory a model was built in (``<zoo>/stages/model-<name>/<file>``)."""
    if not spec.path:
        return None
    path = Path(spec.path)
    root = path.parents[2] if len(path.parents) > 2 else None
    return root if root is not None and (root / "stages" / "split" / "data.parquet").is_file() else None


class PatchableModel:
    """One trainable model: its estimator and original training data, as features.
    ``embeddings_stage(encoder)``: the zoo stage that embedded its split with ``encoder``."""

    def __init__(self, spec: ModelSpec, embed_cache: dict, embeddings_stage: Callable[[str], str]):
        from checkray.actors.models.sklearn_models import load_estimator
        from checkray.engine.stages import RunDir

        self.spec, self.labels = spec, list(spec.labels)
        self.estimator = load_estimator(spec)
        zoo = zoo_dir_of(spec)
        if zoo is None:
            raise LookupError("no zoo split next to the model file")
        split = RunDir(str(zoo)).read_table("stages/split/data.parquet")
        train = ~split.column("held_out").to_numpy(zero_copy_only=False)
        texts = np.asarray(split.column("text").to_pylist(), dtype=object)[train].tolist()
        self.gold = np.asarray(split.column("label").to_pylist(), dtype=object)[train].tolist()
        self.encoder = str(spec.options.get("encoder", "builtin:minilm"))
        self.embed_cache = embed_cache
        self.base = texts
        self.reads_embeddings = has_trait(spec, "shared_encoder")  # a head on encoder embeddings, else texts
        if self.reads_embeddings:
            from checkray.actors.zoo.trainers import read_embeddings

            try:  # the embeddings the zoo computed once for this encoder
                self.base = read_embeddings(RunDir(str(zoo)), embeddings_stage(self.encoder))[train]
            except (OSError, FileNotFoundError):
                self.base = embed(embed_cache, self.encoder, texts)

    def features(self, texts: list[str]):
        return embed(self.embed_cache, self.encoder, texts) if self.reads_embeddings else texts


def refit_failure_rate(
    spec: ModelSpec,
    estimator,
    base,
    base_gold: list[str],
    add,
    add_gold: list[str] | None,
    test_features,
    test: pa.Table,
    settings: ExpectationSettings,
) -> float:
    """Refit a clone of ``estimator`` on base + added training data (``add`` None: no
    refit, the model as it is) and return its failure rate on the ``test`` cases."""
    from sklearn.base import clone

    from checkray.actors.models.sklearn_models import EncoderHeadModel, SklearnTextModel

    if add is not None:
        labels = set(spec.labels)
        keep = [i for i, g in enumerate(add_gold) if g in labels]  # e.g. no neutral for a binary model
        if not has_trait(spec, "shared_encoder"):  # a text pipeline
            X = list(base) + [add[i] for i in keep]
        else:
            X = np.vstack([base, add[keep]]) if keep else base
        estimator = clone(estimator).fit(X, list(base_gold) + [add_gold[i] for i in keep])
    if not has_trait(spec, "shared_encoder"):
        probs = SklearnTextModel(spec, estimator).predict_proba(test_features)
    else:
        probs = EncoderHeadModel(spec, estimator, None).predict_embeddings(test_features)
    passed = [p for p in evaluate_cases(test, probs, list(spec.labels), settings).passed if p is not None]
    return float(1 - np.mean(passed)) if passed else float("nan")


def embed(cache: dict, encoder: str, texts: list[str]) -> np.ndarray:
    """Normalized embeddings, each distinct text encoded once per encoder."""
    from checkray.actors.embedder import load_sentence_transformer

    store = cache.setdefault(encoder, {"model": None, "vectors": {}})
    todo = [t for t in dict.fromkeys(texts) if t not in store["vectors"]]
    if todo:
        if store["model"] is None:
            store["model"] = load_sentence_transformer(encoder)
        vecs = store["model"].encode(
            todo, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        store["vectors"].update(zip(todo, vecs))
    return np.vstack([store["vectors"][t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)


def patchable_models(
    specs: Sequence[ModelSpec], only: Sequence[str] | None, embeddings_stage: Callable[[str], str]
) -> tuple[list[PatchableModel], list[dict]]:
    """(the models to refit, the others with the reason): trainable models with a zoo
    split next to their file, among ``only`` when given."""
    models, skipped, cache = [], [], {}
    for spec in specs:
        if only is not None and spec.name not in only:
            continue
        if not has_trait(spec, "trainable"):
            skipped.append({"model": spec.name, "reason": f"family {spec.family} is not refitted (not trainable)"})
            continue
        try:
            models.append(PatchableModel(spec, cache, embeddings_stage))
        except LookupError as exc:
            skipped.append({"model": spec.name, "reason": str(exc)})
    return models, skipped


def patched_failure_rates(
    suites: dict[str, pa.Table],
    specs: Sequence[ModelSpec],
    config: PatchConfig,
    settings: ExpectationSettings,
    *,
    embeddings_stage: Callable[[str], str],
) -> tuple[list[dict], list[dict]]:
    """(per-seed rows, skipped models with the reason). Rows: model, seed, column,
    failure_rate, train_cases, test_cases. ``config``: the seeds, the test fraction, which
    models and which test cases (``patch:``). Every refit is a Ray task when Ray is up
    (one CPU each)."""
    import ray

    merged = merged_cases(suites)
    models, skipped = patchable_models(specs, config.models, embeddings_stage)
    parallel = ray.is_initialized()
    task = ray.remote(num_cpus=1)(refit_failure_rate) if parallel else None
    put = ray.put if parallel else (lambda x: x)
    bases = {m.spec.name: (put(m.estimator), put(m.base), put(m.gold)) for m in models}
    jobs, rows = [], []
    for seed in config.seeds:
        split = common_test_split(suites, merged, seed, config.test_fraction)
        for model in models:
            est, base, gold = bases[model.spec.name]
            mine = cases_with_labels(split.test, model.labels) if config.test_cases == "trainable" else split.test
            test_features = model.features(mine.column("text").to_pylist())
            runs = [(UNPATCHED, None, None)] + [
                (name, model.features([r["text"] for r in rest]), [r["expected_label"] for r in rest])
                for name, rest in split.remainders.items()
            ]
            for column, add, add_gold in runs:
                args = (model.spec, est, base, gold, add, add_gold, test_features, mine, settings)
                jobs.append(task.remote(*args) if parallel else refit_failure_rate(*args))
                rows.append(
                    {
                        "model": model.spec.name,
                        "seed": seed,
                        "column": column,
                        "train_cases": sum(g in model.labels for g in add_gold or []),
                        "test_cases": mine.num_rows,
                    }
                )
    rates = ray.get(jobs) if parallel else jobs
    return [{**r, "failure_rate": rate} for r, rate in zip(rows, rates)], skipped
