"""Parsing throughput: the S²LCT parser actors on Ray Data vs spaCy ``nlp.pipe`` in one process.

Engine: ``jobs/s2lct/stages.ray_map`` with ``actors/s2lct/parser.ParserActor`` (spaCy ``builtin:sm`` +
the dependency -> constituency conversion), one actor per CPU, Ray initialised before
timing; the wall time includes actor start-up and the pipeline load inside each actor,
as a real run pays them. Baseline: a plain loop in this process on the same sentences:
load the pipeline, one ``nlp.pipe`` over all of them, the same token dicts and the same
conversion per sentence. Both sides do identical work, so the ratio is what sharding
over Ray Data buys (or costs) on this machine.

spaCy's parser is single-threaded, so on N cores up to N actors can work at once; on
2 cores Ray Data's own tasks share the CPUs with the actors.

    .venv/bin/python bench/bench_parsing.py [--n 8530] [--quick]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RT_SIZE, add_repeat, base_parser, interleaved_best, report, resolve_n, rt_table, setup_env  # noqa: E402


def run_engine(texts: list[str]) -> tuple[float, dict]:
    import pyarrow as pa

    from checkray.actors.s2lct.parser import ParserActor
    from checkray.engine.runtime import cluster_resources, init_ray, plan_actor_pool
    from checkray.jobs.config import load_config
    from checkray.jobs.s2lct.stages import ray_map

    cfg = load_config(None)
    s = cfg.section("s2lct")
    init_ray(cfg.runtime)
    resources = cluster_resources()
    plan = plan_actor_pool(resources, "cpu", s.pool_size or max(1, int(resources.get("CPU", 1))))
    start = time.perf_counter()
    out = ray_map(pa.table({"text": texts}), ParserActor, dict(pipeline=s.pipeline, parser=s.parser), s)
    seconds = time.perf_counter() - start
    if out.num_rows != len(texts):
        raise SystemExit(f"engine parsed {out.num_rows} rows, expected {len(texts)}")
    return seconds, {
        "pool_size": plan.pool_size,
        "actor_num_cpus": plan.num_cpus,
        "batch_size": s.batch_size,
        "parser": out.column("parser")[0].as_py(),
    }


def run_baseline(texts: list[str]) -> tuple[float, float]:
    import spacy

    from checkray.actors.s2lct.parser import dep_to_const, token_dicts
    from checkray.actors.spacy_nlp import resolve_pipeline

    start = time.perf_counter()
    nlp = spacy.load(resolve_pipeline("builtin:sm"), disable=["ner"])
    load_seconds = time.perf_counter() - start
    for doc in nlp.pipe(texts, batch_size=128):
        toks = token_dicts(doc)
        if toks:
            dep_to_const(toks, [(sent.start, sent.end) for sent in doc.sents])
    return time.perf_counter() - start, load_seconds


def main() -> None:
    setup_env()
    parser = base_parser(__doc__.splitlines()[0], default_n=RT_SIZE, quick_n=1_000)
    add_repeat(parser)
    args = parser.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 2)
    n = resolve_n(args)
    texts = rt_table(n).column("text").to_pylist()

    base_runs, engine_runs, load_seconds, details = interleaved_best(
        args.repeat, lambda: run_baseline(texts), lambda: run_engine(texts)
    )
    base_seconds, engine_seconds = min(base_runs), min(engine_runs)
    base_rate, engine_rate = n / base_seconds, n / engine_seconds
    ratio = engine_rate / base_rate
    report(
        "parsing",
        [
            ("sentences", f"{n}"),
            (
                "baseline nlp.pipe",
                f"{base_rate:8.1f} sent/s  ({base_seconds:.1f}s in one process; incl. pipeline load {load_seconds:.1f}s)",
            ),
            (
                "engine parser actors",
                f"{engine_rate:8.1f} sent/s  ({engine_seconds:.1f}s incl. actor start + pipeline load)",
            ),
            (
                "engine plan",
                f"{details['pool_size']} actor(s) x {details['actor_num_cpus']} CPU on {os.cpu_count()} cores, "
                f"batches of {details['batch_size']}, parser {details['parser']}",
            ),
            (
                "runs (best kept)",
                f"baseline {', '.join(f'{t:.1f}s' for t in base_runs)}; engine {', '.join(f'{t:.1f}s' for t in engine_runs)}",
            ),
        ],
        ratio,
        ">= 1.0x",
        ratio >= 1.0,
        extra={"n": n, "details": details},
    )


if __name__ == "__main__":
    main()
