"""Peak memory of the whole topics job at 1x and 10x the corpus size, with the cache on.

Each size runs ``run_topics`` in a fresh interpreter with its own local Ray; a thread
samples the summed RSS of the driver and every descendant process (GCS, raylet, all
Ray workers and actors) every 0.2 s. 10x = the same sentences repeated ten times, each
copy with a distinguishing suffix, written to a temp Parquet (1x is written the same
way, so both sizes take the same reading path). Both sizes use one content cache
(``engine/cache.py``, a temp directory): the 1x run fills it, the 10x run reads the 1x
sentences from it and adds the other nine copies, so the embed stage streams cache
lookups, encodes and shard writes chunk by chunk. Goal: peak(10x) <= 1.5x peak(1x).

    .venv/bin/python bench/bench_memory.py [--n 8530] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    RT_SIZE,
    TreeRssSampler,
    base_parser,
    emit_child_result,
    mib,
    report,
    resolve_n,
    rt_table,
    run_child,
    setup_env,
)

SCALE = 10


def write_corpus(path: Path, base_n: int, copies: int) -> int:
    """``copies`` copies of the first ``base_n`` sentences; copy c > 0 gets " (copy c)"."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    # Plain nullable schema: the corpus reader marks text non-null, the joined copies are not.
    base = rt_table(base_n).select(["text", "label"]).cast(pa.schema([("text", pa.string()), ("label", pa.string())]))
    parts = [base]
    for c in range(1, copies):
        parts.append(base.set_column(0, "text", pc.binary_join_element_wise(base.column("text"), f" (copy {c})", "")))
    table = pa.concat_tables(parts)
    pq.write_table(table, path, row_group_size=8_192)
    return table.num_rows


def child(args: argparse.Namespace) -> None:
    from checkray.jobs.config import load_config
    from checkray.jobs.topics.job import run_topics

    cfg = load_config(
        None,
        {"corpus.path": args.corpus, "corpus.text_column": "text", "corpus.label_column": "label", "out": args.out},
    )
    start = time.perf_counter()
    with TreeRssSampler() as sampler:
        result = run_topics(cfg, args.out)
    seconds = time.perf_counter() - start
    rows = result.table("assignments.parquet", columns=["id"]).num_rows
    emit_child_result(
        {
            "peak_total": sampler.peak_total,
            "peak_driver": sampler.peak_driver,
            "peak_workers": sampler.peak_workers,
            "samples": sampler.samples,
            "seconds": seconds,
            "rows": rows,
        }
    )


def main() -> None:
    setup_env()
    parser = base_parser(__doc__.splitlines()[0], default_n=RT_SIZE, quick_n=300)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    n = resolve_n(args)

    results = {}
    with tempfile.TemporaryDirectory(prefix="crmem") as tmp:
        os.environ["CHECKRAY_CACHE_URI"] = str(Path(tmp) / "cache")  # the children inherit it
        for label, copies in (("1x", 1), (f"{SCALE}x", SCALE)):
            corpus = Path(tmp) / f"corpus_{label}.parquet"
            rows = write_corpus(corpus, n, copies)
            print(f"running topics on {rows} documents ({label}) in a fresh process ...", flush=True)
            child_args = ["--corpus", str(corpus), "--out", str(Path(tmp) / f"run_{label}")]
            res = run_child(Path(__file__), child_args, timeout=6 * 3600)
            if res["rows"] != rows:
                raise SystemExit(f"{label}: job assigned {res['rows']} documents, expected {rows}")
            res["cache_mib"] = mib(sum(f.stat().st_size for f in (Path(tmp) / "cache").rglob("*.parquet")))
            results[label] = res

    one, ten = results["1x"], results[f"{SCALE}x"]
    ratio = ten["peak_total"] / one["peak_total"]

    def line(r: dict) -> str:
        return (
            f"{mib(r['peak_total']):7.0f} MiB peak (driver {mib(r['peak_driver']):.0f}, Ray processes "
            f"{mib(r['peak_workers']):.0f}; {r['seconds']:.0f}s, {r['samples']} samples; cache after: {r['cache_mib']:.0f} MiB)"
        )

    report(
        "memory",
        [
            ("documents 1x / 10x", f"{one['rows']} / {ten['rows']}"),
            ("1x", line(one)),
            (f"{SCALE}x", line(ten)),
            ("driver growth", f"{ten['peak_driver'] / one['peak_driver']:.3f}x"),
            ("Ray processes growth", f"{ten['peak_workers'] / one['peak_workers']:.3f}x"),
            ("load average at the end", " ".join(f"{x:.1f}" for x in os.getloadavg())),
        ],
        ratio,
        "<= 1.5x",
        ratio <= 1.5,
        extra={"n": n, "results": results},
    )


if __name__ == "__main__":
    main()
