"""Benchmark engine vs a sequential per-model loop: 12 models x 10,000 cases.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_benchmark.py [--cases 10000] [--models 12]

Baseline (as CheckList/MTEB run suites): in one process, one model after another, load
it, predict every suite's cases in batches of 32, evaluate. Engine: ``run_benchmark``
(one Ray actor per model, all concurrent, batches of 256, inputs shared by suites scored
once, MiniLM heads reading embeddings computed once). Both are timed in the same run from
the same Ray-ready process; Ray start-up is reported separately. An ablation runs the
engine with batch 32, no de-duplication and no shared encoder: concurrency alone.

Models: 12 entries of runs/zoo/zoo.yaml when the zoo job has built one; otherwise
(``--heads 4``) 7 scikit-learn text pipelines + VADER (family "callable",
``bench_benchmark:model_<name>``) and 4 classifier heads on MiniLM embeddings (family
"st_head", as the zoo builds them), trained here on the bundled Rotten Tomatoes
sentences and cached in runs/bench_models/.
Cases: a 4,000-case MFT suite, a 3,000-case INV typo suite and a 3,000-case DIR suite;
the INV/DIR suites contain their 1,500 original sentences each, which the MFT suite
also tests (as suites built from one corpus do): 7,000 distinct texts in 10,000 cases.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "runs" / "bench_models"
ZOO = ROOT / "runs" / "zoo" / "zoo.yaml"
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


def _heads():
    """(name, classifier) heads fitted on MiniLM embeddings (the zoo's st_head family)."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.svm import LinearSVC

    return [
        ("minilm_lr", LogisticRegression(max_iter=1000)),
        ("minilm_lr_c10", LogisticRegression(C=10, max_iter=2000)),
        ("minilm_svc", CalibratedClassifierCV(LinearSVC(), cv=3)),
        ("minilm_mlp", MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=0)),
    ]


class VaderModel:
    def __init__(self):
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        self.analyzer = SentimentIntensityAnalyzer()

    def predict_proba(self, texts):
        p = np.array([(self.analyzer.polarity_scores(t)["compound"] + 1) / 2 for t in texts])
        return np.column_stack([1 - p, p])


def __getattr__(name: str):
    """``bench_benchmark:model_<name>`` for the callable family: loads the model once per process."""
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

    from actors.embedder import load_sentence_transformer
    from engine.benchmark.registry import ModelSpec
    from engine.config import CorpusConfig
    from engine.corpus import read_corpus

    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    corpus = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))
    texts, labels = corpus.column("text").to_pylist(), corpus.column("label").to_pylist()
    order = np.random.default_rng(0).permutation(len(texts))
    train, held = order[: int(0.8 * len(order))], order[int(0.8 * len(order)) :][:1000]
    train_texts, train_labels = [texts[j] for j in train], [labels[j] for j in train]
    held_texts, held_labels = [texts[j] for j in held], [labels[j] for j in held]
    specs = []
    for name, pipe in _text_models()[: n - n_heads]:
        path = MODELS_DIR / f"{name}.joblib"
        if pipe is not None and not path.exists():
            joblib.dump(pipe.fit(train_texts, train_labels), path)
        model = VaderModel() if pipe is None else joblib.load(path)
        specs.append(
            ModelSpec(
                name=name,
                family="callable",
                path=f"bench_benchmark:model_{name}",
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


def build_suites(n_cases: int):
    from engine.config import CorpusConfig
    from engine.corpus import read_corpus
    from engine.schema import make_cases

    corpus = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))
    texts, labels = corpus.column("text").to_pylist(), corpus.column("label").to_pylist()
    n_mft, n_pair = int(n_cases * 0.4), int(n_cases * 0.15)
    rng = np.random.default_rng(1)

    def typo(text: str) -> str:
        i = int(rng.integers(0, max(len(text) - 1, 1)))
        return text[:i] + text[i + 1 : i + 2] + text[i] + text[i + 2 :] if len(text) > 2 else text + "."

    def mft(i, suite, version):
        return {
            "case_id": f"{suite}-o{i}",
            "suite": suite,
            "method": "corpus",
            "capability": "Vocabulary",
            "text": texts[i],
            "expected_label": labels[i],
            "meta": {"version": version},
        }

    mft_suite = [mft(i, "sentiment_mft", f"v{i % 2}") for i in range(n_mft)]
    inv, dirs = [], []
    for k in range(n_pair):
        i = k
        inv += [
            mft(i, "typos_inv", "v0") | {"capability": "Robustness"},
            {
                "case_id": f"typos_inv-p{i}",
                "suite": "typos_inv",
                "method": "typo",
                "capability": "Robustness",
                "text": typo(texts[i]),
                "test_type": "INV",
                "perturbs": f"typos_inv-o{i}",
                "relation": "same",
            },
        ]
        j = n_pair + k
        phrase, relation = (" Really great.", "up") if labels[j] == "positive" else (" Truly awful.", "up")
        dirs += [
            mft(j, "intensity_dir", "v0") | {"capability": "Intensifiers"},
            {
                "case_id": f"intensity_dir-p{j}",
                "suite": "intensity_dir",
                "method": "append",
                "capability": "Intensifiers",
                "text": texts[j] + phrase,
                "test_type": "DIR",
                "perturbs": f"intensity_dir-o{j}",
                "relation": relation,
                "expected_label": labels[j],
            },
        ]
    return [make_cases(mft_suite), make_cases(inv), make_cases(dirs)]


def sequential(parts, specs, batch_size: int = 32):
    """The usual loop: one model after another, each suite in batches of 32, in-process."""
    from actors.models import load_model
    from engine.benchmark.expectations import evaluate_cases
    from jobs.benchmark.job import BenchmarkConfig

    settings = BenchmarkConfig().settings()
    per_model, passed = {}, {}
    for spec in specs:
        start = time.perf_counter()
        model = load_model(spec)
        outcome = []
        for part in parts:
            texts = part.column("text").to_pylist()
            probs = np.concatenate(
                [model.predict_proba(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
            )
            outcome += evaluate_cases(part, probs, model.labels, settings).passed.tolist()
        per_model[spec.name] = time.perf_counter() - start
        passed[spec.name] = outcome
    return per_model, passed


def engine(parts, specs, **bench_options):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from jobs.benchmark.job import BenchmarkConfig, run_benchmark

    with tempfile.TemporaryDirectory(prefix="bench-") as out:
        results, _ = run_benchmark(parts, specs, BenchmarkConfig(**bench_options), out)
        models = pq.read_table(f"{out}/stages/predict/models.parquet").to_pylist()
    passed = {}
    for spec in specs:
        rows = results.filter(pc.equal(results.column("model"), spec.name))
        passed[spec.name] = rows.column("pass").to_pylist()
    return {m["model"]: m for m in models}, passed


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--heads", type=int, default=4, help="How many of the models are MiniLM heads (st_head).")
    parser.add_argument("--repeat", type=int, default=1, help="Interleaved rounds; the best time of each is kept.")
    parser.add_argument("--max-concurrent", type=int, default=None, help="benchmark.max_concurrent_models")
    parser.add_argument("--no-ablation", action="store_true", help="Skip the batch-32, no-dedup engine run.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts workers at nice 15; the baseline loop runs at nice 0. On a shared machine that
    # alone starves the actors, so both sides get the same priority (0) unless told otherwise.
    os.environ.setdefault("RAY_worker_niceness", "0")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # actors import bench_benchmark:model_XX

    from engine.runtime import cluster_resources, init_ray
    from jobs.zoo.resolve import resolve_models

    if ZOO.exists():
        specs = resolve_models(str(ZOO))[: args.models]
        print(f"models: {len(specs)} from {ZOO}")
    else:
        t = time.perf_counter()
        specs = build_models(args.models, args.heads)
        print(f"models: {len(specs)} ({args.heads} MiniLM heads) built or loaded in {time.perf_counter() - t:.1f}s")
    parts = build_suites(args.cases)
    n_cases = sum(p.num_rows for p in parts)
    n_unique = len({t for p in parts for t in p.column("text").to_pylist()})
    print(f"cases: {n_cases} in {len(parts)} suites, {n_unique} distinct texts")
    t = time.perf_counter()
    init_ray()
    print(f"ray start: {time.perf_counter() - t:.1f}s (not counted) · resources {cluster_resources()}")
    load = os.getloadavg()[0]

    options = {"max_concurrent_models": args.max_concurrent}
    best = {"sequential": float("inf"), "engine": float("inf"), "ablation": float("inf")}
    for round_ in range(args.repeat):
        seq_total, (seq_times, seq_passed) = timed(sequential, parts, specs)
        eng_total, (eng_models, eng_passed) = timed(engine, parts, specs, **options)
        abl_total = float("nan")
        if not args.no_ablation:
            abl_total, _ = timed(
                engine, parts, specs, batch_size=32, dedup_texts=False, share_encoders=False, **options
            )
        print(
            f"round {round_ + 1}: sequential {seq_total:.1f}s · engine {eng_total:.1f}s "
            f"({seq_total / eng_total:.2f}x) · engine batch 32, no dedup, no shared encoder {abl_total:.1f}s "
            f"({seq_total / abl_total:.2f}x)"
        )
        if seq_total < best["sequential"]:
            best_seq_times = seq_times
        best["sequential"] = min(best["sequential"], seq_total)
        if eng_total < best["engine"]:
            best_models = eng_models
        best["engine"] = min(best["engine"], eng_total)
        best["ablation"] = min(best["ablation"], abl_total)
    same = all(seq_passed[s.name] == eng_passed[s.name] for s in specs if eng_models[s.name]["error"] is None)

    print(f"\n{'model':<10} {'sequential':>11} {'engine':>9} {'actor ready':>12} {'predicting':>11} {'accuracy':>9}")
    print(f"{'':<10} {'cases/s':>11} {'cases/s':>9} {'s':>12} {'s':>11}")
    for s in specs:
        m = best_models[s.name]
        busy = m["ready_seconds"] + m["predict_seconds"]
        print(
            f"{s.name:<10} {n_cases / best_seq_times[s.name]:>11.0f} {n_cases / busy:>9.0f} "
            f"{m['ready_seconds']:>12.2f} {m['predict_seconds']:>11.2f} "
            f"{s.accuracy if s.accuracy is not None else float('nan'):>9.3f}"
            + (f"  FAILED {m['error']}" if m["error"] else "")
        )
    print(
        "(engine cases/s per model: cases / (actor ready + predicting); models run concurrently, so they share the cores)"
    )
    total = len(specs) * n_cases
    print(f"\nbest of {args.repeat} · load average at start {load:.1f} on {os.cpu_count()} cores")
    print(
        f"sequential (batch 32, one model at a time): {best['sequential']:.1f}s ({total / best['sequential']:.0f} model-cases/s)"
    )
    print(
        f"engine (actor per model, batch 256, dedup, shared encoder): {best['engine']:.1f}s ({total / best['engine']:.0f} model-cases/s)"
    )
    if not args.no_ablation:
        print(
            f"engine, batch 32, no dedup, no shared encoder (concurrency only): {best['ablation']:.1f}s "
            f"({best['sequential'] / best['ablation']:.2f}x)"
        )
    print(
        f"speed-up engine vs sequential: {best['sequential'] / best['engine']:.2f}x (goal >= 1.3x) · "
        f"identical pass/fail: {same}"
    )


if __name__ == "__main__":
    main()
