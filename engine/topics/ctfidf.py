"""Class-based TF-IDF (c-TF-IDF) topic keywords, as in BERTopic and Li et al. Appendix I.

    W[x, c] = ||tf[x, c]|| * log(1 + A / f[x])

tf[x, c] is the count of term x in class c, L1-normalised per class (||.||); f[x] is the
count of x over all classes; A is the average number of words per class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.preprocessing import normalize


@dataclass
class ClassTfidf:
    """A fitted c-TF-IDF model: vocabulary, idf weights and the class-by-term matrix."""

    vectorizer: CountVectorizer
    idf: np.ndarray  # (n_terms,)
    class_matrix: sp.csr_matrix  # (n_classes, n_terms) c-TF-IDF weights
    classes: np.ndarray  # class ids, row order of class_matrix

    @property
    def terms(self) -> np.ndarray:
        return self.vectorizer.get_feature_names_out()

    def transform(self, docs: Sequence[str]) -> sp.csr_matrix:
        """c-TF-IDF vectors of single documents (each treated as its own class)."""
        counts = self.vectorizer.transform(docs)
        return sp.csr_matrix(normalize(counts, norm="l1", axis=1).multiply(self.idf))

    def keywords(self, n: int) -> list[list[tuple[str, float]]]:
        """Top ``n`` (term, weight) pairs per class, highest weight first."""
        terms = self.terms
        out = []
        for row in self.class_matrix:
            dense = row.toarray().ravel()
            top = np.argsort(-dense, kind="stable")[:n]
            out.append([(str(terms[i]), float(dense[i])) for i in top if dense[i] > 0])
        return out


def class_tfidf_weights(counts: sp.spmatrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """c-TF-IDF from a (classes x terms) count matrix. Returns (weights, idf)."""
    counts = sp.csr_matrix(counts, dtype=np.float64)
    n_classes = counts.shape[0]
    term_freq = np.asarray(counts.sum(axis=0)).ravel()  # f[x]
    avg_words = counts.sum() / n_classes  # A
    with np.errstate(divide="ignore"):
        idf = np.log1p(np.where(term_freq > 0, avg_words / np.maximum(term_freq, 1e-12), 0.0))
    tf = normalize(counts, norm="l1", axis=1)  # ||tf[x, c]||
    return sp.csr_matrix(tf.multiply(idf)), idf


def fit_class_tfidf(
    docs: Sequence[str],
    classes: Sequence[int],
    stop_words: str | None = "english",
    ngram_max: int = 1,
    min_df: int = 1,
) -> ClassTfidf:
    """Fit c-TF-IDF: one pseudo-document per class, counted with a shared vocabulary."""
    classes_arr = np.asarray(classes)
    labels = np.unique(classes_arr)
    vectorizer = CountVectorizer(stop_words=stop_words, ngram_range=(1, ngram_max), min_df=min_df)
    try:
        doc_counts = vectorizer.fit_transform(docs)
    except ValueError:  # every word is a stop word or below min_df: fall back to all words
        vectorizer = CountVectorizer(ngram_range=(1, ngram_max), min_df=1, token_pattern=r"(?u)\b\w+\b")
        doc_counts = vectorizer.fit_transform(docs)
    # Summing document rows per class equals counting the joined class document.
    index = {c: i for i, c in enumerate(labels)}
    rows = np.array([index[c] for c in classes_arr])
    indicator = sp.csr_matrix((np.ones(len(rows)), (rows, np.arange(len(rows)))), shape=(len(labels), len(rows)))
    class_counts = indicator @ doc_counts
    weights, idf = class_tfidf_weights(class_counts)
    return ClassTfidf(vectorizer, idf, weights, labels)


def topic_name(cluster: int, words: Sequence[str], n: int) -> str:
    """BERTopic-style name: ``0_author_reviews_better_readers``."""
    return "_".join([str(cluster), *[w.replace(" ", "-") for w in words[:n]]])
