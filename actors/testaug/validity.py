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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import InputError
from engine.llm import GenerationParams
from engine.prompts import load_prompt
from engine.stages import RunDir
from engine.testaug.prompt import ParseCount
from engine.testaug.validity import classifier_input, parse_validity_answer
from engine.training import FineTuneConfig
from engine.trust import SIGNATURE_SUFFIX, load_pickle, pickle_bytes

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
    _head: Any = None
    _encoder: Any = None
    _model: Any = None
    _tokenizer: Any = None

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise InputError(f"unknown validity backend '{self.backend}' (have: {', '.join(BACKENDS)})")

    # ------------------------------------------------------------------ training
    def fit(self, texts: Sequence[str], valid: Sequence[int], seed: int = 0) -> ValidityClassifier:
        valid = [int(v) for v in valid]
        if len(set(valid)) < 2:
            raise InputError(
                f"validity annotations need valid and invalid cases (got only "
                f"{'valid' if valid and valid[0] else 'invalid'} ones)"
            )
        start = time.perf_counter()
        if self.backend == "embedding_lr":
            from sklearn.linear_model import LogisticRegression

            X = self._embed(texts)
            self._head = LogisticRegression(max_iter=2000, class_weight="balanced", random_state=seed).fit(X, valid)
        else:
            from actors.embedder import resolve_model
            from actors.zoo.trainers import fine_tune

            self._model, self._tokenizer, details = fine_tune(
                resolve_model(self.encoder), list(texts), [LABELS[v] for v in valid], LABELS, self.finetune, seed
            )
            self.meta["finetune"] = {**self.finetune.model_dump(), **details}
        self.meta.update(
            n_train=len(valid), n_valid=sum(valid), seed=seed, train_seconds=round(time.perf_counter() - start, 1)
        )
        return self

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._encoder is None:
            from actors.embedder import load_sentence_transformer

            self._encoder = load_sentence_transformer(self.encoder)
        return self._encoder.encode(
            list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    # ------------------------------------------------------------------ inference
    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(valid) for each input (``engine.testaug.validity.classifier_input`` strings)."""
        if not texts:
            return np.zeros(0)
        if self.backend == "embedding_lr":
            probs = self._head.predict_proba(self._embed(texts))
            return probs[:, list(self._head.classes_).index(1)]
        import torch

        out = []
        max_length = int(self.meta.get("finetune", {}).get("max_length", self.finetune.max_length))
        with torch.no_grad():
            for i in range(0, len(texts), 32):
                enc = self._tokenizer(
                    list(texts[i : i + 32]), truncation=True, max_length=max_length, padding=True, return_tensors="pt"
                )
                out.append(torch.softmax(self._model(**enc).logits, dim=-1)[:, 1].numpy())
        return np.concatenate(out)

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        return self.predict_proba(texts) >= 0.5

    # ------------------------------------------------------------------ storage
    def save(self, out: str) -> RunDir:
        run = RunDir(out)
        run.claim("validity")  # never into a directory that is not a classifier's
        if self.backend == "embedding_lr":
            data, signature = pickle_bytes(self._head)  # signed: loading it needs no --trust-code
            run.write_bytes("head.joblib", data)
            run.write_text("head.joblib" + SIGNATURE_SUFFIX, signature)
        else:
            with tempfile.TemporaryDirectory(prefix="validity-ft-") as tmp:
                self._model.save_pretrained(tmp)
                self._tokenizer.save_pretrained(tmp)
                for f in sorted(Path(tmp).rglob("*")):
                    if f.is_file():
                        run.write_bytes(f"model/{f.relative_to(tmp).as_posix()}", f.read_bytes())
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
        backend, encoder = meta.pop("backend", None), meta.pop("encoder", "builtin:minilm")
        meta.pop("labels", None)
        clf = cls(backend, encoder, meta=meta)
        if backend == "embedding_lr":
            clf._head = load_pickle(d / "head.joblib", f"validity classifier {d}")
        else:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            clf._tokenizer = AutoTokenizer.from_pretrained(d / "model")
            clf._model = AutoModelForSequenceClassification.from_pretrained(d / "model").eval()
        return clf


def annotation_inputs(rows: Sequence[dict]) -> list[str]:
    return [classifier_input(r["text"], r.get("text_pair")) for r in rows]


def train_validity(
    rows: Sequence[dict], backend: str, encoder: str, seed: int = 0, finetune: FineTuneConfig | None = None
) -> ValidityClassifier:
    """Fit a classifier on annotated rows (``engine.testaug.validity.read_annotations``)."""
    clf = ValidityClassifier(backend, encoder, **({"finetune": finetune} if finetune else {}))
    return clf.fit(annotation_inputs(rows), [r["validity"] for r in rows], seed)


def score_validity(clf: ValidityClassifier, rows: Sequence[dict]) -> dict[str, float]:
    """Accuracy, F1 of the valid class and the valid share on annotated rows."""
    from sklearn.metrics import accuracy_score, f1_score

    gold = np.array([r["validity"] for r in rows], dtype=int)
    pred = clf.predict(annotation_inputs(rows)).astype(int)
    return {
        "n": len(gold),
        "accuracy": float(accuracy_score(gold, pred)),
        "f1_valid": float(f1_score(gold, pred, zero_division=0)),
        "valid_share": float(gold.mean()),
    }


def llm_label(cases: Sequence[dict], chat, params: GenerationParams, count: ParseCount) -> list[bool | None]:
    """The LLM labeler's verdict per case (``description``, ``text``, ``text_pair`` keys);
    None where its answer names no verdict (counted in ``count``)."""
    if not cases:
        return []
    prompt = load_prompt("testaug_validity")
    messages = [
        prompt.render(
            description=c["description"],
            case=c["text"] if not c.get("text_pair") else f"{c['text']} / {c['text_pair']}",
        )
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
