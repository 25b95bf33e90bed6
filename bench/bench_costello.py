"""COSTELLO throughput: triples scored per second, engine vs a plain loop; and the
embedding fan-out across models, in parallel vs one model after another.

1. Scoring (``costello_scoring``). Engine: the texts of all triples deduplicated, embedded
   once through ``actors.costello.embedders.embed_all`` (Ray Data, one actor), then L1/L2/
   cos distances and the four verdicts vectorised over every triple
   (``engine.costello.metrics``). Baseline: the shape of the authors' script, a Python
   loop that encodes each triple's three sentences with ``SentenceTransformer.encode``
   and compares their distances. Both embed with the same MiniLM (mean pooling); both pay
   their model load. Goal: engine >= 2x. The pure scoring part (distances + verdicts on
   ready embeddings) is also timed against a per-triple loop.
2. Fan-out (``costello_fanout``). ``embed_all`` with 3 models (MiniLM mean, MiniLM CLS,
   spaCy md vectors) in parallel (one actor per model, CPUs split) vs ``parallel=False``
   (one model after another). On 2 cores the gain can only come from overlapping model
   loads and Ray Data overheads with compute; goal: parallel >= 1.0x.

Triples come from the bundled corpus through the job's own operators (``--source
engine``, default) or from a COSTELLO triple file (``--source PATH``, e.g. the authors'
contrast_triples_sst.json: {name: [[s, s+, s-], ...]}).

    .venv/bin/python bench/bench_costello.py [--n 600] [--quick] [--source PATH]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import base_parser, report, resolve_n, setup_env  # noqa: E402

THRESHOLD_NAMES = ("zero", "min", "mu-2sigma", "mu-sigma")
setup_env()
from engine.costello.metrics import DISTANCES, distance, violates  # noqa: E402


def load_triples(source: str, n: int) -> list[tuple[str, str, str]]:
    if source != "engine":
        data = json.loads(Path(source).read_text(encoding="utf-8"))
        triples = [tuple(t[:3]) for rows in data.values() for t in rows]
        rng = np.random.default_rng(0)
        return [triples[i] for i in rng.permutation(len(triples))[:n]]
    from engine.costello.triples import triple_table
    from engine.stages import RunDir, StageRunner
    from jobs.config import load_config
    from jobs.costello.job import mutate_stage, seeds_stage, triples_stage

    cfg = load_config(None, {"costello.seeds": max(50, n * 2)})
    cc = cfg.section("costello")
    with tempfile.TemporaryDirectory(prefix="crbench") as tmp:
        runner = StageRunner(RunDir(tmp), on_stage=lambda *_: None)
        runner.run_all([seeds_stage(cfg, cc, cfg.seed), mutate_stage(cc), triples_stage(cc)])
        wide = triple_table(runner.output("triples"))
    rows = [r for r in wide.to_pylist() if r["seed_pair"] is None]
    return [(r["seed"], r["positive"], r["negative"]) for r in rows][:n]


def score_vectorised(S, P, N, theta):
    out = {}
    for m in DISTANCES:
        d_pos, d_neg = distance(S, P, m), distance(S, N, m)
        out[m] = {t: violates(d_pos, d_neg, theta[t]) for t in THRESHOLD_NAMES}
    return out


def score_loop(S, P, N, theta):
    out = {m: {t: [] for t in THRESHOLD_NAMES} for m in ("l1", "l2", "cos")}
    for s, p, q in zip(S, P, N):
        for m in ("l1", "l2", "cos"):
            if m == "l1":
                dp, dn = np.abs(s - p).sum(), np.abs(s - q).sum()
            elif m == "l2":
                dp, dn = np.linalg.norm(s - p), np.linalg.norm(s - q)
            else:
                dp = 1 - s @ p / (np.linalg.norm(s) * np.linalg.norm(p))
                dn = 1 - s @ q / (np.linalg.norm(s) * np.linalg.norm(q))
            for t in THRESHOLD_NAMES:
                out[m][t].append(dp - dn > theta[t])
    return out


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_scoring(triples, spec) -> None:
    from actors.costello.embedders import embed_all, load_encoder

    theta = {"zero": 0.0, "min": 0.1, "mu-2sigma": 0.2, "mu-sigma": 0.3}
    n = len(triples)
    start = time.perf_counter()
    texts = list(dict.fromkeys(t for tr in triples for t in tr))
    vectors = embed_all(texts, [spec])[spec.name]
    index = {t: i for i, t in enumerate(texts)}
    S, P, N = (vectors[[index[tr[k]] for tr in triples]] for k in range(3))
    engine_verdicts = score_vectorised(S, P, N, theta)
    engine_seconds = time.perf_counter() - start
    engine_score = best_of(lambda: score_vectorised(S, P, N, theta))

    start = time.perf_counter()
    model = load_encoder(spec, device="cpu")
    base_vectors = [model.encode(list(tr), convert_to_numpy=True, show_progress_bar=False) for tr in triples]
    bS, bP, bN = (np.stack([v[k] for v in base_vectors]) for k in range(3))
    loop_verdicts = score_loop(bS, bP, bN, theta)
    base_seconds = time.perf_counter() - start
    loop_score = best_of(lambda: score_loop(bS, bP, bN, theta))

    agree = np.mean(
        [
            np.mean(np.asarray(loop_verdicts[m][t]) == engine_verdicts[m][t])
            for m in engine_verdicts
            for t in THRESHOLD_NAMES
        ]
    )
    ratio = base_seconds / engine_seconds
    report(
        "costello_scoring",
        [
            ("triples", f"{n} ({len(texts)} unique texts, {3 * n} in the loop)"),
            (
                "engine (embed_all + vectorised)",
                f"{n / engine_seconds:8.1f} triples/s ({engine_seconds:.1f}s incl. actor start + load)",
            ),
            (
                "baseline (encode per triple)",
                f"{n / base_seconds:8.1f} triples/s ({base_seconds:.1f}s incl. model load)",
            ),
            (
                "scoring only: vectorised",
                f"{n / max(engine_score, 1e-9):10.0f} triples/s ({engine_score * 1000:.2f} ms, 3 distances x 4 thresholds, best of 5)",
            ),
            (
                "scoring only: per-triple loop",
                f"{n / max(loop_score, 1e-9):10.0f} triples/s ({loop_score * 1000:.2f} ms; "
                f"{loop_score / max(engine_score, 1e-9):.0f}x slower)",
            ),
            ("verdict agreement", f"{agree:.4f} (same model; batch padding moves embeddings by float noise)"),
        ],
        ratio,
        ">= 2x",
        ratio >= 2.0,
        extra={"n": n},
    )


def bench_fanout(texts, specs) -> None:
    from actors.costello.embedders import embed_all

    embed_all(texts[:8], specs[:1])  # warm Ray Data once; both sides pay their model loads
    start = time.perf_counter()
    par = embed_all(texts, specs, parallel=True)
    par_seconds = time.perf_counter() - start
    start = time.perf_counter()
    seq = embed_all(texts, specs, parallel=False)
    seq_seconds = time.perf_counter() - start
    same = all(np.allclose(par[s.name], seq[s.name], atol=1e-4) for s in specs)
    ratio = seq_seconds / par_seconds
    report(
        "costello_fanout",
        [
            ("texts x models", f"{len(texts)} x {len(specs)} ({', '.join(s.name for s in specs)})"),
            ("parallel (one actor per model)", f"{par_seconds:.1f}s"),
            ("sequential (one model after another)", f"{seq_seconds:.1f}s"),
            ("same embeddings", str(same)),
        ],
        ratio,
        ">= 1.0x",
        ratio >= 1.0,
        extra={"n": len(texts)},
    )


def main() -> None:
    setup_env()
    parser = base_parser(__doc__.splitlines()[0], default_n=600, quick_n=60)
    parser.add_argument("--source", default="engine", help="'engine' or a COSTELLO triple JSON file")
    args = parser.parse_args()
    n = resolve_n(args)
    from actors.costello.embedders import EmbedderSpec
    from engine.config import RuntimeConfig
    from engine.runtime import init_ray

    init_ray(RuntimeConfig())
    triples = load_triples(args.source, n)
    minilm = EmbedderSpec(name="minilm_mean", model="builtin:minilm", pooling="mean", max_length=128)
    bench_scoring(triples, minilm)
    texts = list(dict.fromkeys(t for tr in triples for t in tr))
    specs = [
        minilm,
        EmbedderSpec(name="minilm_cls", model="builtin:minilm", pooling="cls", max_length=128),
        EmbedderSpec(name="spacy_md", kind="spacy", model="builtin:md"),
    ]
    bench_fanout(texts, specs)


if __name__ == "__main__":
    main()
