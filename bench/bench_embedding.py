"""Embedding throughput: the topics job's corpus + embed stages vs plain SentenceTransformer.encode.

Engine: ``jobs/topics/job.py`` corpus_stage then embed_stage run by a StageRunner on a temp
run dir, Ray initialised before timing, with an EMPTY content cache of its own (so every
sentence is encoded and the cache's writes are paid). The stage starts its encoder actors
(``actors/embed_cache.py``) before it reads the corpus, so the actor processes import
torch and load the model while the driver reads the length-sorted corpus, digests it and
looks it up in the cache; then it feeds them blocks of 256 sentences, two in hand per
actor. The timing covers both stages: reading the corpus, actor start, model load,
encoding, writing the embeddings and the cache shards.

Baseline: a plain script in this process on the same sentences: read them, load the
model, one ``SentenceTransformer.encode`` call with every core, same encode batch size and
normalisation (the imports are already done in this process; the engine's actors pay
theirs). Both sides run alternately ``--repeat`` times; the best of each is kept.

Also printed: the start-up an engine run pays before its first embedding (actor process,
imports, model load, measured alone), the same stages on a warm cache (every sentence
already cached), the engine with one actor of all the threads (``--one-actor``: the plan
before this change), and the pad tokens each batching makes the model process.

    .venv/bin/python bench/bench_embedding.py [--n 8530] [--repeat 2] [--one-actor] [--quick]

``--n`` above 8,530 repeats the bundled sentences with a distinguishing suffix (" (copy
c)"), so every sentence is distinct and a run of 100k encodes 100k sentences.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RT_SIZE, add_repeat, base_parser, interleaved_best, report, resolve_n, rt_table, setup_env  # noqa: E402


def corpus_file(n: int, folder: str) -> str:
    """The first ``n`` bundled sentences (copies with a suffix past 8,530) as Parquet."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    base = rt_table(min(n, RT_SIZE)).select(["text", "label"])
    base = base.cast(pa.schema([("text", pa.string()), ("label", pa.string())]))
    parts, have, c = [base], base.num_rows, 1
    while have < n:
        parts.append(base.set_column(0, "text", pc.binary_join_element_wise(base.column("text"), f" (copy {c})", "")))
        have, c = have + base.num_rows, c + 1
    path = os.path.join(folder, f"corpus_{n}.parquet")
    pq.write_table(pa.concat_tables(parts).slice(0, n), path)
    return path


def padded_tokens(lengths: list[int], encode_batch: int, block: int | None) -> int:
    """Tokens the model processes, pads included: ``block`` None = one global length sort
    (encode() on the whole list); otherwise the length-sorted list is cut into blocks and
    each block into encode batches (the engine)."""
    ordered = sorted(lengths, reverse=block is None)
    groups = [ordered] if block is None else [ordered[i : i + block] for i in range(0, len(ordered), block)]
    total = 0
    for group in groups:
        group = sorted(group, reverse=True)
        for i in range(0, len(group), encode_batch):
            chunk = group[i : i + encode_batch]
            total += max(chunk) * len(chunk)
    return total


def engine_config(corpus: str, pool_size: int | None = None):
    from checkray.jobs.config import load_config

    overrides = {"corpus.path": corpus, "corpus.text_column": "text", "corpus.label_column": "label"}
    if pool_size:
        overrides["topics.embedder.pool_size"] = pool_size
    return load_config(None, overrides)


def run_engine(corpus: str, n: int, cache_dir: str | None = None, pool_size: int | None = None) -> tuple[float, dict]:
    """corpus + embed stages on a fresh run dir; a fresh empty cache unless ``cache_dir``."""
    from checkray.actors.embed_cache import EmbedPool, cluster_plan
    from checkray.engine.runtime import init_ray
    from checkray.engine.stages import RunDir, StageRunner
    from checkray.jobs.topics.job import corpus_stage, embed_stage, read_embeddings

    cfg = engine_config(corpus, pool_size)
    init_ray(cfg.runtime)
    emb = cfg.section("topics").embedder
    plan = cluster_plan(emb.backend, emb.pool_size)
    with tempfile.TemporaryDirectory(prefix="crbench") as tmp:
        os.environ["CHECKRAY_CACHE_URI"] = cache_dir or os.path.join(tmp, "cache")
        runner = StageRunner(RunDir(os.path.join(tmp, "run")), on_stage=lambda name, status: None)
        EmbedPool.last_times = {}
        start = time.perf_counter()
        runner.run_stage(corpus_stage(cfg))
        runner.run_stage(embed_stage(cfg))
        seconds = time.perf_counter() - start
        pool = {k: v - start for k, v in EmbedPool.last_times.items()}  # when actors were asked, first vectors
        rows = read_embeddings(runner.run).count_rows()
    if rows != n:
        raise SystemExit(f"engine embedded {rows} rows, expected {n}")
    details = {
        "pool_size": plan.pool_size,
        "actor_num_cpus": plan.num_cpus,
        "actor_threads": plan.threads,
        "block_rows": emb.batch_size,
        "encode_batch_size": emb.encode_batch_size,
        "pool_started_s": pool.get("start"),
        "first_vectors_s": pool.get("first"),
    }
    return seconds, details


def run_baseline(corpus: str, encode_batch: int) -> tuple[float, float]:
    import pyarrow.parquet as pq
    import torch

    from checkray.actors.embedder import load_sentence_transformer

    start = time.perf_counter()
    texts = pq.read_table(corpus, columns=["text"]).column("text").to_pylist()
    loaded = time.perf_counter()
    model = load_sentence_transformer("builtin:minilm", device="cpu", threads=os.cpu_count())
    load_seconds = time.perf_counter() - loaded
    with torch.inference_mode():
        model.encode(
            texts, batch_size=encode_batch, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
    return time.perf_counter() - start, load_seconds


def startup_seconds() -> float:
    """An encoder pool's start-up alone: actor processes, imports, model load, one sentence."""
    from checkray.actors.embed_cache import EmbedPool, sentence_model

    start = time.perf_counter()
    with EmbedPool(sentence_model("builtin:minilm")) as pool:
        tickets = [pool.submit(["warm up"]) for _ in range(pool.start().plan.pool_size)]
        for ticket in tickets:
            pool.get(ticket)
    return time.perf_counter() - start


def main() -> None:
    setup_env()
    parser = base_parser(__doc__.splitlines()[0], default_n=RT_SIZE, quick_n=1_000)
    add_repeat(parser)
    parser.add_argument("--one-actor", action="store_true", help="also time the engine with one actor of all threads")
    args = parser.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 2)
    n = resolve_n(args)
    from checkray.engine.config import EmbedderConfig

    emb = EmbedderConfig()
    with tempfile.TemporaryDirectory(prefix="crbench-corpus") as folder:
        corpus = corpus_file(n, folder)
        caches = []

        def engine_cold():  # each timed run starts from an empty cache; the last one is kept for the warm run
            import shutil

            if caches:
                shutil.rmtree(caches[-1], ignore_errors=True)
            caches.append(os.path.join(folder, f"cache-{len(caches)}"))
            return run_engine(corpus, n, cache_dir=caches[-1])

        base_runs, engine_runs, load_seconds, details = interleaved_best(
            args.repeat, lambda: run_baseline(corpus, emb.encode_batch_size), engine_cold
        )
        start_up = startup_seconds()
        warm_seconds, _ = run_engine(corpus, n, cache_dir=caches[-1])  # every sentence stored by the last cold run
        one_actor = run_engine(corpus, n, pool_size=1)[0] if args.one_actor else None
        import pyarrow.parquet as pq

        texts = pq.read_table(corpus, columns=["text"]).column("text").to_pylist()

    base_seconds, engine_seconds = min(base_runs), min(engine_runs)
    from checkray.actors.embedder import load_sentence_transformer

    tokenizer = load_sentence_transformer("builtin:minilm", device="cpu").tokenizer
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=256)["input_ids"]]
    real = sum(lengths)
    pad_global = padded_tokens(lengths, emb.encode_batch_size, None)
    pad_engine = padded_tokens(lengths, emb.encode_batch_size, emb.batch_size)

    base_rate, engine_rate = n / base_seconds, n / engine_seconds
    ratio = engine_rate / base_rate
    lines = [
        ("sentences", f"{n}" + (" (the 8,530 bundled ones and copies with a suffix)" if n > RT_SIZE else "")),
        (
            "baseline encode()",
            f"{base_rate:8.1f} sent/s  ({base_seconds:.1f}s, {os.cpu_count()} torch threads; incl. reading and model load {load_seconds:.1f}s)",
        ),
        (
            "engine corpus+embed",
            f"{engine_rate:8.1f} sent/s  ({engine_seconds:.1f}s, cold cache: incl. actor start, model load, cache writes)",
        ),
        (
            "engine plan",
            f"{details['pool_size']} actor(s) x {details['actor_num_cpus']} CPU, {details['actor_threads']} torch thread(s), "
            f"blocks of {details['block_rows']} sentences (two in hand per actor), encode batches of {details['encode_batch_size']}",
        ),
        (
            "start-up (measured alone)",
            f"{start_up:.1f}s = actor processes + imports + model load + one sentence "
            f"(~{start_up * base_rate:.0f} sentences of baseline time; the baseline's own model load: {load_seconds:.1f}s)",
        ),
        (
            "start-up in the timed run",
            "the encoder actors were asked for "
            + (f"{details['pool_started_s']:.1f}s" if details.get("pool_started_s") is not None else "?")
            + " after the run began (corpus stage before); first vectors back at "
            + (f"{details['first_vectors_s']:.1f}s" if details.get("first_vectors_s") is not None else "?")
            + ": meanwhile the driver read the length-sorted corpus, digested it, looked it up in the cache and "
            "queued every block (the actors load the model while that happens; the rest of it is on the critical path)",
        ),
        (
            "priority",
            f"baseline and engine driver at nice {os.nice(0)}, Ray workers RAY_worker_niceness="
            f"{os.environ.get('RAY_worker_niceness', 'unset (Ray default: +15)')} (as the CLI sets it)",
        ),
        ("engine, warm cache", f"{warm_seconds:.1f}s ({n / warm_seconds:.0f} sent/s: every sentence from the cache)"),
    ]
    if one_actor is not None:
        lines.append(
            ("engine, 1 actor x all threads", f"{one_actor:.1f}s ({n / one_actor / base_rate:.3f}x the baseline)")
        )
    lines += [
        ("tokens (no padding)", f"{real}"),
        ("tokens padded, global sort", f"{pad_global}  ({pad_global / real:.3f}x real)"),
        (
            "tokens padded, engine",
            f"{pad_engine}  ({pad_engine / real:.3f}x real, {pad_engine / pad_global:.3f}x the baseline's)",
        ),
        (
            "runs (best kept)",
            f"baseline {', '.join(f'{t:.1f}s' for t in base_runs)}; engine {', '.join(f'{t:.1f}s' for t in engine_runs)}",
        ),
        ("load average at the end", " ".join(f"{x:.1f}" for x in os.getloadavg())),
    ]
    report(
        "embedding" if n == RT_SIZE else f"embedding_{n}",
        lines,
        ratio,
        ">= 0.95x",
        ratio >= 0.95,
        extra={"n": n, "details": details, "startup_seconds": start_up, "warm_seconds": warm_seconds},
    )


if __name__ == "__main__":
    main()
