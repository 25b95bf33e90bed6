"""Validity classifiers for TestAug (§4.2).

Two backends (``engine/testaug/validity.py`` ``VALIDITY_BACKENDS``), one directory format
(``metadata.json`` + the weights):

* ``embedding_lr`` (``EmbeddingHead``): sentence embeddings (MiniLM by default,
  ``actors/embedder.py``) and a class-balanced logistic regression (``head.joblib``);
  trains in seconds on CPU.
* ``finetune`` (``FineTunedEncoder``): the encoder's transformer fine-tuned with a
  classification head (the zoo's PyTorch loop, ``actors/zoo/trainers.fine_tune``), saved
  under ``model/``; the paper fine-tuned roberta-base the same way.

``ValidityClassifier.predict_proba`` returns P(valid) per input; the classifier holds what
every backend shares (encoder, decision threshold, calibration, metadata, storage) and
hands the weights to its backend's model. The LLM labeler, which judges cases when nobody
annotated them, is ``checkray.engine.testaug.validity.llm_label``.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from checkray.engine.errors import InputError
from checkray.engine.schema import normalize_text
from checkray.engine.stages import RunDir
from checkray.engine.testaug.config import ValidityConfig
from checkray.engine.testaug.validity import VALIDITY_BACKENDS, classifier_input
from checkray.engine.training import FineTuneConfig
from checkray.engine.trust import SIGNATURE_SUFFIX, load_pickle, pickle_bytes

METADATA = "metadata.json"
LABELS = ["invalid", "valid"]
OnStep = Callable[[int, int], None]  # (done, total) optimizer steps: a fine-tune's progress


class ValidityModel(Protocol):
    """The weights of one backend (the class a ``VALIDITY_BACKENDS`` record names)."""

    @classmethod
    def untrained(cls, clf: ValidityClassifier) -> ValidityModel:
        """A model to fit, with the classifier's settings (encoder, class weight ...)."""

    @classmethod
    def load(cls, directory: Path, clf: ValidityClassifier) -> ValidityModel:
        """The weights saved in ``directory`` by ``save``."""

    def fit(self, texts: list[str], valid: list[int], seed: int, on_step: OnStep | None = None) -> dict[str, Any]:
        """Fit on the inputs (refitting replaces the weights); returns what to add to the
        classifier's metadata."""

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(valid) per (non-empty list of) inputs."""

    def save(self, run: RunDir) -> None:
        """Write the weights into the classifier's directory."""

    def to_cpu(self) -> None:
        """Weights on the CPU: trained on a worker's GPU, used by a driver without one."""


class EmbeddingHead:
    """``embedding_lr``: a logistic regression on normalized sentence embeddings."""

    def __init__(self, encoder: str, class_weight: str, head: Any = None):
        self.encoder_name, self.class_weight, self.head = encoder, class_weight, head
        self._encoder: Any = None  # the sentence transformer, loaded on first use

    @classmethod
    def untrained(cls, clf: ValidityClassifier) -> EmbeddingHead:
        return cls(clf.encoder, clf.class_weight)

    @classmethod
    def load(cls, directory: Path, clf: ValidityClassifier) -> EmbeddingHead:
        return cls(
            clf.encoder, clf.class_weight, load_pickle(directory / "head.joblib", f"validity classifier {directory}")
        )

    def fit(self, texts: list[str], valid: list[int], seed: int, on_step: OnStep | None = None) -> dict[str, Any]:
        from sklearn.linear_model import LogisticRegression

        weight = "balanced" if self.class_weight == "balanced" else None
        self.head = LogisticRegression(max_iter=2000, class_weight=weight, random_state=seed).fit(
            self._embed(texts), valid
        )
        return {}

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        probs = self.head.predict_proba(self._embed(texts))
        return probs[:, list(self.head.classes_).index(1)]

    def save(self, run: RunDir) -> None:
        data, signature = pickle_bytes(self.head)  # signed: loading it needs no --trust-code
        run.write_bytes("head.joblib", data)
        run.write_text("head.joblib" + SIGNATURE_SUFFIX, signature)

    def to_cpu(self) -> None:
        """A scikit-learn head is on the CPU already."""

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._encoder is None:
            from checkray.actors.embedder import load_sentence_transformer

            self._encoder = load_sentence_transformer(self.encoder_name)
        return self._encoder.encode(
            list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


class FineTunedEncoder:
    """``finetune``: the encoder fine-tuned with a classification head; an ensemble of
    members fine-tuned with seeds seed, seed+1, ... averages their P(valid) (the runs
    differ in initialisation, oversampling and batch order)."""

    def __init__(
        self,
        encoder: str,
        finetune: FineTuneConfig,
        class_weight: str = "balanced",
        ensemble: int = 1,
        members: list[tuple[Any, Any]] | None = None,
        max_length: int | None = None,
    ):
        self.encoder, self.finetune, self.class_weight, self.ensemble = encoder, finetune, class_weight, ensemble
        self.members: list[tuple[Any, Any]] = list(members or [])  # (model, tokenizer)
        self.max_length = max_length or finetune.max_length  # what the members were trained to read
        # Members loaded from a folder run inference on ONNX Runtime on CPU when the encoder
        # setting says so (engine/inference.py); one forward pass each, built on first use.
        self.folders: list[str | None] = []
        self._onnx: dict[int, Any] = {}

    @classmethod
    def untrained(cls, clf: ValidityClassifier) -> FineTunedEncoder:
        return cls(clf.encoder, clf.finetune, clf.class_weight, clf.ensemble)

    @classmethod
    def load(cls, directory: Path, clf: ValidityClassifier) -> FineTunedEncoder:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        members = []
        for i in range(clf.ensemble):
            folder = directory / _member_dir(i)
            if not folder.is_dir():
                raise InputError(
                    f"{directory}: ensemble member {i} is missing ({folder.name}/); train the classifier again"
                )
            members.append(
                (
                    AutoModelForSequenceClassification.from_pretrained(folder).eval(),
                    AutoTokenizer.from_pretrained(folder),
                )
            )
        trained = clf.meta.get("finetune", {})
        loaded = cls(
            clf.encoder,
            clf.finetune,
            clf.class_weight,
            clf.ensemble,
            members,
            int(trained.get("max_length", clf.finetune.max_length)),
        )
        loaded.folders = [str(directory / _member_dir(i)) for i in range(clf.ensemble)]
        return loaded

    def _onnx_member(self, k: int):
        """Member ``k``'s forward pass on ONNX Runtime, or None (PyTorch): a member trained in
        this process (it stays on PyTorch, as its figures were measured), on a GPU, or the
        setting says torch."""
        from checkray.engine.inference import is_torch, precision_of, resolve_encoder

        model, tokenizer = self.members[k]
        backend = resolve_encoder()
        folder = self.folders[k] if k < len(self.folders) else None
        if is_torch(backend) or folder is None or model.device.type != "cpu":
            return None
        if k not in self._onnx:
            from checkray.actors.onnx_models import OnnxLogits

            self._onnx[k] = OnnxLogits(model, tokenizer, precision_of(backend))
        return self._onnx[k]

    def fit(self, texts: list[str], valid: list[int], seed: int, on_step: OnStep | None = None) -> dict[str, Any]:
        from checkray.actors.embedder import resolve_model
        from checkray.actors.zoo.trainers import fine_tune

        self.members, self.folders, self._onnx, details = [], [], {}, {}
        for k, member_seed in enumerate(range(seed, seed + self.ensemble)):
            order = oversample(valid, member_seed) if self.class_weight == "balanced" else list(range(len(valid)))
            model, tokenizer, details = fine_tune(
                resolve_model(self.encoder),
                [texts[i] for i in order],
                [LABELS[valid[i]] for i in order],
                LABELS,
                self.finetune,
                member_seed,
                on_step=_member_steps(on_step, k, self.ensemble),
            )
            self.members.append((model, tokenizer))
        self.max_length = self.finetune.max_length
        return {"finetune": {**self.finetune.model_dump(), **details, "ensemble": self.ensemble}}

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(valid): the members' average."""
        return np.mean([self._member_proba(k, list(texts)) for k in range(len(self.members))], axis=0)

    def _member_proba(self, k: int, texts: list[str]) -> np.ndarray:
        import torch
        from scipy.special import softmax

        from checkray.engine.inference import resolve_encoder, torch_autocast

        model, tokenizer = self.members[k]
        onnx = self._onnx_member(k)
        backend = resolve_encoder()  # once: resolving ``auto`` asks Ray
        out = []
        for i in range(0, len(texts), 32):
            batch = texts[i : i + 32]
            if onnx is not None:
                enc = tokenizer(batch, truncation=True, max_length=self.max_length, padding=True, return_tensors="np")
                out.append(softmax(onnx(enc).astype(np.float64), axis=-1)[:, 1])
                continue
            enc = tokenizer(batch, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt").to(
                model.device
            )  # a fine-tune on a GPU leaves its model there
            with torch.no_grad(), torch_autocast(backend):  # bf16 on CPU for torch-bf16
                out.append(torch.softmax(model(**enc).logits.float(), dim=-1)[:, 1].cpu().numpy())
        return np.concatenate(out)

    def save(self, run: RunDir) -> None:
        for i, (model, tokenizer) in enumerate(self.members):
            with tempfile.TemporaryDirectory(prefix="validity-ft-") as tmp:
                model.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
                for f in sorted(Path(tmp).rglob("*")):
                    if f.is_file():
                        run.write_bytes(f"{_member_dir(i)}/{f.relative_to(tmp).as_posix()}", f.read_bytes())

    def to_cpu(self) -> None:
        self.members = [(model.to("cpu"), tokenizer) for model, tokenizer in self.members]


@dataclass
class ValidityClassifier:
    backend: str  # a name in VALIDITY_BACKENDS
    encoder: str = "builtin:minilm"
    finetune: FineTuneConfig = field(
        default_factory=lambda: FineTuneConfig(
            epochs=3, train_size=None, max_length=64, batch_size=16, learning_rate=5e-5, group_by_length=False
        )
    )
    meta: dict[str, Any] = field(default_factory=dict)
    # "balanced": the minority class weighs as much as the majority (the logistic head's
    # class_weight; the fine-tune oversamples the minority class to the same count).
    class_weight: str = "balanced"
    # Calibrate the decision threshold on a held-out share of the training cases (the
    # threshold of best accuracy there) instead of P(valid) >= 0.5.
    calibrate: bool = False
    threshold: float = 0.5
    # finetune: members fine-tuned with seeds seed, seed+1, ...; P(valid) is their mean.
    ensemble: int = 1
    model: ValidityModel | None = None  # the backend's weights, once fitted or loaded

    def __post_init__(self):
        if self.backend not in VALIDITY_BACKENDS:
            raise InputError(
                f"unknown validity backend '{self.backend}' (have: {', '.join(VALIDITY_BACKENDS.names())})"
            )
        if self.class_weight not in ("balanced", "none"):
            raise InputError(f"unknown class_weight '{self.class_weight}' (have: balanced, none)")
        if self.ensemble < 1:
            raise InputError(f"validity ensemble must be at least 1, got {self.ensemble}")

    @classmethod
    def from_config(cls, config: ValidityConfig) -> ValidityClassifier:
        """An untrained classifier of the ``validity:`` section's backend and settings."""
        return cls(
            config.backend,
            config.encoder or VALIDITY_BACKENDS.record(config.backend).default_encoder,
            finetune=config.finetune,
            class_weight=config.class_weight,
            calibrate=config.calibrate,
            ensemble=config.ensemble,
        )

    def _backend_model(self) -> type[ValidityModel]:
        return VALIDITY_BACKENDS.get(self.backend)

    # ------------------------------------------------------------------ training
    def fit(
        self,
        texts: Sequence[str],
        valid: Sequence[int],
        seed: int = 0,
        on_step: OnStep | None = None,
    ) -> ValidityClassifier:
        """``on_step(done, total)``: the fine-tune's optimizer steps over all members (progress)."""
        valid = [int(v) for v in valid]
        if len(set(valid)) < 2:
            raise InputError(
                f"validity annotations need valid and invalid cases (got only "
                f"{'valid' if valid and valid[0] else 'invalid'} ones)"
            )
        start = time.perf_counter()
        texts = list(texts)
        self.model = self._backend_model().untrained(self)
        if self.calibrate:
            self._fit_calibrated(texts, valid, seed, on_step)
        else:
            self.meta.update(self.model.fit(texts, valid, seed, on_step))
        self.meta.update(
            n_train=len(valid),
            n_valid=sum(valid),
            seed=seed,
            class_weight=self.class_weight,
            threshold=self.threshold,
            train_seconds=round(time.perf_counter() - start, 1),
        )
        return self

    def _fit_calibrated(self, texts: list[str], valid: list[int], seed: int, on_step: OnStep | None) -> None:
        """Fit on 80 % of the cases and choose the threshold of best accuracy on the rest;
        a quick backend is then refitted on every case, keeping that threshold."""
        from sklearn.model_selection import train_test_split

        fit_idx, cal_idx = train_test_split(
            np.arange(len(valid)), test_size=CALIBRATION_SHARE, stratify=valid, random_state=seed
        )
        self.meta.update(self.model.fit([texts[i] for i in fit_idx], [valid[i] for i in fit_idx], seed, on_step))
        probs = self.predict_proba([texts[i] for i in cal_idx])
        self.threshold = best_threshold(probs, np.array([valid[i] for i in cal_idx]))
        self.meta["calibration"] = {"cases": len(cal_idx), "threshold": self.threshold}
        if VALIDITY_BACKENDS.record(self.backend).quick:
            self.meta.update(self.model.fit(texts, valid, seed))

    # ------------------------------------------------------------------ inference
    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(valid) for each input (``checkray.engine.testaug.validity.classifier_input`` strings)."""
        if not texts:
            return np.zeros(0)
        if self.model is None:
            raise RuntimeError("the validity classifier is not trained: fit or load it first")
        return self.model.predict_proba(texts)

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        return self.predict_proba(texts) >= self.threshold

    @property
    def descriptions(self) -> list[str] | None:
        """The test descriptions its annotations were for; None: annotations that named
        none (the classifier is then taken to judge any description)."""
        found = self.meta.get("descriptions")
        return list(found) if found else None

    @property
    def reads_description(self) -> bool:
        """Whether its inputs lead with the case's description (trained on several)."""
        return bool(self.meta.get("reads_description"))

    def covers(self, description: str) -> bool:
        """Whether it may judge cases of ``description``: validity is relative to a
        description (TestAug trains one classifier per description), so a classifier
        trained on "negated positive words" says nothing about "positive questions"."""
        known = self.descriptions
        return known is None or normalize_text(description) in {normalize_text(d) for d in known}

    # ------------------------------------------------------------------ storage
    def save(self, out: str) -> RunDir:
        if self.model is None:
            raise RuntimeError("the validity classifier is not trained: nothing to save")
        run = RunDir(out)
        run.claim("validity")  # never into a directory that is not a classifier's
        # A classifier saved over an older one: until the new metadata is written last, the
        # directory reads as a save in progress, never as the old metadata over new weights.
        run.write_text(METADATA, json.dumps({"saving": True}))
        self.model.save(run)
        meta = {"backend": self.backend, "encoder": self.encoder, "labels": LABELS, **self.meta}
        run.write_text(METADATA, json.dumps(meta, indent=2, sort_keys=True))  # last: marks a complete save
        return run

    @classmethod
    def load(cls, directory: str) -> ValidityClassifier:
        d = Path(directory)
        if not (d / METADATA).is_file():
            raise InputError(
                f"{d}: not a validity classifier directory (no {METADATA}); make one with `checkray validity train`"
            )
        meta = json.loads((d / METADATA).read_text(encoding="utf-8"))
        if meta.get("saving"):
            raise InputError(f"{d}: the classifier's save did not finish; train it again")
        backend, encoder = meta.pop("backend", None), meta.pop("encoder", "builtin:minilm")
        meta.pop("labels", None)
        clf = cls(
            backend,
            encoder,
            meta=meta,
            threshold=float(meta.get("threshold", 0.5)),
            ensemble=int(meta.get("finetune", {}).get("ensemble", 1)),
        )
        clf.model = clf._backend_model().load(d, clf)
        return clf


def _member_steps(
    on_step: Callable[[int, int], None] | None, k: int, members: int
) -> Callable[[int, int], None] | None:
    """Member k's (done, total) as steps of the whole ensemble (members train alike)."""
    if on_step is None:
        return None
    return lambda done, total: on_step(k * total + done, members * total)


def _member_dir(i: int) -> str:
    """Member 0 keeps the single model's folder name, so older directories still load."""
    return "model" if i == 0 else f"model-{i}"


CALIBRATION_SHARE = 0.2  # of the training cases, held out to choose the threshold


def oversample(valid: Sequence[int], seed: int) -> list[int]:
    """Indices of every case plus minority-class cases drawn again (seeded, without
    replacement while they last) until both classes count the same: class weighting for a
    loss that takes none."""
    y = np.asarray(valid)
    counts = {c: int((y == c).sum()) for c in (0, 1)}
    minority = min(counts, key=counts.get)
    pool = np.flatnonzero(y == minority)
    need = counts[1 - minority] - counts[minority]
    rng = np.random.default_rng(seed)
    extra = np.concatenate([rng.permutation(pool) for _ in range(need // len(pool) + 1)])[:need] if need else []
    order = np.concatenate([np.arange(len(y)), np.asarray(extra, dtype=int)])
    return rng.permutation(order).tolist()


def best_threshold(probs: np.ndarray, gold: np.ndarray) -> float:
    """The P(valid) cut-off of best accuracy on (probs, gold); among equals, the one closest
    to 0.5. Candidates: midpoints between consecutive distinct probabilities, and 0.5."""
    values = np.unique(probs)
    cuts = np.unique(np.concatenate([[0.5], (values[:-1] + values[1:]) / 2])) if len(values) > 1 else np.array([0.5])
    acc = np.array([((probs >= c).astype(int) == gold).mean() for c in cuts])
    best = np.flatnonzero(acc == acc.max())
    return float(cuts[best[np.argmin(np.abs(cuts[best] - 0.5))]])


def annotated_descriptions(rows: Sequence[dict]) -> list[str]:
    """The distinct descriptions annotated rows name (TestAug's files carry one per row)."""
    return sorted({" ".join(str(r["description"]).split()) for r in rows if r.get("description")})


def annotation_inputs(rows: Sequence[dict], *, with_description: bool = False) -> list[str]:
    return [
        classifier_input(r["text"], r.get("text_pair"), r.get("description") if with_description else None)
        for r in rows
    ]


def train_validity(rows: Sequence[dict], config: ValidityConfig, on_step: OnStep | None = None) -> ValidityClassifier:
    """Fit a classifier of the ``validity:`` section's backend and settings on annotated
    rows (``checkray.engine.testaug.validity.read_annotations``), seeded with
    ``config.seed``; ``on_step(done, total)``: the fine-tune's progress."""
    clf = ValidityClassifier.from_config(config)
    descriptions = annotated_descriptions(rows)
    clf.meta["descriptions"] = descriptions
    # One description (TestAug's case: a classifier per description) needs only the text;
    # several are told apart by leading each input with its description.
    clf.meta["reads_description"] = len(descriptions) > 1
    _need_descriptions(clf, rows)
    inputs = annotation_inputs(rows, with_description=clf.reads_description)
    return clf.fit(inputs, [r["validity"] for r in rows], config.seed, on_step)


def train_validity_on_worker(rows: Sequence[dict], config: ValidityConfig) -> ValidityClassifier:
    """``train_validity`` as a Ray task body (a cluster's GPU): the classifier comes back
    with its models on the CPU, so a driver without a GPU can unpickle, score and save it."""
    clf = train_validity(rows, config)
    clf.model.to_cpu()
    return clf


def _need_descriptions(clf: ValidityClassifier, rows: Sequence[dict]) -> None:
    """A classifier of several descriptions reads each case's: every row must name it."""
    unnamed = sum(1 for r in rows if not r.get("description"))
    if clf.reads_description and unnamed:
        raise InputError(
            f"the classifier judges {len(clf.descriptions or [])} descriptions but {unnamed} rows name none: "
            "with several descriptions every row needs its 'description'"
        )


def score_validity(clf: ValidityClassifier, rows: Sequence[dict], probs: np.ndarray | None = None) -> dict[str, Any]:
    """Accuracy (with its Wilson 95 % interval: on a few hundred cases an accuracy moves by
    several points from split to split), F1 of the valid class and the valid share.
    ``probs``: the classifier's P(valid) on ``rows`` when the caller already has them."""
    from scipy.stats import binomtest
    from sklearn.metrics import accuracy_score, f1_score

    _need_descriptions(clf, rows)
    gold = np.array([r["validity"] for r in rows], dtype=int)
    if probs is None:
        probs = clf.predict_proba(annotation_inputs(rows, with_description=clf.reads_description))
    pred = (np.asarray(probs) >= clf.threshold).astype(int)
    interval = binomtest(int((pred == gold).sum()), len(gold)).proportion_ci(method="wilson")
    return {
        "n": len(gold),
        "accuracy": float(accuracy_score(gold, pred)),
        "accuracy_ci95": [round(float(interval.low), 4), round(float(interval.high), 4)],
        "f1_valid": float(f1_score(gold, pred, zero_division=0)),
        "valid_share": float(gold.mean()),
    }
