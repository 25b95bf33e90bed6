"""The zoo recipe (the ``zoo:`` config section) and the pure pieces of training: the
seeded stratified split, scikit-learn estimators built from a recipe, and accuracy.

Nothing here holds a model between calls; ``actors/zoo/trainers.py`` runs these inside
Ray tasks and saves what they fit.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from checkray.engine.config import Backend, JobSection, Section
from checkray.engine.errors import ConfigError

Kind = Literal["tfidf", "embedding", "finetune", "vader", "textblob", "llm_zero_shot"]
Head = Literal["logreg", "lightgbm", "naive_bayes", "mlp"]
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # a model name is also a stage directory


class TfidfConfig(Section):
    ngram_max: int = Field(default=2, ge=1, le=3)
    min_df: int = Field(default=2, ge=1)
    max_features: int | None = Field(default=50_000, ge=1)
    sublinear_tf: bool = True
    lowercase: bool = True


class FineTuneConfig(Section):
    """Fine-tuning an encoder with a classification head (``kind: finetune``)."""

    train_size: int | None = Field(default=3_000, ge=8)  # sentences drawn from the train split
    epochs: float = Field(default=1.0, gt=0)
    max_length: int = Field(default=64, ge=8)
    batch_size: int = Field(default=32, ge=1)
    learning_rate: float = Field(default=5e-5, gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    warmup_ratio: float = Field(default=0.1, ge=0, lt=1)
    # Batches of similar token length (``epoch_batches``): a batch pads to little more than
    # its own texts, where a random one pads to its longest; on CPU the padding is most of
    # the compute.
    group_by_length: bool = True


class ZooModel(Section):
    """One model of the zoo."""

    name: str
    kind: Kind
    head: Head | None = None  # tfidf / embedding
    encoder: str = "builtin:minilm"  # embedding / finetune: builtin alias, path or hub name
    params: dict[str, Any] = Field(default_factory=dict)  # head hyper-parameters (scikit-learn/LightGBM names)
    finetune: FineTuneConfig = FineTuneConfig()
    seed: int | None = None  # None: the zoo's seed
    tiny: bool = False  # also built in tiny mode (fine-tuning never is)
    # Held-out rows used for the accuracy of slow models (a zero-shot LLM answers ~1/s on
    # CPU); None: all of them. The number evaluated is recorded in the registry.
    eval_sample: int | None = Field(default=None, ge=10)
    # Written to the registry entry: the benchmark samples about this many cases for the
    # model (whole CheckList test cases, every test); None: every case.
    max_cases: int | None = Field(default=None, ge=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"'{v}' must be letters, digits, '_', '.', '-' (it names a directory)")
        return v

    @model_validator(mode="after")
    def _head_fits_kind(self) -> ZooModel:
        if self.kind in ("tfidf", "embedding") and self.head is None:
            raise ValueError(f"model '{self.name}': kind {self.kind} needs a head ({', '.join(Head.__args__)})")
        if self.kind not in ("tfidf", "embedding") and (self.head is not None or self.params):
            raise ValueError(f"model '{self.name}': kind {self.kind} takes no head or params")
        if self.kind == "embedding" and self.head == "naive_bayes":
            raise ValueError(f"model '{self.name}': naive_bayes needs non-negative features (use it with tfidf)")
        if self.head is not None:
            make_head(self.head, self.params, seed=0)  # unknown hyper-parameters fail at load time
        return self


def _default_models() -> list[ZooModel]:
    return [
        ZooModel(name="tfidf_lr", kind="tfidf", head="logreg", params={"C": 4.0}, tiny=True),
        ZooModel(name="tfidf_lr_c1", kind="tfidf", head="logreg", params={"C": 1.0}),
        ZooModel(name="tfidf_lgbm", kind="tfidf", head="lightgbm"),
        ZooModel(name="tfidf_nb", kind="tfidf", head="naive_bayes", tiny=True),
        ZooModel(name="minilm_lr", kind="embedding", head="logreg", tiny=True),
        ZooModel(name="minilm_mlp", kind="embedding", head="mlp"),
        ZooModel(name="mpnet_lr", kind="embedding", head="logreg", encoder="builtin:mpnet"),
        ZooModel(name="minilm_ft", kind="finetune"),
        ZooModel(name="vader", kind="vader", tiny=True),
        ZooModel(name="textblob", kind="textblob", tiny=True),
    ]


class ZooConfig(JobSection):
    """``zoo:`` section: how to split the corpus and which models to build."""

    key: ClassVar[str] = "zoo"

    held_out: float = Field(default=0.2, gt=0, lt=1)  # fraction kept for accuracy
    seed: int = 0  # split seed and default model seed
    tiny: bool = False  # small sample, only models marked tiny, no fine-tuning
    tiny_sample: int = Field(default=300, ge=20)
    cache_dir: str = "runs/zoo"  # where resolve_models builds/reuses the zoo of a recipe
    tfidf: TfidfConfig = TfidfConfig()
    embed_batch_size: int = Field(default=64, ge=1)
    backend: Backend = "auto"  # embedding and fine-tuning device
    models: list[ZooModel] = Field(default_factory=_default_models)

    @model_validator(mode="after")
    def _unique(self) -> ZooConfig:
        names = [m.name for m in self.models]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate model names: {', '.join(dup)}")
        if not names:
            raise ValueError("no models listed")
        return self

    def selected(self) -> list[ZooModel]:
        """The models this run builds (tiny mode: those marked tiny, never a fine-tune)."""
        if not self.tiny:
            return list(self.models)
        return [m for m in self.models if m.tiny and m.kind != "finetune"]


def stratified_split(labels: np.ndarray, held_out: float, seed: int) -> np.ndarray:
    """Boolean mask of held-out rows: seeded, stratified by label."""
    from sklearn.model_selection import train_test_split

    labels = np.asarray(labels)
    values, counts = np.unique(labels, return_counts=True)
    if len(values) < 2:
        raise ConfigError(f"corpus has {len(values)} label value(s); a classifier zoo needs at least 2")
    if counts.min() < 2:
        raise ConfigError(
            f"label '{values[counts.argmin()]}' has {counts.min()} example(s); each needs at least 2 to split"
        )
    idx = np.arange(len(labels))
    n_test = max(int(round(held_out * len(labels))), len(values))
    _, test_idx = train_test_split(idx, test_size=n_test, stratify=labels, random_state=seed)
    mask = np.zeros(len(labels), dtype=bool)
    mask[test_idx] = True
    return mask


# Batches sorted together by length (HF Trainer's LengthGroupedSampler uses the same run):
# long enough that neighbours in length share a batch, short enough that an epoch still
# mixes lengths across its course.
LENGTH_GROUP_BATCHES = 50


def epoch_batches(
    lengths: np.ndarray, steps: int, rng: np.random.Generator, group_by_length: bool = True
) -> list[np.ndarray]:
    """One epoch of a fine-tune: ``steps`` batches of row indices covering every row once.

    Random batches (a permutation split in ``steps``); with ``group_by_length``, the same
    permutation is cut into runs of ``LENGTH_GROUP_BATCHES`` batches, each run is sorted by
    token length (longest first) and re-split into batches of the same sizes, and the
    batches are shuffled, so each batch holds texts of similar length and pads to little
    more than them. Sizes and count are those of the random split."""
    order = rng.permutation(len(lengths))
    batches = np.array_split(order, steps)
    if not group_by_length:
        return batches
    lengths = np.asarray(lengths)
    grouped: list[np.ndarray] = []
    for lo in range(0, len(batches), LENGTH_GROUP_BATCHES):
        run = batches[lo : lo + LENGTH_GROUP_BATCHES]
        rows = np.concatenate(run)
        rows = rows[np.argsort(-lengths[rows], kind="stable")]
        grouped.extend(np.split(rows, np.cumsum([len(b) for b in run])[:-1]))
    return [grouped[i] for i in rng.permutation(len(grouped))]


def padded_tokens(lengths: np.ndarray, batches: list[np.ndarray]) -> int:
    """Token positions the batches compute, each padded to its longest text."""
    lengths = np.asarray(lengths)
    return int(sum(len(b) * int(lengths[b].max()) for b in batches if len(b)))


def make_head(head: str, params: dict[str, Any], seed: int, threads: int = 1):
    """A scikit-learn classifier from a recipe; unknown hyper-parameters are a ConfigError."""
    if head == "logreg":
        from sklearn.linear_model import LogisticRegression

        est = LogisticRegression(max_iter=2000, random_state=seed)
    elif head == "lightgbm":
        from lightgbm import LGBMClassifier

        est = LGBMClassifier(
            n_estimators=300, learning_rate=0.1, num_leaves=31, random_state=seed, n_jobs=threads, verbose=-1
        )
    elif head == "naive_bayes":
        from sklearn.naive_bayes import MultinomialNB

        est = MultinomialNB(alpha=0.5)
    elif head == "mlp":
        from sklearn.neural_network import MLPClassifier

        est = MLPClassifier(hidden_layer_sizes=(256,), early_stopping=True, max_iter=200, random_state=seed)
    else:
        raise ConfigError(f"unknown head '{head}'")
    try:
        return est.set_params(**params)
    except ValueError as exc:
        raise ConfigError(f"head {head}: {str(exc).splitlines()[0]}") from None


def make_text_pipeline(head: str, params: dict[str, Any], tfidf: TfidfConfig, seed: int, threads: int = 1):
    """TF-IDF features + a head, one pipeline that takes raw texts."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import Pipeline

    vectorizer = TfidfVectorizer(
        ngram_range=(1, tfidf.ngram_max),
        min_df=tfidf.min_df,
        max_features=tfidf.max_features,
        sublinear_tf=tfidf.sublinear_tf,
        lowercase=tfidf.lowercase,
        dtype=np.float32,
    )
    return Pipeline([("tfidf", vectorizer), ("clf", make_head(head, params, seed, threads))])


def accuracy(probs: np.ndarray, labels: list[str], gold: list[str]) -> float:
    """Share of rows whose argmax label equals the gold label."""
    if len(gold) == 0:
        return float("nan")
    predicted = np.asarray(labels, dtype=object)[np.asarray(probs).argmax(axis=1)]
    return float(np.mean(predicted == np.asarray(gold, dtype=object)))
