"""Pure stages of topic clustering: cluster descriptions and representative documents."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from checkray.engine.config import RepresentationConfig, RepresentativesConfig
from checkray.engine.topics.ctfidf import fit_class_tfidf, topic_name
from checkray.engine.topics.representatives import label_quotas, mmr_select, relevance_to

CLUSTERS_SCHEMA = pa.schema(
    [
        pa.field("cluster", pa.int32()),
        pa.field("topic", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("keywords", pa.list_(pa.string())),
        pa.field("keyword_weights", pa.list_(pa.float64())),
        pa.field("majority_label", pa.string()),
        pa.field("majority_share", pa.float64()),
    ]
)

REPRESENTATIVES_SCHEMA = pa.schema(
    [
        pa.field("cluster", pa.int32()),
        pa.field("topic", pa.string()),
        pa.field("rank", pa.int32()),
        pa.field("id", pa.string()),
        pa.field("text", pa.string()),
        pa.field("label", pa.string()),
        pa.field("relevance", pa.float64()),
    ]
)


def stratified_candidates(labels: np.ndarray, n_candidates: int, quotas: dict, rng: np.random.Generator) -> np.ndarray:
    """Positions of candidate documents: about ``n_candidates`` sampled per label in
    proportion to the cluster, and never fewer of a label than its quota of picks."""
    n = len(labels)
    if n <= n_candidates:
        return np.arange(n)
    picked = []
    for lab in sorted(set(labels.tolist()), key=str):
        where = np.flatnonzero(labels == lab)
        want = max(int(round(n_candidates * len(where) / n)), quotas.get(lab, 0))
        want = min(want, len(where))
        picked.append(rng.choice(where, size=want, replace=False))
    return np.sort(np.concatenate(picked))


def describe_clusters(
    corpus: pa.Table,
    clusters: np.ndarray,
    representation: RepresentationConfig,
    picks: RepresentativesConfig,
    seed: int,
) -> tuple[pa.Table, pa.Table]:
    """c-TF-IDF keywords and names per cluster, then MMR representatives per cluster.

    ``corpus`` is in ``CORPUS_SCHEMA``; ``clusters[i]`` is the cluster of row i.
    Returns (clusters table, representatives table).
    """
    texts = corpus.column("text").to_pylist()
    ids = corpus.column("id").to_pylist()
    labels = np.array(corpus.column("label").to_pylist(), dtype=object)
    labeled = any(lab is not None for lab in labels)
    model = fit_class_tfidf(texts, clusters, representation.stop_words, representation.ngram_max, representation.min_df)
    keywords = model.keywords(representation.n_keywords)
    rng = np.random.default_rng(seed)

    cluster_rows, rep_rows = [], []
    for row, cluster in enumerate(model.classes):
        members = np.flatnonzero(clusters == cluster)
        words = [w for w, _ in keywords[row]]
        name = topic_name(int(cluster), words, representation.name_words)
        counts = Counter(labels[members].tolist()) if labeled else Counter()
        majority, share = counts.most_common(1)[0] if counts else (None, 0)
        cluster_rows.append(
            {
                "cluster": int(cluster),
                "topic": name,
                "size": len(members),
                "keywords": words,
                "keyword_weights": [w for _, w in keywords[row]],
                "majority_label": majority,
                "majority_share": share / len(members) if counts else None,
            }
        )

        member_labels = labels[members]
        quotas = label_quotas(member_labels.tolist(), picks.top_k) if (picks.stratify and labeled) else None
        n_cand = max(picks.candidates, picks.top_k)
        cand = (
            stratified_candidates(member_labels, n_cand, quotas, rng)
            if quotas
            else np.sort(rng.choice(len(members), size=min(n_cand, len(members)), replace=False))
        )
        cand_rows = members[cand]
        vectors = model.transform([texts[i] for i in cand_rows])
        relevance = relevance_to(vectors, model.class_matrix[row])
        chosen = mmr_select(
            vectors,
            model.class_matrix[row],
            picks.top_k,
            picks.diversity,
            quotas=quotas,
            labels=labels[cand_rows].tolist() if quotas else None,
            relevance=relevance,
        )
        for rank, pos in enumerate(chosen):
            doc = int(cand_rows[pos])
            rep_rows.append(
                {
                    "cluster": int(cluster),
                    "topic": name,
                    "rank": rank,
                    "id": ids[doc],
                    "text": texts[doc],
                    "label": labels[doc],
                    "relevance": float(relevance[pos]),
                }
            )
    return (
        pa.Table.from_pylist(cluster_rows, schema=CLUSTERS_SCHEMA),
        pa.Table.from_pylist(rep_rows, schema=REPRESENTATIVES_SCHEMA),
    )
