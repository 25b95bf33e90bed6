"""Patched failure rate (TestAug §5.2.1, Table 3): which suite finds more bugs?

Per seed: merge the suites T_1..T_N, sample a common test set T_test from the merged
cases, and for every trainable zoo model and every suite n refit the model on its
original training data plus T_n minus T_test; the failure rate of the refitted model on
T_test is suite n's patched failure rate (lower: the suite taught the model more, i.e.
found more of its bugs). Reported as mean ± std over the seeds, next to the model's
held-out error ("Original") and its failure rate on T_test before patching ("Unpatched").

Trainable: the ``sklearn`` family (TF-IDF pipelines, refitted from a clone of the saved
pipeline) and ``st_head`` (a clone of the head refitted on encoder embeddings); both retrain
in seconds. The original training data is the zoo's split (``<zoo>/stages/split``, and the
embeddings the zoo computed once), found next to the model file. A case whose label the
model cannot produce (neutral for a binary model) is not used for training, and by
default (``patch.test_cases: trainable``) not for testing either: patching a binary model
with polar cases makes it surer, so its failures on neutral cases under CheckList's band
rule grow whichever suite patched it, which says nothing about the suite. With
``test_cases: all`` they are tested by the band rule, as in the benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.expectations import ExpectationSettings, evaluate_cases
from checkray.engine.benchmark.registry import ModelSpec

TRAINABLE = ("sklearn", "st_head")


def zoo_dir_of(spec: ModelSpec) -> Path | None:
    """The zoo run directory a model was built in (``<zoo>/stages/model-<name>/<file>``)."""
    if not spec.path:
        return None
    path = Path(spec.path)
    root = path.parents[2] if len(path.parents) > 2 else None
    return root if root is not None and (root / "stages" / "split" / "data.parquet").is_file() else None


class PatchableModel:
    """One trainable model: its estimator and original training data, as features."""

    def __init__(self, spec: ModelSpec, embed_cache: dict):
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
        if spec.family == "st_head":
            from checkray.actors.zoo.trainers import read_embeddings
            from checkray.jobs.zoo.job import embed_stage_name

            try:  # the embeddings the zoo computed once for this encoder
                self.base = read_embeddings(RunDir(str(zoo)), embed_stage_name(self.encoder))[train]
            except (OSError, FileNotFoundError):
                self.base = embed(embed_cache, self.encoder, texts)

    def features(self, texts: list[str]):
        return texts if self.spec.family == "sklearn" else embed(self.embed_cache, self.encoder, texts)


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
        if spec.family == "sklearn":
            X = list(base) + [add[i] for i in keep]
        else:
            X = np.vstack([base, add[keep]]) if keep else base
        estimator = clone(estimator).fit(X, list(base_gold) + [add_gold[i] for i in keep])
    if spec.family == "sklearn":
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


def _key(row: dict) -> tuple:
    return row["text"], row["text_pair"], row["expected_label"]


def patched_failure_rates(
    suites: dict[str, pa.Table],
    specs: Sequence[ModelSpec],
    seeds: Sequence[int],
    test_fraction: float,
    settings: ExpectationSettings,
    only: Sequence[str] | None = None,
    test_cases: str = "trainable",
) -> tuple[list[dict], list[dict]]:
    """(per-seed rows, skipped models with the reason). Rows: model, seed, column,
    failure_rate, train_cases, test_cases. Every refit is a Ray task when Ray is up (one CPU each)."""
    import ray

    from checkray.engine.schema import make_cases

    merged: dict[tuple, dict] = {}
    for table in suites.values():
        for row in table.to_pylist():
            if row["text_pair"] is None:  # the zoo's models read single texts
                merged.setdefault(_key(row), row)
    keys = sorted(merged, key=str)
    models, skipped, cache = [], [], {}
    for spec in specs:
        if only is not None and spec.name not in only:
            continue
        if spec.family not in TRAINABLE:
            skipped.append({"model": spec.name, "reason": f"family {spec.family} is not refitted (not in {TRAINABLE})"})
            continue
        try:
            models.append(PatchableModel(spec, cache))
        except LookupError as exc:
            skipped.append({"model": spec.name, "reason": str(exc)})
    parallel = ray.is_initialized()
    task = ray.remote(num_cpus=1)(refit_failure_rate) if parallel else None
    put = ray.put if parallel else (lambda x: x)
    bases = {m.spec.name: (put(m.estimator), put(m.base), put(m.gold)) for m in models}
    jobs, rows = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        n_test = max(1, int(round(test_fraction * len(keys))))
        test_keys = {keys[i] for i in rng.choice(len(keys), size=n_test, replace=False)} if keys else set()
        test = make_cases([{**merged[k], "suite": "common-test", "case_id": None} for k in sorted(test_keys, key=str)])
        remainders = {
            name: [r for r in t.to_pylist() if r["text_pair"] is None and _key(r) not in test_keys]
            for name, t in suites.items()
        }
        for model in models:
            est, base, gold = bases[model.spec.name]
            mine = test
            if test_cases == "trainable":
                labels = set(model.labels)
                mine = test.filter(pa.array([g in labels for g in test.column("expected_label").to_pylist()]))
            test_features = model.features(mine.column("text").to_pylist())
            runs = [("Unpatched", None, None)] + [
                (name, model.features([r["text"] for r in rest]), [r["expected_label"] for r in rest])
                for name, rest in remainders.items()
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


def table3(rows: list[dict], specs: Sequence[ModelSpec], columns: Sequence[str]) -> list[dict]:
    """Table 3 layout: model, Original (held-out error), Unpatched and one column per suite,
    as "mean ± std" failure rates in percent over the seeds."""
    out = []
    accuracy = {s.name: s.accuracy for s in specs}
    for model in dict.fromkeys(r["model"] for r in rows):
        line = {"model": model, "Original": "" if accuracy.get(model) is None else f"{100 * (1 - accuracy[model]):.1f}"}
        for column in ["Unpatched", *columns]:
            vals = np.array([r["failure_rate"] for r in rows if r["model"] == model and r["column"] == column])
            vals = vals[~np.isnan(vals)]
            line[column] = (
                f"{100 * vals.mean():.1f}±{100 * vals.std(ddof=1) if len(vals) > 1 else 0:.1f}" if len(vals) else ""
            )
        out.append(line)
    return out
