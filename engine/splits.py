"""The train/held-out split every job agrees on (zoo training, MFT train/test suites)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from sklearn.model_selection import train_test_split


def split_ids(corpus: pa.Table, test_fraction: float = 0.2, seed: int = 0) -> dict[str, str]:
    """``{document id: "train" | "test"}``, stratified by label when every row has one.

    Deterministic for a given corpus, fraction and seed, so the zoo's held-out accuracy
    and the MFT job's test split refer to the same documents.
    """
    ids = np.array(corpus.column("id").to_pylist(), dtype=object)
    labels = corpus.column("label").to_pylist()
    stratify = labels if None not in labels and len(set(labels)) > 1 else None
    if stratify is not None and min(labels.count(v) for v in set(labels)) < 2:
        stratify = None
    train, test = train_test_split(ids, test_size=test_fraction, random_state=seed, stratify=stratify)
    return {**{i: "train" for i in train}, **{i: "test" for i in test}}
