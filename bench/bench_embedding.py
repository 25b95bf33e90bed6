"""Embedding throughput: the engine's embed stage vs plain SentenceTransformer.encode.

Engine: ``jobs/topics/job.py`` corpus_stage then embed_stage run by a StageRunner on a temp
run dir (Ray Data actor pool), Ray initialised before timing; the stage's wall time
includes actor start-up and the model load inside the actor, as a real run pays them.
Baseline: a plain script in this process on the same sentences: load the model, one
``SentenceTransformer.encode`` call, same encode batch size and normalisation. Both sides
pay their model load, as a user does; the load times are printed separately.

Also prints the padding the batchings cause: encode() sorts its whole input by length
before cutting batches; the engine sorts the dataset by length (Ray Data ``sort``) before
cutting its batches, so it should pad as little. Goal: engine >= 0.95x the baseline.

    .venv/bin/python bench/bench_embedding.py [--n 8530] [--quick]
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RT_SIZE, add_repeat, base_parser, interleaved_best, report, resolve_n, rt_table, setup_env  # noqa: E402


def padded_tokens(lengths: list[int], encode_batch: int, ray_batch: int | None) -> int:
    """Tokens the model processes, pads included, for a batching scheme: ``ray_batch``
    None = one global length sort (encode() on the whole list); otherwise the list is cut
    into Ray Data batches in corpus order and each is sorted on its own."""
    groups = [lengths] if ray_batch is None else [lengths[i : i + ray_batch] for i in range(0, len(lengths), ray_batch)]
    total = 0
    for group in groups:
        ordered = sorted(group, reverse=True)
        for i in range(0, len(ordered), encode_batch):
            chunk = ordered[i : i + encode_batch]
            total += max(chunk) * len(chunk)
    return total


def run_engine(n: int) -> tuple[float, dict]:
    from engine.runtime import cluster_resources, init_ray, plan_actor_pool
    from engine.stages import RunDir, StageRunner
    from jobs.config import load_config
    from jobs.topics.job import corpus_stage, embed_stage, read_embeddings

    cfg = load_config(None, {"corpus.path": "builtin:rotten_tomatoes", "corpus.limit": n})
    init_ray(cfg.runtime)
    plan = plan_actor_pool(
        cluster_resources(), cfg.section("topics").embedder.backend, cfg.section("topics").embedder.pool_size
    )
    with tempfile.TemporaryDirectory(prefix="crbench") as tmp:
        runner = StageRunner(RunDir(tmp), on_stage=lambda name, status: None)
        runner.run_stage(corpus_stage(cfg))
        start = time.perf_counter()
        runner.run_stage(embed_stage(cfg))
        seconds = time.perf_counter() - start
        rows = read_embeddings(runner.run).count_rows()
    if rows != n:
        raise SystemExit(f"engine embedded {rows} rows, expected {n}")
    details = {
        "pool_size": plan.pool_size,
        "actor_num_cpus": plan.num_cpus,
        "actor_threads": plan.threads,
        "ray_batch_size": cfg.section("topics").embedder.batch_size,
        "encode_batch_size": cfg.section("topics").embedder.encode_batch_size,
        "rows": rows,
    }
    return seconds, details


def run_baseline(texts: list[str], encode_batch: int) -> tuple[float, float]:
    import torch

    from actors.embedder import load_sentence_transformer

    start = time.perf_counter()
    model = load_sentence_transformer("builtin:minilm", device="cpu", threads=os.cpu_count())
    load_seconds = time.perf_counter() - start
    with torch.inference_mode():
        model.encode(
            texts, batch_size=encode_batch, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
    return time.perf_counter() - start, load_seconds


def main() -> None:
    setup_env()
    parser = base_parser(__doc__.splitlines()[0], default_n=RT_SIZE, quick_n=1_000)
    add_repeat(parser)
    args = parser.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 2)
    n = resolve_n(args)
    from engine.config import EmbedderConfig

    emb = EmbedderConfig()
    texts = rt_table(n).column("text").to_pylist()

    base_runs, engine_runs, load_seconds, details = interleaved_best(
        args.repeat, lambda: run_baseline(texts, emb.encode_batch_size), lambda: run_engine(n)
    )
    base_seconds, engine_seconds = min(base_runs), min(engine_runs)

    from actors.embedder import load_sentence_transformer

    tokenizer = load_sentence_transformer("builtin:minilm", device="cpu").tokenizer
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=256)["input_ids"]]
    real = sum(lengths)
    pad_global = padded_tokens(lengths, emb.encode_batch_size, None)
    pad_engine = padded_tokens(sorted(lengths), emb.encode_batch_size, emb.batch_size)  # sorted, then cut
    blocks = max(details["pool_size"] * 2, math.ceil(n / emb.batch_size))

    base_rate, engine_rate = n / base_seconds, n / engine_seconds
    ratio = engine_rate / base_rate
    report(
        "embedding",
        [
            ("sentences", f"{n}"),
            (
                "baseline encode()",
                f"{base_rate:8.1f} sent/s  ({base_seconds:.1f}s, {os.cpu_count()} torch threads; incl. model load {load_seconds:.1f}s)",
            ),
            (
                "engine embed stage",
                f"{engine_rate:8.1f} sent/s  ({engine_seconds:.1f}s incl. actor start + model load)",
            ),
            (
                "engine plan",
                f"{details['pool_size']} actor(s) x {details['actor_num_cpus']} CPU, {details['actor_threads']} torch threads, "
                f"{blocks} blocks of <= {emb.batch_size} rows, encode batches of {emb.encode_batch_size}",
            ),
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
            (
                "model load (baseline)",
                f"{load_seconds:.1f}s = {load_seconds * base_rate:.0f} sentences of baseline time",
            ),
        ],
        ratio,
        ">= 0.95x",
        ratio >= 0.95,
        extra={"n": n, "details": details},
    )


if __name__ == "__main__":
    main()
