"""The ``topics`` job: corpus -> embeddings (Ray Data actor pool) -> UMAP -> k-means ->
c-TF-IDF topics -> MMR representative documents (stratified by label) -> report.

Outputs in ``--out DIR``: clusters.parquet, assignments.parquet, representatives.parquet,
report.html; stage checkpoints under DIR/stages/ make a rerun resume where it stopped.
"""

from __future__ import annotations

from collections import deque
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import typer

from checkray.engine.cache import CacheConfig, open_cache
from checkray.engine.corpus import corpus_fingerprint, read_corpus
from checkray.engine.errors import InputError
from checkray.engine.report import Section
from checkray.engine.runtime import choose_device, cluster_resources, wait_for
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner
from checkray.engine.topics.config import TopicsConfig
from checkray.engine.topics.describe import describe_clusters
from checkray.engine.topics.reduce import exact_knn, fit_sample_index, make_clusterer, make_reducer, to_numpy
from checkray.jobs.base import Job, JobResult, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import item_progress
from checkray.jobs.options import ConfigFile, LabelColumn, Labels, RunOut, TextColumn, corpus_overrides
from checkray.jobs.topics.report import topics_sections

CHUNK = 4096  # rows per transform/predict call when streaming embeddings
EMBED_CHUNK = 16_384  # rows per cache lookup and per embeddings shard of the embed stage


def check_cluster_count(table: pa.Table, cfg: CheckrayConfig) -> None:
    k = cfg.section(TopicsConfig).clusterer.n_clusters
    if table.num_rows < k:
        raise InputError(
            f"{cfg.corpus.path}: {table.num_rows} documents but {k} clusters requested (topics.clusterer.n_clusters)"
        )


def corpus_stage(cfg: CheckrayConfig):
    def run(ctx: StageContext):
        table = read_corpus(cfg.corpus)
        check_cluster_count(table, cfg)
        table = table.append_column("pos", pa.array(np.arange(table.num_rows), pa.int64()))
        # The embed stage reads the corpus by text length so each forward pass pads little,
        # as SentenceTransformer.encode does for one in-memory list (sorted here, in Arrow:
        # Ray Data's distributed sort is far costlier than this for a text column).
        lengths = pc.utf8_length(table.column("text"))
        by_length = table.select(["id", "pos", "text"]).take(pc.array_sort_indices(lengths))
        return {"data": table, "by_length": by_length}

    return Stage("corpus", run, config=cfg.corpus, external=(corpus_fingerprint(cfg.corpus),))


def embed_stage(cfg: CheckrayConfig):
    emb = cfg.section(TopicsConfig).embedder
    cache_cfg = cfg.section(CacheConfig)  # only saves work: not in the fingerprint

    def run(ctx: StageContext):
        from checkray.actors.embed_cache import EmbedPool, cluster_plan, embed_stream, sentence_model
        from checkray.actors.embedder import resolve_model
        from checkray.engine.arrays import embeddings_column

        resolve_model(emb.model)  # a missing model path fails here, not inside an actor
        model = sentence_model(emb.model, emb.normalize, emb.encode_batch_size)
        cache = open_cache(cache_cfg) if cache_cfg.embeddings else None
        source = pq.ParquetFile(ctx.input_path("corpus", "by_length"), filesystem=ctx.run.fs)
        batches: deque[pa.RecordBatch] = deque()

        def chunks():  # rows arrive sorted by length (corpus_stage); ``pos`` restores corpus order later
            for batch in source.iter_batches(batch_size=EMBED_CHUNK, columns=["id", "pos", "text"]):
                batches.append(batch)
                yield batch.column("text").to_pylist()

        with (
            EmbedPool(model, cluster_plan(emb.backend, emb.pool_size, texts=source.metadata.num_rows)) as pool,
            item_progress("topics · embed", source.metadata.num_rows, unit="sentences") as advance,
        ):
            stream = embed_stream(chunks(), model, cache=cache, pool=pool, block_rows=emb.batch_size)
            for k, vectors in enumerate(stream):
                batch = batches.popleft()
                advance(batch.num_rows)
                table = pa.table({"id": batch.column("id"), "pos": batch.column("pos")})
                ctx.run.write_table(
                    f"stages/embed/embeddings/part-{k:05d}.parquet",
                    table.append_column("embedding", embeddings_column(vectors)),
                )
        return None

    return Stage("embed", run, inputs=("corpus",), config=emb)


def read_embeddings(run: RunDir) -> pads.Dataset:
    return pads.dataset(run.path("stages", "embed", "embeddings"), filesystem=run.fs, format="parquet")


def fit_layout(run_uri: str, cfg: CheckrayConfig, device: str) -> pa.Table:
    """UMAP (n-D for clustering, 2-D for the map) and k-means; fit on a bounded sample,
    then transform/predict every document in chunks. Runs where the device is."""
    from checkray.engine.arrays import column_to_numpy

    run = RunDir(run_uri)
    t = cfg.section(TopicsConfig)
    data = read_embeddings(run)
    n = data.count_rows()
    sample_pos = fit_sample_index(n, t.reducer.fit_sample, cfg.seed)
    sample = data.to_table(filter=pc.field("pos").isin(pa.array(sample_pos)))
    sample = sample.sort_by("pos")
    X = column_to_numpy(sample.column("embedding"))

    # Fitted on every document (no transform pass to follow): the exact neighbour graph.
    exact = device == "cpu" and n == len(sample_pos) <= t.reducer.exact_knn_below

    def knn(points: np.ndarray):
        return exact_knn(points, t.reducer.n_neighbors, t.reducer.metric) if exact else None

    reducer = make_reducer(t.reducer, device, cfg.seed, knn=knn(X))
    reduced_sample = to_numpy(reducer.fit_transform(X))
    clusterer = make_clusterer(t.clusterer, device, cfg.seed).fit(reduced_sample)
    mapper = make_reducer(
        t.reducer, device, cfg.seed, n_components=2, knn=knn(reduced_sample), n_epochs=t.reducer.map_epochs
    )
    map_sample = to_numpy(mapper.fit_transform(reduced_sample))

    if n == len(sample_pos):  # everything was in the sample: no second pass
        pos = sample.column("pos").to_numpy()
        labels = to_numpy(clusterer.predict(reduced_sample))
        xy = map_sample
    else:
        pos_parts, label_parts, xy_parts = [], [], []
        for batch in data.to_batches(columns=["pos", "embedding"], batch_size=CHUNK):
            reduced = to_numpy(reducer.transform(column_to_numpy(batch.column("embedding"))))
            pos_parts.append(batch.column("pos").to_numpy())
            label_parts.append(to_numpy(clusterer.predict(reduced)))
            xy_parts.append(to_numpy(mapper.transform(reduced)))
        pos, labels, xy = np.concatenate(pos_parts), np.concatenate(label_parts), np.concatenate(xy_parts)
    order = np.argsort(pos)
    return pa.table(
        {
            "pos": pa.array(pos[order], pa.int64()),
            "cluster": pa.array(labels[order].astype(np.int32)),
            "x": pa.array(xy[order, 0].astype(np.float32)),
            "y": pa.array(xy[order, 1].astype(np.float32)),
        }
    )


def layout_stage(cfg: CheckrayConfig):
    t = cfg.section(TopicsConfig)

    def run(ctx: StageContext):
        resources = cluster_resources()
        device = choose_device(t.reducer.backend if t.reducer.backend != "auto" else t.clusterer.backend, resources)
        if device == "gpu":  # cuML must run on a GPU node, not on the (CPU) head
            import ray

            ref = ray.remote(num_gpus=1)(fit_layout).remote(ctx.run.uri, cfg, device)
            table = wait_for(ref, cfg.runtime.task_timeout_s, "the GPU layout task (UMAP, k-means)")
        else:
            table = fit_layout(ctx.run.uri, cfg, device)
        return {"data": table}

    return Stage("layout", run, inputs=("embed",), config=[t.reducer, t.clusterer, cfg.seed])


def describe_stage(cfg: CheckrayConfig):
    """Topics named by c-TF-IDF, MMR representatives, and every document's cluster and
    2-D map position (``assignments``: corpus ids beside the layout, in corpus order)."""
    t = cfg.section(TopicsConfig)

    def run(ctx: StageContext):
        corpus = ctx.input("corpus")
        layout = ctx.input("layout", columns=["cluster", "x", "y"])
        clusters, reps = describe_clusters(
            corpus, layout.column("cluster").to_numpy(), t.representation, t.representatives, cfg.seed
        )
        assignments = pa.table(
            {
                "id": corpus.column("id"),
                "cluster": layout.column("cluster"),
                "x": layout.column("x"),
                "y": layout.column("y"),
            }
        )
        return {"clusters": clusters, "representatives": reps, "assignments": assignments}

    return Stage("describe", run, inputs=("corpus", "layout"), config=[t.representation, t.representatives, cfg.seed])


class TopicsJob(Job[TopicsConfig]):
    """corpus -> embed -> layout -> describe; publishes clusters, assignments, representatives."""

    name, title, section = "topics", "checkray · topics", TopicsConfig
    # corpus.parquet: the documents as read and validated, for the jobs that follow (mft)
    published = ("clusters.parquet", "assignments.parquet", "representatives.parquet", "corpus.parquet")

    def check(self) -> None:
        """A bad corpus, label map, cluster count or embedder path fails before Ray starts."""
        from checkray.actors.embedder import resolve_model

        check_cluster_count(read_corpus(self.cfg.corpus), self.cfg)
        resolve_model(self.cfg.section(TopicsConfig).embedder.model)

    def stages(self):
        yield corpus_stage(self.cfg)
        yield embed_stage(self.cfg)
        yield layout_stage(self.cfg)
        yield describe_stage(self.cfg)

    def publish(self, runner: StageRunner) -> list[Section]:
        clusters = runner.output("describe", "clusters")
        assignments = runner.output("describe", "assignments")
        reps = runner.output("describe", "representatives")
        runner.run.write_table("clusters.parquet", clusters)
        runner.run.write_table("assignments.parquet", assignments)
        runner.run.write_table("representatives.parquet", reps)
        runner.run.write_table("corpus.parquet", runner.output("corpus"))
        return topics_sections(runner.output("corpus"), assignments, clusters, reps, self.cfg)


def run_topics(cfg: CheckrayConfig, out: str | None = None) -> JobResult:
    """Run the topics job into ``out`` (default: the config's ``out``)."""
    return run_job(TopicsJob(cfg), out)


def topics_command(
    config: ConfigFile = None,
    corpus: Optional[str] = typer.Option(
        None, "--corpus", help="Corpus file (.parquet/.csv/.jsonl) or builtin:<name>."
    ),
    text_column: TextColumn = None,
    label_column: LabelColumn = None,
    labels: Labels = None,
    clusters: Optional[int] = typer.Option(None, "--clusters", "-k", help="Number of k-means clusters."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="Representative documents per cluster."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use the first N documents."),
    sample: Optional[int] = typer.Option(None, "--sample", help="Use N documents drawn at random (seeded)."),
    out: RunOut = None,
):
    """Cluster a corpus into topics and pick representative documents."""
    cfg = load_config(
        config,
        {
            **corpus_overrides(corpus, text_column, label_column, labels),
            "corpus.limit": limit,
            "corpus.sample": sample,
            "topics.clusterer.n_clusters": clusters,
            "topics.representatives.top_k": top_k,
            "out": out,
        },
    )
    run = run_topics(cfg).run
    typer.echo(f"wrote {run.uri}/clusters.parquet, assignments.parquet, representatives.parquet, report.html")
