"""Validity classifiers for TestAug (§4.2) and the LLM labeler.

Two backends, one directory format (``metadata.json`` + the weights):

* ``embedding_lr``: sentence embeddings (MiniLM by default, ``actors/embedder.py``) and a
  class-balanced logistic regression (``head.joblib``); trains in seconds on CPU.
* ``finetune``: the encoder's transformer fine-tuned with a classification head (the zoo's
  PyTorch loop, ``actors/zoo_trainers.fine_tune``), saved under ``model/``; the paper
  fine-tuned roberta-base the same way.

``predict_proba`` returns P(valid) per input. When nobody annotated anything, the LLM
labeler (``llm_label``) can judge cases with the ``testaug_validity`` prompt.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from checkray.engine.errors import InputError
from checkray.engine.llm import GenerationParams
from checkray.engine.prompts import load_prompt
from checkray.engine.schema import normalize_text
from checkray.engine.stages import RunDir
from checkray.engine.testaug.prompt import ParseCount
from checkray.engine.testaug.validity import classifier_input, parse_validity_answer
from checkray.engine.training import FineTuneConfig
from checkray.engine.trust import SIGNATURE_SUFFIX, load_pickle, pickle_bytes

BACKENDS: tuple[str, ...] = ("embedding_lr", "finetune")
METADATA = "metadata.json"
LABELS = ["invalid", "valid"]


@dataclass
class ValidityClassifier:
    backend: str
    encoder: str = "builtin:minilm"
    finetune: FineTuneConfig = field(
        default_factory=lambda: FineTuneConfig(
            epochs=3, train_size=None, max_length=64, batch_size=16, learning_rate=5e-5
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
    # finetune: members fine-tuned with seeds seed, seed+1, ...; P(valid) is their mean
    # (the runs differ in initialisation, oversampling and batch order).
    ensemble: int = 1
    _head: Any = None
    _encoder: Any = None
    _members: list[tuple[Any, Any]] = field(default_factory=list)  # finetune: (model, tokenizer)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise InputError(f"unknown validity backend '{self.backend}' (have: {', '.join(BACKENDS)})")
        if self.class_weight not in ("balanced", "none"):
            raise InputError(f"unknown class_weight '{self.class_weight}' (have: balanced, none)")
        if self.ensemble < 1:
            raise InputError(f"validity ensemble must be at least 1, got {self.ensemble}")

    # ------------------------------------------------------------------ training
    def fit(
        self,
        texts: Sequence[str],
        valid: Sequence[int],
        seed: int = 0,
        on_step: Callable[[int, int], None] | None = None,
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
        if self.calibrate:
            from sklearn.model_selection import train_test_split

            fit_idx, cal_idx = train_test_split(
                np.arange(len(valid)), test_size=CALIBRATION_SHARE, stratify=valid, random_state=seed
            )
            self._fit([texts[i] for i in fit_idx], [valid[i] for i in fit_idx], seed, on_step)
            probs = self.predict_proba([texts[i] for i in cal_idx])
            self.threshold = best_threshold(probs, np.array([valid[i] for i in cal_idx]))
            self.meta["calibration"] = {"cases": len(cal_idx), "threshold": self.threshold}
            if self.backend == "embedding_lr":  # cheap: refit the head on every case, keep the threshold
                self._fit(texts, valid, seed)
        else:
            self._fit(texts, valid, seed, on_step)
        self.meta.update(
            n_train=len(valid),
            n_valid=sum(valid),
            seed=seed,
            class_weight=self.class_weight,
            threshold=self.threshold,
            train_seconds=round(time.perf_counter() - start, 1),
        )
        return self

    def _fit(self, texts: list[str], valid: list[int], seed: int, on_step=None) -> None:
        if self.backend == "embedding_lr":
            from sklearn.linear_model import LogisticRegression

            X = self._embed(texts)
            weight = "balanced" if self.class_weight == "balanced" else None
            self._head = LogisticRegression(max_iter=2000, class_weight=weight, random_state=seed).fit(X, valid)
            return
        from checkray.actors.embedder import resolve_model
        from checkray.actors.zoo.trainers import fine_tune

        self._members = []
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
            self._members.append((model, tokenizer))
        self.meta["finetune"] = {**self.finetune.model_dump(), **details, "ensemble": self.ensemble}

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._encoder is None:
            from checkray.actors.embedder import load_sentence_transformer

            self._encoder = load_sentence_transformer(self.encoder)
        return self._encoder.encode(
            list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    # ------------------------------------------------------------------ inference
    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(valid) for each input (``checkray.engine.testaug.validity.classifier_input`` strings)."""
        if not texts:
            return np.zeros(0)
        if self.backend == "embedding_lr":
            probs = self._head.predict_proba(self._embed(texts))
            return probs[:, list(self._head.classes_).index(1)]
        import torch

        max_length = int(self.meta.get("finetune", {}).get("max_length", self.finetune.max_length))
        per_member = []
        with torch.no_grad():
            for model, tokenizer in self._members:
                out = []
                for i in range(0, len(texts), 32):
                    enc = tokenizer(
                        list(texts[i : i + 32]),
                        truncation=True,
                        max_length=max_length,
                        padding=True,
                        return_tensors="pt",
                    ).to(model.device)  # a fine-tune on a GPU leaves its model there
                    out.append(torch.softmax(model(**enc).logits, dim=-1)[:, 1].cpu().numpy())
                per_member.append(np.concatenate(out))
        return np.mean(per_member, axis=0)

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
        run = RunDir(out)
        run.claim("validity")  # never into a directory that is not a classifier's
        # A classifier saved over an older one: until the new metadata is written last, the
        # directory reads as a save in progress, never as the old metadata over new weights.
        run.write_text(METADATA, json.dumps({"saving": True}))
        if self.backend == "embedding_lr":
            data, signature = pickle_bytes(self._head)  # signed: loading it needs no --trust-code
            run.write_bytes("head.joblib", data)
            run.write_text("head.joblib" + SIGNATURE_SUFFIX, signature)
        else:
            for i, (model, tokenizer) in enumerate(self._members):
                with tempfile.TemporaryDirectory(prefix="validity-ft-") as tmp:
                    model.save_pretrained(tmp)
                    tokenizer.save_pretrained(tmp)
                    for f in sorted(Path(tmp).rglob("*")):
                        if f.is_file():
                            run.write_bytes(f"{_member_dir(i)}/{f.relative_to(tmp).as_posix()}", f.read_bytes())
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
        clf = cls(backend, encoder, meta=meta, threshold=float(meta.get("threshold", 0.5)))
        if backend == "embedding_lr":
            clf._head = load_pickle(d / "head.joblib", f"validity classifier {d}")
        else:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            members = int(meta.get("finetune", {}).get("ensemble", 1))
            clf.ensemble = members
            for i in range(members):
                folder = d / _member_dir(i)
                if not folder.is_dir():
                    raise InputError(
                        f"{d}: ensemble member {i} is missing ({folder.name}/); train the classifier again"
                    )
                clf._members.append(
                    (
                        AutoModelForSequenceClassification.from_pretrained(folder).eval(),
                        AutoTokenizer.from_pretrained(folder),
                    )
                )
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


def annotation_inputs(rows: Sequence[dict], with_description: bool = False) -> list[str]:
    return [
        classifier_input(r["text"], r.get("text_pair"), r.get("description") if with_description else None)
        for r in rows
    ]


def train_validity(
    rows: Sequence[dict],
    backend: str,
    encoder: str,
    seed: int = 0,
    finetune: FineTuneConfig | None = None,
    class_weight: str = "balanced",
    calibrate: bool = False,
    ensemble: int = 1,
    on_step: Callable[[int, int], None] | None = None,
) -> ValidityClassifier:
    """Fit a classifier on annotated rows (``checkray.engine.testaug.validity.read_annotations``);
    ``on_step(done, total)``: the fine-tune's progress."""
    clf = ValidityClassifier(
        backend,
        encoder,
        class_weight=class_weight,
        calibrate=calibrate,
        ensemble=ensemble,
        **({"finetune": finetune} if finetune else {}),
    )
    descriptions = annotated_descriptions(rows)
    clf.meta["descriptions"] = descriptions
    # One description (TestAug's case: a classifier per description) needs only the text;
    # several are told apart by leading each input with its description.
    clf.meta["reads_description"] = len(descriptions) > 1
    _need_descriptions(clf, rows)
    return clf.fit(annotation_inputs(rows, clf.reads_description), [r["validity"] for r in rows], seed, on_step)


def train_validity_on_worker(rows: Sequence[dict], *args, **kwargs) -> ValidityClassifier:
    """``train_validity`` as a Ray task body (a cluster's GPU): the classifier comes back
    with its models on the CPU, so a driver without a GPU can unpickle, score and save it."""
    clf = train_validity(rows, *args, **kwargs)
    clf._members = [(model.to("cpu"), tokenizer) for model, tokenizer in clf._members]
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
        probs = clf.predict_proba(annotation_inputs(rows, clf.reads_description))
    pred = (np.asarray(probs) >= clf.threshold).astype(int)
    interval = binomtest(int((pred == gold).sum()), len(gold)).proportion_ci(method="wilson")
    return {
        "n": len(gold),
        "accuracy": float(accuracy_score(gold, pred)),
        "accuracy_ci95": [round(float(interval.low), 4), round(float(interval.high), 4)],
        "f1_valid": float(f1_score(gold, pred, zero_division=0)),
        "valid_share": float(gold.mean()),
    }


def case_text(text: str, text_pair: str | None) -> str:
    """A case as the labeler reads it: the text, or the pair as ``a / b``."""
    return text if not text_pair else f"{text} / {text_pair}"


def llm_label(cases: Sequence[dict], chat, params: GenerationParams, count: ParseCount) -> list[bool | None]:
    """The LLM labeler's verdict per case (``description``, ``text``, ``text_pair`` keys;
    optional ``examples``: valid cases of the description, e.g. its seed cases, shown to
    the labeler with the ``testaug_validity_examples`` prompt); None where its answer
    names no verdict (counted in ``count``)."""
    if not cases:
        return []
    plain, shown = load_prompt("testaug_validity"), load_prompt("testaug_validity_examples")
    messages = [
        shown.render(
            description=c["description"],
            examples="\n".join(f"- {e}" for e in c["examples"]),
            case=case_text(c["text"], c.get("text_pair")),
        )
        if c.get("examples")
        else plain.render(description=c["description"], case=case_text(c["text"], c.get("text_pair")))
        for c in cases
    ]
    verdicts = []
    for out in chat(messages, params):
        count.outputs += 1
        verdict = parse_validity_answer(out.text)
        if verdict is None:
            count.miss(out.text or f"({out.finish_reason})")
        else:
            count.items += 1
        verdicts.append(verdict)
    return verdicts
