"""Representative documents per cluster: c-TF-IDF relevance, MMR diversity, label strata.

Li et al. §2.2.1 and Appendix II: candidates are sampled per cluster (as BERTopic does),
ranked by cosine similarity of their c-TF-IDF vector to the cluster's, and picked with
Maximal Marginal Relevance so near duplicates ("Five stars", "five stars!!!") are not
chosen together; picks keep the cluster's label proportions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import cosine_similarity


def label_quotas(labels: Sequence[str | None], k: int) -> dict[str | None, int]:
    """Split ``k`` picks across labels in proportion to their counts (largest remainder).

    40 % positive / 60 % negative with k=10 gives 4 and 6. Ties go to the more frequent
    label, then to the label that sorts first, so the result is deterministic.
    """
    counts = Counter(labels)
    total = sum(counts.values())
    if total == 0 or k <= 0:
        return {}
    k = min(k, total)
    exact = {lab: k * c / total for lab, c in counts.items()}
    quotas = {lab: int(np.floor(v)) for lab, v in exact.items()}
    left = k - sum(quotas.values())
    order = sorted(counts, key=lambda lab: (-(exact[lab] - quotas[lab]), -counts[lab], str(lab)))
    for lab in order[:left]:
        quotas[lab] += 1
    # A label cannot get more picks than it has documents; hand extras to the others.
    for lab in sorted(quotas, key=lambda x: (-counts[x], str(x))):
        excess = quotas[lab] - counts[lab]
        if excess > 0:
            quotas[lab] = counts[lab]
            for other in sorted(quotas, key=lambda x: (-counts[x], str(x))):
                room = counts[other] - quotas[other]
                give = min(room, excess)
                quotas[other] += give
                excess -= give
    return {lab: q for lab, q in quotas.items() if q > 0}


def mmr_select(
    doc_vectors: sp.spmatrix | np.ndarray,
    query: sp.spmatrix | np.ndarray,
    k: int,
    diversity: float = 0.5,
    quotas: dict[str | None, int] | None = None,
    labels: Sequence[str | None] | None = None,
    relevance: np.ndarray | None = None,
) -> list[int]:
    """Indices of up to ``k`` documents by MMR, in pick order.

    score(i) = (1 - diversity) * cos(D_i, Q) - diversity * max_{j in S} cos(D_i, D_j)

    With ``quotas``, a document is eligible only while its label still has room, so the
    picks follow the label proportions while diversity is judged across all picks.
    ``relevance`` (cos(D_i, Q) per document) may be passed when the caller has it.
    """
    n = doc_vectors.shape[0]
    if n == 0 or k <= 0:
        return []
    if relevance is None:
        relevance = relevance_to(doc_vectors, query)
    pairwise = cosine_similarity(doc_vectors)
    room = dict(quotas) if quotas is not None else None
    chosen: list[int] = []
    available = np.ones(n, dtype=bool)
    max_sim = np.full(n, 0.0)
    target = min(k, n) if room is None else min(sum(room.values()), n)
    while len(chosen) < target:
        eligible = available.copy()
        if room is not None and labels is not None:
            eligible &= np.array([room.get(lab, 0) > 0 for lab in labels])
        if not eligible.any():
            break
        score = (1 - diversity) * relevance - diversity * (max_sim if chosen else 0.0)
        score = np.where(eligible, score, -np.inf)
        best = int(np.argmax(score))  # first index wins ties: deterministic
        chosen.append(best)
        available[best] = False
        max_sim = np.maximum(max_sim, pairwise[best])
        if room is not None and labels is not None:
            room[labels[best]] -= 1
    return chosen


def relevance_to(doc_vectors: sp.spmatrix | np.ndarray, query: sp.spmatrix | np.ndarray) -> np.ndarray:
    """Cosine similarity of each document vector to the query (cluster) vector."""
    return cosine_similarity(doc_vectors, query.reshape(1, -1) if not sp.issparse(query) else query).ravel()
