"""Models for bench/bench_benchmark.py: 24 scikit-learn text models (+ VADER) and 12
classifier heads on MiniLM embeddings, trained once on the bundled Rotten Tomatoes
sentences and cached in runs/bench_models/.

Text models are loaded through the "callable" family as ``bench_models:model_<name>``
(the benchmark passes this folder to its actors); heads are ``st_head`` entries, as the
zoo builds them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "runs" / "bench_models"
_LOADED: dict[str, object] = {}


def _text_models():
    """(name, pipeline) for the text models; None is VADER."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer, TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.naive_bayes import ComplementNB, MultinomialNB
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    return [
        ("tfidf_lr", make_pipeline(TfidfVectorizer(), LogisticRegression(max_iter=1000))),
        ("bigram_lr", make_pipeline(TfidfVectorizer(ngram_range=(1, 2), min_df=2), LogisticRegression(max_iter=1000))),
        (
            "charwb_lr",
            make_pipeline(
                TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2), LogisticRegression(max_iter=1000)
            ),
        ),
        ("vader", None),
        ("bigram_nb", make_pipeline(CountVectorizer(ngram_range=(1, 2)), MultinomialNB())),
        ("count_cnb", make_pipeline(CountVectorizer(), ComplementNB())),
        (
            "tfidf_sgd",
            make_pipeline(TfidfVectorizer(sublinear_tf=True), SGDClassifier(loss="log_loss", random_state=0)),
        ),
        (
            "hashing_sgd",
            make_pipeline(
                HashingVectorizer(n_features=2**18, alternate_sign=False),
                SGDClassifier(loss="modified_huber", random_state=0),
            ),
        ),
        (
            "trigram_lr",
            make_pipeline(TfidfVectorizer(ngram_range=(1, 3), min_df=2), LogisticRegression(C=10, max_iter=1000)),
        ),
        (
            "char_lr",
            make_pipeline(
                TfidfVectorizer(analyzer="char", ngram_range=(3, 5), min_df=3), LogisticRegression(max_iter=1000)
            ),
        ),
        ("bigram_svc", make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), CalibratedClassifierCV(LinearSVC(), cv=3))),
        (
            "svd_lr",
            make_pipeline(
                TfidfVectorizer(min_df=2), TruncatedSVD(100, random_state=0), LogisticRegression(max_iter=1000)
            ),
        ),
    ]


def _more_text_models():
    """12 more text models (logistic regressions over other features and strengths)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    features = {
        "word": {},
        "bigram": {"ngram_range": (1, 2), "min_df": 2},
        "charwb": {"analyzer": "char_wb", "ngram_range": (2, 4), "min_df": 2},
        "sublin": {"sublinear_tf": True, "min_df": 2},
        "binary": {"binary": True},
        "stop": {"stop_words": "english"},
    }
    return [
        (
            f"{name}_lr_c{c}".replace(".", ""),
            make_pipeline(TfidfVectorizer(**kw), LogisticRegression(C=c, max_iter=1000)),
        )
        for name, kw in features.items()
        for c in (0.3, 3.0)
    ]


def _heads():
    """(name, classifier) heads fitted on MiniLM embeddings (the zoo's st_head family)."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.svm import LinearSVC

    return [
        ("minilm_lr", LogisticRegression(max_iter=1000)),
        ("minilm_lr_c10", LogisticRegression(C=10, max_iter=2000)),
        ("minilm_svc", CalibratedClassifierCV(LinearSVC(), cv=3)),
        ("minilm_mlp", MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=0)),
        ("minilm_lr_c01", LogisticRegression(C=0.1, max_iter=1000)),
        ("minilm_svc_c01", CalibratedClassifierCV(LinearSVC(C=0.1), cv=3)),
        ("minilm_mlp32", MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=1)),
        ("minilm_mlp128", MLPClassifier(hidden_layer_sizes=(128,), max_iter=300, random_state=2)),
        ("minilm_sgd", SGDClassifier(loss="log_loss", random_state=0)),
        ("minilm_gnb", GaussianNB()),
        ("minilm_lda", LinearDiscriminantAnalysis()),
        ("minilm_knn", KNeighborsClassifier(n_neighbors=25)),
    ]


class VaderModel:
    def __init__(self):
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        self.analyzer = SentimentIntensityAnalyzer()

    def predict_proba(self, texts):
        p = np.array([(self.analyzer.polarity_scores(t)["compound"] + 1) / 2 for t in texts])
        return np.column_stack([1 - p, p])


def __getattr__(name: str):
    """``bench_models:model_<name>`` for the callable family: loads the model once per process."""
    if not name.startswith("model_"):
        raise AttributeError(name)

    def predict(texts, pairs=None):
        if name not in _LOADED:
            import joblib

            key = name[len("model_") :]
            _LOADED[name] = VaderModel() if key == "vader" else joblib.load(MODELS_DIR / f"{key}.joblib")
        return _LOADED[name].predict_proba(list(texts))

    return predict


def _accuracy(probs: np.ndarray, labels: list[str]) -> float:
    return round(float(np.mean(np.where(probs[:, 1] > 0.5, "positive", "negative") == np.array(labels))), 4)


def build_models(n: int, n_heads: int):
    """``n - n_heads`` text models and ``n_heads`` MiniLM heads, trained once and cached."""
    import joblib

    from checkray.actors.embedder import load_sentence_transformer
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus

    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    corpus = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))
    texts, labels = corpus.column("text").to_pylist(), corpus.column("label").to_pylist()
    order = np.random.default_rng(0).permutation(len(texts))
    train, held = order[: int(0.8 * len(order))], order[int(0.8 * len(order)) :][:1000]
    train_texts, train_labels = [texts[j] for j in train], [labels[j] for j in train]
    held_texts, held_labels = [texts[j] for j in held], [labels[j] for j in held]
    specs = []
    for name, pipe in (_text_models() + _more_text_models())[: n - n_heads]:
        path = MODELS_DIR / f"{name}.joblib"
        if pipe is not None and not path.exists():
            joblib.dump(pipe.fit(train_texts, train_labels), path)
        model = VaderModel() if pipe is None else joblib.load(path)
        specs.append(
            ModelSpec(
                name=name,
                family="callable",
                path=f"bench_models:model_{name}",
                accuracy=_accuracy(model.predict_proba(held_texts), held_labels),
            )
        )
    heads = _heads()[:n_heads]
    if heads:
        cache = MODELS_DIR / "minilm_embeddings.npz"
        if not cache.exists():  # heads train on 3,000 sentences' embeddings; accuracy on 1,000 held out
            encoder = load_sentence_transformer("builtin:minilm")

            def encode(t):
                return encoder.encode(t, normalize_embeddings=True, batch_size=64)

            np.savez(cache, train=encode(train_texts[:3000]), held=encode(held_texts))
        emb = np.load(cache)
        for name, head in heads:
            path = MODELS_DIR / f"{name}.joblib"
            if not path.exists():
                joblib.dump(head.fit(emb["train"], train_labels[:3000]), path)
            specs.append(
                ModelSpec(
                    name=name,
                    family="st_head",
                    path=str(path),
                    options={"encoder": "builtin:minilm"},
                    accuracy=_accuracy(joblib.load(path).predict_proba(emb["held"]), held_labels),
                )
            )
    return specs
