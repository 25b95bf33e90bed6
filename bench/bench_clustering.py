"""Clustering: the engine's ``fit_layout`` vs umap-learn + scikit-learn called directly.

Both sides get the same MiniLM embeddings of the bundled sentences and the same
parameters (the topics defaults: UMAP 5-D cosine, k-means, UMAP 2-D map of the 5-D
output, seed 0). The engine reads them from a run dir in the embed stage's layout
(``stages/embed/embeddings/*.parquet``: id, pos, embedding); the direct side reads the
same Parquet into NumPy. Each side runs in a fresh interpreter and its timing starts
before ``import umap``, so both pay numba compilation. A throw-away child runs first so
numba's on-disk cache holds what the packages cache themselves; the engine also keeps the
kernels they do not (``engine/topics/reduce.cache_numba_kernels``), which a direct call
compiles again in every process. The engine also lays out a corpus it fits whole on its
exact neighbour graph (``engine/topics/reduce.exact_knn``) where umap-learn called directly
searches an approximate one with pynndescent, so the two partitions differ: the cluster
agreement (ARI) line says by how much. Goal: engine <= 1.1x the direct time.

    .venv/bin/python bench/bench_clustering.py [--n 8530] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RT_SIZE, base_parser, emit_child_result, report, resolve_n, rt_table, run_child, setup_env  # noqa: E402


def write_embed_stage(run_uri: str, n: int) -> None:
    """Embeddings of the first ``n`` sentences where the embed stage would put them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from checkray.actors.embedder import load_sentence_transformer
    from checkray.engine.arrays import embeddings_column
    from checkray.engine.stages import RunDir

    corpus = rt_table(n)
    model = load_sentence_transformer("builtin:minilm", device="cpu")
    vectors = model.encode(
        corpus.column("text").to_pylist(),
        batch_size=64,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    table = pa.table(
        {"id": corpus.column("id"), "pos": pa.array(range(n), pa.int64()), "embedding": embeddings_column(vectors)}
    )
    run = RunDir(run_uri)
    run.fs.create_dir(run.path("stages", "embed", "embeddings"), recursive=True)
    # Several files, as Ray Data writes them.
    step = max(1, -(-n // 4))
    for i, start in enumerate(range(0, n, step)):
        pq.write_table(table.slice(start, step), run.path("stages", "embed", "embeddings", f"part-{i}.parquet"))


def child_engine(run_uri: str) -> dict:
    start = time.perf_counter()
    from checkray.jobs.config import load_config
    from checkray.jobs.topics.job import fit_layout

    layout = fit_layout(run_uri, load_config(None), "cpu")
    return {"seconds": time.perf_counter() - start, "labels": layout.column("cluster").to_pylist()}


def child_direct(run_uri: str) -> dict:
    start = time.perf_counter()
    import numpy as np
    import pyarrow.dataset as pads
    from sklearn.cluster import KMeans
    from umap import UMAP

    from checkray.jobs.config import load_config

    cfg = load_config(None)
    r, c = cfg.section("topics").reducer, cfg.section("topics").clusterer
    table = pads.dataset(f"{run_uri}/stages/embed/embeddings", format="parquet").to_table().sort_by("pos")
    col = table.column("embedding").combine_chunks()
    X = col.flatten().to_numpy().reshape(-1, col.type.list_size)
    params = dict(n_neighbors=r.n_neighbors, min_dist=r.min_dist, metric=r.metric, random_state=cfg.seed)
    reduced = UMAP(n_components=r.n_components, **params).fit_transform(X)
    kmeans = KMeans(n_clusters=c.n_clusters, n_init=c.n_init, random_state=cfg.seed).fit(reduced)
    labels = kmeans.predict(reduced)
    xy = UMAP(n_components=2, **params).fit_transform(reduced)
    assert xy.shape == (len(X), 2)
    return {"seconds": time.perf_counter() - start, "labels": np.asarray(labels).tolist()}


def silhouette(run_uri: str, labels: list[int]) -> float:
    """The partition's silhouette (cosine) over the embeddings it was made from."""
    import numpy as np
    import pyarrow.dataset as pads
    from sklearn.metrics import silhouette_score

    table = pads.dataset(f"{run_uri}/stages/embed/embeddings", format="parquet").to_table().sort_by("pos")
    col = table.column("embedding").combine_chunks()
    X = col.flatten().to_numpy().reshape(-1, col.type.list_size)
    return float(silhouette_score(X, np.asarray(labels), metric="cosine"))


def main() -> None:
    setup_env()
    parser = base_parser(__doc__.splitlines()[0], default_n=RT_SIZE, quick_n=1_000)
    parser.add_argument("--child", choices=["engine", "direct"], help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return emit_child_result((child_engine if args.child == "engine" else child_direct)(args.run))
    n = resolve_n(args)
    from sklearn.metrics import adjusted_rand_score

    from checkray.jobs.config import load_config

    if n > load_config(None).section("topics").reducer.fit_sample:
        raise SystemExit("--n above reducer.fit_sample: the engine would fit on a sample and the sides would differ")
    with tempfile.TemporaryDirectory(prefix="crclu") as tmp:
        warm, run = f"{tmp}/warm", f"{tmp}/run"
        print(f"embedding {n} sentences for the benchmark (not timed) ...", flush=True)
        write_embed_stage(run, n)
        write_embed_stage(warm, min(n, 300))
        run_child(Path(__file__), ["direct", "--run", warm])  # numba disk cache warm-up
        direct = run_child(Path(__file__), ["direct", "--run", run])
        engine = run_child(Path(__file__), ["engine", "--run", run])
        quality = {side: silhouette(run, result["labels"]) for side, result in (("direct", direct), ("engine", engine))}
    ratio = engine["seconds"] / direct["seconds"]
    ari = adjusted_rand_score(direct["labels"], engine["labels"])
    report(
        "clustering",
        [
            ("documents", f"{n}"),
            ("direct umap-learn + sklearn", f"{direct['seconds']:.1f}s (fresh process, incl. imports + numba compile)"),
            ("engine fit_layout", f"{engine['seconds']:.1f}s (fresh process, incl. imports + numba compile)"),
            ("cluster agreement (ARI)", f"{ari:.3f} (1.0 = identical partitions)"),
            (
                "silhouette",
                f"direct {quality['direct']:.4f}, engine {quality['engine']:.4f} "
                "(cosine, in the embedding space: how well each partition separates the documents)",
            ),
        ],
        ratio,
        "<= 1.1x",
        ratio <= 1.1,
        extra={"n": n, "ari": ari, "silhouette": quality},
    )


if __name__ == "__main__":
    main()
