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
model cannot produce (neutral for a binary model) is not used for training; it is still
tested with CheckList's neutral band rule, as in the benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from engine.expectations import ExpectationSettings, evaluate_cases
from engine.models import ModelSpec

TRAINABLE = ("sklearn", "st_head")


def zoo_dir_of(spec: ModelSpec) -> Path | None:
    """The zoo run directory a model was built in (``<zoo>/stages/model-<name>/<file>``)."""
    if not spec.path:
        return None
    path = Path(spec.path)
    root = path.parents[2] if len(path.parents) > 2 else None
    return root if root is not None and (root / "stages" / "split" / "data.parquet").is_file() else None


class PatchableModel:
    """One trainable model: its original training data and how to refit it."""

    def __init__(self, spec: ModelSpec, embed_cache: dict):
        from actors.models.sklearn_models import load_estimator
        from engine.stages import RunDir

        self.spec, self.labels = spec, list(spec.labels)
        self.estimator = load_estimator(spec)
        zoo = zoo_dir_of(spec)
        if zoo is None:
            raise LookupError("no zoo split next to the model file")
        split = RunDir(str(zoo)).read_table("stages/split/data.parquet")
        train = ~split.column("held_out").to_numpy(zero_copy_only=False)
        self.texts = np.asarray(split.column("text").to_pylist(), dtype=object)[train].tolist()
        self.gold = np.asarray(split.column("label").to_pylist(), dtype=object)[train].tolist()
        self.X = None
        self.encoder = str(spec.options.get("encoder", "builtin:minilm"))
        if spec.family == "st_head":
            from actors.zoo_trainers import read_embeddings
            from jobs.zoo import embed_stage_name

            try:
                self.X = read_embeddings(RunDir(str(zoo)), embed_stage_name(self.encoder))[train]
            except (OSError, FileNotFoundError):
                self.X = embed(embed_cache, self.encoder, self.texts)
        self.embed_cache = embed_cache

    def predict(self, estimator, texts: list[str]) -> np.ndarray:
        from actors.models.sklearn_models import EncoderHeadModel, SklearnTextModel

        if self.spec.family == "sklearn":
            return SklearnTextModel(self.spec, estimator).predict_proba(texts)
        return EncoderHeadModel(self.spec, estimator, None).predict_embeddings(embed(self.embed_cache, self.encoder, texts))

    def refit(self, texts: list[str], gold: list[str]):
        from sklearn.base import clone

        keep = [i for i, g in enumerate(gold) if g in self.labels]
        texts, gold = [texts[i] for i in keep], [gold[i] for i in keep]
        est = clone(self.estimator)
        if self.spec.family == "sklearn":
            return est.fit(self.texts + texts, self.gold + gold)
        X = self.X if not texts else np.vstack([self.X, embed(self.embed_cache, self.encoder, texts)])
        return est.fit(X, self.gold + gold)


def embed(cache: dict, encoder: str, texts: list[str]) -> np.ndarray:
    """Normalized embeddings, each distinct text encoded once per encoder."""
    from actors.embedder import load_sentence_transformer

    store = cache.setdefault(encoder, {"model": None, "vectors": {}})
    todo = [t for t in dict.fromkeys(texts) if t not in store["vectors"]]
    if todo:
        if store["model"] is None:
            store["model"] = load_sentence_transformer(encoder)
        vecs = store["model"].encode(todo, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=False)
        store["vectors"].update(zip(todo, vecs))
    return np.vstack([store["vectors"][t] for t in texts]) if texts else np.zeros((0, 1))


def _failure_rate(model: PatchableModel, estimator, test: pa.Table, settings: ExpectationSettings) -> float:
    probs = model.predict(estimator, test.column("text").to_pylist())
    passed = [p for p in evaluate_cases(test, probs, model.labels, settings).passed if p is not None]
    return float(1 - np.mean(passed)) if passed else float("nan")


def _key(row: dict) -> tuple:
    return row["text"], row["text_pair"], row["expected_label"]


def patched_failure_rates(suites: dict[str, pa.Table], specs: Sequence[ModelSpec], seeds: Sequence[int],
                          test_fraction: float, settings: ExpectationSettings,
                          only: Sequence[str] | None = None) -> tuple[list[dict], list[dict]]:
    """(per-seed rows, skipped models with the reason). Rows: model, seed, column, failure_rate."""
    from engine.schema import make_cases

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
    rows = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        n_test = max(1, int(round(test_fraction * len(keys))))
        test_keys = {keys[i] for i in rng.choice(len(keys), size=n_test, replace=False)} if keys else set()
        test = make_cases([{**merged[k], "suite": "common-test", "case_id": None} for k in sorted(test_keys, key=str)])
        remainders = {name: [r for r in t.to_pylist() if r["text_pair"] is None and _key(r) not in test_keys]
                      for name, t in suites.items()}
        for model in models:
            rows.append({"model": model.spec.name, "seed": seed, "column": "Unpatched",
                         "failure_rate": _failure_rate(model, model.estimator, test, settings), "train_cases": 0})
            for name, rest in remainders.items():
                fitted = model.refit([r["text"] for r in rest], [r["expected_label"] for r in rest])
                rows.append({"model": model.spec.name, "seed": seed, "column": name,
                             "failure_rate": _failure_rate(model, fitted, test, settings),
                             "train_cases": sum(r["expected_label"] in model.labels for r in rest)})
    return rows, skipped


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
            line[column] = f"{100 * vals.mean():.1f}±{100 * vals.std(ddof=1) if len(vals) > 1 else 0:.1f}" if len(vals) else ""
        out.append(line)
    return out
