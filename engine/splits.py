"""The train/held-out split every job agrees on (zoo training, MFT train/test suites)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from checkray.engine.errors import ConfigError
from checkray.engine.training import stratified_split


def split_ids(corpus: pa.Table, test_fraction: float = 0.2, seed: int = 0) -> dict[str, str]:
    """``{document id: "train" | "test"}``: the zoo's stratified held-out split.

    The same corpus, fraction and seed give the zoo's held-out rows, so the zoo's
    held-out accuracy and the MFT job's test split refer to the same documents. Corpora
    that cannot be stratified (unlabeled rows, a singleton label) get a seeded random split.
    """
    ids = corpus.column("id").to_pylist()
    labels = corpus.column("label").to_pylist()
    try:
        if None in labels:
            raise ConfigError("unlabeled rows")
        held = stratified_split(np.array(labels, dtype=object), test_fraction, seed)
    except ConfigError:
        rng = np.random.default_rng(seed)
        held = np.zeros(len(ids), dtype=bool)
        held[rng.choice(len(ids), size=max(1, int(round(test_fraction * len(ids)))), replace=False)] = True
    return {doc: ("test" if h else "train") for doc, h in zip(ids, held)}
